"""The topology record every parser fills in: GPUs, NICs, links, P2P statuses and notes."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

# nvidia-smi topo -m distance order, closest first (GUIDE.md section 5). NCCL path names that
# nvidia-smi lacks are slotted where NCCL puts them; SOC is the old drivers' SYS.
LINK_ORDER = {"X": 0, "LOC": 0, "NVL": 1, "NVB": 2, "C2C": 2, "PIX": 3, "PXB": 4, "P2C": 4,
              "PXN": 5, "PHB": 6, "NODE": 7, "SYS": 8, "NET": 9, "DIS": 10}
NV_RE = re.compile(r"^NV(\d+)$")
LINK_CELL_RE = re.compile(r"^(X|NV\d+|NVL|NVB|C2C|PIX|PXB|PHB|NODE|SYS|SOC)$")

# nvmlGpuP2PStatus_t as `nvidia-smi topo -p2p` prints it.
P2P_CODES = ("OK", "CNS", "GNS", "TNS", "NS", "DR", "U")
P2P_MEANING = {"OK": "supported", "CNS": "chipset not supported", "GNS": "GPU not supported",
               "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey",
               "U": "unknown", "disabled": "disabled by NCCL (the driver said not OK)",
               "used": "seen in use in NCCL INFO lines", "unused": "NCCL used SHM/NET, not P2P",
               "unknown": "not shown by this input"}
P2P_GOOD = frozenset({"OK", "used"})
P2P_BAD = frozenset({"CNS", "GNS", "TNS", "NS", "DR", "disabled", "unused"})

# NVML topology common-ancestor levels -> topo -m codes (GUIDE.md section 5).
NVML_LEVEL_CODE = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def canon_link(code: str) -> str:
    """One spelling per link type: SOC is SYS, NV# keeps its count."""
    code = code.strip().upper()
    return "SYS" if code == "SOC" else code


def link_rank(code: str | None) -> int:
    """Distance rank of a link code (lower is closer); unknown codes sort last."""
    if not code:
        return 99
    if NV_RE.match(code):
        return LINK_ORDER["NVL"]
    return LINK_ORDER.get(code, 98)


def is_nvlink(code: str | None) -> bool:
    return bool(code) and (bool(NV_RE.match(code or "")) or code in ("NVL", "NVB"))


def p2p_level(code: str) -> str:
    """The NCCL_P2P_LEVEL value that covers a link code (NCCL has no NODE: it is PHB there)."""
    if is_nvlink(code):
        return "NVL"
    return {"NODE": "PHB", "C2C": "NVL", "P2C": "PXB", "PXN": "PXB"}.get(code, code)


@functools.lru_cache(maxsize=4096)
def natkey(text: str) -> tuple:
    """Sort GPU2 before GPU10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def norm_bus_id(raw: str) -> str:
    """'00000000:18:00.0', '0000:18:00.0', '18:00.0' -> '0000:18:00.0' (lower case)."""
    raw = raw.strip().lower()
    m = re.match(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$", raw)
    if not m:
        return raw
    dom = int(m.group(1) or "0", 16)
    return f"{dom:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def bus_from_int(value: int) -> str:
    """NCCL's int64 bus id (hex '1b000', '100000') -> '0000:1b:00.0'."""
    return f"{value >> 20:04x}:{(value >> 12) & 0xff:02x}:{(value >> 4) & 0xff:02x}.{value & 0xf:x}"


def short_bus(bus: str) -> str:
    """'0000:0a:00.0' -> '0a:00.0' (domain kept when it is not 0)."""
    return bus[5:] if bus.startswith("0000:") else bus


def cpus_from_mask(mask: str) -> str:
    """NCCL/sysfs hex mask '00000000,0000ffff,ffffffff' -> '0-47'."""
    digits = mask.replace(",", "")
    if len(digits) > MAX_MASK_DIGITS:  # past 16384 CPUs: damage, and int() of it is slow
        return ""
    try:
        value = int(digits, 16)
    except ValueError:
        return ""
    # one pass over the binary digits: shifting a big int per bit would be quadratic
    bits = [i for i, bit in enumerate(reversed(bin(value)[2:])) if bit == "1"]
    return cpu_ranges(bits)


MAX_MASK_DIGITS = 4096


