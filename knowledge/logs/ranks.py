"""Rank names in order and in short: '0-3,5' for numeric ranks, a few names otherwise."""
from __future__ import annotations

from typing import Any


def rank_key(r: str) -> tuple[int, Any]:
    return (0, int(r)) if r.isdigit() else (1, r)


def span(ranks: list[str]) -> str:
    """'0-3,5' for numeric ranks, a comma list otherwise (at most a few names)."""
    nums = sorted(int(r) for r in ranks if r.isdigit())
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    other = [r for r in ranks if not r.isdigit()]
    parts.extend(other[:3])
    if len(other) > 3:
        parts.append(f"+{len(other) - 3} more")
    return ",".join(parts)
