"""Per-pair P2P status with its evidence, P2P support over all pairs and NVLink, and the facts dict."""
from __future__ import annotations

from typing import Any

import networkx as nx

from .graph import build_graph, gpu_pair_edges, has_nvlink
from .model import P2P_BAD, P2P_CODES, P2P_GOOD, P2P_MEANING, Topology, link_rank

DRIVER_KINDS = ("read", "write", "p2p", "prop")


def pair_status(topo: Topology, pair: tuple[str, str], edge: dict) -> tuple[str, str]:
    """(status, evidence). The driver's answer wins, then NCCL's, then NVLink, then what a log
    saw in use; with none of these the honest answer is 'unknown'."""
    statuses = topo.p2p.get(pair, {})
    driver = {k: v for k, v in statuses.items() if k in DRIVER_KINDS and v in P2P_CODES}
    bad = [(k, v) for k, v in driver.items() if v != "OK" and v != "U"]
    if bad:
        kind, code = bad[0]
        return code, f"driver: P2P {kind if kind != 'p2p' else 'status'} {code} ({P2P_MEANING[code]})"
    if driver and all(v == "OK" for v in driver.values()):
        return "OK", f"driver: P2P {'/'.join(driver)} OK"
    if statuses.get("nccl") == "disabled":
        return "disabled", "NCCL INFO: P2P is disabled between these GPUs"
    if has_nvlink(edge) or statuses.get("nvlink") == "OK":
        if edge.get("nvb_via"):
            return "OK", f"NVLink through {edge['nvb_via']} (NCCL path NVB)"
        return "OK", f"{edge.get('nvlink') or 'NVLink'} ({edge.get('link') or 'NVLink P2P OK'})"
    seen = ", ".join(sorted(topo.transports.get(pair, ())))
    if statuses.get("nccl") == "used":
        return "used", f"NCCL INFO: via {seen}"
    if statuses.get("nccl") == "unused":
        # SHM is NCCL's own default for many pairs (PHB/NODE/SYS on Intel CPUs, PXB and beyond from
        # 2.23): it was not told P2P fails. Only a failed P2P attempt or a P2P-disabled line says so.
        shm = f"NCCL INFO: via {seen}, NCCL's usual choice for such pairs on many hosts, not proof P2P is unusable"
        return ("U", f"driver: P2P status unknown (U); {shm}") if driver else ("unknown", shm)
    if driver:
        return "U", "driver: P2P status unknown (U)"
    return "unknown", f"{edge.get('link') or 'no link code'}: this input does not show P2P support"


SHM_NOTE = ("NCCL used SHM between some GPUs. That is its normal choice on many hosts (Intel CPUs, and pairs "
            "linked through PHB, NODE or SYS), so it does not show that P2P is unusable; only a P2P attempt "
            "that failed or NCCL's 'P2P is disabled between connected GPUs' would. For the hardware's "
            "answer: nvidia-smi topo -p2p r")
WHOLE_NODE_SOURCES = frozenset({"topo-m", "topo-p2p", "nvml"})


def p2p_support(statuses: list[str]) -> str:
    """all | partial | none | unknown over the pairs this input shows."""
    good = sum(s in P2P_GOOD for s in statuses)
    bad = sum(s in P2P_BAD for s in statuses)
    if not statuses or (good == 0 and bad == 0):
        return "unknown"
    if bad == 0:
        return "all" if good == len(statuses) else "unknown"
    return "none" if good == 0 else "partial"


def nvlink_present(topo: Topology, g: nx.Graph) -> bool | None:
    if any(has_nvlink(d) for _, _, d in gpu_pair_edges(g)) or topo.nvlink_hint:
        return True
    if any(d.get("kind") == "nvlink" for _, _, d in g.edges(data=True)):
        return True
    return False if topo.nvlink_visible else None


def nearest(g: nx.Graph, node: str, kind: str) -> tuple[list[str], str | None]:
    """The closest nodes of `kind` by link code, and that code."""
    best, found = 99, []
    code = None
    for other, d in g[node].items():
        if d.get("kind") != "path" or g.nodes[other]["kind"] != kind or not d.get("link"):
            continue
        rank = link_rank(d["link"])
        if rank < best:
            best, found, code = rank, [other], d["link"]
        elif rank == best:
            found.append(other)
    return found, code


