"""One deployment, resolved once: model + hardware/system + engine settings + parallelism + dtypes -> KV pool.

A :class:`Deployment` is what every planner takes (DESIGN.md §1). :func:`resolve` builds it from
names, paths or cards, once:

- cards: the model card, the hardware card and the system it sits in (a node or a supernode:
  its scale-up domain, NIC and host links); a system card named in the hardware's place stands
  for its accelerator. ``node_hardware`` is the hardware card carrying the system's links (what
  tensor-parallel traffic uses).
- engine: the profile (ENGINES.md) and the settings under vLLM's names (:class:`EngineSettings`).
- parallelism (:class:`Parallelism`, vLLM's ``--tensor-parallel-size``, ``--pipeline-parallel-size``,
  ``--data-parallel-size``, ``--enable-expert-parallel``): GPUs per instance ``tp × pp × dp``;
  with expert parallelism the experts are split over ``ep = tp × dp`` ranks (vLLM's EP group is the
  TP × DP ranks, vllm/distributed/parallel_state.py), attention is data parallel over ``dp``.
- dtypes: weights, KV and compute (``compute_dtype_for``).
- the KV pool as the engine computes it at start-up (:func:`kvplan.plans.sizing.fit.engine_memory`):
  ``budget = the engine's rule``, ``blocks = floor(budget / (block_size × KV bytes per token on
  the rank))``; per GPU and per instance (:class:`KVPool`).

The roofline cost (:func:`kvplan.calc.roofline.model_cost`), the machine
(:func:`kvplan.plans.sizing.latency.resolve_machine`: peak FLOPS, η, links) and the step-time
model every planner uses (``steps``, :class:`kvplan.calc.steptime.StepTimes`: the per-operator
model by default, the roofline with ``EngineSettings(perf_model="roofline")``) are resolved on
first use and kept, so a command that only needs memory never asks the card for FLOPS.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.calc.kv import KVLayout, kv_layout
from kvplan.cards.loader import load_hardware_and_system, load_model, load_system
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.engines import EngineProfile, batch_defaults, get_profile
from kvplan.errors import InputError
from kvplan.plans.layout import ModelLayout  # noqa: F401 (re-exported: size's hardware-free layout)
from kvplan.plans.links import node_hardware
from kvplan.plans.sizing.fit import EngineMemory, Overrides, engine_memory, gpu_utilization
from kvplan.plans.sizing.efficiency import Efficiencies
from kvplan.units import format_bytes

if TYPE_CHECKING:  # the roofline loads on first use of a deployment's cost or machine (kvplan size never needs it)
    from kvplan.calc.roofline import Machine, ModelCost
    from kvplan.calc.steptime import StepTimes


@dataclass(frozen=True)
class EngineSettings:
    """Engine and its settings, under vLLM's names."""

    engine: str = "vllm"
    kv_dtype: str = "auto"
    weights_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None     # None: the engine's default for the hardware (engines.batch_defaults)
    chunk_tokens: int | None = None     # max_num_batched_tokens; None: the engine's default for the hardware
    block_size: int | None = None
    efficiencies: Efficiencies = Efficiencies()
    perf_model: str = "operators"     # kvplan's step-time model: operators (per-operator) or roofline
    dp_imbalance: float | None = None  # λ_dp on a dp > 1 instance's steps (--dp-imbalance); None: the sourced λ_dp(dp)


def fewest_redundant_experts(card: ModelCard, ep: int) -> int:
    """EPLB replicas that let ``ep`` ranks divide the routed experts: ``(−E) mod ep`` (0 for a dense model).

    DeepSeek-V3's 256 experts over EP144 → 32 (its day-6 decode units); over EP8 → 0.
    """
    return (-card.moe.num_experts) % ep if card.moe is not None else 0


