"""NCCL INFO logs: GPUs and bus ids per rank, the transport each channel took, P2P-disabled lines,
NVLS, NICs, and the topology NCCL prints. What the lines show, not more: P2P in use is no proof."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from distdoctor.knowledge import nccl_grammar as grammar
from distdoctor.knowledge.i18n import t

from .limits import MAX_GPUS, sane, tests_bus
from .model import Gpu, Nic, Topology, bus_from_int, cpus_from_mask, short_bus
from .parse_nccl_dump import DumpReader
from .parse_xml import tree_links

# NCCL's line grammar (header, version banner, 'set by environment', nccl-tests' ranks) is
# knowledge/nccl_grammar.py's; the patterns below read what NCCL says after the header.
PREFIX = grammar.LINE_RX
CHANNEL = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : (\d+)\[([0-9a-fA-F]+)\] -> (\d+)\[([0-9a-fA-F]+)\]"
                     r"(?: \[(?:send|receive)\])? via (\S+)")
INIT = re.compile(r"rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)")
TESTS_RANK = grammar.TESTS_RANK_RX
DISABLED = re.compile(r"P2P is disabled between (NVLINK )?connected GPUs (\d+) and (\d+)")
NOT_ENABLED = re.compile(r"Could not enable P2P between dev (\d+)\(=([0-9a-f]+)\) and dev (\d+)\(=([0-9a-f]+)\)")
NIC_DISTANCE = re.compile(r"CUDA Dev (\d+)\[(\d+)\], (\w+ )?NIC distance :\s+(\w+)")
NET_IB = re.compile(r"NET/IB : Using ((?:\[\d+\][\w.\-]+:\d+/\w+\s*)+)")
NET_SOCKET = re.compile(r"NET/Socket : Using ((?:\[\d+\][\w.\-]+:\S*\s*)+)")
IB_DEV = re.compile(r"\[(\d+)\]([\w.\-]+):(\d+)/(\w+)")
SOCK_DEV = re.compile(r"\[(\d+)\]([\w.\-]+):")
AFFINITY = re.compile(r"Setting affinity for GPU (\d+) to ([0-9a-fA-F,]+)")
NVLS = re.compile(r"NVLS multicast support is (not )?available on dev (\d+)")
ENV_SET = grammar.ENV_SET_RX
# the switches that change what the transport lines prove (P2P off makes SHM no evidence)
SWITCHES = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_IB_DISABLE")
VERSION = grammar.VERSION_RX
DUMP_HINT = re.compile(r"^\s*(?:\+ |(?:CPU|GPU|NET|NIC)/)|=== System")


def parse_bracket(value: str) -> tuple[int | None, str]:
    """Channel brackets hold the device number (new NCCL) or the hex bus id (2.8 to 2.18)."""
    if len(value) <= 2 and value.isdigit():
        return int(value), ""
    return None, bus_from_int(int(value, 16))


@dataclass
class Rec:
    host: str
    dev: int | None = None
    bus: str = ""
    rank: int | None = None
    name: str = ""
    cpus: str = ""


@dataclass
class LogScan:
    recs: list[Rec] = field(default_factory=list)
    hints: dict[tuple[str, int], Rec] = field(default_factory=dict)  # the [dev] of each line's prefix
    transports: list[tuple[Rec, Rec, str]] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (host, text) already read
    disabled: list[tuple[Rec, Rec, bool]] = field(default_factory=list)
    nic_distance: list[tuple[Rec, str, str]] = field(default_factory=list)
    nics: dict[str, str] = field(default_factory=dict)  # name -> kind
    envs: dict[str, str] = field(default_factory=dict)
    nvls: bool = False
    net_transports: set[str] = field(default_factory=set)
    lines: int = 0
    skipped: list[str] = field(default_factory=list)  # damaged mentions left out, with the reason


def parse_nccl_log(text: str) -> Topology:
    topo = Topology(sources=["nccl-info"])
    scan = LogScan()
    dump = DumpReader()
    for line in text.splitlines():
        if " opCount " in line:  # COLL-subsystem lines (one per collective): never topology
            scan.lines += 1
            continue
        m = PREFIX.search(line) if "NCCL " in line else None
        if m is None:
            bare(topo, scan, line)
            continue
        scan.lines += 1
        host, rest = m.group("host").strip(":"), m.group("rest")
        hint = (host, int(m.group("dev")))
        if hint not in scan.hints:
            scan.hints[hint] = Rec(host, dev=hint[1])
        if (host, rest) in scan.seen:  # channels and ranks repeat the same lines: read each once
            continue
        scan.seen.add((host, rest))
        if DUMP_HINT.search(rest) and dump.feed(rest):
            continue
        info_line(topo, scan, host, rest)
    resolve(topo, scan, dump)
    topo.raw_lines = scan.lines
    return topo


def bare(topo: Topology, scan: LogScan, line: str) -> None:
    """Lines without the host:pid:tid prefix: nccl-tests' device list and the version banner."""
    m = TESTS_RANK.search(line) if "Rank" in line else None
    if m:
        bus = tests_bus(m.group("bus"))
        if bus is None:
            scan.skipped.append(f"nccl-tests device line with bus id {m.group('bus')!r} (not a bus id)")
            return
        scan.recs.append(Rec(m.group("host"), dev=int(m.group("dev")), bus=bus, rank=int(m.group("rank")),
                             name=m.group("gpu").strip()))
        scan.lines += 1
        return
    m = VERSION.search(line)
    if m:
        topo.note(f"NCCL {m.group('full')}.")