def analyse(topo: Topology, input_name: str | None = None) -> dict[str, Any]:
    """Topology -> the `topo --json` dict: source, gpus, nics, p2p, nvlink, pairs, advice (+ detail)."""
    from .advice import make_advice

    g = build_graph(topo)
    order = topo.order
    pairs = []
    for a, b, d in sorted(gpu_pair_edges(g), key=lambda e: (order(min(e[:2], key=order)),
                                                           order(max(e[:2], key=order)))):
        a, b = topo.pair(a, b)
        status, evidence = pair_status(topo, (a, b), d)
        d["p2p"] = status
        pair = {"a": a, "b": b, "link": d.get("link"), "p2p": status, "evidence": evidence}
        if topo.transports.get((a, b)):
            pair["transports"] = sorted(topo.transports[(a, b)])
        pairs.append(pair)
    if any(topo.p2p.get((p["a"], p["b"]), {}).get("nccl") == "unused" for p in pairs):
        topo.note(SHM_NOTE)
    gpus = gpu_facts(topo, g)
    statuses = [p["p2p"] for p in pairs]
    if WHOLE_NODE_SOURCES & set(topo.sources):
        # these show every pair of the node's GPUs: a pair the input lost (a truncated row) is
        # unknown, so the support cannot be "all" over the pairs that happen to remain
        statuses += ["unknown"] * max(0, len(gpus) * (len(gpus) - 1) // 2 - len(pairs))
    facts: dict[str, Any] = {
        "source": "+".join(topo.sources),
        "input": input_name,
        "gpus": gpus,
        "nics": nic_facts(topo, g),
        "p2p": p2p_support(statuses),
        "nvlink": nvlink_present(topo, g),
        "pairs": pairs,
        "pairs_without_p2p": [f"{p['a']}-{p['b']}" for p in pairs if p["p2p"] in P2P_BAD],
        "nic_links": [{"gpu": a, "nic": b, "link": d["link"]} for a, b, d in nic_edges(topo, g)],
        "numa": numa_facts(topo),
        "cpu_vendor": topo.cpu_vendor or None,
        "nics_total": topo.nics_total,
        "nvlink_evidence": topo.nvlink_hint or None,
        "evidence": topo.evidence,
        "notes": topo.notes,
    }
    facts["advice"] = make_advice(facts)
    return facts


def nic_edges(topo: Topology, g: nx.Graph) -> list[tuple[str, str, dict]]:
    out = []
    for gpu in topo.gpus:
        for nic, d in g[gpu].items():
            if d.get("kind") == "path" and g.nodes[nic]["kind"] == "nic" and d.get("link"):
                out.append((gpu, nic, d))
    return out


def gpu_facts(topo: Topology, g: nx.Graph) -> list[dict[str, Any]]:
    out = []
    for key in sorted(topo.gpus, key=topo.order):
        gpu = topo.gpus[key]
        nics, code = nearest(g, key, "nic")
        out.append({"id": key, "index": gpu.index, "name": gpu.name or None, "bus_id": gpu.bus_id or None,
                    "numa": gpu.numa, "cpus": gpu.cpus or None, "host": gpu.host or None,
                    "rank": gpu.rank, "seen": gpu.seen,
                    "nearest_nics": sorted(nics, key=topo.order), "nic_link": code})
    return out


def nic_facts(topo: Topology, g: nx.Graph) -> list[dict[str, Any]]:
    out = []
    for key in sorted(topo.nics, key=topo.order):
        nic = topo.nics[key]
        gpus, code = nearest(g, key, "gpu")
        out.append({"id": key, "name": nic.name or key, "bus_id": nic.bus_id or None, "numa": nic.numa,
                    "kind": nic.kind or None, "nearest_gpus": sorted(gpus, key=topo.order),
                    "gpu_link": code})
    return out


def numa_facts(topo: Topology) -> list[dict[str, Any]]:
    """GPUs grouped by NUMA node; without NUMA ids, by identical CPU affinity."""
    groups: dict[str, dict[str, Any]] = {}
    for key in sorted(topo.gpus, key=topo.order):
        gpu = topo.gpus[key]
        if gpu.numa is not None:
            name = f"NUMA{gpu.numa}"
            entry = groups.setdefault(name, {"id": gpu.numa, "cpus": topo.numa.get(gpu.numa) or gpu.cpus
                                             or None, "gpus": []})
        else:
            name = f"cpus:{gpu.cpus}" if gpu.cpus else "unknown"
            entry = groups.setdefault(name, {"id": None, "cpus": gpu.cpus or None, "gpus": []})
        entry["gpus"].append(key)
    return list(groups.values())
