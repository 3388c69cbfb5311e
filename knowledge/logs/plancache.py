"""The prefilter plan for small inputs kept on disk (knowledge/cache.py): building it parses every
signature and trigger pattern and runs the set cover (~0.15 s, most of a small run's time). The
key is a hash of the signature rows, the extractors' triggers and the code that plans; a new
signature (the data changed) or a site overlay's is a miss, and the plan is built again."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import cache
from .extractors import TRIGGERS
from .prefilter import Plan

NAME = "log-plan"
_HERE = Path(__file__).parent
_CODE = ("prefilter.py", "compiled.py", "plancache.py")


def key(sig_rows: tuple) -> str:
    return cache.digest([repr(sig_rows), repr(TRIGGERS), *cache.source_parts(*(str(_HERE / c) for c in _CODE))])


def load(sig_rows: tuple) -> tuple[Plan, dict[str, tuple[str, ...]], tuple[str, ...]] | None:
    """(plan, each signature pattern's needles, the unanchored trigger ids), or None on a miss or
    a file of another shape."""
    doc = cache.load(NAME, key(sig_rows))
    try:
        return _decode(doc) if doc is not None else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def store(sig_rows: tuple, plan: Plan, needles: dict[str, tuple[str, ...]], unanchored: tuple[str, ...]) -> None:
    cache.store(NAME, key(sig_rows), {
        "literals": list(plan.literals), "roots": [[c, list(t)] for c, t in plan.roots],
        "rare": sorted(plan.rare), "searched": sorted(plan.searched),
        "needles": {p: list(n) for p, n in needles.items()}, "unanchored": list(unanchored)})


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def _decode(doc: Any) -> tuple[Plan, dict[str, tuple[str, ...]], tuple[str, ...]]:
    roots = []
    for item in doc["roots"]:
        ch, tails = item
        if not isinstance(ch, str) or len(ch) != 1:
            raise ValueError("a root is one character")
        roots.append((ch, _strings(tails)))
    plan = Plan(_strings(doc["literals"]), tuple(roots), frozenset(_strings(doc["rare"])),
                frozenset(_strings(doc["searched"])))
    needles = {p: _strings(n) for p, n in doc["needles"].items()}
    return plan, needles, _strings(doc["unanchored"])
