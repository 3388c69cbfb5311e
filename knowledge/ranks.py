"""Rank names in order and in short: '0-3,5' for numeric ranks, a few names otherwise. The one
rank-list formatter: the logs' timeline and the stacks' groups both print ranks through it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def rank_key(r: str) -> tuple[int, Any]:
    """Sort ranks numerically ("2" before "10"); names that are not numbers go last."""
    return (0, int(r)) if r.isdigit() else (1, r)


def span(ranks: Iterable[str], names: int | None = 3) -> str:
    """'0-3,5' for numeric ranks (each once), then the other names in their order: at most
    `names` of them and '+N more' (None: all)."""
    ranks = list(ranks)
    nums = sorted({int(r) for r in ranks if r.isdigit()})
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    other = list(dict.fromkeys(r for r in ranks if not r.isdigit()))
    shown = other if names is None else other[:names]
    parts.extend(shown)
    if len(other) > len(shown):
        parts.append(f"+{len(other) - len(shown)} more")
    return ",".join(parts)
