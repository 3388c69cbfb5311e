"""Byte counts as people read them: the one human-size formatter."""
from __future__ import annotations


def human_size(n: int | float) -> str:
    """1073741824 -> '1.0 GiB', 512 -> '512 B'; binary units up to TiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
