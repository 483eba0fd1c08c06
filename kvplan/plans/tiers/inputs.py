"""The memory tiers a tier plan places KV in: from the cards, a ``--tiers`` file and capacity overrides.

Card convention (system_cards/*.yaml notes): a tier's ``capacity_bytes`` is the whole system's
(one node), its ``read/write_bytes_per_s`` is per accelerator (the line rate of that GPU's
path, like ``Link``). A plan over ``nodes`` systems therefore has ``nodes × capacity`` of each
local tier (host DRAM, CXL, NVMe), and every GPU reads at the per-accelerator rate. A
``remote`` tier is a pool outside the nodes (Mooncake Store style): its capacity is the pool's
total and is not multiplied by the node count.

Where tiers come from, first match wins: ``--tiers FILE`` (a YAML list of tiers in the card
schema, or a mapping with a ``tiers:`` list and optional ``source``/``field_sources``); else the
system card's ``tiers``; else the hardware card's. Capacity overrides (``--dram-per-node 1TB``,
``--cxl-per-node``, ``--nvme-per-node``, ``--remote-pool``) replace the capacity of every tier of
that kind; they cannot create a tier, because its bandwidth would be a guess.

Achieved bandwidth: a remote tier is read through the NICs at the card's ``nic.efficiency``
(Mooncake's 87% anchor on hgx-h100-8); local tiers at line rate (no sourced efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from kvplan.cards.loader import describe_validation_error
from kvplan.cards.schema import HardwareCard, SystemCard, Tier
from kvplan.errors import CardError, InputError

TIER_ORDER = ("host_dram", "cxl", "nvme", "remote")
OVERRIDE_FLAGS = {"host_dram": "--dram-per-node", "cxl": "--cxl-per-node", "nvme": "--nvme-per-node",
                  "remote": "--remote-pool"}


@dataclass(frozen=True)
class CapacityOverrides:
    """Capacities given on the command line, in bytes: per node for local tiers, total for the remote pool."""

    host_dram: float | None = None
    cxl: float | None = None
    nvme: float | None = None
    remote: float | None = None

    def given(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in TIER_ORDER if getattr(self, k) is not None}


@dataclass(frozen=True)
class TierSpec:
    """One tier of a deployment, resolved: fleet capacity, per-GPU achieved bandwidth, latency."""

    name: str
    kind: str                          # hbm, host_dram, cxl, nvme, remote
    capacity_bytes: float | None       # the whole fleet's (None: unknown)
    read_bytes_per_s: float            # per accelerator, achieved
    write_bytes_per_s: float | None
    latency_s: float
    cost_per_gb: float | None
    origin: str                        # where the figures came from
    line_rate_bytes_per_s: float       # per accelerator, before efficiency
    latency_given: bool = True


def read_tiers_file(path: Path) -> list[Tier]:
    """A YAML list of tiers (card schema); errors name the file and the field, with the value."""
    from kvplan.inputs import read_yaml

    data = read_yaml(path, "tiers file")
    if isinstance(data, dict):
        data = data.get("tiers")
    if not isinstance(data, list) or not data:
        raise CardError(f"{path}: expected a non-empty YAML list of tiers (or a mapping with 'tiers:')",
                        "each tier: name, kind (host_dram|cxl|nvme|remote), capacity_bytes, read_bytes_per_s, …")
    try:
        return TypeAdapter(list[Tier]).validate_python(data)
    except ValidationError as exc:
        message, _ = describe_validation_error(str(path), exc)
        raise CardError(message.replace(f"{path}: ", f"{path}: tiers.", 1),
                        "a tier needs name, kind (host_dram|cxl|nvme|remote) and read_bytes_per_s > 0 (bytes/s per "
                        "GPU); capacity_bytes, write_bytes_per_s, latency_s and cost_per_gb are optional") from None


def resolve_tiers(
    hardware: HardwareCard, system: SystemCard | None, nodes: int, *, tiers_file: Path | None = None,
    overrides: CapacityOverrides = CapacityOverrides(),
) -> tuple[list[TierSpec], list[str]]:
    """The tiers below HBM, in placement order (DRAM → CXL → NVMe → remote), and notes on their figures."""
    if tiers_file is not None:
        tiers, origin = read_tiers_file(tiers_file), str(tiers_file)
    elif system is not None and system.tiers:
        tiers, origin = list(system.tiers), f"system card {system.name}"
    else:
        tiers, origin = list(hardware.tiers), f"hardware card {hardware.name}"
    notes: list[str] = []
    given = overrides.given()
    for kind, value in given.items():
        if value <= 0:
            raise InputError(f"{OVERRIDE_FLAGS[kind]} must be > 0 (got {value:g} bytes)", "write e.g. 1TB or 512GiB")
        if not any(t.kind == kind for t in tiers):
            raise InputError(
                f"{OVERRIDE_FLAGS[kind]}: {origin} has no {kind} tier, so its bandwidth is unknown",
                "describe the tier (capacity, read bandwidth, latency, with sources) in a --tiers FILE")
    nic = system.nic if system is not None and system.nic is not None else hardware.nic
    nic_efficiency = nic.efficiency if nic is not None and nic.efficiency is not None else None
    resolved: list[TierSpec] = []
    for tier in sorted(tiers, key=lambda t: TIER_ORDER.index(t.kind)):
        capacity = tier.capacity_bytes
        source, name = origin, tier.name
        if tier.kind in given:
            capacity, source = given[tier.kind], OVERRIDE_FLAGS[tier.kind]
            scope = "total" if tier.kind == "remote" else "per node"
            name = f"{tier.name.split(' (')[0]} ({capacity / 1e12:g} TB {scope}, {source})"
        if capacity is not None and tier.kind != "remote":
            capacity = capacity * nodes
        efficiency = nic_efficiency if tier.kind == "remote" and nic_efficiency is not None else 1.0
        if tier.kind == "remote" and nic_efficiency is not None:
            notes.append(f"{name}: read at the NIC efficiency {nic_efficiency:g} of its "
                         f"{tier.read_bytes_per_s / 1e9:g} GB/s line rate per GPU")
        if tier.latency_s is None:
            notes.append(f"{name}: no latency on the card; taken as 0 (bandwidth term only)")
        resolved.append(TierSpec(
            name=name, kind=tier.kind, capacity_bytes=None if capacity is None else float(capacity),
            read_bytes_per_s=tier.read_bytes_per_s * efficiency, write_bytes_per_s=tier.write_bytes_per_s,
            latency_s=tier.latency_s or 0.0, cost_per_gb=tier.cost_per_gb, origin=source,
            line_rate_bytes_per_s=tier.read_bytes_per_s, latency_given=tier.latency_s is not None))
    local = [t.kind for t in resolved if t.kind != "remote" and t.capacity_bytes is not None]
    if local and nodes > 1:
        notes.append(f"local tier capacities are per node × {nodes} nodes, used as one fleet-wide LRU: cache-aware "
                     "routing (Mooncake Conductor, SGLang router, Dynamo KV router) sends a request to the node "
                     "holding its prefix")
    return resolved, notes


def with_capacity(tier: TierSpec, capacity_bytes: float | None) -> TierSpec:
    return replace(tier, capacity_bytes=capacity_bytes)
