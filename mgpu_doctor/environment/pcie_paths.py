"""The PCIe route between two GPUs and the bridges on it whose ACS controls redirect peer-to-peer.

Pure functions of :class:`~mgpu_doctor.model.collective_facts.PcieFacts`, used by the ``pcie-p2p``
check and by ``fleet``.
"""

from __future__ import annotations

from itertools import combinations

from mgpu_doctor.model.collective_facts import ACS_REDIRECTING, PciBridge, PcieFacts, PciGpu
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record


@record
class Route:
    """How traffic from GPU ``a`` reaches GPU ``b`` over PCIe.

    ``shared``: ``switch`` (a common bridge: nvidia-smi's PIX/PXB), ``root complex`` (the same PCI
    root, different root ports: PHB) or ``none`` (different PCI roots: on AMD EPYC often the same
    socket, elsewhere another socket). ``between`` are the bridges below the common point, on both
    sides: their ACS controls decide.
    """

    a: PciGpu
    b: PciGpu
    shared: str
    between: list[str]

    @property
    def same_numa_node(self) -> bool | None:
        if isinstance(self.a.numa_node, int) and isinstance(self.b.numa_node, int):
            return self.a.numa_node == self.b.numa_node
        return None

    @property
    def pcie_p2p_likely(self) -> bool:
        """Whether NCCL would use PCIe peer-to-peer here when nothing else is known: under one
        switch or root complex, or on one NUMA node (AMD's several PCI roots per socket); not
        across sockets."""
        return self.shared != "none" or self.same_numa_node is not False


def route(a: PciGpu, b: PciGpu) -> Route:
    common = 0
    if a.host_bridge == b.host_bridge:
        while common < min(len(a.bridges), len(b.bridges)) and a.bridges[common] == b.bridges[common]:
            common += 1
    shared = "switch" if common else ("root complex" if a.host_bridge == b.host_bridge else "none")
    return Route(a, b, shared, a.bridges[common:] + b.bridges[common:])


def routes(gpus: list[PciGpu]) -> list[Route]:
    return [route(a, b) for a, b in combinations(gpus, 2)]


def redirecting(bridge: PciBridge) -> list[str]:
    """The enabled ACS controls of a bridge that send peer-to-peer traffic upstream."""
    if isinstance(bridge.acs, Unavailable):
        return []
    return [c for c in bridge.acs if c in ACS_REDIRECTING]


def acs_unknown(bridge: PciBridge) -> bool:
    return isinstance(bridge.acs, Unavailable) and bridge.acs.cause != "no-acs"


def redirecting_bridges(pcie: PcieFacts, gpus: list[PciGpu] | None = None) -> list[PciBridge]:
    """Every bridge between two of the GPUs (sharing a switch or root complex) that redirects."""
    by_address = {b.address: b for b in pcie.bridges}
    found: dict[str, PciBridge] = {}
    for r in routes(pcie.gpus if gpus is None else gpus):
        if not r.pcie_p2p_likely:
            continue
        for address in r.between:
            bridge = by_address.get(address)
            if bridge is not None and redirecting(bridge):
                found[address] = bridge
    return [found[a] for a in sorted(found)]
