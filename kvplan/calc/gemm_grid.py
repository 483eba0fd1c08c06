"""GEMM efficiency at any (N, K) from the measured grid, and a layer group's efficiency over its GEMMs.

The GEMM table (``kvplan/data/perf/gemm.csv``, NVIDIA aiconfigurator's ``gemm_perf``) holds measured
latencies on a grid of (n, k) pairs (the source measures n, k ∈ {32 … 16384, 51200, 65536}), each over
the tokens m. At one measured pair, ``η(m) = SOL / latency`` (:func:`kvplan.calc.efficiency.curve_from_rows`,
``SOL = max(n k w / BW, 2 m n k / peak)``). Between pairs::

    t = (ln n − ln n₀) / (ln n₁ − ln n₀),   u = (ln k − ln k₀) / (ln k₁ − ln k₀)
    η(m; n, k) = (1−t)(1−u) η₀₀(m) + t(1−u) η₁₀(m) + (1−t) u η₀₁(m) + t u η₁₁(m)

with n₀ ≤ n ≤ n₁, k₀ ≤ k ≤ k₁ the kept grid values around the query (a measured n or k is its own
bracket: t or u = 0) and each corner's η(m) piecewise linear in ln m, held at its ends. The shape's
time is then ``SOL(query) / η``. This is aiconfigurator's own form (``aic-core/rust/aiconfigurator-core/
src/perf_database/perf_interp.rs``, ``SiteIndex::resolve_pair``): for an unmeasured (n, k) it carries the
*utilisation* (η) of measured sites over, in log₂ (n, k) space, and rescales by the query's SOL. It weights
up to four nearest sites by inverse squared log-distance; here the four sites are the bracketing corners,
weighted bilinearly, which is exact at a measured pair and continuous across cells. A shape beyond the
grid (an LM head's ``n = vocab / tp`` above 65536) is held at the edge, and the curve's source says so;
where a bracketing corner is not kept (a table that is not a grid, e.g. AMD's tuned shapes), the caller
takes the nearest measured pair instead (:func:`bilinear_corners` returns None).

A group of GEMMs run at the same m (attention's QKV and O; the MLP's gate_up and down) takes, at each m,
the harmonic combination by each GEMM's share ``f_g`` of the group's SOL (∝ n k: bytes and FLOPs are
both ∝ n k at one m)::

    η_group(m) = 1 / Σ_g f_g / η_g(m)

so that ``SOL_group / η_group = Σ_g SOL_g / η_g``: the group's time is the sum of its GEMMs' times.
"""

from __future__ import annotations

import math

import numpy as np

from kvplan.calc.efficiency import Curve, curve_from_rows, distinct_values, nearest_index


def _bracket(values: np.ndarray, x: float) -> tuple[float, float, float]:
    """(lower, upper, weight of the upper) of ``x`` among the ascending ``values``, ``x`` inside them."""
    if x in values:
        return x, x, 0.0
    i = int(np.searchsorted(values, x))
    lo, hi = float(values[i - 1]), float(values[i])
    return lo, hi, (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))


def measured_pairs(rows: dict) -> tuple[np.ndarray, np.ndarray, frozenset]:
    """(the distinct n, the distinct k, the measured (n, k) pairs) of one backend's rows of one dtype: what
    :func:`bilinear_corners` reads; a caller pricing several shapes from the same rows passes it in once."""
    return distinct_values(rows["n"]), distinct_values(rows["k"]), frozenset(zip(rows["n"].tolist(),
                                                                                 rows["k"].tolist()))


def bilinear_corners(rows: dict, n: float, k: float, pairs: tuple | None = None) -> tuple[list, str] | None:
    """The measured (n, k) corners around (n, k) with their bilinear weights, and a note where the shape lies
    beyond the measured range (held at the edge). None when a bracketing corner is not in ``rows``
    (``pairs``: :func:`measured_pairs` of ``rows``, worked out here where not given)."""
    ns, ks, kept = measured_pairs(rows) if pairs is None else pairs
    nq, kq = min(max(n, ns[0]), ns[-1]), min(max(k, ks[0]), ks[-1])
    edge = []
    for name, q, x, lo, hi in (("n", nq, n, ns[0], ns[-1]), ("k", kq, k, ks[0], ks[-1])):
        if q != x:
            edge.append(f"{name}={x:g} beyond the measured {name} {lo:g}–{hi:g}: held at {q:g}")
    n0, n1, t = _bracket(ns, float(nq))
    k0, k1, u = _bracket(ks, float(kq))
    weights: dict = {}
    for (a, b), w in (((n0, k0), (1 - t) * (1 - u)), ((n1, k0), t * (1 - u)), ((n0, k1), (1 - t) * u),
                      ((n1, k1), t * u)):
        if w > 0 or (a, b) == (n0, k0):
            weights[(a, b)] = weights.get((a, b), 0.0) + w
    if any(c not in kept for c in weights):
        return None
    return [(w, a, b) for (a, b), w in weights.items()], "; ".join(edge)


