"""Writing a sweep: CSV (stdout or a file) or Parquet, whole or not at all, one block at a time.

Cells and types are those of :mod:`kvplan.plans.check.sweep_format`. Blocks of a
:class:`~kvplan.plans.check.sweep.SweepStream` are evaluated (the calling thread), formatted (two
worker threads, a few blocks ahead) and written in order (a writer thread), then dropped: the
three overlap, and memory stays bounded by the chunk size times the blocks in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from kvplan.errors import InputError
from kvplan.plans.check.sweep import LATENCY_COLUMNS, Block, SweepResult, SweepStream

OUTPUT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def output_format(path: Path | None) -> str:
    """csv or parquet from the file name; checked before any work (pyarrow must be there for parquet)."""
    if path is None:
        return "csv"
    fmt = OUTPUT_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the format of '{path}'", "name the output .csv or .parquet")
    if fmt == "parquet":
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:
            raise InputError(f"writing '{path}' needs pyarrow, which is not installed",
                             "pip install 'kvplan[parquet]', or write .csv")
    directory = Path(path).parent
    if not directory.is_dir():
        raise InputError(f"cannot write '{path}': no directory '{directory}'", "create the directory first")
    return fmt


def block_frame(block: Block):
    """One block as a pandas DataFrame, typed and with empty cells as the written files have them."""
    from kvplan.plans.check.sweep_format import arrow_schema, block_table

    return block_table(block, arrow_schema(block.column_names)).to_pandas()


def write_sweep(result: SweepResult, path: Path | None, *, progress: Callable[[int, int], None] | None = None,
                stream=None) -> int:
    """Write every row to ``path`` (.csv or .parquet) whole or not at all; to ``stream`` when path is None.

    ``result`` may be a :class:`SweepStream`: blocks are then evaluated, written and dropped one
    at a time. Returns the number of rows written.
    """
    from kvplan.outputs import OutputSet

    fmt = output_format(path)
    if path is None:
        return _write_csv(result, stream, progress)
    rows: list[int] = []
    outputs = OutputSet()  # umask mode, devices and FIFOs refused, temporary file removed on any failure
    if fmt == "csv":
        outputs.add_writer(path, lambda handle: rows.append(_write_csv(result, handle, progress)), binary=True)
    else:
        outputs.add_path_writer(path, lambda tmp: rows.append(_write_parquet(result, tmp, progress)))
    outputs.commit()
    return rows[0]


def _blocks_of(result: SweepResult) -> Iterator[Block]:
    return iter(result) if isinstance(result, SweepStream) else iter(result.blocks)


def _pipelined(blocks: Iterator[Block], work: Callable, depth: int = 2) -> Iterator[tuple[int, object]]:
    """``(rows, work(block))`` in order, with up to ``depth`` blocks formatted ahead on worker threads.

    Arrow's kernels and the Parquet writer release the GIL, so formatting overlaps evaluation
    and writing; at most ``depth`` formatted blocks are held (memory stays bounded).
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque = deque()
        for block in blocks:
            pending.append((block.rows, pool.submit(work, block)))
            if len(pending) >= depth:
                rows, future = pending.popleft()
                yield rows, future.result()
        while pending:
            rows, future = pending.popleft()
            yield rows, future.result()


def _written(chunks: Iterator[tuple[int, object]], write: Callable, progress, total: Callable[[int], int],
             depth: int = 1) -> int:
    """Write ``(rows, data)`` chunks in order on a writer thread while this thread evaluates the next ones.

    Evaluation (this thread), formatting (``_pipelined``'s workers) and writing (file I/O, the
    Parquet encoder: both release the GIL) overlap; at most ``depth`` chunks wait for the writer.
    An error on either side stops both and is raised here; returns the rows written.
    """
    import queue
    import threading

    pending: queue.Queue = queue.Queue(maxsize=depth)
    done = [0]
    failed: list[BaseException] = []

    def writer() -> None:
        while True:
            item = pending.get()
            if item is None:
                return
            if failed:
                continue  # drain: the producer must never block on a dead writer
            try:
                write(item[1])
                done[0] += item[0]
                if progress is not None:
                    progress(done[0], total(done[0]))
            except BaseException as exc:  # re-raised in the caller's thread
                failed.append(exc)

    thread = threading.Thread(target=writer, name="kvplan-sweep-writer", daemon=True)
    thread.start()
    try:
        for item in chunks:
            if failed:
                break
            pending.put(item)
    finally:
        pending.put(None)
        thread.join()
    if failed:
        raise failed[0]
    return done[0]


