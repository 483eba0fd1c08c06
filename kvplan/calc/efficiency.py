"""Operator efficiencies: η as a function of an operator's size, from measured per-kernel tables.

An efficiency is the share of the speed-of-light (SOL) time an operator reaches::

    SOL  = max(bytes / peak bandwidth, FLOPs / peak FLOPS of its dtype)
    η    = SOL / measured latency                       (one measured kernel row)
    t    = SOL / η(size)                                (any shape of that operator)

``η(size)`` is piecewise linear in ``log(size)`` between measured sizes (tokens M for a GEMM,
tokens entering a MoE layer for its grouped GEMMs, batch and context for decode attention, prompt
tokens for prefill attention). Outside the measured range it is clamped to the end value, and
:meth:`Curve.outside` says which points were clamped so that the command can say so.

Without a table row for an operator (a GPU without data, a dtype not measured) the operator
runs at the card's flat efficiencies: ``t = max(bytes / (BW × η_mem), FLOPs / (peak × η_flops))``
(:class:`Flat`), and the resolver records a note naming the default used.

Every class broadcasts: ``curve(x)`` takes any array of sizes, so one point and a million are
the same code path (one ``np.interp`` per operator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Flat:
    """The card's efficiencies, one for bytes and one for FLOPs (the roofline's η_mem, η_flops)."""

    eta_mem: float
    eta_flops: float
    source: str = "card"

    def time_s(self, memory_s, compute_s, size=None):
        """``max(memory_s / η_mem, compute_s / η_flops)`` for times at peak (η = 1)."""
        return np.maximum(np.asarray(memory_s) / self.eta_mem, np.asarray(compute_s) / self.eta_flops)

    def outside(self, size):
        return np.zeros(np.shape(size), dtype=bool)


@dataclass(frozen=True)
class Curve:
    """η of one operator versus one size, piecewise linear in log(size), clamped outside the table.

    ``sizes`` ascending and positive; ``eta`` in (0, 1] (SOL / measured latency of each row).
    """

    sizes: tuple[float, ...]
    eta: tuple[float, ...]
    source: str
    _log: np.ndarray = field(init=False, repr=False, compare=False)
    _eta: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        sizes = np.asarray(self.sizes, dtype=np.float64)
        eta = np.asarray(self.eta, dtype=np.float64)
        if sizes.ndim != 1 or sizes.size == 0 or sizes.size != eta.size:
            raise ValueError("a curve needs as many efficiencies as sizes, at least one")
        if np.any(sizes <= 0) or np.any(np.diff(sizes) <= 0):
            raise ValueError("curve sizes must be positive and strictly increasing")
        if np.any(eta <= 0) or np.any(~np.isfinite(eta)):
            raise ValueError("curve efficiencies must be positive and finite")
        object.__setattr__(self, "_log", np.log(sizes))
        object.__setattr__(self, "_eta", np.minimum(eta, 1.0))

    @property
    def lo(self) -> float:
        return float(self.sizes[0])

    @property
    def hi(self) -> float:
        return float(self.sizes[-1])

    def __call__(self, size):
        x = np.log(np.maximum(np.asarray(size, dtype=np.float64), 1e-300))
        return np.interp(x, self._log, self._eta)

    def outside(self, size):
        s = np.asarray(size, dtype=np.float64)
        return (s < self.lo * (1 - 1e-9)) | (s > self.hi * (1 + 1e-9))

    def time_s(self, memory_s, compute_s, size):
        """``max(memory_s, compute_s) / η(size)``: the SOL of the operator over its measured share."""
        return np.maximum(np.asarray(memory_s), np.asarray(compute_s)) / self(size)


@dataclass(frozen=True)
class Grid:
    """η versus two sizes (decode attention: batch × context), bilinear in (log a, log b), clamped."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    eta: tuple[tuple[float, ...], ...]   # eta[i][j] at (a[i], b[j])
    source: str

    def __call__(self, size_a, size_b):
        la, lb = np.log(np.asarray(self.a, float)), np.log(np.asarray(self.b, float))
        table = np.minimum(np.asarray(self.eta, dtype=np.float64), 1.0)
        xa = np.clip(np.log(np.maximum(np.asarray(size_a, float), 1e-300)), la[0], la[-1])
        xb = np.clip(np.log(np.maximum(np.asarray(size_b, float), 1e-300)), lb[0], lb[-1])
        # each axis is located once on its own shape (a batch row, a context column); the four
        # corner lookups and the blend broadcast to the grid (same values as broadcasting first)
        ia = np.clip(np.searchsorted(la, xa, side="right") - 1, 0, max(len(la) - 2, 0))
        ib = np.clip(np.searchsorted(lb, xb, side="right") - 1, 0, max(len(lb) - 2, 0))
        ja, jb = np.minimum(ia + 1, len(la) - 1), np.minimum(ib + 1, len(lb) - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            fa = np.where(ja > ia, (xa - la[ia]) / (la[ja] - la[ia]), 0.0)
            fb = np.where(jb > ib, (xb - lb[ib]) / (lb[jb] - lb[ib]), 0.0)
        return ((1 - fa) * (1 - fb) * _gather(table, ia, ib) + fa * (1 - fb) * _gather(table, ja, ib)
                + (1 - fa) * fb * _gather(table, ia, jb) + fa * fb * _gather(table, ja, jb))

    def outside(self, size_a, size_b):
        a, b = np.asarray(size_a, float), np.asarray(size_b, float)
        return ((a < self.a[0] * (1 - 1e-9)) | (a > self.a[-1] * (1 + 1e-9))
                | (b < self.b[0] * (1 - 1e-9)) | (b > self.b[-1] * (1 + 1e-9)))


def _gather(table: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``table[i, j]`` (broadcast); a row of ``i`` against a column of ``j`` (or the reverse), as a grid of
    points gives them, by two one-axis takes (the same values, without a broadcast index per point)."""
    if i.ndim == j.ndim == 2:
        if i.shape[0] == 1 and j.shape[1] == 1:
            return np.take(table.T[j[:, 0]], i[0], axis=1)
        if i.shape[1] == 1 and j.shape[0] == 1:
            return np.take(table[i[:, 0]], j[0], axis=1)
    return table[i, j]


@dataclass(frozen=True)
class LatencyCurve:
    """A collective's measured latency versus message bytes at one rank count, log-log interpolated.

    Beyond the largest message the time grows at the last measured bandwidth; below the
    smallest it is the smallest message's latency (the α of the collective).
    """

    message_bytes: tuple[float, ...]
    latency_s: tuple[float, ...]
    source: str

    def __call__(self, message_bytes):
        x = np.asarray(self.message_bytes, dtype=np.float64)
        y = np.asarray(self.latency_s, dtype=np.float64)
        m = np.maximum(np.asarray(message_bytes, dtype=np.float64), x[0])
        t = np.exp(np.interp(np.log(m), np.log(x), np.log(y)))
        if x.size >= 2:
            slope_s_per_byte = (y[-1] - y[-2]) / (x[-1] - x[-2])
            t = np.where(m > x[-1], y[-1] + (m - x[-1]) * max(slope_s_per_byte, 0.0), t)
        return t


def sol_s(bytes_, flops, bandwidth_bytes_per_s: float, peak_flops_per_s: float):
    """Speed-of-light time of a kernel: ``max(bytes / BW, FLOPs / peak)``."""
    return np.maximum(np.asarray(bytes_, float) / bandwidth_bytes_per_s, np.asarray(flops, float) / peak_flops_per_s)


def distinct_values(values) -> np.ndarray:
    """The distinct values of ``values``, ascending, as float64: np.unique's, without its import of numpy.ma (~10 ms
    at start-up) or its sort of a whole broadcast grid."""
    return np.array(sorted(set(np.ravel(values).tolist())), dtype=np.float64)


def curve_from_rows(sizes, sol, latency, source: str) -> Curve | None:
    """A curve from measured rows: η = SOL / latency at each size; duplicate sizes are averaged."""
    sizes = np.asarray(sizes, dtype=np.float64)
    eta = np.asarray(sol, dtype=np.float64) / np.asarray(latency, dtype=np.float64)
    keep = np.isfinite(eta) & (eta > 0) & (sizes > 0)
    if not keep.any():
        return None
    sizes, eta = sizes[keep], eta[keep]
    uniq = distinct_values(sizes)
    mean = np.array([eta[sizes == u].mean() for u in uniq])
    return Curve(tuple(float(u) for u in uniq), tuple(float(min(e, 1.0)) for e in mean), source)


def nearest_index(candidates: np.ndarray, target: np.ndarray) -> int:
    """The row of ``candidates`` (shape [rows, d]) nearest ``target`` in log space (shapes of a GEMM)."""
    c = np.log(np.maximum(np.asarray(candidates, dtype=np.float64), 1.0))
    t = np.log(np.maximum(np.asarray(target, dtype=np.float64), 1.0))
    return int(np.argmin(((c - t) ** 2).sum(axis=-1)))


def describe(eff) -> str:
    if isinstance(eff, Flat):
        return f"flat η_mem {eff.eta_mem:g}, η_flops {eff.eta_flops:g} ({eff.source})"
    if isinstance(eff, Curve):
        lo, hi = min(eff.eta), max(eff.eta)
        return f"η {lo:.2f}–{hi:.2f} over sizes {eff.lo:g}–{eff.hi:g} ({eff.source})"
    if isinstance(eff, Grid):
        values = [v for row in eff.eta for v in row]
        return f"η {min(values):.2f}–{max(values):.2f} over batch × context ({eff.source})"
    return str(eff)


__all__ = ["Flat", "Curve", "Grid", "LatencyCurve", "sol_s", "curve_from_rows", "distinct_values", "nearest_index", "describe"]
