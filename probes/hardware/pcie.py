"""PCIe probe: ACS redirect on the bridges above the GPUs (`lspci -vvv`; sos's lspci_-nnvv),
GPU links trained below their width, and the IOMMU mode (/proc/cmdline, /sys/kernel/iommu_groups).

Facts only; checks.toml says which matter. ACS request/completion redirect on a bridge that has
no GPU below it (an NVSwitch management port, a NIC's own port) is listed apart: it sends no
GPU peer traffic through the root complex."""
from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any

from ..base import OK, ProbeContext, ProbeResult, unavailable
from .lspci import domain_bus, parse
from .source import first_text, is_recorded

NAME = "pcie"
LSPCI_FILES = ("sos_commands/pci/lspci_-nnvv", "sos_commands/pci/lspci_-vvv", "sos_commands/pci/lspci_-vvnn")
REDIRECT = ("ReqRedir", "CmpltRedir")


def iommu(ctx: ProbeContext) -> dict[str, Any]:
    """The IOMMU mode from the kernel command line, and how many IOMMU groups the kernel made."""
    cmdline = (ctx.read_text("/proc/cmdline") or "").split()
    params = dict(p.split("=", 1) if "=" in p else (p, "") for p in cmdline)
    groups_dir = ctx.path("/sys/kernel/iommu_groups")
    try:
        groups: int | None = len(os.listdir(groups_dir))
    except OSError:
        groups = None
    if params.get("iommu") == "pt" or params.get("iommu.passthrough") == "1":
        mode = "passthrough"
    elif params.get("intel_iommu") == "off" or params.get("amd_iommu") == "off" or params.get("iommu") == "off":
        mode = "off"
    elif "on" in params.get("intel_iommu", "").split(",") or params.get("amd_iommu") == "on" \
            or params.get("iommu.passthrough") == "0" or params.get("iommu") == "force":
        mode = "translated"
    else:
        mode = "default" if cmdline else "unknown"
    on = [p for p in cmdline if p.split("=")[0] in ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough")]
    return {"iommu_mode": mode, "iommu_params": on, "iommu_groups": groups,
            "cmdline_read": bool(cmdline)}


def lspci_facts(text: str) -> dict[str, Any]:
    devices = parse(text)
    gpus = [d for d in devices if d["is_gpu"]]
    gpu_buses = [domain_bus(g["slot"]) for g in gpus]
    on_gpu_path, elsewhere = [], []
    for dev in devices:
        acs = dev.get("acs_ctl") or {}
        if not any(acs.get(flag) for flag in REDIRECT):
            continue
        flags = " ".join(f"{k}+" for k in REDIRECT if acs.get(k))
        label = f"{dev['slot']} ({dev['desc'][:60]}): {flags}"
        domain = dev["slot"].split(":")[0]
        below = [b for d, b in gpu_buses if d == domain and "secondary" in dev
                 and dev["secondary"] <= b <= dev["subordinate"]]
        (on_gpu_path if below else elsewhere).append(label)
    width_down = []
    for gpu in gpus:
        cap, sta = gpu.get("link_cap"), gpu.get("link_sta")
        if cap and sta and sta["width"] < cap["width"]:
            width_down.append(f"{gpu['slot']}: x{sta['width']} of x{cap['width']}")
    nics = [d["slot"] for d in devices if d["class"].startswith(("Infiniband controller", "Ethernet controller"))
            and ("Mellanox" in d["desc"] or "[15b3:" in d["desc"])]
    return {"devices": len(devices), "gpus": [g["slot"] for g in gpus], "rdma_nics": nics,
            "acs_redirect_gpu_path": on_gpu_path, "acs_redirect_elsewhere": elsewhere,
            "gpu_link_width_degraded": width_down}


def numa(ctx: ProbeContext, slots: list[str]) -> dict[str, int]:
    """Each device's NUMA node from /sys/bus/pci/devices/<slot>/numa_node (-1: none reported)."""
    out = {}
    for slot in slots:
        text = ctx.read_text(f"/sys/bus/pci/devices/{slot}/numa_node")
        if text is not None and text.strip().lstrip("-").isdigit():
            out[slot] = int(text.strip())
    return out


def probe_pcie(ctx: ProbeContext) -> ProbeResult:
    """ACS bits above the GPUs, GPU link widths, and the IOMMU mode."""
    found, reasons = first_text(ctx, LSPCI_FILES, (("lspci", "-vvv"),))
    facts: dict[str, Any] = iommu(ctx)
    if found is None and not facts["cmdline_read"] and is_recorded(ctx):
        return unavailable(NAME, "not in this recorded node (no sos_commands/pci/lspci_-nnvv, no proc/cmdline)")
    if found is None and not facts["cmdline_read"]:
        return unavailable(NAME, "no lspci output and no /proc/cmdline: " + "; ".join(reasons))
    if found is not None:
        facts.update(lspci_facts(found.text))
        facts["source"] = found.origin
        # without root, lspci prints no capabilities: the ACS lines are missing, not clear
        facts["capabilities_read"] = "LnkCap" in found.text
        # NUMA placement of GPUs and RDMA NICs (facts for the topology view; sos keeps none)
        facts["gpu_numa"] = numa(ctx, facts["gpus"])
        facts["nic_numa"] = numa(ctx, facts["rdma_nics"])
    else:
        facts["lspci_reason"] = "no lspci output recorded" if is_recorded(ctx) else "; ".join(reasons)
    return ProbeResult(NAME, OK, MappingProxyType(facts))