def info_line(topo: Topology, scan: LogScan, host: str, rest: str) -> None:
    m = CHANNEL.search(rest)
    if m:
        transport = m.group(5)
        if transport.startswith("NET"):
            scan.net_transports.add(transport.split("/")[1] + ("/GDRDMA" if "GDRDMA" in transport else ""))
            return  # the peer is on another node: not a pair of this machine's GPUs
        a, b = (rec_from_bracket(host, m.group(1), m.group(2)), rec_from_bracket(host, m.group(3), m.group(4)))
        scan.recs += [a, b]
        scan.transports.append((a, b, transport))
        return
    m = INIT.search(rest)
    if m:
        bus = bus_from_int(int(m.group(5), 16))
        scan.recs.append(Rec(host, dev=int(m.group(3)), bus=bus, rank=int(m.group(1))))
        return
    m = DISABLED.search(rest)
    if m:
        a, b = Rec(host, dev=int(m.group(2))), Rec(host, dev=int(m.group(3)))
        scan.recs += [a, b]
        scan.disabled.append((a, b, bool(m.group(1))))
        return
    m = NOT_ENABLED.search(rest)
    if m:
        a = Rec(host, dev=int(m.group(1)), bus=bus_from_int(int(m.group(2), 16)))
        b = Rec(host, dev=int(m.group(3)), bus=bus_from_int(int(m.group(4), 16)))
        scan.recs += [a, b]
        scan.disabled.append((a, b, False))
        return
    other_lines(topo, scan, host, rest)


def other_lines(topo: Topology, scan: LogScan, host: str, rest: str) -> None:
    m = NIC_DISTANCE.search(rest)
    if m:
        rec = Rec(host, dev=int(m.group(2)))
        scan.recs.append(rec)
        scan.nic_distance.append((rec, f"{(m.group(3) or '').strip() or 'NET'} NIC", m.group(4)))
        return
    m = NET_IB.search(rest)
    if m:
        for dev in IB_DEV.finditer(m.group(1)):
            scan.nics[dev.group(2)] = dev.group(4).lower()
        return
    m = NET_SOCKET.search(rest)
    if m:
        for dev in SOCK_DEV.finditer(m.group(1)):
            scan.nics.setdefault(dev.group(2), "socket")
        return
    m = AFFINITY.search(rest)
    if m:
        scan.recs.append(Rec(host, dev=int(m.group(1)), cpus=cpus_from_mask(m.group(2))))
        return
    m = NVLS.search(rest)
    if m and not m.group(1):
        scan.nvls = True
        return
    m = ENV_SET.search(rest)
    if m and m.group("name") in SWITCHES:
        scan.envs[m.group("name")] = m.group("value")
        return
    if "NET/IB : No device found" in rest:
        topo.note(t("NET/IB found no device: NCCL falls back to TCP sockets (NET/Socket) between nodes."))
    elif "Failed to open libibverbs" in rest:
        topo.note(t("libibverbs could not be loaded: no InfiniBand/RoCE, NCCL uses NET/Socket between nodes."))
    else:
        m = VERSION.search(rest)
        if m:
            topo.note(f"NCCL {m.group('full')}.")


def rec_from_bracket(host: str, rank: str, bracket: str) -> Rec:
    dev, bus = parse_bracket(bracket)
    return Rec(host, dev=dev, bus=bus, rank=int(rank))


