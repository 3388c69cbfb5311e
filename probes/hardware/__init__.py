"""Hardware and fabric probes: kernel log (Xid, AER), GPU health, PCIe/IOMMU, InfiniBand, limits."""
from __future__ import annotations

from .gpu import probe_gpu_health
from .infiniband import probe_infiniband
from .kernel import probe_kernel
from .limits import probe_limits
from .pcie import probe_pcie

HARDWARE_PROBES = ("kernel", "gpu_health", "pcie", "infiniband", "limits")

__all__ = ["HARDWARE_PROBES", "probe_gpu_health", "probe_infiniband", "probe_kernel",
           "probe_limits", "probe_pcie"]
