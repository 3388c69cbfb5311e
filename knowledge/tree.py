"""The method's decision tree as a networkx graph, and its validation."""
from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from .model import KnowledgeBase


def build_graph(kb: KnowledgeBase) -> nx.DiGraph:
    """Nodes are step ids, edges point from a step to the steps that may follow it."""
    graph = nx.DiGraph()
    for step in kb.steps.values():
        graph.add_node(step.id, kind=step.kind, title=step.title)
        for nxt in step.next:
            graph.add_edge(step.id, nxt)
    return graph


def check_tree(kb: KnowledgeBase, file_of: Callable[[str, str], str]) -> None:
    """Every id resolves, every node is reachable, no cycles, every leaf is a conclusion."""
    from .errors import KnowledgeError

    if kb.root_step not in kb.steps:
        raise KnowledgeError("meta", "meta.root_step", f"unknown step {kb.root_step!r}")
    for step in kb.steps.values():
        where = file_of("step", step.id)
        if step.kind not in ("step", "conclusion"):
            raise KnowledgeError(where, f"step.{step.id}.kind", "must be step or conclusion")
        for nxt in step.next:
            if nxt not in kb.steps:
                raise KnowledgeError(where, f"step.{step.id}.next", f"unknown step {nxt!r}")
        if not step.next and step.kind != "conclusion":
            raise KnowledgeError(where, f"step.{step.id}.next", "a leaf must be a conclusion")
        if step.next and step.kind == "conclusion":
            raise KnowledgeError(where, f"step.{step.id}.next", "a conclusion must be a leaf")
    graph = build_graph(kb)
    unreachable = set(graph) - nx.descendants(graph, kb.root_step) - {kb.root_step}
    if unreachable:
        first = sorted(unreachable)[0]
        raise KnowledgeError(file_of("step", first), f"step.{first}", "not reachable from " + kb.root_step)
    try:
        cycle = nx.find_cycle(graph, kb.root_step)
    except nx.NetworkXNoCycle:
        return
    a, b = cycle[0][:2]
    raise KnowledgeError(file_of("step", a), f"step.{a}.next", f"cycle through {b!r}")


def main_path(kb: KnowledgeBase) -> list[str]:
    """The method's steps in order: the longest path from the root to a conclusion."""
    graph = build_graph(kb)
    return nx.dag_longest_path(graph)
