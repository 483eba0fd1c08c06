"""kvplan: analytical KV-cache capacity planning for LLM inference.

The public library surface (each CLI command has one of these as its Python equivalent)::

    import kvplan
    kvplan.size("llama-3.1-70b", seq=131072, batch=[1, 4])       # -> Result
    kvplan.fit("llama-3.1-70b", "h100-sxm", seq=131072, tp=8)
    kvplan.load_model("deepseek-v3"); kvplan.load_hardware("h200")
    kvplan.plan_aggregated(card, hw, workload, slos, shape)       # -> FleetPlan (one shape)
    kvplan.plan(model, hw, workload, slos)                        # -> FleetAnswer (kvplan plan)
    kvplan.plan_pd(model, hw, qps=…, isl=…, osl=…)                # -> PdAnswer (kvplan pd)

Answers are typed (frozen dataclasses); ``answer.rows`` are the JSON rows ``--format json`` prints.

Names resolve lazily so that ``import kvplan`` stays cheap.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "size": "kvplan.plans.sizing.size",
    "fit": "kvplan.plans.sizing.fit",
    "Overrides": "kvplan.plans.sizing.fit",
    "load_model": "kvplan.cards.loader",
    "load_hardware": "kvplan.cards.loader",
    "load_system": "kvplan.cards.loader",
    "kv_layout": "kvplan.calc.kv",
    "get_profile": "kvplan.engines",
    "plan": "kvplan.plans.fleet.plan",
    "plan_aggregated": "kvplan.plans.fleet.aggregated",
    "FleetPlan": "kvplan.plans.fleet.aggregated",
    "FleetAnswer": "kvplan.plans.fleet.plan",
    "plan_pd": "kvplan.plans.pd.plan",
    "PdAnswer": "kvplan.plans.pd.result",
    "Result": "kvplan.result",
    "KvplanError": "kvplan.errors",
    "ModelCard": "kvplan.cards.schema",
    "HardwareCard": "kvplan.cards.schema",
    "SystemCard": "kvplan.cards.schema",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
