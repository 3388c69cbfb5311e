"""GPU topology as a graph: links, P2P support, NIC affinity, advice, and pictures of it.

Public API: probe_topology(ctx), load_input(path), analyse(topology or text), draw_text(facts),
draw_matrix(facts), to_dot(facts), to_svg(facts), TopologyInputError.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from distdoctor.knowledge.lazymod import lazy_exports

from .draw_dot import to_dot
from .draw_svg import to_svg
from .draw_text import draw_matrix, draw_text
from .model import Topology
from .probe import probe_topology

if TYPE_CHECKING:
    from .graph import build_graph
    from .load import TopologyInputError, load_topology, parse_text

__all__ = ["TopologyInputError", "Topology", "analyse", "build_graph", "draw_matrix", "draw_text",
           "load_input", "load_topology", "parse_text", "probe_topology", "to_dot", "to_svg"]

# Imported on first use: the probe runs in every `distdoctor check`, and on a node without a
# driver it must not pay for networkx and the parsers (~0.3 s) only to say so.
_LAZY = {"build_graph": "graph", "TopologyInputError": "load", "load_topology": "load",
         "parse_text": "load"}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def analyse(source: Topology | str, name: str | None = None) -> dict[str, Any]:
    """The `topo --json` dict for a parsed Topology or for raw text in any supported format."""
    from .assess import analyse as analyse_topology
    from .load import parse_text

    topo = parse_text(source, name or "<text>") if isinstance(source, str) else source
    return analyse_topology(topo, name)


def load_input(path: str | Path) -> dict[str, Any]:
    """Parse any supported file (detected by content) into the `topo --json` dict.
    Raises TopologyInputError (one-line message) for empty, binary, truncated or foreign files."""
    from .assess import analyse as analyse_topology
    from .load import load_topology

    return analyse_topology(load_topology(path), str(path))