def _write_csv(result: SweepResult, handle, progress) -> int:
    """CSV through Arrow's kernels when pyarrow is installed, else by Python joins (same cells)."""
    import importlib.util

    from kvplan.plans.check.sweep_format import block_csv, block_csv_bytes

    binary = not hasattr(handle, "encoding")
    out = handle if binary else getattr(handle, "buffer", None)
    header = ",".join(result.column_names) + "\n"
    if out is None:  # a text stream without a byte layer (tests' capture): Python joins
        handle.write(header)
        chunks = ((block.rows, block_csv(block)) for block in _blocks_of(result))
        write = handle.write
    else:
        if not binary:
            handle.flush()
        out.write(header.encode())
        if importlib.util.find_spec("pyarrow") is not None:
            chunks = _pipelined(_blocks_of(result), block_csv_bytes)
        else:
            chunks = ((block.rows, block_csv(block).encode()) for block in _blocks_of(result))
        write = out.write
    if out is None:
        done = 0
        for rows, text in chunks:
            write(text)
            done += rows
            if progress is not None:
                progress(done, max(result.rows, done))
    else:
        done = _written(chunks, write, progress, lambda d: max(result.rows, d))
    (out or handle).flush()
    return done


# Parquet encoder settings, each measured on the 4M-point grid of benchmarks/bench_sweep.py (CPU
# seconds of the encoder alone, per million rows, single thread):
# - LZ4 (LZ4_RAW) pages, except the latency floats: LZ4 does not shrink them (3 columns: 14.94 MiB
#   with LZ4, 14.92 without per million rows) and costs ~2 ms a million rows; zstd-1 packs no
#   smaller here at twice the time, no compression at all makes a ~400 MB file.
# - dictionaries for the string columns (one value a row group: the column is a dictionary and
#   a run of zeros); every other column is not dictionary-encoded (hashing 4M values each costs
#   more than LZ4 on their plain runs, which packs a constant or a batch cycle about as small).
# - DELTA_BINARY_PACKED for the byte totals (a new value every row, a steady step along batch:
#   a few bits a row, 0.9 MiB instead of 9 MiB per million rows for the two); seq_len plain (a run
#   of ``batch`` equal values that LZ4 packs: 3 ms instead of 6.5 ms a million rows, 114 KiB
#   instead of 77 KiB).
# - statistics on the numeric coordinates and fits (what readers filter on: a row group is one
#   combination, so min = max names it); not on the string columns: Arrow derives them from the
#   dictionary indices row by row (16 ms a million rows for the four, a third of the encoder's
#   time on them) while each of those column chunks is a one-value dictionary and a few hundred
#   bytes of run-length zeros, no dearer to read than its statistics would be.
# - ``fits`` PLAIN (bit-packed, Parquet's base encoding for booleans, which every reader has) instead of
#   pyarrow's default RLE for booleans on format 2.x pages: 22 ms instead of 26 ms (best of 25 interleaved),
#   150M instead of 220M instructions (callgrind, the encoder alone), 30 KiB instead of 22 KiB for the column.
# - the columns that are never empty are required fields (no definition levels).
# - DataPageV2 pages (Parquet format 2.0's page header, which pyarrow, parquet-java/Spark, DuckDB and
#   polars read): the definition levels sit outside the compressed block, so the nullable LZ4 columns
#   (constant in a row group, null where a combination has no KV memory) encode in ~12 ms instead of
#   ~20 ms each, best of 15 interleaved; the uncompressed latency floats and the required columns
#   take the same time either way, and the file is the same size (54.2 MiB).
# - values reach the encoder 65,536 at a time (write_batch_size; pyarrow's default is 1,024):
#   a plain LZ4 column of 4M values encodes in ~13 ms instead of ~18 ms.
# - pages of at most 50,000 rows (max_rows_per_page, in pyarrow's Python API since 23: apache/arrow#48096; the
#   writer's own default is 20,000 rows in pyarrow 26): two pages a 100,000-point block instead of five, 3.43G instead of 3.53G encoder
#   instructions (callgrind), 450-600 ms instead of 530-680 ms best of 21-25 interleaved (medians 8-17 ms apart),
#   54.0 MiB instead of 54.2 MiB. One page a block (100,000 rows or no limit) costs more: 3.81G instructions, the
#   larger page buffers copied as they grow. Passed only where pyarrow takes it (23 and later).
# Files stay standard Parquet (format 2.6 types, codecs every reader has): pandas and pyarrow read
# them with integers as int64, booleans as bool and the string columns as dictionaries.
STRING_COLUMNS = ["model", "hardware", "kv_dtype", "engine"]
STATISTICS_COLUMNS = ["seq_len", "batch", "tp", "pp", "fits"]
UNCOMPRESSED_COLUMNS = frozenset(LATENCY_COLUMNS)
PARQUET_OPTIONS = {"use_dictionary": STRING_COLUMNS, "write_statistics": STATISTICS_COLUMNS,
                   "write_batch_size": 1 << 16, "data_page_version": "2.0"}
