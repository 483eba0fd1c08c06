"""The hardware-free part of a deployment: what ``kvplan size`` takes (no roofline, no engine memory).

Its own module so that ``kvplan size`` loads neither the deployment machinery (engine memory,
links, efficiencies) nor a hardware card; :mod:`kvplan.plans.deployment` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.calc.kv import KVLayout
    from kvplan.cards.schema import ModelCard
    from kvplan.engines import EngineProfile


@dataclass(frozen=True)
class ModelLayout:
    """The part of a deployment that needs no hardware: a model's KV layout under one engine, KV dtype, TP × PP.

    What ``kvplan size`` takes; a :class:`~kvplan.plans.deployment.Deployment` has the same
    ``model``, ``profile`` and ``layout`` and serves wherever a ``ModelLayout`` does.
    """

    model: ModelCard
    profile: EngineProfile
    layout: KVLayout
