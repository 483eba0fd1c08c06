"""``kvplan sweep``: size, fit (and decode latency) over a Cartesian grid, vectorised.

The grid is models × hardware × kv_dtype × tp × pp × engine × seq × batch. Python loops only
over the (model, hardware, kv_dtype, tp, pp, engine) combinations; inside one combination the
engine's budget, block count and pool are scalars (taken from :func:`kvplan.plans.sizing.fit.fit`
itself, so the sweep agrees with ``kvplan fit`` exactly) and every (seq, batch) point is one
numpy evaluation:

    per-sequence bytes  = KVLayout.sequence_bytes(seq)                      (n_seq)
    total bytes         = per-sequence × batch                              (n_seq × n_batch)
    max concurrency     = pool / per-sequence bytes on one GPU              (n_seq)
    fits                = budget > 0 and max concurrency ≥ batch            (n_seq × n_batch)
    max context         = min(KVLayout.max_sequence_len(pool, batch), max(model max, seq))
    decode step         = per-operator decode_step(batch, context = seq)   (n_seq × n_batch)

Rows come out seq-major, batch-minor within a combination, combinations in grid order.
:func:`sweep_stream` yields them in chunks of at most ``CHUNK_POINTS`` points (every
combination checked first), so that writing (kvplan.plans.check.sweep_write) holds one
chunk at a time; :func:`sweep` collects them all.
A combination the engines reject (tp not dividing the KV heads, a profile without TP) is
skipped and counted; so are sequence lengths beyond a model's context unless
``allow_long_context``. With ``strict`` the first rejection is the error instead.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from kvplan.calc.dtypes import KV_DTYPE_NAMES, WEIGHT_DTYPE_NAMES
from kvplan.engines import ENGINE_NAMES
from kvplan.errors import InputError, KvplanError, MissingFigureError
from kvplan.plans.check.yamlfile import Tokens, describe_errors, read_yaml
from kvplan.plans.deployment import EngineSettings, Parallelism, resolve
from kvplan.plans.check.sweep_format import LATENCY_COLUMNS as LATENCY
from kvplan.units import parse_tokens

# Column order of the output. Scalars of a combination, seq-only and seq × batch values.
COORDINATES = ["model", "hardware", "seq_len", "batch", "kv_dtype", "tp", "pp", "engine"]
SIZE_FIT_COLUMNS = [
    "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_per_sequence_per_gpu",
    "kv_bytes_total", "kv_bytes_total_per_gpu", "weights_bytes_per_gpu", "kv_cache_memory_bytes",
    "num_blocks", "kv_cache_tokens", "max_concurrency", "max_context_at_batch", "fits",
]
LATENCY_COLUMNS = list(LATENCY)
# points per evaluated chunk: a combination's seq axis is cut so that no chunk holds more
CHUNK_POINTS = 1 << 18


def _listed(value):
    return value if isinstance(value, list) else [value]


def _token_axis(value):
    """A list of token counts, one count, or a range ``{start, stop, num[, log]}`` (both ends included)."""
    if isinstance(value, dict):
        unknown = set(value) - {"start", "stop", "num", "log"}
        if unknown or not {"start", "stop", "num"} <= set(value):
            raise ValueError("a range is {start: 1k, stop: 128k, num: 100, log: false}"
                             + (f" (unknown keys: {', '.join(sorted(unknown))})" if unknown else ""))
        try:
            start, stop = parse_tokens(value["start"]), parse_tokens(value["stop"])
        except KvplanError as exc:
            raise ValueError(exc.message) from None
        num = int(value["num"])
        if num < 1 or stop < start:
            raise ValueError(f"a range needs num >= 1 and stop >= start (got {value})")
        points = np.geomspace(start, stop, num) if value.get("log") else np.linspace(start, stop, num)
        return [int(v) for v in dict.fromkeys(np.rint(points).astype(np.int64).tolist())]
    return _listed(value)


TokenAxis = Annotated[list[Tokens], BeforeValidator(_token_axis)]
IntAxis = Annotated[list[Annotated[int, Field(ge=1)]], BeforeValidator(_listed)]
StrAxis = Annotated[list[str], BeforeValidator(_listed)]


class Grid(BaseModel):
    """A sweep grid: each axis a list (a single value is a one-element list); absent axes take defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: StrAxis = Field(min_length=1, description="model card names, repo ids or card files")
    hardware: StrAxis = Field(min_length=1, description="hardware card names or files")
    seq: TokenAxis = Field([8192], min_length=1, description="max_model_len values ('128k'); or {start, stop, num, log}")
    batch: TokenAxis = Field([1], min_length=1, description="concurrent sequences; or {start, stop, num, log}")
    kv_dtype: StrAxis = Field(["auto"], min_length=1, description=f"any of {', '.join(KV_DTYPE_NAMES)}")
    tp: IntAxis = Field([1], min_length=1)
    pp: IntAxis = Field([1], min_length=1)
    engine: StrAxis = Field(["vllm"], min_length=1, description=f"any of {', '.join(ENGINE_NAMES)}")
    weights_dtype: str = Field("auto", description=f"one of {', '.join(WEIGHT_DTYPE_NAMES)}")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    block_size: int | None = Field(None, ge=1)
    max_num_batched_tokens: Tokens | None = None
    max_num_seqs: int | None = Field(None, ge=1, description="default: the engine's for the GPU (vLLM: 1,024 on a GPU with >= 70 GiB other than A100, else 256)")
    allow_long_context: bool = Field(False, description="keep seq values beyond a model's max context")
    latency: bool = Field(True, description="add decode-step latency columns (roofline)")

    @field_validator("kv_dtype")
    @classmethod
    def _kv_dtypes(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if v not in KV_DTYPE_NAMES]
        if bad:
            raise ValueError(f"unknown KV dtype {', '.join(bad)} (choose from: {', '.join(KV_DTYPE_NAMES)})")
        return values

    @field_validator("engine")
    @classmethod
    def _engines(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if v not in ENGINE_NAMES]
        if bad:
            raise ValueError(f"unknown engine {', '.join(bad)} (choose from: {', '.join(ENGINE_NAMES)})")
        return values

    @field_validator("weights_dtype")
    @classmethod
    def _weights(cls, value: str) -> str:
        if value not in WEIGHT_DTYPE_NAMES:
            raise ValueError(f"unknown weights dtype '{value}' (choose from: {', '.join(WEIGHT_DTYPE_NAMES)})")
        return value

    @property
    def points(self) -> int:
        return math.prod(len(getattr(self, k)) for k in ("models", "hardware", "seq", "batch", "kv_dtype",
                                                            "tp", "pp", "engine"))