DELTA_COLUMNS = ("kv_bytes_total", "kv_bytes_total_per_gpu")
PLAIN_COLUMNS = ("fits",)


MAX_ROWS_PER_PAGE = 50_000


def _page_rows() -> dict:
    """``max_rows_per_page`` where pyarrow's writer takes it (pyarrow 23 and later), else nothing."""
    import pyarrow

    return {"max_rows_per_page": MAX_ROWS_PER_PAGE} if int(pyarrow.__version__.split(".")[0]) >= 23 else {}


def parquet_options(names: list[str]) -> dict:
    encodings = {**{name: "DELTA_BINARY_PACKED" for name in DELTA_COLUMNS}, **{name: "PLAIN" for name in PLAIN_COLUMNS}}
    return {**PARQUET_OPTIONS, **_page_rows(),
            "compression": {name: "none" if name in UNCOMPRESSED_COLUMNS else "lz4" for name in names},
            "column_encoding": {name: encoding for name, encoding in encodings.items() if name in names}}


def parquet_schema(result: SweepResult):
    """The Parquet file's Arrow schema: the cache columns are nullable only when some combination has no KV memory.

    A :class:`SweepStream` is checked first (``empty()``: every combination is checked, so whether
    any has no KV memory is known).
    """
    from kvplan.plans.check.sweep_format import CACHE_COLUMNS, NULLABLE_COLUMNS, arrow_schema

    if isinstance(result, SweepStream):
        result.empty()
    nullable = NULLABLE_COLUMNS if result.has_cache_gaps() else NULLABLE_COLUMNS - frozenset(CACHE_COLUMNS)
    return arrow_schema(result.column_names, nullable)


# What pyarrow.parquet.ParquetWriter passes its core writer besides the options above (its defaults).
WRITER_DEFAULTS = {"version": "2.6", "writer_engine_version": "V2", "data_page_version": "1.0",
                   "use_compliant_nested_type": True, "use_deprecated_int96_timestamps": False, "store_schema": True}


def parquet_writer(path: str, schema, names: list[str]):
    """A Parquet file writer for ``path`` with :func:`parquet_options`.

    The class ``pyarrow.parquet.ParquetWriter`` wraps, given the arguments that wrapper gives it
    (``WRITER_DEFAULTS``): the same file, byte for byte (tests/unit/test_sweep_fast_paths.py), without
    ``pyarrow.parquet``'s imports (``pyarrow.fs``, its S3 and TLS modules: ~11 ms of the sweep's
    start-up, of ~12 ms for the module). The wrapper itself where the core class is not there or does not
    take those arguments (the class is pyarrow's private module, which a later release may change).
    """
    try:
        from pyarrow._parquet import ParquetWriter as Core

        return Core(path, schema, **{**WRITER_DEFAULTS, **parquet_options(names)})
    except (ImportError, TypeError):
        from pyarrow.parquet import ParquetWriter

        return ParquetWriter(path, schema, **parquet_options(names))


def _write_parquet(result: SweepResult, tmp: str, progress) -> int:
    """Blocks as row groups, in the schema of :func:`parquet_schema`."""
    from kvplan.plans.check.sweep_format import ColumnCache, block_table

    schema = parquet_schema(result)
    cache = ColumnCache()
    writer = parquet_writer(tmp, schema, result.column_names)
    try:
        return _written(_pipelined(_blocks_of(result), lambda block: block_table(block, schema, cache)),
                        writer.write_table, progress, lambda d: max(result.rows, d))
    finally:
        writer.close()
