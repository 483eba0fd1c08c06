"""What a plan's metric producers read and return: the plan with its cards loaded once, and their output."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.cards.loader import load_hardware, load_model, load_system
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.engines import VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
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

    def __init__(self, plan: Plan, base_dir: Path, cards: tuple[Path, ...] = ()) -> None:
        self.plan = plan
        self.base_dir = base_dir
        self.cards = cards
        self._produced: dict[str, Produced] = {}

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
    def deployment(self) -> Deployment:
        """The plan's deployment, resolved once: cards, engine settings, tp × pp, the engine's KV pool."""
        e = self.plan.engine
        settings = EngineSettings(
            engine=e.name, kv_dtype=e.kv_cache_dtype, weights_dtype=e.weights_dtype,
            gpu_memory_utilization=e.gpu_memory_utilization, max_num_seqs=e.max_num_seqs,
            chunk_tokens=e.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, block_size=e.block_size)
        return resolve(self.model_card, self.hardware_card, system=self.system_card, engine=settings,
                       parallel=Parallelism(e.tensor_parallel_size, e.pipeline_parallel_size),
                       overrides=Overrides(kv_cache_memory_bytes=e.kv_cache_memory_bytes), cards=self.cards)

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