def grid_json_schema() -> dict:
    schema = Grid.model_json_schema()
    schema["title"] = "kvplan sweep grid"
    return schema


MAX_GRID_POINTS = 200_000_000  # 200M points: minutes of work and gigabytes of output; beyond is a typo
MAX_RANGE_NUM = 10_000_000


def load_grid(path: str | Path) -> Grid:
    data, _ = read_yaml(Path(path), "grid")
    for key, value in (data.items() if isinstance(data, dict) else ()):
        num = value.get("num") if isinstance(value, dict) else None
        if isinstance(num, int) and not isinstance(num, bool) and num > MAX_RANGE_NUM:
            raise InputError(f"{path}: {key}: a range of {num:,} values (at most {MAX_RANGE_NUM:,})",
                             "use fewer values (num) or a log range")
    try:
        grid = Grid.model_validate(data)
    except ValidationError as exc:
        raise describe_errors(Path(path), exc, Grid) from None
    if grid.points > MAX_GRID_POINTS:
        raise InputError(f"{path}: the grid has {grid.points:,} points, more than the {MAX_GRID_POINTS:,} "
                         "kvplan evaluates in one sweep", "split the grid or use fewer values per axis")
    return grid


@dataclass
class Block:
    """One combination's points in factored form: scalars, seq-long arrays, seq × batch arrays."""

    scalars: dict[str, object]
    seq_arrays: dict[str, np.ndarray]
    batch_arrays: dict[str, np.ndarray]
    grid_arrays: dict[str, np.ndarray]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.seq_arrays["seq_len"]), len(self.batch_arrays["batch"])

    @property
    def rows(self) -> int:
        n_seq, n_batch = self.shape
        return n_seq * n_batch

    @property
    def no_cache(self) -> bool:
        """Weights and reserves leave no KV memory: the cache figures are meaningless (empty in files)."""
        return bool(self.scalars["kv_cache_memory_bytes"] <= 0)

    def columns(self) -> dict[str, np.ndarray | object]:
        """Every output column, expanded to one value per row (scalars stay scalars)."""
        n_seq, n_batch = self.shape
        out: dict[str, np.ndarray | object] = {}
        for name in self.column_names:
            if name in self.scalars:
                out[name] = self.scalars[name]
            elif name in self.seq_arrays:
                out[name] = np.repeat(self.seq_arrays[name], n_batch)
            elif name in self.batch_arrays:
                out[name] = np.tile(self.batch_arrays[name], n_seq)
            else:
                out[name] = self.grid_arrays[name].ravel()
        return out

    @property
    def column_names(self) -> list[str]:
        names = COORDINATES + SIZE_FIT_COLUMNS
        return names + [c for c in LATENCY_COLUMNS if c in self.grid_arrays]


