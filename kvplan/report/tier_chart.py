"""PNG chart of a tier plan: the prefix-LRU hit rate versus cache capacity, with each tier's span.

matplotlib is imported inside the function (Agg canvas, no pyplot), so ``kvplan --help`` and the
other commands never load it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

DPI = 110
SIZE = (8.0, 4.6)
TIER_COLOURS = {"hbm": "#2ca02c", "host_dram": "#1f77b4", "cxl": "#9467bd", "nvme": "#ff7f0e", "remote": "#8c564b"}
MAX_POINTS = 4000


def hit_rate_chart(capacity_tokens: np.ndarray, hit_rate: np.ndarray,
                   boundaries: Sequence[tuple[str, str, float]], unlimited_hit_rate: float, title: str) -> bytes:
    """The PNG (bytes, written by the caller with its other outputs) of the step curve ``hit_rate[k]`` from ``capacity_tokens[k]`` on, log-x, with tiers shaded.

    ``boundaries``: (tier name, kind, cumulative capacity in tokens where the tier ends), hot to cold.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    x, y = _thin(np.asarray(capacity_tokens, float), np.asarray(hit_rate, float))
    ends = [end for _, _, end in boundaries if end > 0]
    right = max([x[-1] if x.size else 1.0, *ends, 1.0]) * 1.5
    left = max(min(x[0] if x.size else 1.0, *(e for e in ends if e > 0), right) / 2, 1.0)
    if x.size:
        ax.step(np.concatenate(([left], x, [right])), np.concatenate(([0.0], y, [y[-1]])) * 100, where="post",
                color="black", linewidth=1.6, label="prefix hit rate (LRU)")
    ax.axhline(unlimited_hit_rate * 100, color="grey", linestyle=":", linewidth=1,
               label=f"unlimited cache {unlimited_hit_rate:.1%}")
    start = left
    for name, kind, end in boundaries:
        if end <= start:
            continue
        ax.axvspan(start, end, color=TIER_COLOURS.get(kind, "#7f7f7f"), alpha=0.18, label=name)
        ax.axvline(end, color=TIER_COLOURS.get(kind, "#7f7f7f"), linewidth=1)
        start = end
    ax.set_xscale("log")
    ax.set_xlim(left, right)
    ax.set_ylim(0, max(unlimited_hit_rate * 100 * 1.15, 1.0))
    ax.set_xlabel("cache capacity (tokens, all tiers above the line)")
    ax.set_ylabel("prompt blocks served from cache (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return png_bytes(figure)


def png_bytes(figure) -> bytes:
    """A figure as PNG bytes (no timestamp or software metadata: the same input gives the same file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS steps, keeping the curve's shape on a log axis (last step of each bin)."""
    if x.size <= MAX_POINTS:
        return x, y
    bins = np.unique(np.searchsorted(x, np.geomspace(x[0], x[-1], MAX_POINTS), side="right") - 1)
    return x[bins], y[bins]
