"""The links a set of ranks shares, from the system card (else the hardware card): below every planner.

A deployment's GPUs sit in a system (an HGX node, an NVL72 rack, a CloudMatrix-384 supernode, a
PCIe host). The system card names its links per GPU and per direction:

- ``scale_up``: GPU to GPU inside the scale-up domain (NVLink, UB, PCIe peer-to-peer); what
  tensor-parallel all-reduces and EP all-to-alls inside the domain use;
- ``host_link``: the host's PCIe, outside the scale-up domain but in the node;
- ``nic``: scale-out, between nodes (RDMA NICs); what ranks across nodes use.

``node_hardware`` is the hardware card with the system's links and scale-up domain in place of
the card's own (where the system has them): the card the step-time model reads for communication
(sizing's latency, the fleet, pd). :class:`Side` is one pool's accelerator in its system, which pd
and route resolve their transfer paths from. A system card given in the hardware's place stands
for its accelerator (``cards.loader.load_hardware_and_system``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from kvplan.cards.loader import load_hardware_and_system, usual_system
from kvplan.cards.schema import HardwareCard, Link, SystemCard

LINK_KINDS = ("scale_up", "host_link", "nic")


def node_hardware(hw: HardwareCard, system: SystemCard | None) -> HardwareCard:
    """``hw`` with the system's scale-up, NIC and host links (and scale-up domain) where the system has them."""
    if system is None:
        return hw
    update = {k: getattr(system, k) for k in LINK_KINDS if getattr(system, k)}
    if system.scale_up is not None:
        update["scale_up_domain"] = system.scale_up_domain
    return hw.model_copy(update=update)


@dataclass(frozen=True)
class Side:
    """One pool's accelerator and the system (node / supernode) it sits in, if known.

    ``assumed``: the note saying which system was assumed when none was given (the hardware
    card's ``usual_system``), or what was assumed without one.
    """

    hardware: HardwareCard
    system: SystemCard | None = None
    assumed: str | None = None

    @property
    def name(self) -> str:
        return self.system.name if self.system else self.hardware.name

    def link(self, kind: str) -> Link | None:
        if self.system is not None:
            return getattr(self.system, kind)
        return getattr(self.hardware, kind)

    @property
    def node_hardware(self) -> HardwareCard:
        """The hardware card with the system's links (where the system has them): what TP traffic uses."""
        return node_hardware(self.hardware, self.system)

    @property
    def scale_up_domain(self) -> float:
        if self.system is not None:
            return float(self.system.scale_up_domain)
        return float(self.hardware.scale_up_domain or (math.inf if self.hardware.scale_up else 1))

    @property
    def node_accelerators(self) -> float:
        return float(self.system.accelerators) if self.system is not None else self.scale_up_domain


def load_side(hardware: str | HardwareCard, system: str | SystemCard | None, cards: tuple[Path, ...] = (),
              default_system: bool = False) -> Side:
    """A hardware card (or a system card given in its place) and the system around it.

    Without a system, ``default_system`` assumes the hardware card's ``usual_system`` (multi-node
    by default: nodes of that system joined by its NIC), and says so in ``Side.assumed``.
    """
    hw, sys_card = load_hardware_and_system(hardware, system, cards)
    assumed = None
    if sys_card is None and default_system:
        sys_card, assumed = usual_system(hw, cards)
    return Side(hw, sys_card, assumed)
