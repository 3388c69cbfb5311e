"""The registered probes, by name, in the order a check runs and shows them."""
from __future__ import annotations

from .base import Probe, ProbeContext, ProbeResult
from .hardware import probe_gpu_health, probe_infiniband, probe_kernel, probe_limits, probe_pcie
from .launch import probe_launch
from .network import probe_network
from .shm import probe_shm
from .switches import probe_switches
from .versions import probe_versions


def probe_topology(ctx: ProbeContext) -> ProbeResult:
    """distdoctor.probes.topology.probe_topology, imported only when the topology probe runs."""
    from .topology import probe_topology as probe

    return probe(ctx)


PROBES: dict[str, Probe] = {
    "versions": probe_versions,
    "shm": probe_shm,
    "launch": probe_launch,
    "switches": probe_switches,
    "network": probe_network,
    "topology": probe_topology,
    # hardware and fabric (issue 26): the only ones that read a recorded node (check --root)
    "kernel": probe_kernel,
    "gpu_health": probe_gpu_health,
    "pcie": probe_pcie,
    "infiniband": probe_infiniband,
    "limits": probe_limits,
}
