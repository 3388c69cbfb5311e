"""No two of distdoctor's own modules import each other, lazily or not (a static scan): the
folders show the design, and each module can be read knowing only what it imports.

The scan reuses tests/unit/test_import_direction.py's reader of every import, including the ones
inside functions, so a cycle hidden behind a lazy import is found too.
"""
from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_import_direction import REPO, imported, modules  # noqa: E402


def graph() -> nx.DiGraph:
    names = {}
    for layer, path in modules():
        rel = path.relative_to(REPO / layer).with_suffix("")
        parts = ["distdoctor", layer, *(rel.parts[:-1] if rel.name == "__init__" else rel.parts)]
        names[path] = ".".join(parts)
    known = set(names.values())
    g = nx.DiGraph()
    for layer, path in modules():
        me = names[path]
        g.add_node(me)
        for _line, name in imported(layer, path):
            # `from .x import y` names x.y: the module is the longest known prefix
            parts = name.split(".")
            for n in range(len(parts), 1, -1):
                target = ".".join(parts[:n])
                if target in known:
                    if target != me and not me.startswith(target + "."):  # a package's own parts
                        g.add_edge(me, target)
                    break
    return g


def test_no_module_imports_one_that_imports_it_back() -> None:
    g = graph()
    pairs = sorted(f"{a} <-> {b}" for a, b in g.edges if a < b and g.has_edge(b, a))
    assert pairs == []


def test_the_scan_finds_a_cycle_when_there_is_one() -> None:
    g = graph()
    g.add_edge("distdoctor.knowledge.errors", "distdoctor.knowledge.loader")
    assert any(a < b and g.has_edge(b, a) for a, b in g.edges)
