"""``kvplan calibrate``: fit η_mem, η_flops and the per-step overhead to a user's measurements.

Measurements CSV (a header row; SI units; other columns are ignored; an empty cell is absent):

==============  =========================================================================
column          meaning
==============  =========================================================================
batch           sequences in the step (decode), or prompts prefilled together (prefill)
context         decode rows: tokens each sequence attends (its KV length) in the step
step_time_s     decode rows: measured time of one decode step at that batch and context
                (inter-token latency of a steady batch, or TPOT of ``vllm bench latency``)
isl             prefill rows: prompt tokens per sequence
ttft_s          prefill rows: measured time to first token of the batch, without queueing
tp              optional: tensor-parallel size of the row (default: ``--tp``)
==============  =========================================================================

A row with ``step_time_s`` is a decode step; a row with ``ttft_s`` is an unchunked prefill.

The model fitted is the roofline of :mod:`kvplan.calc.roofline` with its efficiencies free::

    t_i = Σ_op max(m_io × x_mem, c_io × x_flops) + comm_i + overhead,   x = 1/η
    m_io = bytes / peak bandwidth,  c_io = FLOPs / peak FLOPS of operator class o (dense GEMMs,
    routed-expert GEMMs, attention) in row i   (kvplan's own byte and FLOP counts)

``comm_i`` comes from the card's link and is not fitted. The fit alternates (1) assigning each
operator of each row to the term that binds under the current values and (2) solving the least-squares problem
in (x_mem, x_flops, overhead) on relative residuals ``(t̂_i − t_i)/t_i`` with x ≥ 1 (η ≤ 1) and
overhead ≥ 0, exactly, by enumerating the active bounds; it stops when the assignment repeats
and keeps the best fit seen. An efficiency no row binds on keeps the card's (or the default)
value, and is reported as not fitted.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from kvplan.calc.roofline import Machine, compute_dtype_for, decode_step, model_cost, prefill
from kvplan.cards.schema import MAX_LATENCY_S, MIN_EFFICIENCY, HardwareCard, ModelCard
from kvplan.errors import InputError
from kvplan.plans.sizing.latency import Efficiencies, check_parallel_modes, resolve_machine
from kvplan.result import Result
from kvplan.units import format_seconds

if TYPE_CHECKING:
    from kvplan.plans.deployment import Deployment

CALIBRATE_COLUMNS = ["line", "kind", "set", "batch", "tp", "tokens", "measured_s", "predicted_s", "error_pct",
                     "bound"]
INT_COLUMNS = ("batch", "context", "isl", "tp")
TIME_COLUMNS = ("step_time_s", "ttft_s")


@dataclass(frozen=True)
class Measurement:
    """One measured step: a decode step (tokens = context) or a prefill (tokens = isl)."""

    line: int
    kind: str  # "decode" | "prefill"
    batch: int
    tokens: int
    tp: int
    measured_s: float


@dataclass(frozen=True)
class Fit:
    eta_mem: float
    eta_flops: float
    step_overhead_s: float
    fitted: tuple[str, ...]   # which of eta_mem, eta_flops, step_overhead_s the data determined
    predicted_s: np.ndarray
    bound: np.ndarray
    iterations: int


@dataclass(frozen=True)
class Calibration:
    """The calibration table and the overlay card (a full hardware card with the fitted efficiency)."""

    result: Result
    card: HardwareCard
    fit: Fit

    def card_yaml(self) -> str:
        data = self.card.model_dump(mode="json", exclude_defaults=True)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _number(path: Path, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{path} line {line}: column '{column}': not a number ({text!r})",
                         "cells hold plain numbers in SI units (seconds, tokens)") from None
    if not math.isfinite(value):
        raise InputError(f"{path} line {line}: column '{column}': not a finite number ({text!r})",
                         "cells hold plain numbers in SI units (seconds, tokens)")
    return value


def read_measurements(path: Path, default_tp: int = 1) -> list[Measurement]:
    """Parse a measurements CSV; every error names the file, the line and the column."""
    path = Path(path)
    from kvplan.inputs import TABLE_MAX_BYTES, read_text

    text = read_text(path, "measurements CSV", TABLE_MAX_BYTES, missing="no file at '{path}'")
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or []) if h is not None]
    reader.fieldnames = header
    columns = ", ".join(header) or "none"
    if "batch" not in header:
        raise InputError(f"{path}: missing column 'batch' (columns: {columns})",
                         "columns: batch, context, step_time_s (decode) and/or isl, ttft_s (prefill)")
    if not any(c in header for c in TIME_COLUMNS):
        raise InputError(f"{path}: missing column 'step_time_s' or 'ttft_s' (columns: {columns})",
                         "decode rows need context and step_time_s; prefill rows need isl and ttft_s")
    for time_col, tokens_col in (("step_time_s", "context"), ("ttft_s", "isl")):
        if time_col in header and tokens_col not in header:
            raise InputError(f"{path}: missing column '{tokens_col}' (needed with '{time_col}'; columns: {columns})",
                             "decode rows need context and step_time_s; prefill rows need isl and ttft_s")
    rows: list[Measurement] = []
    for index, raw in enumerate(reader):
        line = index + 2
        cells = {k: (v or "").strip() for k, v in raw.items() if k is not None}
        if not any(cells.values()):
            continue
        values = {c: _number(path, line, c, cells[c]) for c in (*INT_COLUMNS, *TIME_COLUMNS) if cells.get(c)}
        for c in INT_COLUMNS:
            if c in values and (values[c] < 1 or values[c] != int(values[c])):
                raise InputError(f"{path} line {line}: column '{c}': must be a positive whole number "
                                 f"(got {cells[c]!r})", "token and batch counts are whole numbers >= 1")
        has_step, has_ttft = "step_time_s" in values, "ttft_s" in values
        if has_step == has_ttft:
            raise InputError(f"{path} line {line}: needs exactly one of step_time_s or ttft_s "
                             f"({'both' if has_step else 'neither'} given)",
                             "put decode steps and prefills on separate rows")
        kind, time_col, tokens_col = ("decode", "step_time_s", "context") if has_step else ("prefill", "ttft_s", "isl")
        for c in ("batch", tokens_col):
            if c not in values:
                raise InputError(f"{path} line {line}: column '{c}' is empty (needed for a {kind} row)",
                                 f"fill in {c}")
        if values[time_col] <= 0:
            raise InputError(f"{path} line {line}: column '{time_col}': must be > 0 (got {cells[time_col]!r})",
                             "times are in seconds")
        rows.append(Measurement(line, kind, int(values["batch"]), int(values[tokens_col]),
                                int(values.get("tp", default_tp)), values[time_col]))
    if not rows:
        raise InputError(f"{path}: no measurement rows", "add at least two rows (more, at several batches)")
    return rows


def _bounded_lstsq(a: np.ndarray, y: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """min ||a x − y||² subject to x ≥ lower, solved exactly by trying every set of active bounds.

    The problem is convex; its optimum is the unconstrained optimum of the free variables for
    some active set, so the feasible candidate with the least residual is the optimum
    (three variables: eight small solves).
    """
    n = a.shape[1]
    best, best_ssr = None, math.inf
    for active in itertools.product((False, True), repeat=n):
        act = np.array(active)
        x = np.where(act, lower, 0.0)
        free = ~act
        if free.any():
            rhs = y - a[:, act] @ x[act]
            x[free] = np.linalg.lstsq(a[:, free], rhs, rcond=None)[0]
        if np.any(x < lower - 1e-12):
            continue
        ssr = float(np.sum((a @ x - y) ** 2))
        if ssr < best_ssr - 1e-18:
            best, best_ssr = x, ssr
    return best


def fit_efficiency(op_memory_s: np.ndarray, op_compute_s: np.ndarray, comm_s: np.ndarray, measured_s: np.ndarray,
                   prior: Machine, max_iterations: int = 50) -> Fit:
    """Fit (η_mem, η_flops, overhead) to ``measured = Σ_op max(m_op/η_mem, c_op/η_flops) + comm + overhead``.

    ``op_memory_s`` and ``op_compute_s`` (operator axis first) are the terms at η = 1
    (bytes / peak BW, FLOPs / peak) of each operator class of each row.
    """
    m, c = np.asarray(op_memory_s, dtype=np.float64), np.asarray(op_compute_s, dtype=np.float64)
    comm, t = np.asarray(comm_s, dtype=np.float64), np.asarray(measured_s, dtype=np.float64)
    x = np.array([1 / prior.eta_mem, 1 / prior.eta_flops, prior.step_overhead_s])
    w = 1 / t
    names = ("eta_mem", "eta_flops", "step_overhead_s")

    def predict(v):
        return np.maximum(m * v[0], c * v[1]).sum(axis=0) + comm + v[2]

    best, best_ssr, seen, fitted, iterations = x, math.inf, set(), (), 0
    for iterations in range(1, max_iterations + 1):
        memory_limited = m * x[0] >= c * x[1]
        key = memory_limited.tobytes()
        if key in seen:
            break
        seen.add(key)
        a = np.column_stack([np.where(memory_limited, m, 0.0).sum(axis=0), np.where(memory_limited, 0.0, c).sum(axis=0),
                             np.ones_like(t)])
        free = [j for j in range(3) if np.any(a[:, j] != 0)]
        if np.linalg.matrix_rank(a[:, free] * w[:, None]) < len(free) and 2 in free:
            free.remove(2)  # one memory (or compute) point cannot separate η from the overhead
        fixed = [j for j in range(3) if j not in free]
        rhs = (t - comm - a[:, fixed] @ x[fixed]) * w
        sol = _bounded_lstsq(a[:, free] * w[:, None], rhs, np.array([1.0, 1.0, 0.0])[free])
        candidate = x.copy()
        candidate[free] = sol
        ssr = float(np.sum(((predict(candidate) - t) * w) ** 2))
        if ssr < best_ssr:
            best, best_ssr, fitted = candidate, ssr, tuple(names[j] for j in free)
        x = candidate
    memory_time = np.where(m * best[0] >= c * best[1], m * best[0], 0.0).sum(axis=0)
    compute_time = np.where(m * best[0] >= c * best[1], 0.0, c * best[1]).sum(axis=0)
    bound = np.array(["memory", "compute", "communication"])[np.argmax(np.stack([memory_time, compute_time, comm]), axis=0)]
    return Fit(eta_mem=float(1 / best[0]), eta_flops=float(1 / best[1]), step_overhead_s=float(best[2]),
               fitted=fitted, predicted_s=predict(best), bound=bound, iterations=iterations)


def calibrate(
    deployments: Sequence[Deployment], measurements: str | Path, rows: Sequence[Measurement] | None = None, *,
    ep: int = 1, compute_dtype: str | None = None, name: str | None = None, holdout: float = 0.0,
) -> Calibration:
    """Fit the hardware card's efficiencies to measured step times; returns the table and the overlay card.

    ``deployments``: the model on the hardware under one engine and dtypes, one per TP of the rows
    (:func:`kvplan.plans.build.step_deployments`); ``rows``: the parsed ``measurements`` file
    (read here when not given, rows without a tp column at the first deployment's TP).
    ``holdout`` (0 ≤ f ≤ 0.5): every ⌈1/f⌉-th row (in file order) is left out of the fit and scored
    with the fitted values, so the verdict gives an in-sample and a held-out error.
    """
    if not 0 <= holdout <= 0.5 or not math.isfinite(holdout):
        raise InputError(f"--holdout must be in [0, 0.5] (got {holdout})",
                         "the share of rows scored but not fitted, e.g. 0.3")
    if not deployments:
        raise InputError("no deployment to calibrate", "give the model and the hardware")
    first = deployments[0]
    card, hw, s = first.model, first.hardware, first.engine
    path = Path(measurements)
    data = list(rows) if rows is not None else read_measurements(path, first.tp)
    tps = sorted({d.tp for d in data})
    check_parallel_modes(card, tps, ep)
    shared = set(first.cost.layouts) >= set(tps)
    cost = first.cost if shared else model_cost(card, first.profile, s.weights_dtype, s.kv_dtype, tps=tps)
    dtype = compute_dtype or compute_dtype_for(cost.weights_dtype, card.dtype)
    prior, notes = resolve_machine(hw, dtype, cost.weights_dtype, cost.layers, Efficiencies(), max(tps) * ep,
                                   moe_layers=cost.moe_layers)
    unit = dataclasses.replace(prior, eta_mem=1.0, eta_flops=1.0, step_overhead_s=0.0)
    kind = np.array([d.kind for d in data])
    batch = np.array([d.batch for d in data], dtype=np.float64)
    tokens = np.array([d.tokens for d in data], dtype=np.float64)
    tp_arr = np.array([d.tp for d in data])
    dec = decode_step(cost, unit, batch, tokens, tp=tp_arr, ep=ep)
    pre = prefill(cost, unit, batch, tokens, tp=tp_arr, ep=ep)
    is_decode = kind == "decode"
    op_memory_s = np.where(is_decode, dec.op_memory_s, pre.op_memory_s)
    op_compute_s = np.where(is_decode, dec.op_compute_s, pre.op_compute_s)
    comm_s = np.where(is_decode, dec.comm_s, pre.comm_s)
    memory_s, compute_s = op_memory_s.sum(axis=0), op_compute_s.sum(axis=0)
    measured = np.array([d.measured_s for d in data])
    held = np.zeros(len(data), dtype=bool)
    if holdout > 0:
        every = max(2, math.ceil(1 / holdout))
        held[every - 1::every] = True
        if held.sum() == 0 or (~held).sum() < 2:
            raise InputError(f"--holdout {holdout:g} leaves {int((~held).sum())} row(s) to fit and "
                             f"{int(held.sum())} to score", "add rows, or lower --holdout")
    train = ~held
    fit = fit_efficiency(op_memory_s[:, train], op_compute_s[:, train], comm_s[train], measured[train], prior)
    _check_card_range(fit, path)
    predicted = (np.maximum(op_memory_s / fit.eta_mem, op_compute_s / fit.eta_flops).sum(axis=0) + comm_s
                 + fit.step_overhead_s)
    bound_all = np.array(["memory", "compute", "communication"])[np.argmax(np.stack([
        np.where(op_memory_s / fit.eta_mem >= op_compute_s / fit.eta_flops, op_memory_s / fit.eta_mem, 0).sum(0),
        np.where(op_memory_s / fit.eta_mem >= op_compute_s / fit.eta_flops, 0, op_compute_s / fit.eta_flops).sum(0),
        comm_s]), axis=0)]
    fit = dataclasses.replace(fit, predicted_s=predicted, bound=bound_all)
    rel = (fit.predicted_s - measured) / measured
    rms = float(np.sqrt(np.mean(rel[train] ** 2)))
    rows = [{
        "line": d.line, "kind": d.kind, "batch": d.batch, "tp": d.tp, "tokens": d.tokens,
        "measured_s": d.measured_s, "predicted_s": float(fit.predicted_s[i]),
        "residual_s": float(measured[i] - fit.predicted_s[i]), "relative_error": float(rel[i]),
        "error_pct": float(rel[i] * 100), "set": "held out" if held[i] else "fit",
        "bound": str(fit.bound[i]), "eta_mem": fit.eta_mem, "eta_flops": fit.eta_flops,
        "step_overhead_s": fit.step_overhead_s,
    } for i, d in enumerate(data)]
    wanted = {"eta_mem": "memory-bound (small-batch decode) rows", "eta_flops": "compute-bound (large-batch or "
              "prefill) rows", "step_overhead_s": "rows at two or more batch sizes or contexts"}
    for k in ("eta_mem", "eta_flops", "step_overhead_s"):
        if k not in fit.fitted:
            notes.append(f"{k} not determined by the measurements (no row binds on it): kept at "
                         f"{getattr(fit, k):.4g}; add {wanted[k]}")
    notes.extend(bound_warnings(fit))
    verdict = (f"fitted η_mem = {fit.eta_mem:.4f}, η_flops = {fit.eta_flops:.4f}, step overhead = "
               f"{format_seconds(fit.step_overhead_s)} on {int(train.sum())} rows; in-sample error "
               f"{error_summary(rel[train])}; RMS relative error {rms:.2%}")
    if held.any():
        verdict += f"; held out ({int(held.sum())} rows, not fitted): {error_summary(rel[held])}"
    explain = [
        "t = Σ_op max(bytes / (BW × η_mem), FLOPs / (peak × η_flops)) + comm + overhead; least squares on relative "
        f"residuals, 1/η ≥ 1, overhead ≥ 0; {fit.iterations} assignment iteration(s)",
        f"  {hw.name}: BW {hw.hbm_bandwidth_bytes_per_s:.4g} B/s, peak {prior.peak_flops_per_s:.4g} FLOP/s "
        f"({dtype}); prior η_mem {prior.eta_mem:g}, η_flops {prior.eta_flops:g}, overhead "
        f"{format_seconds(prior.step_overhead_s)}",
    ]
    for i, d in enumerate(data):
        explain.append(f"  line {d.line}: {d.kind} batch {d.batch} × {d.tokens:,} tokens, tp {d.tp}: "
                       f"bytes/BW {format_seconds(memory_s[i])}, FLOPs/peak {format_seconds(compute_s[i])}, "
                       f"comm {format_seconds(comm_s[i])} → predicted {format_seconds(fit.predicted_s[i])}, "
                       f"measured {format_seconds(d.measured_s)} ({rel[i]:+.2%})")
    overlay = _overlay_card(hw, fit, name or f"{hw.name}-calibrated", path, card, len(data), rms)
    result = Result(title=f"Calibration: {card.name} on {hw.name} ({path.name})", rows=rows,
                    columns=CALIBRATE_COLUMNS, explain=explain, assumptions=list(dict.fromkeys(notes)),
                    verdict=verdict)
    return Calibration(result=result, card=overlay, fit=fit)


def error_summary(rel: np.ndarray) -> str:
    """Median |error|, median signed error (bias) and p90 |error|, in percent."""
    a = np.abs(rel)
    return (f"median |error| {np.median(a):.1%}, bias {np.median(rel):+.1%}, p90 |error| "
            f"{np.quantile(a, 0.9):.1%}")


def bound_warnings(fit: Fit) -> list[str]:
    """A fitted parameter at its bound says the model cannot explain the data there: say so."""
    out = []
    for key, label, value, bound, why in (
            ("eta_mem", "η_mem", fit.eta_mem, 1.0, "the data ask for more than the card's peak bandwidth: check the "
             "card, the weight/KV dtypes, or whether the engine reads fewer bytes than kvplan counts"),
            ("eta_flops", "η_flops", fit.eta_flops, 1.0, "the data ask for more than the dtype's peak FLOPS: check "
             "--weights-dtype / --compute-dtype"),
            ("step_overhead_s", "step overhead", fit.step_overhead_s, 0.0, "the rows leave no time for a per-step "
             "overhead; the efficiencies absorb it")):
        if key in fit.fitted and abs(value - bound) <= 1e-6 * max(1.0, abs(bound)):
            out.append(f"warning: {label} = {value:.4f} sits at its bound ({bound:g}): {why}")
    return out


def _check_card_range(fit: Fit, path: Path) -> None:
    """Refuse a fit no hardware card may hold (η below 0.1%, an overhead over an hour): the rows are off in units."""
    low = [f"{k} = {getattr(fit, k):.3g}" for k in ("eta_mem", "eta_flops") if getattr(fit, k) < MIN_EFFICIENCY]
    if fit.step_overhead_s > MAX_LATENCY_S:
        low.append(f"step overhead = {fit.step_overhead_s:.3g} s")
    if low:
        raise InputError(f"{path.name}: the measured times imply {', '.join(low)}, outside what a hardware card "
                         f"holds (efficiency >= {MIN_EFFICIENCY:g}, overhead <= {MAX_LATENCY_S:g} s)",
                         "check the time column's unit (seconds, e.g. 0.012 for 12 ms) and the rows' batch and tokens")


def _overlay_card(hw: HardwareCard, fit: Fit, name: str, path: Path, model: ModelCard, n: int, rms: float):
    """A full copy of ``hw`` named ``name`` with the fitted efficiency (valid: load_hardware reads it)."""
    data = hw.model_dump(mode="json", exclude_defaults=True)
    basis = f"kvplan calibrate: {path.name}, {n} measurements of {model.name}, RMS relative error {rms:.2%}"
    data.update({
        "name": name, "aliases": [],
        "source": [*hw.source, basis],
        "efficiency": {"memory_bandwidth": round(fit.eta_mem, 6), "flops": round(fit.eta_flops, 6),
                       "step_overhead_s": float(f"{fit.step_overhead_s:.6g}")},
        "notes": f"Calibrated copy of {hw.name}. " + (hw.notes or ""),
    })
    sources = dict(data.get("field_sources", {}))
    for key, field_name in (("eta_mem", "memory_bandwidth"), ("eta_flops", "flops"),
                            ("step_overhead_s", "step_overhead_s")):
        sources[f"efficiency.{field_name}"] = (f"fitted by {basis}" if key in fit.fitted
                                               else f"not determined by {path.name}; kept from {hw.name} / kvplan default")
    data["field_sources"] = sources
    return HardwareCard.model_validate(data)
