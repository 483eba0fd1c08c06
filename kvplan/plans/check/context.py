"""What a plan's metric producers read and return: the plan with its cards loaded once, and their output."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.cards.loader import load_hardware, load_model, load_system, usual_system
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.errors import InputError
from kvplan.plans.deployment import Deployment, EngineSettings, Parallelism, resolve
from kvplan.plans.sizing.fit import Overrides
from kvplan.result import Result

if TYPE_CHECKING:
    from kvplan.plans.check.metrics import Producer
    from kvplan.plans.check.planfile import Plan


@dataclass
class Produced:
    """One producer's output: metric values, the chain of numbers behind them, its notes."""

    values: dict[str, float | bool]
    explain: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    result: Result | None = None


class PlanContext:
    """A plan with its cards loaded once; producers read from it and cache their output."""

    def __init__(self, plan: Plan, base_dir: Path, cards: tuple[Path, ...] = (),
                 gpu_cost: dict[str, float] | None = None) -> None:
        self.plan = plan
        self.base_dir = base_dir
        self.cards = cards
        self._gpu_cost = gpu_cost  # prices given outside the plan (kvplan report --gpu-cost) replace the plan's
        self._produced: dict[str, Produced] = {}
        self.memo: dict[str, object] = {}  # answers several producers and report sections share (the one fleet)

    @cached_property
    def model_card(self) -> ModelCard:
        return load_model(self._path_or_name(self.plan.model), self.cards)

    @cached_property
    def system_card(self) -> SystemCard | None:
        return load_system(self._path_or_name(self.plan.system), self.cards) if self.plan.system else None

    @cached_property
    def hardware_card(self) -> HardwareCard:
        name = self.plan.hardware or self.system_card.accelerator
        return load_hardware(self._path_or_name(name), self.cards)

    @cached_property
    def fleet_system(self) -> tuple[SystemCard | None, str | None]:
        """The plan's system, or (as ``kvplan plan`` assumes without --system) the accelerator's usual one, and
        the note saying so."""
        if self.system_card is not None:
            return self.system_card, None
        return usual_system(self.hardware_card, self.cards)

    @cached_property
    def deployment(self) -> Deployment:
        """The plan's deployment, resolved once: cards, engine settings, tp × pp, the engine's KV pool; on the
        plan's system, or the accelerator's usual system as ``kvplan plan`` assumes (its nodes and NIC)."""
        e = self.plan.engine
        settings = EngineSettings(
            engine=e.name, kv_dtype=e.kv_cache_dtype, weights_dtype=e.weights_dtype,
            gpu_memory_utilization=e.gpu_memory_utilization, max_num_seqs=e.max_num_seqs,
            chunk_tokens=e.max_num_batched_tokens or None, block_size=e.block_size)
        return resolve(self.model_card, self.hardware_card, system=self.fleet_system[0], engine=settings,
                       parallel=Parallelism(e.tensor_parallel_size, e.pipeline_parallel_size),
                       overrides=Overrides(kv_cache_memory_bytes=e.kv_cache_memory_bytes), cards=self.cards)

    @cached_property
    def gpu_cost(self) -> dict[str, float]:
        """{hardware card name: price per GPU-hour}: the --gpu-cost given to the command, else the plan's
        ``gpu_cost`` (a bare number prices the plan's hardware; names resolve like HARDWARE, aliases too)."""
        if self._gpu_cost is not None:
            return dict(self._gpu_cost)
        given = self.plan.gpu_cost
        if given is None:
            return {}
        if not isinstance(given, dict):
            return {self.hardware_card.name: float(given)}
        return {load_hardware(name, self.cards).name: float(price) for name, price in given.items()}

    def _path_or_name(self, text: str) -> str:
        """Card files named in a plan are relative to the plan file."""
        if text.endswith((".yaml", ".yml", ".json")) and not Path(text).is_absolute():
            return str(self.base_dir / text)
        return text

    @property
    def max_model_len(self) -> int:
        return self.plan.engine.max_model_len or self.model_card.max_context

    @property
    def concurrency(self) -> int:
        workload = self.plan.workload
        return workload.concurrency if workload and workload.concurrency else 1

    def produce(self, producer: Producer) -> Produced:
        if producer.name not in self._produced:
            reason = producer.unavailable(self.plan)
            if reason:
                raise InputError(f"{producer.name} metrics: {reason}", "drop the assertions that need them")
            self._produced[producer.name] = producer.compute(self)
        return self._produced[producer.name]