class Identities:
    """Merges the many partial mentions of a GPU (device number, bus id, rank) into one."""

    def __init__(self) -> None:
        self.gpus: list[Rec] = []
        self.dropped = 0  # mentions of GPUs past MAX_GPUS

    def find(self, rec: Rec) -> Rec | None:
        for gpu in self.gpus:
            if gpu.host != rec.host:
                continue
            if rec.bus and gpu.bus == rec.bus:
                return gpu
            if rec.dev is not None and gpu.dev == rec.dev and not (rec.bus and gpu.bus and rec.bus != gpu.bus):
                return gpu
        if rec.dev is None and rec.rank is not None:
            # Known only by rank (and maybe a bus id no one else gave): the one GPU of that rank.
            same = [g for g in self.gpus if g.host == rec.host and g.rank == rec.rank
                    and not (rec.bus and g.bus)]
            return same[0] if len(same) == 1 else None
        return None

    def add(self, rec: Rec) -> Rec | None:
        old = self.find(rec)
        if old is None:
            if len(self.gpus) >= MAX_GPUS:
                self.dropped += 1
                return None
            self.gpus.append(Rec(rec.host, rec.dev, rec.bus, rec.rank, rec.name, rec.cpus))
            return self.gpus[-1]
        for name in ("dev", "bus", "rank", "name", "cpus"):
            if getattr(old, name) in (None, "") and getattr(rec, name) not in (None, ""):
                setattr(old, name, getattr(rec, name))
        return old


def resolve(topo: Topology, scan: LogScan, dump: DumpReader) -> None:
    sane(scan)
    ids = Identities()
    for rec in sorted(scan.recs, key=lambda r: r.dev is None):
        ids.add(rec)
    dump_host = next(iter(scan.hints.values())).host if scan.hints else ""
    for gpu in dump.dump.gpus:
        ids.add(Rec(dump_host, bus=gpu.bus, rank=gpu.rank))
    hosts_with_gpus = {g.host for g in ids.gpus}
    for rec in scan.hints.values():  # a line's [dev] proves the GPU exists only where nothing else names one
        if rec.host not in hosts_with_gpus:
            ids.add(rec)
    multi = len({g.host for g in ids.gpus}) > 1
    keys = build_gpus(topo, ids, multi)
    build_pairs(topo, scan, ids, keys)
    build_dump(topo, dump, ids, keys)
    for name, kind in scan.nics.items():
        topo.add_nic(Nic(name, name=name, kind=kind))
    for rec, nic, code in scan.nic_distance:
        topo.add_nic(Nic(nic, name=nic, kind="net"))
        gpu = ids.find(rec)
        if gpu is not None:
            topo.set_link(keys[id(gpu)], nic, code)
    summarise(topo, scan, dump)
    if ids.dropped:
        scan.skipped.append(f"{ids.dropped} mention(s) of GPUs past the first {MAX_GPUS}")
    if scan.skipped:
        shown = "; ".join(dict.fromkeys(scan.skipped[:3]))
        more = f" and {len(scan.skipped) - 3} more" if len(scan.skipped) > 3 else ""
        topo.note(t("Skipped {n} damaged or out-of-range entry: {shown}{more}.", n=1, shown=shown, more=more)
                   if len(scan.skipped) == 1 else
                   t("Skipped {n} damaged or out-of-range entries: {shown}{more}.", n=len(scan.skipped), shown=shown,
                     more=more))


def gpu_key(rec: Rec, multi: bool) -> str:
    base = f"GPU{rec.dev}" if rec.dev is not None else f"GPU@{short_bus(rec.bus)}"
    return f"{rec.host}/{base}" if multi and rec.host else base


def build_gpus(topo: Topology, ids: Identities, multi: bool) -> dict[int, str]:
    keys: dict[int, str] = {}
    for rec in sorted(ids.gpus, key=lambda r: (r.host, r.dev if r.dev is not None else 1 << 20)):
        keys[id(rec)] = gpu_key(rec, multi)
        topo.add_gpu(Gpu(keys[id(rec)], index=rec.dev, name=rec.name, bus_id=rec.bus, cpus=rec.cpus,
                         host=rec.host, rank=rec.rank))
    for host in sorted({r.host for r in ids.gpus}):
        devs = {r.dev for r in ids.gpus if r.host == host and r.dev is not None}
        # Device ordinals are dense: a line naming device 7 means devices 0-6 exist on that host too.
        implied = [d for d in range(max(devs) + 1) if d not in devs] if devs else []
        for dev in implied:
            rec = Rec(host, dev=dev)
            topo.add_gpu(Gpu(gpu_key(rec, multi), index=dev, host=host, seen=False))
        if implied:
            topo.note(t("GPUs {gpus}{on} are not in these lines but exist (device numbers are dense).",
                        gpus=", ".join(map(str, implied)), on=t(" on {host}", host=host) if multi else ""))
    return keys


