"""A workload's length statistics for the fleet model (:mod:`kvplan.plans.fleet.model`): moments, equally likely
quantile points, and the sample folded onto the prompt-length grid of the instance figures."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kvplan.calc import tails

QUANTILE_POINTS = 256
TAIL_POINTS = 4096    # equally likely prompt lengths behind the prefill wait's heavy tail


def _points(values: np.ndarray, k: int = QUANTILE_POINTS) -> np.ndarray:
    """k equally likely points of an empirical distribution (quantiles at (i + ½)/k)."""
    return np.quantile(np.asarray(values, dtype=np.float64), (np.arange(k) + 0.5) / k)


@dataclass(frozen=True, eq=False)
class LengthStats:
    """Moments and quantile points of a workload's lengths (from a trace or a seeded sample)."""

    isl: np.ndarray
    osl: np.ndarray

    def __post_init__(self):
        isl, osl = self.isl.astype(np.float64), self.osl.astype(np.float64)
        n = np.maximum(osl - 1, 0)
        ctx = isl + osl
        decoding = n[n >= 1]
        steps = n.sum()
        held = (n * isl + n * (n + 1) / 2).sum() / steps if steps > 0 else isl.mean() + 1
        held2 = ((n * isl**2 + isl * n * (n + 1) + n * (n + 1) * (2 * n + 1) / 6).sum() / steps
                 if steps > 0 else held**2)
        points = _points(isl)
        grid = np.unique(np.concatenate([points, np.quantile(isl, [0.0, 0.99, 0.999, 0.9999, 1.0])]))
        values = {
            "isl_points": points, "isl_grid": grid, "points_index": np.searchsorted(grid, points),
            "n_points": _points(decoding) if decoding.size else np.zeros(0),
            "n_distinct": tails.distinct(_points(decoding)) if decoding.size else (np.zeros(0), np.zeros(0)),
            "mean_isl": float(isl.mean()), "mean_osl": float(osl.mean()), "mean_steps": float(n.mean()),
            "second_steps": float((n * n).mean()),
            "decode_context": float(held), "decode_context_var": float(max(held2 - held**2, 0.0)),
            "context_mean": float(ctx.mean()),
            **{f"context_p{p}": float(np.percentile(ctx, p)) for p in (50, 90, 99)},
            "context_max": float(ctx.max()),
        }
        # the sample folded onto the grid: request i sits between grid points j and j + 1 with weights
        # (a, b), a + b = 1; f(ISL_i) = a f_j + b f_j+1 for any f linear between grid points
        j = np.clip(np.searchsorted(grid, isl, side="right") - 1, 0, max(grid.size - 2, 0))
        width = np.diff(grid)[j] if grid.size > 1 else np.ones_like(isl)
        b = np.where(width > 0, (isl - grid[j]) / np.where(width > 0, width, 1.0), 0.0) if grid.size > 1 else 0 * isl
        a, size, count = 1.0 - b, max(grid.size - 1, 1), isl.size
        folds = {name: np.bincount(j, weights=w, minlength=size) / count
                 for name, w in (("a", a), ("b", b), ("aa", a * a), ("ab", a * b), ("bb", b * b), ("an", a * n),
                                 ("bn", b * n))}
        values["grid_folds"] = folds
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @cached_property
    def tail_isl(self) -> np.ndarray:
        """The sorted prompt lengths thinned to :data:`TAIL_POINTS` equally likely points (the prefill
        wait's heavy tail, :meth:`FleetModel._heavy_tail`); computed once per workload, shared by every shape."""
        isl = np.sort(self.isl.astype(np.float64))
        return isl if isl.size <= TAIL_POINTS else _points(isl, TAIL_POINTS)
