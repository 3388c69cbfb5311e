"""InfiniBand / RoCE probe: each port's state, physical state, rate and link layer, its error
counters (sampled twice, live, to give what grew meanwhile), RoCE v2 GIDs, and whether
GPUDirect RDMA's nvidia-peermem is loaded.

Live it reads /sys/class/infiniband; a sos report does not copy that tree, so a recorded node
is read from sos_commands/infiniband/ibstat and perfquery_-C_<dev>_-P_<port>."""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..base import OK, ProbeContext, ProbeResult, unavailable
from ..offline import OfflineRunner
from .source import glob_files, read_file

NAME = "infiniband"
SYS = "sys/class/infiniband"
IBSTAT = "sos_commands/infiniband/ibstat"
# sysfs counter name -> perfquery's name
COUNTERS = {"symbol_error": "SymbolErrorCounter", "link_error_recovery": "LinkErrorRecoveryCounter",
            "link_downed": "LinkDownedCounter", "port_rcv_errors": "PortRcvErrors",
            "local_link_integrity_errors": "LocalLinkIntegrityErrors",
            "excessive_buffer_overrun_errors": "ExcessiveBufferOverrunErrors",
            "port_xmit_discards": "PortXmitDiscards"}
SAMPLE_GAP_S = 1.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _after_colon(text: str | None) -> str | None:
    """"4: ACTIVE" -> "ACTIVE"."""
    return None if text is None else text.split(":", 1)[-1].strip()


def _counters(port: Path) -> dict[str, int]:
    out = {}
    for name in COUNTERS:
        text = _read(port / "counters" / name)
        if text is not None and text.isdigit():
            out[name] = int(text)
    return out


def _sysfs_ports(root: Path) -> list[dict[str, Any]]:
    ports = []
    base = root / SYS
    for dev in sorted(base.iterdir()) if base.is_dir() else ():
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else ():
            gids = []
            types = port / "gid_attrs" / "types"
            for index in range(0, 16):
                gid, kind = _read(port / "gids" / str(index)), _read(types / str(index))
                if gid and kind and gid.strip("0:"):
                    gids.append({"index": index, "gid": gid, "type": kind})
            ports.append({"device": dev.name, "port": int(port.name) if port.name.isdigit() else port.name,
                          "state": _after_colon(_read(port / "state")),
                          "phys_state": _after_colon(_read(port / "phys_state")),
                          "rate": _read(port / "rate"), "link_layer": _read(port / "link_layer"),
                          "counters": _counters(port), "gids": gids, "_path": port})
    return ports


_CA = re.compile(r"^CA '([^']+)'")
_PORT = re.compile(r"^\s+Port (\d+):")
_FIELD = re.compile(r"^\s+(State|Physical state|Rate|Link layer):\s*(.*)$")


def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """`ibstat`: one record per CA port."""
    ports: list[dict[str, Any]] = []
    device, current = None, None
    for line in text.splitlines():
        if (m := _CA.match(line)):
            device, current = m[1], None
        elif device and (m := _PORT.match(line)):
            current = {"device": device, "port": int(m[1]), "state": None, "phys_state": None,
                       "rate": None, "link_layer": None, "counters": {}, "gids": []}
            ports.append(current)
        elif current is not None and (m := _FIELD.match(line)):
            key = {"State": "state", "Physical state": "phys_state", "Rate": "rate",
                   "Link layer": "link_layer"}[m[1]]
            current[key] = m[2].strip()
    return ports


def parse_perfquery(text: str) -> dict[str, int]:
    """`perfquery` counters ("SymbolErrorCounter:.......0") under their sysfs names."""
    names = {v: k for k, v in COUNTERS.items()}
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\.*\s*(\d+)\s*$", line.strip())
        if m and m[1] in names:
            out[names[m[1]]] = int(m[2])
    return out


def peermem(ctx: ProbeContext) -> bool | None:
    """Whether nvidia-peermem (GPUDirect RDMA) is loaded: /sys/module, /proc/modules or sos's lsmod."""
    if ctx.path("/sys/module/nvidia_peermem").is_dir():
        return True
    for source in ("proc/modules", "sos_commands/kernel/lsmod"):
        found = read_file(ctx, source)
        if found is not None:
            return bool(re.search(r"^nvidia_peermem\b", found.text, re.M))
    return None


