"""NCCL topology XML (NCCL_TOPO_DUMP_FILE output or a hand-written NCCL_TOPO_FILE), read tag by tag
with regular expressions so that a file cut off anywhere still yields what came before the cut.

Not an XML parser on purpose: entities are never expanded (a DOCTYPE is noted and ignored),
nesting past MAX_DEPTH and devices past MAX_DEVICES are skipped with a note, so time and memory
stay linear in the input whatever it holds."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from distdoctor.knowledge.i18n import t

from .limits import BUS_ID, MAX_DEV
from .model import Gpu, Nic, Topology, cpus_from_mask, norm_bus_id, short_bus

# One optional whitespace run before '>' unless a '/' splits it: two adjacent \s* runs would try
# every split of a long blank stretch in a cut-off tag (quadratic).
TAG = re.compile(r"<\s*(/?)\s*([A-Za-z_][\w.-]*)((?:\s+[\w:.-]+\s*=\s*\"[^\"]*\")*)\s*(?:(/)\s*)?>")
ATTR = re.compile(r"([\w:.-]+)\s*=\s*\"([^\"]*)\"")
NVSWITCH_CLASS = "0x0680"
NIC_CLASSES = ("0x0200", "0x0207", "0x0280")
# Real dumps nest 6-10 deep (system/cpu/pci switches/pci/gpu/nvlink) and hold at most a few dozen
# devices; past these bounds an input is damaged or hostile, and what is skipped is said.
MAX_DEPTH = 64
MAX_DEVICES = 128  # GPUs, NICs and switches, each (a node has at most a few dozen)
MAX_ELEMENTS = 50_000  # a dump holds hundreds of elements; past this the rest is not read
DOCTYPE = re.compile(r"<!DOCTYPE|<!ENTITY", re.I)


def is_gpu_class(cls: str, vendor: str) -> bool:
    """3D controllers (0x0302) and VGA (0x0300) made by NVIDIA (or with no vendor given)."""
    cls = cls.lower()
    if cls.startswith("0x0302"):
        return vendor.lower() in ("", "0x10de")
    return cls.startswith("0x0300") and vendor.lower() == "0x10de"


@dataclass
class Frame:
    tag: str
    key: str = ""          # graph node this element stands for
    bus: str = ""
    numa: int | None = None


@dataclass
class XmlScan:
    """Everything gathered in one pass over the tags, before GPU keys are decided."""

    skipped: dict[str, int] = field(default_factory=dict)    # reason -> how many elements
    gpu_bus: dict[str, dict] = field(default_factory=dict)   # bus -> {parent, numa, dev, rank, sm}
    nvlinks: list[tuple[str, str, int, str]] = field(default_factory=list)  # src bus, target, n, tclass
    nets: list[tuple[str, str, str, int | None]] = field(default_factory=list)  # name, bus, parent, numa
    nic_bus: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    saw_gpu_element: bool = False
    closed: bool = False


def parse_xml(text: str) -> Topology:
    """NCCL XML -> Topology. GPU-GPU and GPU-NIC codes come from the PCIe tree (PIX, PXB, PHB,
    SYS as NCCL names them: NCCL has no NODE) and NVLink elements (NV#)."""
    topo = Topology(sources=["nccl-xml"])
    scan = XmlScan()
    stack: list[Frame] = []
    deeper = 0  # open elements past MAX_DEPTH, not pushed: their closing tags only count down
    if DOCTYPE.search(text[:1 << 16]):
        topo.note(t("The XML declares a DOCTYPE or entities: ignored, never expanded."))
    stopped = False
    for n, m in enumerate(TAG.finditer(text)):
        if n >= MAX_ELEMENTS:
            stopped = True
            topo.note(t("Read only the first {most} XML elements (ending at byte {byte} of {size}): a real topology dump "
                        "holds a few hundred.", most=MAX_ELEMENTS, byte=m.start(), size=len(text)))
            break
        closing, tag, attr_text, self_closing = m.group(1), m.group(2).lower(), m.group(3), m.group(4)
        if closing:
            if deeper:
                deeper -= 1
                continue
            if any(f.tag == tag for f in stack):  # a stray closing tag must not empty the stack
                while stack and stack.pop().tag != tag:
                    pass
            scan.closed = scan.closed or tag == "system"
            continue
        if len(stack) >= MAX_DEPTH:
            skip(scan, f"<{tag[:20]}> nested deeper than {MAX_DEPTH} levels")
            deeper += not self_closing
            continue
        attrs = {k.lower(): v for k, v in ATTR.findall(attr_text)}
        frame = open_element(topo, scan, stack, tag, attrs)
        if frame is not None and not self_closing:
            stack.append(frame)
    finish(topo, scan)
    if not scan.closed and topo.gpus and not stopped:
        topo.note(t("The XML ends before </system> (cut short): read what is there."))
    for reason, count in list(scan.skipped.items())[:4]:
        topo.note(t("Skipped {count} element(s): {reason}.", count=count, reason=reason))
    if len(scan.skipped) > 4:
        topo.note(t("Skipped elements for {n} more reason(s).", n=len(scan.skipped) - 4))
    return topo


def skip(scan: XmlScan, reason: str) -> None:
    scan.skipped[reason] = scan.skipped.get(reason, 0) + 1


def full(scan: XmlScan, table: dict | list, what: str) -> bool:
    """Whether a device table is at its bound (the element is then skipped, with a note)."""
    if len(table) < MAX_DEVICES:
        return False
    skip(scan, f"{what} past the first {MAX_DEVICES}")
    return True


def parent_key(stack: list[Frame]) -> str:
    for frame in reversed(stack):
        if frame.key:
            return frame.key
    return ""


def current_numa(stack: list[Frame]) -> int | None:
    for frame in reversed(stack):
        if frame.numa is not None:
            return frame.numa
    return None


def open_element(topo: Topology, scan: XmlScan, stack: list[Frame], tag: str,
                 attrs: dict[str, str]) -> Frame | None:
    if tag == "cpu":
        raw = attrs.get("numaid", "")
        digits = raw[1:] if raw.startswith("-") else raw
        numa = int(raw) if digits.isascii() and digits.isdigit() and len(digits) <= 4 else len(topo.numa)
        if numa not in topo.numa and full(scan, topo.numa, "<cpu> elements"):
            return Frame(tag)
        topo.numa[numa] = cpus_from_mask(attrs.get("affinity", ""))
        topo.cpu_vendor = topo.cpu_vendor or attrs.get("vendor", "")
        return Frame(tag, key=f"NUMA{numa}", numa=numa)
    if tag == "pci":
        bus = norm_bus_id(attrs.get("busid", ""))
        cls, vendor = attrs.get("class", ""), attrs.get("vendor", "")
        parent = parent_key(stack)
        if not BUS_ID.match(bus):
            # '0x', '0x03:', 'dev...': not a PCI address; its children still hang off the parent
            skip(scan, f"<pci> with a malformed busid ({bus[:24]!r})")
            return Frame(tag)
        if is_gpu_class(cls, vendor):
            if bus not in scan.gpu_bus and full(scan, scan.gpu_bus, "GPUs"):
                return Frame(tag)
            scan.gpu_bus.setdefault(bus, {"parent": parent, "numa": current_numa(stack)})
            return Frame(tag, key=f"BUS@{bus}", bus=bus)
        if cls.lower().startswith(NIC_CLASSES):
            if bus not in scan.nic_bus and full(scan, scan.nic_bus, "NICs"):
                return Frame(tag)
            scan.nic_bus[bus] = (parent, current_numa(stack))
            return Frame(tag, key=f"BUS@{bus}", bus=bus)
        key = f"PCI@{short_bus(bus)}"
        if key not in topo.switches and full(scan, topo.switches, "PCI switches"):
            return Frame(tag)
        topo.switches[key] = "nvswitch" if cls.lower().startswith(NVSWITCH_CLASS) else "pcie"
        if parent:
            topo.parents[key] = parent
        return Frame(tag, key=key, bus=bus)
    if tag == "gpu":
        scan.saw_gpu_element = True
        bus = next((f.bus for f in reversed(stack) if f.bus), "")
        if not bus:  # under a <pci> whose busid was malformed (skipped): no key to file it under
            skip(scan, "<gpu> outside a <pci> with a valid busid")
            return Frame(tag)
        if bus not in scan.gpu_bus and full(scan, scan.gpu_bus, "GPUs"):
            return Frame(tag)
        info = scan.gpu_bus.setdefault(bus, {"parent": parent_key(stack), "numa": current_numa(stack)})
        for name in ("dev", "rank", "sm"):
            value = attrs.get(name, "")
            if value.isascii() and value.isdigit() and len(value) <= 6:
                if name == "dev" and int(value) > MAX_DEV:
                    skip(scan, f"<gpu dev> above {MAX_DEV} (not a device ordinal)")
                    continue
                info[name] = int(value)
            elif value:
                skip(scan, f"<gpu {name}> that is not a small number ({value[:16]!r})")
        return Frame(tag, bus=bus)
    if tag == "nvlink":
        src = next((f.bus for f in reversed(stack) if f.tag == "gpu"), "")
        if full(scan, scan.nvlinks, "NVLink elements"):
            return None
        raw_count = attrs.get("count", "")
        count = int(raw_count) if raw_count.isascii() and raw_count.isdigit() and len(raw_count) <= 3 else 1
        scan.nvlinks.append((src, norm_bus_id(attrs.get("target", "")), count,
                             attrs.get("tclass", "").lower()))
        return None
    if tag == "net":
        if full(scan, scan.nets, "<net> elements"):
            return None
        bus = next((f.bus for f in reversed(stack) if f.bus), "")
        parent = parent_key(stack)
        scan.nets.append((attrs.get("name") or f"net{len(scan.nets)}", bus, parent, current_numa(stack)))
        return None
    return Frame(tag)


def finish(topo: Topology, scan: XmlScan) -> None:
    """Name the GPUs, then derive every GPU-GPU and GPU-NIC code from the tree and NVLinks."""
    have_dev = any("dev" in info for info in scan.gpu_bus.values())
    numbered = sorted(scan.gpu_bus)
    keys: dict[str, str] = {}
    for bus, info in scan.gpu_bus.items():
        if "dev" in info:
            key, index = f"GPU{info['dev']}", info["dev"]
        elif not have_dev:
            # nvidia-smi and NVML number GPUs in PCI bus order: the file names no device numbers.
            index = numbered.index(bus)
            key = f"GPU{index}"
        else:
            key, index = f"GPU@{short_bus(bus)}", None
        keys[bus] = key
        name = f"sm{info['sm']}" if "sm" in info else ""
        numa = info.get("numa")
        topo.add_gpu(Gpu(key, index=index, bus_id=bus, numa=numa, rank=info.get("rank"), name=name,
                         cpus=topo.numa.get(numa, "") if numa is not None else ""))
        topo.parents[key] = info["parent"]
    if scan.gpu_bus and not have_dev:
        topo.note(t("The file names no device numbers: GPUs are numbered in PCI bus order, as nvidia-smi does."))
    add_nics(topo, scan)
    add_nvlinks(topo, scan, keys)
    topo.nvlink_visible = scan.saw_gpu_element and not any(
        src == target for src, target, _, _ in scan.nvlinks)
    if not scan.saw_gpu_element and scan.gpu_bus:
        topo.note(t("No <gpu> elements (a hand-written NCCL_TOPO_FILE): NVLink is not described here; "
                  "NCCL finds it at run time through NVML."))
    tree_links(topo)


def add_nics(topo: Topology, scan: XmlScan) -> None:
    named_buses = set()
    for name, bus, parent, numa in scan.nets:
        if bus in scan.nic_bus:
            parent, numa = scan.nic_bus[bus]
            named_buses.add(bus)
        topo.add_nic(Nic(name, name=name, bus_id=bus, numa=numa, kind="net"))
        topo.parents[name] = parent
    for bus, (parent, numa) in scan.nic_bus.items():
        if bus not in named_buses:  # topo files often list the NIC's PCI function only
            key = f"NIC@{short_bus(bus)}"
            topo.add_nic(Nic(key, name=short_bus(bus), bus_id=bus, numa=numa, kind="pci"))
            topo.parents[key] = parent


def add_nvlinks(topo: Topology, scan: XmlScan, keys: dict[str, str]) -> None:
    peers: list[str] = []
    for src, target, count, tclass in scan.nvlinks:
        if src not in keys:
            continue
        if target == src:
            topo.note(t("{gpu} lists an NVLink to itself (count {count}): a placeholder, ignored; this file cannot tell "
                        "whether NVLink exists.", gpu=keys[src], count=count))
            continue
        if tclass.startswith(NVSWITCH_CLASS):
            peer = f"NVS@{short_bus(target)}"
            topo.switches[peer] = "nvswitch"
        elif tclass.startswith(("0x0302", "0x0300")) or target in keys:
            if target not in keys:
                keys[target] = f"GPU@{short_bus(target)}"
                topo.add_gpu(Gpu(keys[target], bus_id=target))
                peers.append(keys[target])
            peer = keys[target]
        else:
            topo.note(t("{gpu} has an NVLink to {target} (class {cls}), not a GPU or NVSwitch.", gpu=keys[src],
                        target=target, cls=tclass or "?"))
            continue
        topo.nvlinks.append((keys[src], peer, count))
    if peers:
        topo.note(t("Known only as NVLink peers (outside this dump's PCI tree): {peers}.", peers=", ".join(peers)))


def ancestors(topo: Topology, key: str) -> list[str]:
    chain, seen = [], {key}
    while key in topo.parents and topo.parents[key] and topo.parents[key] not in seen:
        key = topo.parents[key]
        seen.add(key)
        chain.append(key)
    return chain


def pci_code(topo: Topology, a: str, b: str) -> str | None:
    """PIX (one switch), PXB (switches, no host bridge), PHB (same CPU), SYS (across CPUs)."""
    ca, cb = ancestors(topo, a), ancestors(topo, b)
    if not ca or not cb:
        return None
    numa_a = next((k for k in ca if k.startswith("NUMA")), None)
    numa_b = next((k for k in cb if k.startswith("NUMA")), None)
    if numa_a and numa_b and numa_a != numa_b:
        return "SYS"
    common = next((k for k in ca if k in cb), None)
    if common is None:
        return None
    if common.startswith("NUMA"):
        return "PHB"
    return "PIX" if ca[0] == common and cb[0] == common else "PXB"


def tree_links(topo: Topology) -> None:
    gpus = [k for k in topo.gpus if k in topo.parents]
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            code = pci_code(topo, a, b)
            if code:  # codes a source stated (NCCL's own path lines) win over the tree's
                topo.links.setdefault(topo.pair(a, b), code)
        for nic in topo.nics:
            code = pci_code(topo, a, nic)
            if code:
                topo.links.setdefault(topo.pair(a, nic), code)