def cpu_ranges(cpus: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    out: list[str] = []
    start = prev = None
    for cpu in sorted(set(cpus)):
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = cpu
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(out)


@dataclass
class Gpu:
    """One GPU as a source names it. `seen` is False when only implied (device ordinals are dense)."""

    key: str
    index: int | None = None
    name: str = ""
    bus_id: str = ""
    numa: int | None = None
    cpus: str = ""
    host: str = ""
    rank: int | None = None
    seen: bool = True


@dataclass
class Nic:
    key: str
    name: str = ""
    bus_id: str = ""
    numa: int | None = None
    kind: str = ""


@dataclass
class Topology:
    """What one input (or the live machine) showed. Pairs are keyed (a, b) in GPU/NIC order."""

    sources: list[str] = field(default_factory=list)
    gpus: dict[str, Gpu] = field(default_factory=dict)
    nics: dict[str, Nic] = field(default_factory=dict)
    links: dict[tuple[str, str], str] = field(default_factory=dict)
    # pair -> {"read": "OK", "write": "GNS", "nvlink": "NS", "nccl": "disabled", ...}
    p2p: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    transports: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # (gpu, peer, count): peer is a GPU key or an NVSwitch key ("NVS@...")
    nvlinks: list[tuple[str, str, int]] = field(default_factory=list)
    # PCIe tree: child key -> parent key ("PCI@..." switch, "NUMA0" CPU)
    parents: dict[str, str] = field(default_factory=dict)
    switches: dict[str, str] = field(default_factory=dict)  # key -> "pcie" | "nvswitch"
    numa: dict[int, str] = field(default_factory=dict)      # NUMA id -> CPU list
    cpu_vendor: str = ""
    nvlink_visible: bool = False      # the source would show NVLink if there were any
    nvlink_hint: str = ""             # evidence of NVLink without pair detail (NVLS, NVL in a dump)
    nics_total: int | None = None
    notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    raw_lines: int = 0

    def order(self, key: str) -> tuple:
        if key in self.gpus:
            gpu = self.gpus[key]
            return (0, gpu.host, gpu.index if gpu.index is not None else 1 << 20, natkey(key))
        return (1, "", 0, natkey(key))

    def pair(self, a: str, b: str) -> tuple[str, str]:
        return (a, b) if self.order(a) <= self.order(b) else (b, a)

    def add_gpu(self, gpu: Gpu) -> Gpu:
        """Insert or fill in the blanks of an existing GPU with the same key."""
        old = self.gpus.get(gpu.key)
        if old is None:
            self.gpus[gpu.key] = gpu
            return gpu
        for name in ("index", "name", "bus_id", "numa", "cpus", "host", "rank"):
            if getattr(old, name) in (None, "") and getattr(gpu, name) not in (None, ""):
                setattr(old, name, getattr(gpu, name))
        old.seen = old.seen or gpu.seen
        return old

    def add_nic(self, nic: Nic) -> Nic:
        old = self.nics.get(nic.key)
        if old is None:
            self.nics[nic.key] = nic
            return nic
        for name in ("name", "bus_id", "numa", "kind"):
            if getattr(old, name) in (None, "") and getattr(nic, name) not in (None, ""):
                setattr(old, name, getattr(nic, name))
        return old

    def set_link(self, a: str, b: str, code: str) -> None:
        if a != b and code and code != "X":
            self.links[self.pair(a, b)] = canon_link(code)

    def set_p2p(self, a: str, b: str, kind: str, status: str) -> None:
        if a != b:
            self.p2p.setdefault(self.pair(a, b), {})[kind] = status

    def add_transport(self, a: str, b: str, transport: str) -> None:
        if a != b:
            self.transports.setdefault(self.pair(a, b), set()).add(transport)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: Topology) -> None:
        """Fold another source about the same machine in (GPUs matched by key)."""
        for source in other.sources:
            if source not in self.sources:
                self.sources.append(source)
        for gpu in other.gpus.values():
            self.add_gpu(gpu)
        for nic in other.nics.values():
            self.add_nic(nic)
        for (a, b), code in other.links.items():
            self.links.setdefault(self.pair(a, b), code)
        for (a, b), statuses in other.p2p.items():
            self.p2p.setdefault(self.pair(a, b), {}).update(statuses)
        for (a, b), names in other.transports.items():
            self.transports.setdefault(self.pair(a, b), set()).update(names)
        self.nvlinks.extend(other.nvlinks)
        self.parents.update(other.parents)
        self.switches.update(other.switches)
        for node, cpus in other.numa.items():
            self.numa.setdefault(node, cpus)
        self.cpu_vendor = self.cpu_vendor or other.cpu_vendor
        self.nvlink_visible = self.nvlink_visible or other.nvlink_visible
        self.nvlink_hint = self.nvlink_hint or other.nvlink_hint
        self.nics_total = self.nics_total or other.nics_total
        for text in other.notes:
            self.note(text)
        self.evidence.extend(other.evidence)
        self.raw_lines += other.raw_lines