def _nvidia_present(ctx: ProbeContext) -> bool:
    if ctx.path("/proc/driver/nvidia").exists():
        return True
    found = read_file(ctx, "sos_commands/kernel/lsmod") or read_file(ctx, "proc/modules")
    return bool(found and re.search(r"^nvidia\b", found.text, re.M))


def facts_of(ports: list[dict[str, Any]], rising: dict[str, dict[str, int]]) -> dict[str, Any]:
    def name(p: dict[str, Any]) -> str:
        return f"{p['device']}/{p['port']}"

    ib = [p for p in ports if (p.get("link_layer") or "InfiniBand").lower() == "infiniband"]
    # An Ethernet (RoCE) port that is down is often just an unused NIC; an IB port that is down
    # or still polling is a cable, switch or subnet-manager problem
    not_active = [f"{name(p)}: {p.get('state')} ({p.get('phys_state')})" for p in ib
                  if p.get("state") and p["state"].upper() not in ("ACTIVE", "4: ACTIVE")]
    nonzero = [f"{name(p)}: " + ", ".join(f"{k}={v}" for k, v in sorted(p["counters"].items()) if v)
               for p in ports if any(p.get("counters", {}).values())]
    roce_v2 = [f"{name(p)}: GID {g['index']} {g['gid']}" for p in ports for g in p.get("gids", ())
               if "v2" in g["type"].lower()]
    # NCCL_IB_GID_INDEX for RoCE: the first RoCE v2 GID that carries an IPv4 address
    v4 = sorted({g["index"] for p in ports for g in p.get("gids", ())
                 if "v2" in g["type"].lower() and g["gid"].startswith("0000:0000:0000:0000:0000:ffff:")})
    rates = sorted({p["rate"] for p in ib if p.get("rate") and p.get("state", "").upper() == "ACTIVE"})
    return {
        "ports": [{k: v for k, v in p.items() if not k.startswith("_")} for p in ports],
        "port_count": len(ports),
        "ib_ports_not_active": not_active,
        "error_counters_nonzero": nonzero,
        "error_counters_rising": [f"{port}: " + ", ".join(f"{k} +{v}" for k, v in sorted(d.items()))
                                  for port, d in sorted(rising.items())],
        "active_rates": rates,
        "roce_v2_gids": roce_v2,
        "roce_v2_ipv4_gid_index": v4[0] if v4 else None,
    }


def probe_infiniband(ctx: ProbeContext, *, sleep: Callable[[float], None] = time.sleep) -> ProbeResult:
    """Ports, error counters (and their growth, live), RoCE v2 GIDs and nvidia-peermem."""
    ports = _sysfs_ports(ctx.root)
    rising: dict[str, dict[str, int]] = {}
    source = "/" + SYS
    sample_twice = bool(ports) and not isinstance(ctx.runner, OfflineRunner)  # a recording does not change
    if sample_twice:
        sleep(SAMPLE_GAP_S)
        for p in ports:
            again = _counters(p["_path"])
            grew = {k: again[k] - v for k, v in p["counters"].items() if again.get(k, v) > v}
            if grew:
                rising[f"{p['device']}/{p['port']}"] = grew
    if not ports:
        found = read_file(ctx, IBSTAT)
        if found is None:
            return unavailable(NAME, "no InfiniBand or RoCE device (no /sys/class/infiniband, no ibstat)")
        ports = parse_ibstat(found.text)
        source = found.origin
        for p in ports:
            counters = read_file(ctx, f"sos_commands/infiniband/perfquery_-C_{p['device']}_-P_{p['port']}")
            if counters is not None:
                p["counters"] = parse_perfquery(counters.text)
        if not ports:
            return unavailable(NAME, f"no port in {found.origin}")
    facts = facts_of(ports, rising)
    facts["source"] = source
    facts["counters_sampled_twice"] = sample_twice
    loaded = peermem(ctx)
    facts["nvidia_peermem"] = loaded
    # GPUDirect RDMA needs nvidia-peermem (or DMA-BUF with the open kernel modules) on GPU nodes
    facts["gpudirect_missing"] = bool(loaded is False and _nvidia_present(ctx))
    facts["sos_perfquery"] = glob_files(ctx, "sos_commands/infiniband/perfquery_*")[:8]
    return ProbeResult(NAME, OK, MappingProxyType(facts))