@dataclass
class SweepResult:
    grid: Grid
    blocks: list[Block]
    skipped: list[tuple[str, int]] = field(default_factory=list)  # (reason, points)
    notes: list[str] = field(default_factory=list)
    latency_notes: list[str] = field(default_factory=list)  # defaults the roofline took per card
    seconds: float = 0.0
    cache_gaps: bool | None = None  # some combination has no KV memory (empty cache cells); None: from the blocks

    def has_cache_gaps(self) -> bool:
        """True when some combination's cache cells are empty (its budget is ≤ 0)."""
        return any(b.no_cache for b in self.blocks) if self.cache_gaps is None else self.cache_gaps

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.blocks)

    @property
    def skipped_points(self) -> int:
        return sum(n for _, n in self.skipped)

    @property
    def column_names(self) -> list[str]:
        return self.blocks[0].column_names if self.blocks else COORDINATES + SIZE_FIT_COLUMNS


def _deployment(card, hw, grid: Grid, dtype: str, tp: int, pp: int, engine: str):
    """The combination's deployment: the engine's start-up KV pool (the arithmetic of ``kvplan fit``)."""
    settings = EngineSettings(
        engine=engine, kv_dtype=dtype, weights_dtype=grid.weights_dtype,
        gpu_memory_utilization=grid.gpu_memory_utilization, max_num_seqs=grid.max_num_seqs,
        chunk_tokens=grid.max_num_batched_tokens or None, block_size=grid.block_size)
    return resolve(card, hw, engine=settings, parallel=Parallelism(tp, pp))


def _whole(x) -> int | float:
    x = float(x)
    return int(x) if x.is_integer() else x