def blend(curves: list[tuple[float, Curve]], source: str) -> Curve:
    """Σ w η_c(m) over the union of the curves' sizes (each held at its own ends): the bilinear blend."""
    sizes = distinct_values(np.concatenate([np.asarray(c.sizes) for _, c in curves]))
    eta = sum(w * c(sizes) for w, c in curves)
    return Curve(tuple(float(s) for s in sizes), tuple(float(e) for e in eta), source)


def group_curve(curves: list[tuple[float, Curve]], source: str) -> Curve:
    """``1 / Σ f_g / η_g(m)`` over the union of the GEMMs' sizes, ``f_g`` the weights normalised to 1."""
    total = sum(w for w, _ in curves)
    sizes = distinct_values(np.concatenate([np.asarray(c.sizes) for _, c in curves]))
    inverse = sum((w / total) / c(sizes) for w, c in curves)
    return Curve(tuple(float(s) for s in sizes), tuple(float(1.0 / v) for v in inverse), source)


def shape_label(n: float, k: float, sep: str = ", ") -> str:
    return f"n={n:.6g}{sep}k={k:.6g}"


def _pair_curve(rows: dict, n: float, k: float, width: float, bw: float, peak: float, source: str) -> Curve | None:
    """η(m) of the measured pair (n, k): ``SOL = max(n k width / BW, 2 m n k / peak)`` over each row's latency."""
    sel = (rows["n"] == n) & (rows["k"] == k)
    m, nn, kk = rows["m"][sel], rows["n"][sel], rows["k"][sel]
    sol = np.maximum(nn * kk * width / bw, 2 * m * nn * kk / peak)
    return curve_from_rows(m, sol, rows["latency_s"][sel], source)


def measured_curve(rows: dict, n: float, k: float, width: float, bw: float, peak: float, head: str,
                   pairs: tuple | None = None) -> Curve | None:
    """η(m) at (n, k) from one backend's rows of one dtype (``width`` bytes a weight): the bilinear blend of the
    bracketing measured pairs (:func:`bilinear_corners`, held at the grid's edge), or the nearest measured pair in
    log space where the rows do not bracket it. ``head`` starts the source ("aiconfigurator vllm 0.24.0 bf16 GEMM");
    ``pairs``: :func:`measured_pairs` of ``rows`` where the caller has it."""
    pairs = measured_pairs(rows) if pairs is None else pairs
    found = bilinear_corners(rows, n, k, pairs)
    if found is None:                      # not a grid around (n, k): the nearest measured pair
        kept = np.array(sorted(pairs[2]), dtype=np.float64)
        a, b = kept[nearest_index(kept, np.array([n, k]))]
        why = "" if (a, b) == (n, k) else f" (nearest measured pair to {shape_label(n, k)})"
        return _pair_curve(rows, a, b, width, bw, peak, f"{head} {shape_label(a, b)}{why}")
    corners, edge = found
    if len(corners) == 1 and not edge:     # a measured pair: its own rows
        return _pair_curve(rows, corners[0][1], corners[0][2], width, bw, peak, f"{head} {shape_label(n, k)}")
    curves = [(w, _pair_curve(rows, a, b, width, bw, peak, head)) for w, a, b in corners]
    if any(c is None for _, c in curves):
        return None
    notes = [edge] if edge else []
    if len(corners) > 1:
        ns = "–".join(f"{v:g}" for v in sorted({a for _, a, _ in corners}))
        ks = "–".join(f"{v:g}" for v in sorted({b for _, _, b in corners}))
        notes.insert(0, f"interpolated between measured n {ns}, k {ks}")
    return blend(curves, f"{head} {shape_label(n, k)} ({'; '.join(notes)})")


def group_source(gemms, curves) -> str:
    """Short source of a group curve: the table, each GEMM's shape, how they were read."""
    head = curves[0].source.split(" GEMM ")[0]
    parts = "; ".join(f"{g[0]} {shape_label(g[1], g[2], ',')}" for g in gemms)
    how = [w for w, key in (("interpolated between measured n, k", "interpolated"),
                            ("nearest measured pair", "nearest"), ("held at the grid's edge", "beyond"))
           if any(key in c.source for c in curves)]
    return f"{head} GEMMs {parts}" + (f" ({'; '.join(how)})" if how else "")


__all__ = ["bilinear_corners", "measured_pairs", "blend", "group_curve", "shape_label", "measured_curve", "group_source"]
