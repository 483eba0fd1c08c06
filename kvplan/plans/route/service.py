"""A deployment behind the router: its KV pool is each instance's prefix cache, its fleet model gives
service times, TTFT and GPUs (:mod:`kvplan.plans.fleet.model`, the model of ``kvplan plan``).

- cache per instance = the engine's KV pool, ``num_blocks × block_size`` tokens (the deployment's
  :class:`kvplan.plans.deployment.KVPool`, ``kvplan fit``'s ``kv_cache_tokens``). The pool also holds the running requests' KV, so this is the prefix cache's
  upper bound (vLLM and SGLang keep cached blocks in the same pool and evict them first).
- time in system of request i at N instances, for counting loads: the fleet at N (``FleetModel.evaluate``)
  gives the mean TTFT's waits W, the prefill S(ISL) at its mean batch and the mean TPOT m:
  ``T_i = W + S(ISL_i) + max(OSL_i − 1, 0) × m``; prefix hits are not credited here (a slight
  over-count of in-flight time). Where the fleet at N is unstable, the unloaded figures
  (``FleetModel.best_alone``) are used and a note says so.
- prefill GPU-seconds saved = ``tp × Σ_i [suffix(0, S_i) − suffix(a_i, S_i)]`` with ``a_i`` the tokens the
  request's prefix hits let it skip and ``suffix`` the deployment's step-time model's ``suffix_prefill_s``
  (:class:`kvplan.calc.steptime.StepTimes`: per-operator by default, the roofline with ``--perf-model roofline``).
- TTFT p50/p99 and GPUs: the fleet model with every prompt's prefill shortened to its uncached suffix
  ``S_i − a_i`` while decode contexts and KV per sequence stay the full ``S_i + OSL_i``; the suffix is
  prefilled like a fresh prompt of that length (attention over the cached prefix not charged). The fleet
  model spreads load evenly (its central-queue router); ``ttft_p99_busiest_s`` evaluates the same fleet at
  ``load_imbalance ×`` the rate, what the busiest instance of a policy sees.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from kvplan.errors import InfeasibleError
from kvplan.plans.fleet import model as fm
from kvplan.plans.fleet.aggregated import EngineSettings, FleetWorkload, Shape, Slo, plan_aggregated
from kvplan.workload.traces import Trace

COLUMNS = ["prefill_gpu_s_saved_per_s", "ttft_p50_s", "ttft_p99_s", "ttft_p99_busiest_s", "gpus_needed"]
_PREFILL_KEYS = ("isl_points", "isl_grid", "points_index", "grid_folds")


def _hybrid(full: fm.LengthStats, prefill: fm.LengthStats, isl: np.ndarray) -> fm.LengthStats:
    """Decode and KV statistics of ``full``, prefill grid and folds of ``prefill``, ``isl`` as given."""
    out = copy.copy(full)
    for key in _PREFILL_KEYS:
        object.__setattr__(out, key, getattr(prefill, key))
    object.__setattr__(out, "isl", isl)
    return out


@dataclass
class ServiceModel:
    """One deployment (model, hardware, shape, engine settings, SLOs) over one trace."""

    card: object
    hardware: object
    trace: Trace
    slos: dict[str, Slo]
    shape: Shape = Shape()
    engine: EngineSettings = EngineSettings()
    max_utilization: float = 0.9
    system: object = None
    links: list = field(default_factory=list)
    cards: tuple = ()
    notes: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=lambda: list(COLUMNS))

    def __post_init__(self) -> None:
        self.workload = FleetWorkload.from_trace(self.trace)
        plan = plan_aggregated(self.card, self.hardware, self.workload, self.slos, self.shape, self.engine,
                               system=self.system, max_utilization=self.max_utilization, allow_long_context=True,
                               cards=self.cards)
        if plan.figures is None or plan.figures.batch_kv < 1:
            raise InfeasibleError(f"the deployment cannot serve the trace: {plan.reason}", plan.hint)
        self.plan, self.setup = plan, plan.setup
        self.cost, self.machine, self.layout = plan.setup["cost"], plan.setup["machine"], plan.setup["layout"]
        self.pool = plan.setup["deployment"].pool
        self.steps = plan.setup["steps"]      # the deployment's step-time model (Deployment.steps)
        self.cache_tokens = int(self.pool.tokens_per_instance)
        self.base = fm.FleetModel(plan.figures, self.workload.lengths, self.workload.rate_per_s,
                                  self.workload.arrival_scv, self.slos, self.max_utilization)
        isl = self.trace.isl.astype(np.float64)
        self.full_prefill_s = np.asarray(self.steps.suffix_prefill_s(0.0, isl))
        self.duration_s = float(self.trace.arrival_s[-1] - self.trace.arrival_s[0]) or math.nan
        self._points: dict[int, fm.Point] = {}
        self._times: dict[int, np.ndarray] = {}
        self.notes = list(dict.fromkeys([*plan.assumptions, self._cache_note()]))

    def _cache_note(self) -> str:
        pool = self.pool
        return (f"per-instance prefix cache = the KV pool of {self.plan.model} on {self.shape.gpus}× {self.plan.hardware} "
                f"({self.engine.engine}): {pool.blocks_per_gpu:,} blocks × {pool.block_size} tokens = "
                f"{self.cache_tokens:,} tokens (shared with running requests: an upper bound)")

    def point(self, n: int) -> fm.Point:
        if n not in self._points:
            self._points[n] = self.base.evaluate(n)
        return self._points[n]

    def time_in_system_s(self, n: int) -> np.ndarray:
        """``W + S(ISL_i) + max(OSL_i − 1, 0) × m`` at the fleet of N (module docstring)."""
        if n not in self._times:
            self._times[n] = self._time_in_system_s(n)
        return self._times[n]

    def _time_in_system_s(self, n: int) -> np.ndarray:
        p, f = self.point(n), self.plan.figures
        isl = self.trace.isl.astype(np.float64)
        steps = np.maximum(self.trace.osl.astype(np.float64) - 1, 0)
        if p.ttft and p.tpot and all(math.isfinite(p.ttft[k]) for k in ("mean",)):
            row = np.interp(p.batch_mean, f.b_grid, np.arange(f.b_grid.size))
            i = int(min(row, f.b_grid.size - 2))
            w = row - i
            grid_s = (1 - w) * f.prefill_grid_s[i] + w * f.prefill_grid_s[i + 1]
            prefill = np.interp(isl, self.workload.lengths.isl_grid, grid_s)
            wait = max(p.ttft["mean"] - f.request_dispatch_s - float(np.mean(prefill)) - p.residual_s, 0.0)
            return wait + prefill + steps * p.tpot["mean"]
        _, tpot = self.base.best_alone()
        prefill = np.interp(isl, self.workload.lengths.isl_grid, f.prefill_grid_s[0])
        self.notes.append(f"the fleet at N = {n} cannot keep up ({', '.join(p.failures)}); loads counted with "
                          "unloaded service times (prefill alone + OSL × TPOT at batch 1), a lower bound")
        return prefill + steps * tpot["mean"]

    def figures(self, n: int, hits, trace: Trace) -> dict:
        skipped = hits.skipped_tokens(trace.isl, trace.block_tokens).astype(np.float64)
        isl = trace.isl.astype(np.float64)
        with_cache = np.asarray(self.steps.suffix_prefill_s(skipped, isl))
        tp = self.shape.tp
        saved = float(tp * (self.full_prefill_s - with_cache).sum())
        row = {"prefill_gpu_s": float(tp * self.full_prefill_s.sum()), "prefill_gpu_s_saved": saved,
               "prefill_gpu_s_saved_per_s": saved / self.duration_s}
        row.update(self._fleet(n, np.maximum(isl - skipped, 1.0), float(hits.instance_requests.max()
                                                                          / hits.instance_requests.mean())))
        return row

    def _fleet(self, n: int, uncached: np.ndarray, imbalance: float) -> dict:
        full = self.workload.lengths
        prefill = fm.LengthStats(uncached, self.trace.osl)
        sized = _hybrid(full, prefill, full.isl)
        figures = fm.instance_figures(self.cost, self.machine, self.shape.tp, sized, self.layout,
                                      self.plan.figures.pool_bytes_per_gpu, self.plan.engine.max_num_seqs,
                                      self.plan.engine.chunk_tokens, dp=self.steps.dp, steps=self.steps)
        served = _hybrid(full, prefill, uncached)
        rate, scv = self.workload.rate_per_s, self.workload.arrival_scv
        model = fm.FleetModel(figures, served, rate, scv, self.slos, self.max_utilization)
        p = model.evaluate(n)
        busiest = fm.FleetModel(figures, served, rate * imbalance, scv, self.slos, self.max_utilization).evaluate(n)
        out = {"ttft_mean_s": _stat(p.ttft, "mean"), "ttft_p50_s": _stat(p.ttft, "p50"), "ttft_p99_s": _stat(p.ttft, "p99"),
               "tpot_p99_s": _stat(p.tpot, "p99"), "ttft_p99_busiest_s": _stat(busiest.ttft, "p99"),
               "meets_slos": p.ok, "failures": ",".join(p.failures) or None}
        try:
            best, _ = model.search()
            out.update({"instances_needed": best.instances, "gpus_needed": best.instances * self.shape.gpus})
        except OverflowError:
            out.update({"instances_needed": None, "gpus_needed": None})
        return out

    def add_migration(self, result, trace, instances, policies, capacity, router) -> None:
        from kvplan.plans.route.migration import migration_rows

        if "prefix-aware" in policies and trace.has_blocks and self.links:
            rows, notes = migration_rows(self, trace, instances, capacity, router)
            result.rows += rows
            result.assumptions += notes


def _stat(values: dict, key: str) -> float | None:
    value = values.get(key) if values else None
    return None if value is None else float(value)