def _product(per_seq: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """per-sequence bytes × batch on the (seq, batch) grid, in int64 where every product is exact.

    Both factors are whole; below 2⁵³ the int64 product equals the float64 one exactly (and
    needs no conversion when written); beyond, the float product is kept as it is.
    """
    if (per_seq.size and batches.size and float(per_seq.max()) * float(batches.max()) < 2.0**53
            and float(per_seq.min()) >= 0 and bool((per_seq == np.floor(per_seq)).all())):
        return per_seq.astype(np.int64)[:, None] * batches.astype(np.int64)[None, :]
    return per_seq[:, None] * batches[None, :]


def round_4(values: np.ndarray) -> np.ndarray:
    """Python's ``round(x, 4)`` of every value (what ``kvplan fit`` prints), without a Python call per value.

    ``rint(x × 10⁴) / 10⁴`` picks the same last digit as Python's correctly rounded ``round``
    except where ``x × 10⁴`` lies within rounding error of a half (the product itself is rounded)
    or is not an exact integer range (≥ 2⁵², infinities): those few values go through ``round``.
    The division of a whole k < 2⁵³ by 10⁴ is correctly rounded, as Python's result is.
    """
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = x * 1e4
        out = np.rint(scaled) / 1e4
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    for i in np.flatnonzero(near_half | ~np.isfinite(scaled) | (np.abs(scaled) >= 2.0**52)).tolist():
        out[i] = round(float(x[i]), 4)
    return out


def _blocks(dep, seqs: np.ndarray, batches: np.ndarray, latency_model,
            chunk_points: int = CHUNK_POINTS) -> Iterator[Block]:
    """The combination's points, in chunks of at most ``chunk_points`` (whole seq rows).

    Everything that can reject the combination runs before the first chunk is made; calling
    ``next`` once therefore checks it (the caller does so for every combination up front).
    """
    card, layout = dep.model, dep.layout
    kv_bytes, pool = dep.memory.kv_cache_memory_bytes, dep.pool.blocks_per_gpu * dep.pool.block_bytes_per_gpu
    scalars = {"model": card.name, "hardware": dep.hardware.name, "kv_dtype": layout.kv_dtype, "tp": dep.tp,
               "pp": dep.pp, "engine": dep.engine.engine, "kv_bytes_per_token": _whole(layout.bytes_per_token),
               "kv_bytes_per_token_per_gpu": _whole(layout.bytes_per_token_per_gpu),
               "weights_bytes_per_gpu": dep.memory.weights_bytes_per_gpu, "kv_cache_memory_bytes": kv_bytes,
               "num_blocks": dep.pool.blocks_per_gpu, "kv_cache_tokens": dep.pool.tokens_per_gpu}
    upper = max(card.max_context, int(seqs.max()))
    step = max(1, chunk_points // len(batches))
    yield None  # checked (what follows rejects nothing: it runs when the first chunk is asked for,
    # beside the writing of the combinations before, not in the check of every combination up front)
    longest = layout.max_sequence_len(pool, batches, upper=upper)           # per batch value
    for start in range(0, len(seqs), step):
        chunk = seqs[start:start + step]
        per_seq = layout.sequence_bytes(chunk)
        per_seq_gpu = layout.sequence_bytes(chunk, per_gpu=True)
        with np.errstate(divide="ignore"):
            concurrency = np.where(per_seq_gpu > 0, pool / per_seq_gpu, math.inf)
        rounded = round_4(concurrency)  # kvplan fit's round(concurrency, 4), vectorised
        grid_arrays = {
            "kv_bytes_total": _product(per_seq, batches),
            "kv_bytes_total_per_gpu": _product(per_seq_gpu, batches),
            "fits": (kv_bytes > 0) & (concurrency[:, None] >= batches[None, :]),
        }
        batch_arrays = {"batch": batches.astype(np.int64)}
        if chunk.max() <= card.max_context:  # min(longest, max(model max, seq)) depends on batch only
            batch_arrays["max_context_at_batch"] = np.minimum(longest, card.max_context).astype(np.int64)
        else:
            grid_arrays["max_context_at_batch"] = np.minimum(
                longest[None, :], np.maximum(card.max_context, chunk)[:, None]).astype(np.int64)
        if latency_model is not None:
            grid_arrays.update(latency_model(chunk, batches))
        yield Block(
            scalars=scalars,
            seq_arrays={"seq_len": chunk.astype(np.int64), "kv_bytes_per_sequence": per_seq,
                        "kv_bytes_per_sequence_per_gpu": per_seq_gpu, "max_concurrency": rounded},
            batch_arrays=batch_arrays,
            grid_arrays=grid_arrays,
        )


def _latency_model(dep, grid: Grid, notes: list[str], latency_notes: list[str]):
    """A function (seqs, batches) → decode-step columns, or None when latency does not apply.

    What can leave the columns empty (pp > 1, a missing card figure) is decided here, before any
    point; the operator model is built on the first call, adding its notes to ``latency_notes``.
    """
    if not grid.latency:
        return None
    try:
        from kvplan.calc.roofline import decode_step
    except ImportError:
        return None
    card, hw, tp = dep.model, dep.hardware, dep.tp
    if dep.pp > 1:
        notes.append("latency columns are empty for pp > 1 (the roofline models one pipeline stage-less instance)")
        return _empty_latency
    try:
        cost, machine = dep.cost, dep.machine
    except MissingFigureError as exc:
        notes.append(f"latency columns are empty for {card.name} on {hw.name} tp={tp}: {exc.message}")
        return _empty_latency
    latency_notes.extend(dep.machine_notes)
    from kvplan.calc.operators import Parallel
    from kvplan.plans.sizing.latency_ops import load_tables
    from kvplan.plans.sizing.perfmodel import operator_model

    eff = dep.engine.efficiencies
    made: list = []

    def times(*args, **kwargs):  # the step time and its floor only: no per-operator terms at grid size
        if not made:  # the operator model (kernel-table curves) when the first chunk needs it: this setup
            made.append(operator_model(  # then overlaps the writing of the combinations before
                card, hw, cost, machine, dep.engine.engine, eff.eta_mem is not None or eff.eta_flops is not None,
                eff.step_overhead_s is not None, Parallel(tp=tp), latency_notes, load_tables())[0])
        return made[0](*args, times_only=True, **kwargs)

    def columns(seqs: np.ndarray, batches: np.ndarray) -> dict[str, np.ndarray]:
        step = decode_step(cost, machine, batches[None, :], seqs[:, None], tp=tp, pass_fn=times)
        return {"decode_step_s": step.time_s, "floor_decode_step_s": step.floor_s,
                "decode_tokens_per_s": batches[None, :] / step.time_s}

    return columns


def _empty_latency(seqs: np.ndarray, batches: np.ndarray) -> dict[str, np.ndarray]:
    nan = np.full((len(seqs), len(batches)), np.nan)
    return {c: nan for c in LATENCY_COLUMNS}


def iter_combinations(grid: Grid) -> Iterator[tuple]:
    return itertools.product(grid.models, grid.hardware, grid.kv_dtype, grid.tp, grid.pp, grid.engine)


class SweepStream(SweepResult):
    """A sweep evaluated as it is read: ``blocks`` yields each chunk once, then the counts are final."""

    def __init__(self, grid: Grid, source: Iterator[Block]) -> None:
        super().__init__(grid=grid, blocks=[])
        self._source = source
        self._rows = 0
        self._first: list[Block] = []

    def empty(self) -> bool:
        """True when no point is valid (evaluates the first block, kept for the reading)."""
        if not self._first:
            self._first = [block for block in itertools.islice(self._source, 1)]
        return not self._first

    def __iter__(self) -> Iterator[Block]:
        for block in itertools.chain(self._first, self._source):
            self._rows += block.rows
            yield block
        self._first = []

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def column_names(self) -> list[str]:
        return COORDINATES + SIZE_FIT_COLUMNS + (LATENCY_COLUMNS if self.grid.latency else [])


def sweep(grid: Grid | str | Path, *, cards: tuple[Path, ...] = (), strict: bool = False,
          progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """Evaluate every grid point; ``progress(points_done, points_total)`` after each combination."""
    stream = sweep_stream(grid, cards=cards, strict=strict, progress=progress)
    blocks = list(stream)
    return SweepResult(grid=stream.grid, blocks=blocks, skipped=stream.skipped, notes=stream.notes,
                       latency_notes=stream.latency_notes, seconds=stream.seconds, cache_gaps=stream.cache_gaps)


def sweep_stream(grid: Grid | str | Path, *, cards: tuple[Path, ...] = (), strict: bool = False,
                 progress: Callable[[int, int], None] | None = None,
                 chunk_points: int = CHUNK_POINTS) -> SweepStream:
    """The sweep as a stream of blocks of at most ``chunk_points`` points (memory stays bounded).

    ``skipped``, ``notes``, ``latency_notes`` and ``seconds`` are complete once it is read.
    """
    grid = grid if isinstance(grid, Grid) else load_grid(grid)
    stream = SweepStream(grid, iter(()))
    stream._source = _evaluate(grid, stream, cards, strict, progress, chunk_points)
    return stream


def _evaluate(grid: Grid, result: SweepResult, cards, strict, progress, chunk_points) -> Iterator[Block]:
    from kvplan.cards.loader import load_hardware, load_model

    start = time.perf_counter()
    models = {m: load_model(m, cards) for m in grid.models}
    hardware = {h: load_hardware(h, cards) for h in grid.hardware}
    seqs_all = np.array(grid.seq, dtype=np.float64)
    batches = np.array(grid.batch, dtype=np.float64)
    reasons: dict[str, int] = {}
    notes: list[str] = []
    latency_notes: list[list[str]] = []  # per combination, in grid order (the operator model adds to its own later)
    done = 0
    gaps = False
    ready = []  # every combination is checked (strict errors raised) before the first point is made
    for model, hw_name, dtype, tp, pp, engine in iter_combinations(grid):
        card, hw = models[model], hardware[hw_name]
        seqs = seqs_all if grid.allow_long_context else seqs_all[seqs_all <= card.max_context]
        dropped = (len(grid.seq) - len(seqs)) * len(grid.batch)
        if dropped:
            reason = (f"seq beyond {card.name}'s max context ({card.max_context:,} tokens; "
                      "set allow_long_context: true to keep them)")
            if strict:
                raise InputError(f"{reason}: {', '.join(str(int(s)) for s in seqs_all if s > card.max_context)}",
                                 "drop those seq values, or set allow_long_context: true")
            reasons[reason] = reasons.get(reason, 0) + dropped
        if len(seqs):
            try:
                dep = _deployment(card, hw, grid, dtype, tp, pp, engine)
                latency_notes.append([])
                chunks = _blocks(dep, seqs, batches, _latency_model(dep, grid, notes, latency_notes[-1]),
                                 chunk_points)
                next(chunks)
            except InputError as exc:
                if strict:
                    raise
                reasons[exc.message] = reasons.get(exc.message, 0) + len(seqs) * len(grid.batch)
            else:
                ready.append(chunks)
                gaps = gaps or dep.memory.kv_cache_memory_bytes <= 0
    result.skipped = list(reasons.items())
    result.cache_gaps = gaps
    result.notes = list(dict.fromkeys(notes))
    result.latency_notes = list(dict.fromkeys(itertools.chain(*latency_notes)))
    for chunks in ready:
        for block in chunks:
            done += block.rows
            yield block
        if progress is not None:
            progress(done, grid.points)
    result.latency_notes = list(dict.fromkeys(itertools.chain(*latency_notes)))
    result.seconds = time.perf_counter() - start
