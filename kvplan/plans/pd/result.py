"""The typed results of ``kvplan pd``: one plan per mode and scenario, its two pools, and the answer.

A :class:`PdPlan` is the disaggregated plan of one scenario (or the aggregated alternative, or one
placement): the pools (:class:`PoolFigures`: instances, TP × DP × EP, nodes, GPUs, the constraint
that binds with one instance fewer, what one instance serves alone), the P→D link and transfer,
TTFT / TPOT percentiles, the binding constraint and whether it is feasible. A :class:`PdAnswer`
holds the base plan, the aggregated alternative, the sensitivity and placement plans, the notes
(assumptions and defaults taken), the chain of numbers and the verdict. Planners read these
fields; the JSON rows are made from them for output only (:mod:`kvplan.plans.pd.rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.result import Answer


@dataclass(frozen=True)
class PoolFigures:
    """One pool of a plan: instances × (TP × DP, EP) GPUs, nodes; ``binding``: what fails with one instance fewer
    (None at one instance); ``goodput_per_gpu``: requests/s one instance serves alone within its SLO, per GPU."""

    instances: int | None = None
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    nodes: float | None = None
    gpus: int | None = None
    binding: str | None = None
    goodput_per_gpu: float | None = None

    def label(self) -> str:
        """'TP4', or 'TP1×DP32 EP32, 136 nodes' for attention-DP / EP pools."""
        dp, ep = self.dp or 1, self.ep or 1
        if dp == 1 and ep == 1:
            return f"TP{self.tp}"
        return f"TP{self.tp}×DP{dp}" + (f" EP{ep}" if ep > 1 else "") + f", {self.nodes:g} nodes"


@dataclass(frozen=True)
class Placement:
    """Where the pools sit (:mod:`kvplan.plans.pd.placement`): the placement, whether one unit fits it, whether
    the planner picked it, and why (or why it does not fit)."""

    name: str
    fits: bool
    picked: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class PdPlan:
    """One PD (or aggregated) plan: pools, link and transfer, percentiles (s), binding, feasibility."""

    scenario: str
    mode: str                                  # "disaggregated" or "aggregated"
    model: str
    prefill_hardware: str
    decode_hardware: str
    qps: float
    arrival_scv: float
    isl_mean: float
    osl_mean: float
    cached_prefix_fraction: float
    ttft_slo: str
    tpot_slo: str
    feasible: bool = False
    xpyd: str | None = None
    prefill: PoolFigures = PoolFigures()
    decode: PoolFigures = PoolFigures()
    total_gpus: int | None = None
    link_kind: str | None = None
    link: str | None = None
    link_bandwidth_bytes_per_s: float | None = None
    link_latency_s: float | None = None
    links_per_transfer: int | None = None
    kv_transfer_bytes: float | None = None
    kv_transfer_s: float | None = None
    exposed_transfer_s: float | None = None
    link_utilization: float | None = None
    link_wait_s: float | None = None
    prefill_s: float | None = None
    prefill_dispatch_s: float | None = None    # the engine's prefill dispatch, once per request, in TTFT only
    prefill_utilization: float | None = None
    first_decode_step_s: float | None = None
    decode_batch_mean: float | None = None
    decode_batch_at_slo: float | None = None
    decode_kv_budget_bytes_per_gpu: float | None = None
    decode_kv_used_bytes_per_gpu: float | None = None
    decode_staging_bytes_per_gpu: float | None = None
    ttft: dict = field(default_factory=dict)   # {stat: seconds or None}, stat in report.STATS
    tpot: dict = field(default_factory=dict)
    goodput_per_gpu: float = 0.0
    capacity_per_gpu: float | None = None
    rate_matched_xpyd: str | None = None
    binding_constraint: str | None = None
    best_achievable_ttft_s: float | None = None
    best_achievable_tpot_s: float | None = None
    interference_share: float | None = None
    reason: str | None = None
    placement: Placement | None = None
    checklist: dict | None = None
    extra: tuple = ()  # ((key, seconds), …): an SLO statistic outside report.STATS (p99.9), in row order
    cost_per_hour: float | None = None  # with --gpu-cost: GPUs × price per GPU-hour of each pool's hardware

    def ttft_at(self, stat: str):
        return self.ttft.get(stat, dict(self.extra).get(f"ttft_{stat}_s"))

    def tpot_at(self, stat: str):
        return self.tpot.get(stat, dict(self.extra).get(f"tpot_{stat}_s"))


@dataclass(frozen=True)
class PdAnswer(Answer):
    """``kvplan pd``'s answer: the base plan first, then the aggregated alternative, the sensitivity and placement
    plans; notes, explain, the verdict; ``rows`` is the JSON form (:func:`kvplan.plans.pd.rows.answer_rows`)."""

    title: str
    plans: tuple[PdPlan, ...]
    columns: tuple[str, ...]
    notes: tuple[str, ...]
    explain: tuple[str, ...]
    verdict: str | None
    failed: bool
    aggregated: PdPlan | None = None

    @property
    def plan(self) -> PdPlan:
        """The recommended (base) PD plan."""
        return self.plans[0]

    @property
    def rows(self) -> list[dict]:
        from kvplan.plans.pd.rows import answer_rows

        return answer_rows(self)
