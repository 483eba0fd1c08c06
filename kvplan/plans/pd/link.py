"""The link that carries KV from prefill to decode: which path, and what one transfer gets of it.

Paths, per GPU and per direction, from the system card (else the hardware card); each pool's
hardware and system is a :class:`kvplan.plans.links.Side`:

- ``scale_up``: P and D in one scale-up domain (NVLink in an HGX node or an NVL72 rack, UB in a
  CloudMatrix-384 supernode, PCIe peer-to-peer where that is the only GPU-to-GPU path).
- ``host_link``: same node, outside the scale-up domain (PCIe hosts whose NVLink joins pairs only).
- ``nic``: different nodes, or different logical partitions of a supernode — the slower, scale-out
  path (RDMA NICs, CloudMatrix's RDMA plane). Heterogeneous P and D hardware is always here.

Effective bandwidth of a path per GPU = line rate × links per GPU (``count``) × efficiency (the
card's figure, e.g. 0.87 from Mooncake's 87 GB/s on 4 × 200 Gbps RoCE; 1.0 with a note when the
card has none). Across different hardware the slower side's figure counts. A path the cards do
not describe is an error that names the card and the field, never a guess.

Placement ``auto``: scale-up when the GPUs of one xPyD unit (x/g prefill and y/g decode
instances, g = gcd(x, y)) fit in one scale-up domain, the host link when they fit in one node,
the NIC otherwise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.cards.loader import system_names
from kvplan.errors import InputError, MissingFigureError
from kvplan.plans.links import Side

PLACEMENTS = ("auto", "same-domain", "same-node", "cross-node")
PATH_NAMES = {"scale_up": "scale-up link", "host_link": "host link (PCIe)", "nic": "NIC (RDMA)"}


@dataclass(frozen=True)
class LinkOverride:
    """Figures given on the command line, replacing the card's (bandwidth: line rate per GPU per direction)."""

    bandwidth_bytes_per_s: float | None = None
    efficiency: float | None = None
    latency_s: float | None = None
    bandwidth_scale: float = 1.0  # sensitivity: 0.25 = bandwidth ÷ 4


@dataclass(frozen=True)
class PathLink:
    """The P→D path, resolved: effective bytes/s per GPU per direction and a fixed latency."""

    kind: str
    name: str
    line_rate_bytes_per_s: float   # per GPU per direction, all links of the kind
    efficiency: float
    latency_s: float
    notes: tuple[str, ...] = ()

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.line_rate_bytes_per_s * self.efficiency

    def scaled(self, factor: float) -> PathLink:
        return dataclasses.replace(self, line_rate_bytes_per_s=self.line_rate_bytes_per_s * factor)


def same_place(prefill: Side, decode: Side) -> bool:
    """P and D can share a node: same accelerator and the same (or an unnamed) system."""
    if prefill.hardware.name != decode.hardware.name:
        return False
    return prefill.system is None or decode.system is None or prefill.system.name == decode.system.name


def path_kind(placement: str, prefill: Side, decode: Side, unit_gpus: float) -> str:
    """The path a placement (or ``auto`` for a unit of ``unit_gpus`` GPUs) uses."""
    if placement not in PLACEMENTS:
        raise InputError(f"unknown placement '{placement}'", f"choose one of: {', '.join(PLACEMENTS)}")
    if not same_place(prefill, decode):
        if placement in ("same-domain", "same-node"):
            raise InputError(f"--placement {placement}: prefill on {prefill.name} and decode on {decode.name} "
                             "cannot share a node or a scale-up domain",
                             "use --placement cross-node (or auto) for heterogeneous pools")
        return "nic"
    domain, node = prefill.scale_up_domain, prefill.node_accelerators
    has = {k: prefill.link(k) is not None for k in PATH_NAMES}
    if placement == "same-domain":
        return "scale_up"
    if placement == "same-node":
        return "scale_up" if unit_gpus <= domain or not has["host_link"] else "host_link"
    if placement == "cross-node":
        return "nic"
    if unit_gpus <= domain and has["scale_up"]:
        return "scale_up"
    if unit_gpus <= node and has["host_link"]:
        return "host_link"
    return "nic"


def resolve_link(kind: str, prefill: Side, decode: Side, override: LinkOverride = LinkOverride()) -> PathLink:
    """Effective figures of path ``kind`` between the pools, with the command line's overrides."""
    notes: list[str] = []
    sides = [prefill] if same_place(prefill, decode) else [prefill, decode]
    links = [(s, s.link(kind)) for s in sides]
    if override.bandwidth_bytes_per_s is not None:
        line = float(override.bandwidth_bytes_per_s)
        name = f"given {PATH_NAMES[kind]} (--link-bandwidth)"
        card_eff = None
        card_latency = [lk.latency_s for _, lk in links if lk is not None and lk.latency_s is not None]
    else:
        for side, link in links:
            if link is None:
                with_link = system_names(accelerator=side.hardware.name, with_nic=True) if kind == "nic" else []
                shipped = (f", or pass --system {' or '.join(with_link)} (a shipped system card with a NIC)"
                           if with_link else ", or pass a system card with a NIC as --system or --decode-system "
                           f"(shipped: {', '.join(system_names(with_nic=True))})" if kind == "nic" else "")
                raise MissingFigureError(
                    f"{side.name} has no {kind} link: the P→D KV transfer over the {PATH_NAMES[kind]} needs "
                    f"its bandwidth ({_card_file(side)}: {kind}.bandwidth_bytes_per_s)",
                    "add the link with its source to the card, pass --link-bandwidth (e.g. 50GB/s per GPU), "
                    f"choose another --placement{shipped}")
        effective = [lk.bandwidth_bytes_per_s * lk.count * (lk.efficiency or 1.0) for _, lk in links]
        slow = min(range(len(links)), key=lambda i: effective[i])
        side, link = links[slow]
        line = link.bandwidth_bytes_per_s * link.count
        card_eff = link.efficiency
        name = f"{side.name} {kind}: {link.name}"
        if len(links) > 1:
            notes.append(f"heterogeneous pools: the slower side's {kind} counts ({name})")
        card_latency = [lk.latency_s for _, lk in links if lk.latency_s is not None]
    efficiency = override.efficiency if override.efficiency is not None else card_eff
    if efficiency is None:
        efficiency = 1.0
        notes.append(f"P→D {PATH_NAMES[kind]} at line rate ({line / 1e9:g} GB/s per GPU): no efficiency figure "
                     "(Mooncake reached 87% of RoCE line rate; pass --link-efficiency)")
    elif not 0 < efficiency <= 1:
        raise InputError(f"--link-efficiency must be in (0, 1] (got {efficiency})", "Mooncake's RoCE anchor is 0.87")
    if override.latency_s is not None:
        latency = float(override.latency_s)
    elif card_latency:
        latency = max(card_latency)
    else:
        latency = 0.0
        notes.append(f"no fixed latency per P→D transfer: the {PATH_NAMES[kind]} has no latency_s "
                     "(pass --link-latency)")
    if override.bandwidth_scale != 1.0:
        notes.append(f"link bandwidth × {override.bandwidth_scale:g} (sensitivity)")
    return PathLink(kind, name, line * override.bandwidth_scale, float(efficiency), latency, tuple(notes))


def _card_file(side: Side) -> str:
    return f"system_cards/{side.system.name}.yaml" if side.system else f"hardware_cards/{side.hardware.name}.yaml"