def build_pairs(topo: Topology, scan: LogScan, ids: Identities, keys: dict[int, str]) -> None:
    p2p_off = scan.envs.get("NCCL_P2P_DISABLE") == "1" or scan.envs.get("NCCL_P2P_LEVEL") == "LOC"
    for a, b, transport in scan.transports:
        ga, gb = ids.find(a), ids.find(b)
        if ga is None or gb is None or ga is gb:
            continue
        ka, kb = keys[id(ga)], keys[id(gb)]
        topo.add_transport(ka, kb, transport)
        kind = transport.split("/")[0]
        if kind == "P2P":
            topo.set_p2p(ka, kb, "nccl", "used")
        elif kind == "SHM" and not p2p_off and topo.p2p.get(topo.pair(ka, kb), {}).get("nccl") != "used":
            topo.set_p2p(ka, kb, "nccl", "unused")
    for a, b, nvlink in scan.disabled:
        ga, gb = ids.find(a), ids.find(b)
        if ga is None or gb is None or ga is gb:
            continue
        topo.set_p2p(keys[id(ga)], keys[id(gb)], "nccl", "disabled")
        if nvlink:
            topo.nvlink_hint = topo.nvlink_hint or "NCCL WARN: P2P disabled between NVLink-connected GPUs"
            topo.note(t("NCCL says P2P is disabled between NVLink-connected {a} and {b}: a hardware problem (check "
                        "`nvidia-smi nvlink --status`).", a=keys[id(ga)], b=keys[id(gb)]))
    if p2p_off:
        switches = ", ".join(f"{k}={v}" for k, v in scan.envs.items() if k.startswith("NCCL_P2P"))
        topo.note(t("This run had P2P switched off ({switches}): SHM lines say nothing about the hardware.",
                    switches=switches))


def build_dump(topo: Topology, dump: DumpReader, ids: Identities, keys: dict[int, str]) -> None:
    host = next(iter({g.host for g in ids.gpus}), "")

    def key_of(bus: str) -> str | None:
        rec = ids.find(Rec(host, bus=bus))
        return keys.get(id(rec)) if rec is not None else None

    for child, parent in dump.dump.parents.items():
        topo.parents[child] = parent
    for gpu in dump.dump.gpus:
        key = key_of(gpu.bus)
        if key:
            topo.parents[key] = gpu.parent
    topo.switches.update(dump.dump.switches)
    for bus, peer in dump.dump.nvlinks:
        src = key_of(bus)
        dst = key_of(peer[4:]) if peer.startswith("GPU@") else peer
        if src and dst:
            topo.nvlinks.append((src, dst, 0))
    for a, b, ptype in dump.dump.paths:
        ka, kb = key_of(a), key_of(b)
        if ka and kb and ptype not in ("LOC", "DIS"):
            topo.set_link(ka, kb, ptype)
    if dump.dump.paths:
        topo.nvlink_visible = True
    for nic, nets in dump.dump.nic_nets.items():
        for net in nets:  # NCCL's NET/n hangs off its NIC's PCI function
            topo.add_nic(Nic(net, name=net, kind="net"))
            if nic in dump.dump.parents:
                topo.parents[net] = dump.dump.parents[nic]
    for bus, net, ptype in dump.dump.gpu_net:
        key = key_of(bus)
        if key:
            topo.add_nic(Nic(net, name=net, kind="net"))
            topo.set_link(key, net, ptype)
    for numa in dump.dump.numa:
        topo.numa.setdefault(numa, "")
    if dump.dump.gpus:
        tree_links(topo)
    if dump.dump.nvlinks:
        topo.nvlink_hint = topo.nvlink_hint or "NVL links in NCCL's printed topology"
    elif dump.nvlink_from_bw:
        topo.nvlink_hint = topo.nvlink_hint or (
            f"NCCL's topology summary: totalBw {dump.dump.total_bw:g}, more than any PCIe link carries")


def summarise(topo: Topology, scan: LogScan, dump: DumpReader) -> None:
    if scan.nvls:
        topo.nvlink_hint = topo.nvlink_hint or "NVLS multicast available (NVSwitch)"
    used = sorted({t for _, _, t in scan.transports})
    if used:
        topo.evidence.append("intra-node transports: " + ", ".join(used))
        if any(transport.startswith("P2P") for transport in used):
            topo.note(t("P2P was in use on the connections shown; in use is not proof it works "
                      "(ACS/IOMMU can still hang it)."))
    if scan.net_transports:
        topo.evidence.append("inter-node transports: NET/" + ", NET/".join(sorted(scan.net_transports)))
    for name, value in scan.envs.items():
        topo.evidence.append(f"{name}={value} (set by environment)")
