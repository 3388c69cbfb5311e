"""One networkx graph for every source: GPUs, NICs, NUMA nodes, PCIe switches and NVSwitches;
edges typed with the matrix codes, NVLink counts and P2P statuses."""
from __future__ import annotations

import itertools

import networkx as nx

from .model import NV_RE, Topology, is_nvlink


def fill_numa(topo: Topology) -> None:
    """A GPU or NIC under a CPU in the PCIe tree belongs to that CPU's NUMA node."""
    for key, dev in itertools.chain(topo.gpus.items(), topo.nics.items()):
        if dev.numa is not None:
            continue
        node, seen = key, set()
        while node in topo.parents and node not in seen:
            seen.add(node)
            node = topo.parents[node]
            if node.startswith("NUMA") and node[4:].isdigit():
                dev.numa = int(node[4:])
                break
    for gpu in topo.gpus.values():
        if gpu.numa is not None and not gpu.cpus:
            gpu.cpus = topo.numa.get(gpu.numa, "")


def nvlink_pairs(topo: Topology) -> dict[tuple[str, str], tuple[str, str]]:
    """pair -> (code, how) for GPUs joined by NVLink: NV# direct or through NVSwitches, NVB when
    the only NVLink path goes through another GPU (NCCL uses that path for P2P too)."""
    direct: dict[tuple[str, str], int] = {}
    to_switch: dict[str, int] = {}
    switch_of: dict[str, set[str]] = {}
    for gpu, peer, count in topo.nvlinks:
        if peer in topo.gpus:
            pair = topo.pair(gpu, peer)
            direct[pair] = max(direct.get(pair, 0), count)  # both ends list the same links
        else:
            to_switch[gpu] = to_switch.get(gpu, 0) + count
            switch_of.setdefault(gpu, set()).add(peer)
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for pair, count in direct.items():
        found[pair] = (f"NV{count}" if count else "NVL", "direct NVLink")
    for a, b in itertools.combinations(sorted(switch_of, key=topo.order), 2):
        if switch_of[a] & switch_of[b]:
            n = min(to_switch[a], to_switch[b])
            found.setdefault(topo.pair(a, b), (f"NV{n}" if n else "NVL", "NVLink through NVSwitch"))
    for pair, code in topo.links.items():
        if pair[0] in topo.gpus and pair[1] in topo.gpus and NV_RE.match(code):
            found.setdefault(pair, (code, "NVLink"))
    return found


def nvb_pairs(topo: Topology, nvl: dict[tuple[str, str], tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Pairs without their own NVLink but joined through other GPUs' NVLinks: pair -> via GPU."""
    hops = nx.Graph()
    hops.add_edges_from(nvl)
    out: dict[tuple[str, str], str] = {}
    for component in nx.connected_components(hops):
        for a, b in itertools.combinations(sorted(component, key=topo.order), 2):
            pair = topo.pair(a, b)
            if pair not in nvl:
                path = nx.shortest_path(hops, a, b)
                out[pair] = path[1]
    return out


def build_graph(topo: Topology) -> nx.Graph:
    """The machine as a graph. Node attribute `kind`: gpu, nic, numa, pcie-switch, nvswitch.
    Edge attribute `kind`: path (GPU-GPU, GPU-NIC: `link` code, `p2p`), pcie (tree), nvlink
    (GPU-NVSwitch, `count`), affinity (GPU-NUMA when no tree says more)."""
    fill_numa(topo)
    g = nx.Graph()
    for key, gpu in topo.gpus.items():
        g.add_node(key, kind="gpu", index=gpu.index, name=gpu.name, bus_id=gpu.bus_id, numa=gpu.numa,
                   cpus=gpu.cpus, host=gpu.host, seen=gpu.seen)
    for key, nic in topo.nics.items():
        g.add_node(key, kind="nic", name=nic.name, bus_id=nic.bus_id, numa=nic.numa)
    for numa, cpus in topo.numa.items():
        g.add_node(f"NUMA{numa}", kind="numa", cpus=cpus)
    for key, kind in topo.switches.items():
        g.add_node(key, kind="nvswitch" if kind == "nvswitch" else "pcie-switch")
    for child, parent in topo.parents.items():
        if parent and child in g and parent in g:
            g.add_edge(child, parent, kind="pcie")
    for key, gpu in topo.gpus.items():
        if gpu.numa is not None and not any(g.nodes[n].get("kind") == "numa" for n in g[key]):
            g.add_node(f"NUMA{gpu.numa}", kind="numa", cpus=topo.numa.get(gpu.numa, gpu.cpus))
            if topo.parents.get(key) is None:
                g.add_edge(key, f"NUMA{gpu.numa}", kind="affinity")
    nvl = nvlink_pairs(topo)
    for gpu, peer, count in topo.nvlinks:
        if peer not in topo.gpus:
            old = g.edges[gpu, peer]["count"] if g.has_edge(gpu, peer) else 0
            g.add_edge(gpu, peer, kind="nvlink", count=old + count)
    for (a, b), code in topo.links.items():
        if a in g and b in g:
            g.add_edge(a, b, kind="path", link=code)
    for (a, b), (code, how) in nvl.items():
        g.add_edge(a, b, kind="path", link=code, nvlink=how)
    for (a, b), via in nvb_pairs(topo, nvl).items():
        if not g.has_edge(a, b):
            g.add_edge(a, b, kind="path", link="NVB")
        g.edges[a, b]["nvb_via"] = via
    for a, b in set(topo.p2p) | set(topo.transports):  # pairs only a log or p2p matrix mentions
        if a in topo.gpus and b in topo.gpus and not g.has_edge(a, b):
            g.add_edge(a, b, kind="path", link=None)
    return g


def gpu_pair_edges(g: nx.Graph) -> list[tuple[str, str, dict]]:
    return [(a, b, d) for a, b, d in g.edges(data=True)
            if d.get("kind") == "path" and g.nodes[a]["kind"] == "gpu" and g.nodes[b]["kind"] == "gpu"]


def has_nvlink(d: dict) -> bool:
    return is_nvlink(d.get("link")) or bool(d.get("nvlink")) or bool(d.get("nvb_via"))
