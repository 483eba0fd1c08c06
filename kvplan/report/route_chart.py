"""PNG chart of a routing study: prefix hit rate and load imbalance versus N, one line per policy.

matplotlib is imported inside the function (Agg canvas, no pyplot); the caller writes the PNG bytes together
with its other outputs (``kvplan.outputs.OutputSet``: all files or none).
"""

from __future__ import annotations

from kvplan.report.tier_chart import png_bytes

DPI = 110
SIZE = (9.0, 4.2)


def route_chart(rows: list[dict], title: str) -> bytes:
    """The PNG (bytes) of a routing study. Left: hit_rate (%) vs instances; right: load_imbalance (max/mean) vs instances; log2 x axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    hit_ax, balance_ax = figure.subplots(1, 2)
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    for policy in policies:
        points = sorted((r["instances"], r["hit_rate"], r["load_imbalance"]) for r in rows if r["policy"] == policy)
        xs = [p[0] for p in points]
        if all(p[1] is not None for p in points):
            hit_ax.plot(xs, [p[1] * 100 for p in points], marker="o", label=policy)
        balance_ax.plot(xs, [p[2] for p in points], marker="o", label=policy)
    ticks = sorted({r["instances"] for r in rows})
    for ax, label in ((hit_ax, "prompt blocks served from cache (%)"), (balance_ax, "load imbalance (max / mean requests)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, labels=[str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("instances N")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    hit_ax.set_ylim(bottom=0)
    balance_ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    hit_ax.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    return png_bytes(figure)
