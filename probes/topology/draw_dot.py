"""Graphviz export: GPUs clustered by NUMA node, GPU links labelled with code and P2P status,
each GPU joined to its nearest NIC(s)."""
from __future__ import annotations

from typing import Any

from distdoctor.knowledge.printable import clean_block

from .model import P2P_BAD, P2P_GOOD


def quote(text: object) -> str:
    # names come from the input: control codes become visible escapes, as everywhere
    return '"' + clean_block(str(text)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def edge_colour(status: str) -> str:
    if status in P2P_GOOD:
        return "darkgreen"
    return "red" if status in P2P_BAD else "gray50"


def to_dot(facts: dict[str, Any]) -> str:
    """The topology as a Graphviz `graph` (render with `dot -Tsvg topo.dot -o topo.svg`)."""
    nvlink = {True: "yes", False: "no", None: "not shown"}[facts["nvlink"]]
    title = f"GPU topology ({facts['source']}): P2P {facts['p2p']}, NVLink {nvlink}"
    out = ["graph topology {",
           f"  graph [label={quote(title)}, labelloc=t, fontname=Helvetica];",
           "  node [fontname=Helvetica, fontsize=10];",
           "  edge [fontname=Helvetica, fontsize=9];"]
    gpus = {g["id"]: g for g in facts["gpus"]}
    for i, group in enumerate(facts["numa"]):
        title = f"NUMA {group['id']}" if group["id"] is not None else "NUMA node not shown"
        if group.get("cpus"):
            title += f"\nCPUs {group['cpus']}"
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f"    label={quote(title)}; style=rounded; color=gray60;")
        for key in group["gpus"]:
            gpu = gpus[key]
            label = key + (f"\n{gpu['name']}" if gpu.get("name") else "")
            style = "" if gpu["seen"] else ", style=dashed"
            out.append(f"    {quote(key)} [shape=box, label={quote(label)}{style}];")
        nics = [n for n in facts["nics"] if n.get("numa") is not None and n["numa"] == group["id"]]
        for nic in nics:
            out.append(f"    {quote(nic['id'])} [shape=ellipse, label={quote(nic_text(nic))}];")
        out.append("  }")
    placed = {n["id"] for n in facts["nics"] if n.get("numa") is not None
              and any(g["id"] == n["numa"] for g in facts["numa"])}
    for nic in facts["nics"]:
        if nic["id"] not in placed:
            out.append(f"  {quote(nic['id'])} [shape=ellipse, label={quote(nic_text(nic))}];")
    for p in facts["pairs"]:
        label = f"{p['link'] or '/'.join(p.get('transports', [])) or '?'}\nP2P {p['p2p']}"
        style = ", style=bold" if (p["link"] or "").startswith("NV") else ""
        out.append(f"  {quote(p['a'])} -- {quote(p['b'])} [label={quote(label)}, "
                   f"color={edge_colour(p['p2p'])}{style}];")
    for gpu in facts["gpus"]:
        for nic in gpu["nearest_nics"]:
            out.append(f"  {quote(gpu['id'])} -- {quote(nic)} [label={quote(gpu['nic_link'])}, "
                       "style=dashed, color=steelblue];")
    out.append("}")
    return "\n".join(out) + "\n"


def nic_text(nic: dict[str, Any]) -> str:
    return nic["id"] if nic["name"] == nic["id"] else f"{nic['id']}\n{nic['name']}"