@dataclass(frozen=True)
class Parallelism:
    """GPUs of one instance: tensor × pipeline × attention data parallel; experts split over TP × DP with EP."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    redundant_experts: int = 0  # EPLB replicas (vLLM --num-redundant-experts; DeepSeek: 32 in both pools)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep(self) -> int:
        """Expert-parallel ranks: ``tp × dp`` with ``--enable-expert-parallel``, else 1 (experts split by TP)."""
        return self.tp * self.dp if self.expert_parallel else 1

    def experts_per_gpu(self, card: ModelCard) -> float:
        """Routed experts one GPU holds per MoE layer: ``(E + R) / ep`` with EP (DeepSeek decode: 288/144 = 2)."""
        if card.moe is None:
            return 0.0
        return (card.moe.num_experts + self.redundant_experts) / self.ep

    def check(self, card: ModelCard) -> None:
        """Whole sizes >= 1; expert parallelism needs routed experts that the EP ranks divide.

        With ``R`` redundant experts (EPLB) each rank holds ``(E + R) / ep`` experts, so ``ep``
        must divide ``E + R`` (DeepSeek's day-6 units: 256 + 32 = 288 over EP32 = 9, EP144 = 2).
        """
        for flag, value in (("--tp", self.tp), ("--pp", self.pp), ("--dp", self.dp)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{flag} must be a whole number >= 1 (got {value})", "1 turns it off")
        r = self.redundant_experts
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise InputError(f"--ep-redundant-experts must be a whole number >= 0 (got {r})", "0 turns it off")
        if r and card.moe is None:
            raise InputError(f"--ep-redundant-experts: {card.name} is a dense model (no routed experts to replicate)",
                             "drop --ep-redundant-experts for dense models")
        if r and not self.expert_parallel:
            raise InputError("--ep-redundant-experts needs --enable-expert-parallel",
                             "redundant experts are replicas placed over the expert-parallel ranks")
        if not self.expert_parallel:
            return
        if card.moe is None:
            raise InputError(f"--enable-expert-parallel: {card.name} is a dense model (no routed experts)",
                             "drop --enable-expert-parallel for dense models")
        if r > card.moe.num_experts * (self.ep - 1):
            raise InputError(f"--ep-redundant-experts {r}: ep = {self.ep} ranks hold at most "
                             f"{card.moe.num_experts * (self.ep - 1)} replicas of {card.name}'s "
                             f"{card.moe.num_experts} experts (every expert on every rank)",
                             "EPLB adds a few replicas of the hottest experts, e.g. 32 over EP144 for 256 experts")
        if (card.moe.num_experts + r) % self.ep:
            extra = f" + {r} redundant" if r else ""
            raise InputError(f"--enable-expert-parallel: ep = tp × dp = {self.ep} does not divide {card.name}'s "
                             f"{card.moe.num_experts}{extra} routed experts",
                             "choose tp × dp that divides the expert count (or set --ep-redundant-experts)")


@dataclass(frozen=True)
class KVPool:
    """The KV cache the engine allocates: whole blocks, per GPU and per instance.

    Every GPU of a TP × PP group holds its share of the same tokens, so the group holds
    ``tokens_per_gpu`` tokens; attention data parallelism gives each of the ``dp`` groups its own
    pool: ``tokens_per_instance = tokens_per_gpu × dp``, ``bytes_per_instance = bytes_per_gpu × GPUs``.
    """

    budget_bytes_per_gpu: float  # the engine's budget rule (may be <= 0)
    block_size: int
    block_bytes_per_gpu: float
    blocks_per_gpu: int
    gpus: int
    dp: int = 1

    @property
    def bytes_per_gpu(self) -> float:
        return max(self.blocks_per_gpu * self.block_bytes_per_gpu, 0.0)

    @property
    def tokens_per_gpu(self) -> int:
        return self.blocks_per_gpu * self.block_size

    @property
    def bytes_per_instance(self) -> float:
        return self.bytes_per_gpu * self.gpus

    @property
    def tokens_per_instance(self) -> int:
        return self.tokens_per_gpu * self.dp

    @property
    def empty(self) -> bool:
        """No block fits: the weights and reserves leave no KV memory."""
        return self.blocks_per_gpu <= 0


@dataclass(frozen=True, eq=False)
class Deployment:
    """A model on hardware (in its system) under one engine, parallel layout and dtypes, with its KV pool."""

    model: ModelCard
    hardware: HardwareCard
    system: SystemCard | None
    engine: EngineSettings
    profile: EngineProfile
    parallel: Parallelism
    layout: KVLayout
    memory: EngineMemory
    pool: KVPool
    notes: tuple[str, ...] = ()
    cost_tps: tuple[int, ...] = field(default=(), repr=False)

    # names planners print
    @property
    def name(self) -> str:
        """Where it runs: the system's name when one is given, else the hardware's."""
        return self.system.name if self.system is not None else self.hardware.name

    @property
    def tp(self) -> int:
        return self.parallel.tp

    @property
    def pp(self) -> int:
        return self.parallel.pp

    @property
    def gpus(self) -> int:
        return self.parallel.gpus

    @property
    def weights_dtype(self) -> str:
        return self.cost.weights_dtype

    @property
    def kv_dtype(self) -> str:
        return self.layout.kv_dtype

    @property
    def compute_dtype(self) -> str:
        from kvplan.calc.roofline import compute_dtype_for

        return compute_dtype_for(self.cost.weights_dtype, self.model.dtype)

    @cached_property
    def node_hardware(self) -> HardwareCard:
        """The hardware card with the system's links (where the system has them): what TP traffic uses."""
        return node_hardware(self.hardware, self.system)

    @cached_property
    def cost(self) -> ModelCost:
        from kvplan.calc.roofline import model_cost

        s = self.engine
        return model_cost(self.model, self.profile, s.weights_dtype, s.kv_dtype, tps=self.cost_tps or (self.tp,))

    @cached_property
    def _machine(self) -> tuple[Machine, tuple[str, ...]]:
        from kvplan.plans.sizing.kernels import attention_kernels
        from kvplan.plans.sizing.latency import resolve_machine

        cost = self.cost
        machine, notes = resolve_machine(self.node_hardware, self.compute_dtype, cost.weights_dtype, cost.layers,
                                         self.engine.efficiencies, self.tp * self.parallel.dp,
                                         moe_layers=cost.moe_layers,
                                         attention=attention_kernels(self.model, self.engine.engine,
                                                                     weights_dtype=cost.weights_dtype,
                                                                     kv_dtype=self.kv_dtype,
                                                                     hardware=self.node_hardware,
                                                                     perf_model=self.engine.perf_model))
        return machine, tuple(notes)

    @property
    def machine(self) -> Machine:
        """Peak FLOPS, bandwidth, efficiencies and links of one GPU (resolved on first use)."""
        return self._machine[0]

    @property
    def machine_notes(self) -> tuple[str, ...]:
        """The defaults the machine took (η, step overhead, link latencies)."""
        return self._machine[1]

    @cached_property
    def steps(self) -> StepTimes:
        """The step-time model every planner uses (``engine.perf_model``; resolved on first use, once).

        Per-operator by default (:func:`kvplan.plans.sizing.perfmodel.step_times`), the roofline
        with ``perf_model="roofline"``; over ``node_hardware`` (the system's links), at ``tp``
        GPUs per attention rank and ``dp`` ranks.
        """
        from kvplan.plans.sizing.perfmodel import step_times

        par = self.parallel
        return step_times(self.model, self.node_hardware, self.cost, self.machine, self.engine.engine,
                          self.engine.efficiencies, self.engine.perf_model, self.tp, par.dp, par.expert_parallel,
                          par.redundant_experts, dp_imbalance=self.engine.dp_imbalance if par.dp > 1 else None)

    @property
    def step_notes(self) -> tuple[str, ...]:
        """The machine's defaults and the step-time model's (which efficiencies each operator took)."""
        return tuple(dict.fromkeys([*self.machine_notes, *self.steps.notes]))


def resolve_cards(hardware: str | HardwareCard | None, system: str | SystemCard | None,
                  cards: tuple[Path, ...] = ()) -> tuple[HardwareCard, SystemCard | None]:
    """A hardware card (a system card given in its place stands for its accelerator) and its system."""
    sys_card = system if isinstance(system, SystemCard) or system is None else load_system(system, cards)
    if hardware is None:
        if sys_card is None:
            raise InputError("no hardware: give a HARDWARE card or --system SYSTEM",
                             "e.g. --system hgx-h100-8, or a hardware card such as h100-sxm")
        hardware = sys_card.accelerator
    return load_hardware_and_system(hardware, sys_card, cards)


def resolve(
    model: str | ModelCard, hardware: str | HardwareCard | None = None, *, system: str | SystemCard | None = None,
    engine: EngineSettings = EngineSettings(), parallel: Parallelism = Parallelism(),
    overrides: Overrides = Overrides(), cost_tps: tuple[int, ...] = (), cards: tuple[Path, ...] = (),
) -> Deployment:
    """The :class:`Deployment` of ``model`` on ``hardware`` (and ``system``); see the module docstring.

    Raises InputError for a layout the engine refuses (TP not dividing the heads, EP on a dense
    model). A pool with no blocks is returned as such (``pool.empty``): whether that is an error
    is the planner's answer to give.
    """
    card = model if isinstance(model, ModelCard) else load_model(model, cards)
    hw, sys_card = resolve_cards(hardware, system, cards)
    return _build(card, hw, sys_card, engine, parallel, overrides, tuple(cost_tps))


def _build(card: ModelCard, hw: HardwareCard, sys_card: SystemCard | None, s: EngineSettings, par: Parallelism,
           overrides: Overrides, cost_tps: tuple[int, ...]) -> Deployment:
    par.check(card)
    notes: list[str] = []
    gpu_bytes = overrides.gpu_memory_bytes or hw.hbm_capacity_bytes
    s = with_batch_defaults(s, gpu_bytes, hw.name, notes)  # the engine's batch defaults follow the GPU memory
    if overrides.gpu_memory_bytes is None:  # one note: the memory, and the defaults it sets
        memory = f"GPU memory {format_bytes(gpu_bytes)} from the {hw.name} card ({hw.hbm_capacity_basis} figure)"
        notes[:] = ["; ".join([memory, *notes])]
    _check_settings(s)
    profile = get_profile(s.engine)
    layout = kv_layout(card, profile, s.kv_dtype, par.tp, par.pp, block_size=s.block_size,
                       max_num_batched_tokens=s.chunk_tokens)
    util = gpu_utilization(s.engine, gpu_bytes, par.tp, par.pp, s.gpu_memory_utilization, notes)
    memory = engine_memory(card, profile, layout, gpu_bytes, util, weights_dtype=s.weights_dtype,
                           max_num_batched_tokens=s.chunk_tokens, max_num_seqs=s.max_num_seqs, overrides=overrides,
                           weights_bytes_per_gpu=_ep_weights(card, profile, s, par), notes=notes)
    pool = KVPool(memory.kv_cache_memory_bytes, memory.block_size, memory.block_bytes_per_gpu, memory.num_blocks,
                  par.gpus, par.dp)
    return Deployment(card, hw, sys_card, s, profile, par, layout, memory, pool, tuple(dict.fromkeys(notes)),
                      cost_tps)


def with_batch_defaults(s: EngineSettings, gpu_memory_bytes: float, hardware_name: str,
                        notes: list[str] | None = None) -> EngineSettings:
    """``s`` with ``max_num_seqs`` and ``chunk_tokens`` (max_num_batched_tokens) set where None: the engine's own
    defaults for this GPU (:func:`kvplan.engines.batch_defaults`; vLLM by device memory and name), named in ``notes``."""
    if s.max_num_seqs is not None and s.chunk_tokens is not None:
        return s
    seqs, tokens, note = batch_defaults(s.engine, gpu_memory_bytes, hardware_name)
    if note and notes is not None:
        notes.append(note)
    return replace(s, max_num_seqs=seqs if s.max_num_seqs is None else s.max_num_seqs,
                   chunk_tokens=tokens if s.chunk_tokens is None else s.chunk_tokens)


def _check_settings(s: EngineSettings) -> None:
    if not isinstance(s.max_num_seqs, int) or s.max_num_seqs < 1:
        raise InputError(f"--max-num-seqs must be >= 1 (got {s.max_num_seqs})",
                         "leave it out for the engine's default (vLLM: 1,024 on a GPU with >= 70 GiB other than A100, "
                         "else 256)")
    if not isinstance(s.chunk_tokens, int) or s.chunk_tokens < 1:
        raise InputError(f"--chunk-size must be >= 1 token (got {s.chunk_tokens})",
                         "leave it out for the engine's default (vLLM: 8192 on a GPU with >= 70 GiB other than A100, "
                         "else 2048)")
    from kvplan.calc.steptime import PERF_MODELS

    if s.perf_model not in PERF_MODELS:
        raise InputError(f"--perf-model must be operators or roofline (got {ascii(s.perf_model)})",
                         "operators: per-operator efficiencies (default); roofline: one η pair for every operator")


def _ep_weights(card: ModelCard, profile: EngineProfile, s: EngineSettings, par: Parallelism) -> float | None:
    """Weights per GPU with expert parallelism: ``(W − E) / (tp × pp) + E × (1 + R/n_e) / (ep × pp)``; None without EP.

    E = all routed experts' bytes (``moe_layers × experts × expert bytes``, the roofline's figure),
    n_e the routed experts, R the redundant replicas (each rank holds (n_e + R)/ep experts); the
    rest (attention, dense layers, embeddings) is split by TP and replicated over DP.
    """
    if not par.expert_parallel:
        return None
    from kvplan.calc.memory import weight_bytes
    from kvplan.engines import serving_dtype

    from kvplan.calc.roofline import model_cost

    cost = model_cost(card, profile, s.weights_dtype, s.kv_dtype, tps=(par.tp,))
    experts = cost.moe_layers * cost.num_experts * cost.expert_weight_bytes
    total = weight_bytes(card, s.weights_dtype, serving_dtype(card.dtype, profile))
    replicas = 1.0 + par.redundant_experts / cost.num_experts if cost.num_experts else 1.0
    return max(total - experts, 0.0) / (par.tp * par.pp) + experts * replicas / (par.ep * par.pp)
