"""Where the pools sit in a supernode (seed §8): one scale-up domain, logical partitions, or across domains.

For the shapes the plan chose (prefill TP × DP, decode TP × DP), three placements are planned
again (fewest instances meeting the SLOs, :meth:`kvplan.plans.pd.search.PairModel.search`):

- ``one-domain``: P and D instances of a unit inside one scale-up domain (an NVL72 rack, a
  CloudMatrix-384 supernode, an 8-GPU HGX node). The KV moves over the scale-up link; each
  instance's collectives (TP all-reduce, EP dispatch/combine) stay on it while the instance fits
  the domain. Only possible when one xPyD unit (x/g prefill + y/g decode instances, g = gcd)
  fits the domain.
- ``partitions``: P and D in different logical partitions (or different nodes): each instance
  keeps its collectives inside its partition, the KV crosses partitions over the NIC (the RDMA
  plane), as the seed's example of a prefill in partition A and its decode in partition B.
- ``across-domains``: instances assembled from nodes (``node_accelerators``) of different
  domains, locality broken: an instance larger than a node runs its collectives over the NIC
  (:class:`kvplan.calc.roofline.Machine` with the scale-up domain cut to one node), the KV over
  the NIC.

The planner picks, among the feasible placements that fit, the fewest GPUs, then the lower TTFT
at its SLO statistic, then the lower TPOT; the reason names what the locality bought (exposed
KV transfer and step time against the next placement).
"""

from __future__ import annotations

import dataclasses
import math

from kvplan.errors import MissingFigureError
from kvplan.plans.pd.link import PATH_NAMES, LinkOverride, resolve_link
from kvplan.plans.pd.model import transfer_model
from kvplan.plans.pd.result import Placement
from kvplan.plans.pd.search import PairModel
from kvplan.units import format_seconds

PLACEMENT_NAMES = ("one-domain", "partitions", "across-domains")
PLACEMENT_TEXT = {"one-domain": "P and D in one scale-up domain (KV over the scale-up link)",
                  "partitions": "P and D in different logical partitions / nodes (KV over the NIC)",
                  "across-domains": "instances spread over nodes of different domains (collectives and KV over the NIC)"}


def fragmented(machine, node: int):
    """The machine of an instance assembled from ``node``-GPU pieces of different domains: collectives beyond
    one node go over the NIC (``scale_up_domain = min(domain, node)``)."""
    return dataclasses.replace(machine, scale_up_domain=min(machine.scale_up_domain, float(node)))


def placement_plans(setup, workload, best, models_for, make_candidate, pd_plan, unit_of) -> tuple[list, list[str]]:
    """Plans (:class:`~kvplan.plans.pd.result.PdPlan`) of the three placements for the chosen shapes, the
    planner's pick marked, and notes (see the module docstring)."""
    shape_p, shape_d = best.shape_p, best.shape_d
    side_p, side_d = setup.prefill.side, setup.decode.side
    domain = side_p.scale_up_domain
    node = min(setup.prefill.node, setup.decode.node)
    rows, notes, picked = [], [], []
    for name in PLACEMENT_NAMES:
        kind = "scale_up" if name == "one-domain" else "nic"
        machine_of = (lambda dep: fragmented(dep.machine, node)) if name == "across-domains" else None
        # a figure given on the command line (--link-bandwidth …) is the planned path's; other paths use their cards
        override = setup.override if kind == best.link.kind else LinkOverride(
            bandwidth_scale=setup.override.bandwidth_scale)
        try:
            link = resolve_link(kind, side_p, side_d, override)
        except MissingFigureError as exc:
            notes.append(f"placement {name} not planned: {exc.message}")
            continue
        if name == "across-domains" and max(shape_p.gpus, shape_d.gpus) > node and any(
                math.isnan(dep.machine.nic_bytes_per_s) for dep in (setup.prefill.deployments[shape_p],
                                                                    setup.decode.deployments[shape_d])):
            notes.append(f"placement {name} not planned: {side_p.name} has no NIC figure for collectives "
                         "across nodes")
            continue
        prefill, decode = models_for(setup, workload, machine_of, (shape_p, shape_d))
        pm, dm = prefill[shape_p], decode[shape_d]
        transfer = transfer_model(dm.receive_bytes_per_gpu, shape_d.tp, shape_p.tp, pm.service_s,
                                  setup.card.num_layers, link.bandwidth_bytes_per_s, link.latency_s)
        pair = PairModel(workload, pm, dm, transfer, setup.ttft, setup.tpot, max_utilization=setup.max_utilization)
        point, reason = pair.search()
        if point is None:
            point = pair.evaluate(best.point.x, best.point.y)
        cand = make_candidate(shape_p, shape_d, link, pair, point)
        plan = pd_plan(setup, workload, cand, f"placement: {name}")
        unit = unit_of(point.x, point.y, shape_p.gpus, shape_d.gpus)
        fits = unit <= domain if name == "one-domain" else True
        plan = dataclasses.replace(plan, placement=Placement(
            name, fits, reason=None if fits else f"one {point.x}P{point.y}D unit is {unit} GPUs, more than the "
                                                 f"{domain:g}-GPU scale-up domain"))
        rows.append(plan)
        if plan.feasible and fits:
            picked.append(plan)
    if picked:
        stat_t, stat_d = setup.ttft.stat, setup.tpot.stat
        choice = min(picked, key=lambda r: (r.total_gpus, r.ttft_at(stat_t), r.tpot_at(stat_d)))
        others = [r for r in rows if r is not choice]
        chosen = dataclasses.replace(choice, placement=dataclasses.replace(
            choice.placement, picked=True, reason=_reason(choice, others, stat_t, stat_d)))
        rows = [chosen if r is choice else r for r in rows]
    return rows, notes


def _reason(choice, others: list, stat_t: str, stat_d: str) -> str:
    text = (f"{PLACEMENT_TEXT[choice.placement.name]}: {choice.total_gpus} GPUs, TTFT {stat_t} "
            f"{_sec(choice.ttft_at(stat_t))} (exposed KV transfer {_sec(choice.exposed_transfer_s)}), TPOT "
            f"{stat_d} {_sec(choice.tpot_at(stat_d))}")
    for r in others:
        if not r.feasible:
            text += f"; {r.placement.name} misses the SLOs ({r.binding_constraint})"
            continue
        if not r.placement.fits:
            text += f"; {r.placement.name} does not fit ({r.placement.reason})"
            continue
        text += (f"; {r.placement.name} needs {r.total_gpus} GPUs at TTFT {_sec(r.ttft_at(stat_t))}, TPOT "
                 f"{_sec(r.tpot_at(stat_d))} ({PATH_NAMES.get(r.link_kind, r.link_kind)})")
    return text


def _sec(value) -> str:
    return format_seconds(value) if value is not None and math.isfinite(value) else "∞"
