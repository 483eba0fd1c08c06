"""Deployments for the sizing commands, built once from names and flags (the deployment layer's builders).

``kvplan size``, ``fit``, ``latency`` and ``calibrate`` take lists of values (several KV dtypes,
TPs, engines); each combination is one deployment, resolved here once with its cards loaded once:

- :func:`model_layouts`: size's :class:`~kvplan.plans.deployment.ModelLayout` per (KV dtype, tp, pp,
  engine): the KV layout only, no hardware (so ``kvplan size`` loads neither the roofline nor a
  hardware card);
- :func:`fit_deployments`: fit's :class:`~kvplan.plans.deployment.Deployment` per (KV dtype, tp,
  engine), each with the engine's start-up budget and blocks;
- :func:`step_deployments`: latency's and calibrate's deployment per TP, sharing one roofline cost
  resolved for all the TPs (``cost_tps``), so the step times of every TP are one numpy evaluation.

The planners (:mod:`kvplan.plans.sizing`) take what these return and load no card themselves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from typing import TYPE_CHECKING

from kvplan.calc.kv import kv_layout
from kvplan.cards.loader import load_model
from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.engines import get_profile
from kvplan.plans.layout import ModelLayout
from kvplan.plans.sizing.size import as_list

if TYPE_CHECKING:  # imported where used: kvplan size needs none of the deployment machinery
    from kvplan.plans.deployment import Deployment, EngineSettings
    from kvplan.plans.sizing.fit import Overrides


def model_card(model: str | ModelCard, cards: tuple[Path, ...] = ()) -> ModelCard:
    """A model card from a name, a Hugging Face id, a card file or a config.json (a card passes through)."""
    return model if isinstance(model, ModelCard) else load_model(model, cards)


def model_layouts(model: str | ModelCard, kv_dtype="auto", tp=1, pp=1, engine="vllm", *, block_size: int | None = None,
                  max_num_batched_tokens: int | None = None, cards: tuple[Path, ...] = ()) -> list[ModelLayout]:
    """One :class:`ModelLayout` per (KV dtype, tp, pp, engine) of the given values (each a value or a list).

    The card is loaded once; the layouts come in the order of the product (kvplan size's rows).
    """
    card = model_card(model, cards)
    out = []
    for dtype, t, p, eng in itertools.product(as_list(kv_dtype), as_list(tp), as_list(pp), as_list(engine)):
        profile = get_profile(eng)
        out.append(ModelLayout(card, profile, kv_layout(card, profile, dtype, t, p, block_size=block_size,
                                                        max_num_batched_tokens=max_num_batched_tokens)))
    return out


def fit_deployments(model: str | ModelCard, hardware: str | HardwareCard, kv_dtype="auto", tp=1, pp: int = 1,
                    engine="vllm", *, weights_dtype: str = "auto", gpu_memory_utilization: float | None = None,
                    block_size: int | None = None, max_num_batched_tokens: int | None = None,
                    max_num_seqs: int | None = None, overrides: Overrides | None = None,
                    cards: tuple[Path, ...] = ()) -> list[Deployment]:
    """One :class:`Deployment` per (KV dtype, tp, engine) of the given values, cards loaded once (kvplan fit's rows).

    ``max_num_seqs`` / ``max_num_batched_tokens`` None: the engine's defaults for the GPU
    (:func:`kvplan.engines.batch_defaults`: vLLM's by device memory and name);
    ``overrides`` None: none (``Overrides()``).
    """
    from kvplan.plans.deployment import EngineSettings, Parallelism, resolve, resolve_cards
    from kvplan.plans.sizing.fit import Overrides

    overrides = Overrides() if overrides is None else overrides
    card = model_card(model, cards)
    hw, sys_card = resolve_cards(hardware, None, cards)
    out = []
    for dtype, t, eng in itertools.product(as_list(kv_dtype), as_list(tp), as_list(engine)):
        settings = EngineSettings(
            engine=eng, kv_dtype=dtype, weights_dtype=weights_dtype, gpu_memory_utilization=gpu_memory_utilization,
            max_num_seqs=max_num_seqs, block_size=block_size, chunk_tokens=max_num_batched_tokens or None)
        out.append(resolve(card, hw, system=sys_card, engine=settings, parallel=Parallelism(tp=t, pp=pp),
                           overrides=overrides))
    return out


def step_deployments(model: str | ModelCard, hardware: str | HardwareCard, tp: int | Sequence[int] = 1, *,
                     system: str | None = None, engine: EngineSettings | None = None, ep: int = 1, dp: int = 1,
                     expert_parallel: bool = False, redundant_experts: int = 0, perf_model: str = "operators",
                     cards: tuple[Path, ...] = ()) -> list[Deployment]:
    """One :class:`Deployment` per TP for ``kvplan latency`` / ``calibrate``, all sharing one roofline cost.

    The parallel inputs are checked first with latency's own rules (:func:`parallel_layout`: the
    legacy ``--ep N`` is ``--tp 1 --dp N --enable-expert-parallel`` under the per-operator model),
    so an impossible layout is the same error whichever door it comes through. ``engine`` None:
    the default settings (``EngineSettings()``).
    """
    from kvplan.plans.deployment import EngineSettings, Parallelism, node_hardware, resolve, resolve_cards
    from kvplan.plans.sizing.latency import parallel_layout

    engine = EngineSettings() if engine is None else engine

    card = model_card(model, cards)
    hw, sys_card = resolve_cards(hardware, system, cards)
    tps = as_list(tp)
    dp, expert_parallel, _ = parallel_layout(card, node_hardware(hw, sys_card), tps, ep=ep, dp=dp,
                                             expert_parallel=expert_parallel, redundant_experts=redundant_experts,
                                             perf_model=perf_model)
    shared = tuple(sorted(set(tps)))
    return [resolve(card, hw, system=sys_card, engine=engine, cost_tps=shared, parallel=Parallelism(
                tp=t, dp=dp, expert_parallel=expert_parallel, redundant_experts=redundant_experts)) for t in tps]


# --------------------------------------------------------------------------- from names (scripts, tests)
# Each is the builder above, then the planner, with the planner's old keyword names: what the
# command does after parsing its flags.

def size_from_names(model, seq=131072, batch=1, kv_dtype="auto", tp=1, pp=1, engine="vllm", *, block_size=None,
                    max_num_batched_tokens=None, cards: tuple[Path, ...] = ()):
    """``kvplan size`` from names: :func:`model_layouts`, then :func:`kvplan.plans.sizing.size.size`."""
    from kvplan.plans.sizing.size import size

    layouts = model_layouts(model, kv_dtype, tp, pp, engine, block_size=block_size,
                            max_num_batched_tokens=max_num_batched_tokens, cards=cards)
    return size(layouts, seq, batch, max_num_batched_tokens=max_num_batched_tokens)


def fit_from_names(model, hardware, seq=None, batch=1, kv_dtype="auto", tp=1, pp=1, engine="vllm", *,
                   allow_long_context=False, warn_concurrency=False, **settings):
    """``kvplan fit`` from names: :func:`fit_deployments` (``settings``: its keywords), then the fit planner."""
    from kvplan.plans.sizing.fit import fit

    deployments = fit_deployments(model, hardware, kv_dtype, tp, pp, engine, **settings)
    return fit(deployments, seq, batch, allow_long_context=allow_long_context, warn_concurrency=warn_concurrency)


def latency_from_names(model, hardware, isl=2048, osl=256, batch=1, tp=1, *, ep=1, kv_dtype="auto",
                       weights_dtype="auto", engine="vllm", efficiencies=None, dp=1, expert_parallel=False,
                       redundant_experts=0, perf_model="operators", system=None, cards: tuple[Path, ...] = (),
                       speculation=None, **planner):
    """``kvplan latency`` from names: :func:`step_deployments`, then the latency planner (``planner``: its keywords).

    A speculation's ``draft_model`` may be a card name here; it is resolved to its card.
    """
    import dataclasses

    from kvplan.plans.deployment import EngineSettings
    from kvplan.plans.sizing.efficiency import Efficiencies
    from kvplan.plans.sizing.latency import latency

    settings = EngineSettings(engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
                              efficiencies=efficiencies or Efficiencies())
    deployments = step_deployments(model, hardware, tp, system=system, engine=settings, ep=ep, dp=dp,
                                   expert_parallel=expert_parallel, redundant_experts=redundant_experts,
                                   perf_model=perf_model, cards=cards)
    if speculation is not None and isinstance(speculation.draft_model, str):
        speculation = dataclasses.replace(speculation, draft_model=model_card(speculation.draft_model, cards))
    return latency(deployments, isl, osl, batch, ep=ep, perf_model=perf_model, speculation=speculation, **planner)


def calibrate_from_names(model, hardware, measurements, tp=1, *, ep=1, kv_dtype="auto", weights_dtype="auto",
                         engine="vllm", cards: tuple[Path, ...] = (), **planner):
    """``kvplan calibrate`` from names: the rows read, a deployment per TP in them, then the calibration."""
    from kvplan.plans.deployment import EngineSettings
    from kvplan.plans.sizing.calibrate import calibrate, read_measurements

    rows = read_measurements(Path(measurements), tp)
    settings = EngineSettings(engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype)
    deployments = step_deployments(model, hardware, sorted({r.tp for r in rows}), engine=settings, ep=ep,
                                   perf_model="roofline", cards=cards)
    return calibrate(deployments, measurements, rows, ep=ep, **planner)
