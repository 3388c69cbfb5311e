"""The topology NCCL prints at INFO level: the `=== System ===` tree and the per-GPU path lines."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .model import bus_from_int, short_bus

SYSTEM = re.compile(r"=== System : max(?:Bw|Width) ([\d.]+) total(?:Bw|Width) ([\d.]+) ===")
NODE = r"(CPU|PCI|GPU|NIC|NET|NVS|C2C)/([0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?)"
TREE = re.compile(rf"^(?P<indent> *)(?:\+ (?P<ltype>[A-Z0-9]+)\[(?P<bw>[\d.]+)\] - )?{NODE}"
                  r"(?: \((?P<extra>[^)]*)\))?\s*$")
PATHS = re.compile(rf"^\s*(GPU|NET|NIC)/([0-9A-Fa-f-]+) :((?:\s*{NODE} \(\d+/[\d.]+/\w+\))+)\s*$")
PATH_ITEM = re.compile(rf"{NODE} \((\d+)/([\d.]+)/(\w+)\)")
# Above any PCIe link NCCL models (Gen5 x16 is 48, Gen6 would be 96): only NVLink adds up to more.
NVLINK_TOTAL_BW = 100.0


def local_id(raw: str) -> str:
    """'0-1b000' (system-local) or '1b000' -> '1b000'."""
    return raw.split("-")[-1]


def node_bus(raw: str) -> str:
    return bus_from_int(int(local_id(raw), 16))


@dataclass
class DumpGpu:
    bus: str
    rank: int | None
    parent: str


@dataclass
class Dump:
    """What the printed topology showed, with node keys shared with the rest of the parser."""

    gpus: list[DumpGpu] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)   # child key -> parent key
    switches: dict[str, str] = field(default_factory=dict)
    nvlinks: list[tuple[str, str]] = field(default_factory=list)  # gpu bus, peer key or "GPU@bus"
    nic_nets: dict[str, list[str]] = field(default_factory=dict)  # NIC key -> NET ids
    paths: list[tuple[str, str, str]] = field(default_factory=list)  # bus a, bus b, NCCL type
    gpu_net: list[tuple[str, str, str]] = field(default_factory=list)  # gpu bus, NET/n, type
    total_bw: float | None = None
    numa: set[int] = field(default_factory=set)


def node_key(ntype: str, raw: str) -> str:
    if ntype == "CPU":
        return f"NUMA{int(local_id(raw), 16)}"
    if ntype in ("PCI", "NIC", "GPU"):
        return f"{ntype}@{short_bus(node_bus(raw))}"
    return f"{ntype}/{local_id(raw)}"


class DumpReader:
    """Fed the text after `NCCL INFO ` line by line; keeps the tree position by indentation."""

    def __init__(self) -> None:
        self.dump = Dump()
        self.stack: list[tuple[int, str, str]] = []  # (column, key, ntype)
        self.key_bus: dict[str, str] = {}

    def feed(self, rest: str) -> bool:
        m = SYSTEM.search(rest)
        if m:
            self.dump.total_bw = max(self.dump.total_bw or 0.0, float(m.group(2)))
            self.stack = []
            return True
        m = PATHS.match(rest)
        if m:
            self.paths(m)
            return True
        m = TREE.match(rest)
        if not m or (m.group("ltype") is None and m.group(4) != "CPU"):
            return False
        self.tree(m)
        return True

    def tree(self, m: re.Match) -> None:
        ntype, raw = m.group(4), m.group(5)  # groups 1-3: indent, link type, bandwidth
        key = node_key(ntype, raw)
        if ntype == "GPU":
            self.key_bus[key] = node_bus(raw)
        if m.group("ltype") is None:  # a root: CPU/0 (1/2/-1)
            self.dump.numa.add(int(local_id(raw), 16))
            self.stack = [(-1, key, ntype)]
            return
        col = len(m.group("indent"))
        while self.stack and self.stack[-1][0] >= col:
            self.stack.pop()
        parent, ptype = (self.stack[-1][1], self.stack[-1][2]) if self.stack else ("", "")
        ltype = m.group("ltype")
        self.stack.append((col, key, ntype))
        if ltype == "PCI" and parent:
            self.dump.parents[key] = parent
            if ntype == "PCI":
                self.dump.switches[key] = "pcie"
            elif ntype == "GPU":
                rank = m.group("extra") or ""
                self.dump.gpus.append(DumpGpu(node_bus(raw), int(rank) if rank.isdigit() else None, parent))
        elif ltype == "NVL" and ptype == "GPU":
            if ntype == "NVS":
                self.dump.switches[key] = "nvswitch"
            peer = f"GPU@{node_bus(raw)}" if ntype == "GPU" else key
            self.dump.nvlinks.append((self.key_bus.get(parent, ""), peer))
        elif ltype == "NET" and ptype == "NIC":
            self.dump.nic_nets.setdefault(parent, []).append(f"NET/{local_id(raw)}")

    def paths(self, m: re.Match) -> None:
        src_type, src = m.group(1), m.group(2)
        if src_type != "GPU":
            return
        a = node_bus(src)
        for item in PATH_ITEM.finditer(m.group(3)):
            ntype, raw, ptype = item.group(1), item.group(2), item.group(5)
            if ntype == "GPU" and node_bus(raw) != a:
                self.dump.paths.append((a, node_bus(raw), ptype))
            elif ntype == "NET":
                self.dump.gpu_net.append((a, f"NET/{local_id(raw)}", ptype))

    @property
    def nvlink_from_bw(self) -> bool:
        return (self.dump.total_bw or 0.0) > NVLINK_TOTAL_BW
