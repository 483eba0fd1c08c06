"""PNG charts for reports (matplotlib, Agg canvas, imported inside each function).

Each function takes plain numbers (SI units) and a path, draws one figure and writes it.
No pyplot: a ``Figure`` on an Agg canvas has no global state, so charts can be drawn from
any thread and never open a window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO
from pathlib import Path

GIB = 2**30
DPI = 110
SIZE = (7.5, 4.2)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f"]


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path | BinaryIO) -> None:
    figure.savefig(path, format="png", metadata={"Software": None})


def memory_chart(path: Path, parts: Sequence[tuple[str, float]], gpu_bytes: float, title: str) -> None:
    """One stacked horizontal bar: where one GPU's memory goes (GiB)."""
    figure = _figure()
    ax = figure.add_subplot()
    left = 0.0
    for i, (label, value) in enumerate(parts):
        width = max(value, 0.0) / GIB
        ax.barh([0], [width], left=left, color=PALETTE[i % len(PALETTE)], label=f"{label}: {value / GIB:,.2f} GiB")
        if width > 0.06 * gpu_bytes / GIB:
            ax.text(left + width / 2, 0, f"{width:,.1f}", ha="center", va="center", color="white", fontsize=9)
        left += width
    ax.axvline(gpu_bytes / GIB, color="black", linestyle="--", linewidth=1)
    ax.text(gpu_bytes / GIB, 0.45, f" GPU {gpu_bytes / GIB:,.1f} GiB", va="center", fontsize=8)
    ax.set_yticks([])
    ax.set_ylim(-0.6, 0.6)
    ax.set_xlim(0, max(left, gpu_bytes / GIB) * 1.02)
    ax.set_xlabel("GiB on one GPU")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, fontsize=8, frameon=False)
    _save(figure, path)


def kv_context_chart(path: Path, series: dict[str, tuple[Sequence[float], Sequence[float]]], budget_bytes: float,
                     max_model_len: int, title: str) -> None:
    """KV bytes of one sequence on one GPU vs context length, one curve per KV dtype, with the budget."""
    figure = _figure()
    ax = figure.add_subplot()
    for i, (dtype, (contexts, values)) in enumerate(series.items()):
        ax.plot(contexts, [v / GIB for v in values], label=dtype, color=PALETTE[i % len(PALETTE)], linewidth=1.8)
    if budget_bytes > 0:
        ax.axhline(budget_bytes / GIB, color="black", linestyle="--", linewidth=1,
                   label=f"KV budget {budget_bytes / GIB:,.1f} GiB")
    ax.axvline(max_model_len, color="grey", linestyle=":", linewidth=1, label=f"max_model_len {max_model_len:,}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("KV of one sequence on one GPU (GiB)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    _save(figure, path)


def concurrency_chart(path: Path, batches: Sequence[int], max_context: Sequence[float], max_model_len: int,
                      max_concurrency: float, title: str) -> None:
    """The KV budget shared out: longest context every one of B sequences can have, vs B."""
    figure = _figure()
    ax = figure.add_subplot()
    ax.plot(batches, max_context, color=PALETTE[0], linewidth=1.8, label="max context at concurrency")
    ax.axhline(max_model_len, color="grey", linestyle=":", linewidth=1, label=f"max_model_len {max_model_len:,}")
    if max_concurrency > 0:
        ax.axvline(max_concurrency, color=PALETTE[3], linestyle="--", linewidth=1,
                   label=f"max concurrency at max_model_len {max_concurrency:,.2f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("concurrent sequences")
    ax.set_ylabel("tokens per sequence")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    _save(figure, path)


def latency_chart(path: Path, batches: Sequence[int], step_s: Sequence[float], floor_s: Sequence[float],
                  tokens_per_s: Sequence[float], memory_limit: float | None, title: str) -> None:
    """Decode step (and its floor) and decode throughput vs batch size."""
    figure = _figure()
    ax = figure.add_subplot()
    ax.plot(batches, [s * 1e3 for s in step_s], color=PALETTE[0], linewidth=1.8, label="decode step (TPOT)")
    ax.plot(batches, [s * 1e3 for s in floor_s], color=PALETTE[0], linestyle="--", linewidth=1,
            label="physical floor")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (concurrent sequences)")
    ax.set_ylabel("ms per step")
    ax.grid(True, which="major", alpha=0.3)
    right = ax.twinx()
    right.plot(batches, tokens_per_s, color=PALETTE[1], linewidth=1.8, label="decode tokens/s")
    right.set_ylabel("decode tokens/s (one instance)")
    if memory_limit:
        ax.axvline(memory_limit, color=PALETTE[3], linestyle=":", linewidth=1,
                   label=f"KV memory limit {memory_limit:,.1f}")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=10)
    _save(figure, path)


def closed_loop_chart(path: Path | BinaryIO, rows: Sequence[dict], title: str) -> None:
    """The latency–throughput curve of a closed-loop sweep: output tokens/s per GPU against TPOT p50 and TTFT p99.

    ``path``: a file, or a binary buffer (``kvplan plan --chart`` writes the bytes with its other outputs).

    One point per concurrency C (labelled), as ``vllm bench serve --max-concurrency`` sweeps plot it.
    """
    figure = _figure()
    ax = figure.add_subplot()
    x = [r["output_tokens_per_s_per_gpu"] or 0.0 for r in rows]
    tpot = [(r["tpot_p50_s"] or 0.0) * 1e3 for r in rows]
    ttft = [(r["ttft_p99_s"] or 0.0) for r in rows]
    ax.plot(x, tpot, marker="o", color=PALETTE[0], label="TPOT p50 (ms)")
    for xi, yi, r in zip(x, tpot, rows):
        ax.annotate(f"C={r['concurrency']}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("output tokens/s per GPU")
    ax.set_ylabel("TPOT p50 (ms)", color=PALETTE[0])
    other = ax.twinx()
    other.plot(x, ttft, marker="s", linestyle="--", color=PALETTE[1], label="TTFT p99 (s)")
    other.set_ylabel("TTFT p99 (s)", color=PALETTE[1])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    _save(figure, path)
