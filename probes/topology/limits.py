"""Bounds the topology parsers share: past them an input is damaged or hostile, time and memory
stay linear in it, and what is left out is a skipped entry with its reason (never an exception)."""
from __future__ import annotations

import re
from typing import Any

from .model import norm_bus_id

# Bounds no real node comes near (NVL72 racks have 72 GPUs, across trays): a hostile or damaged
# log past them costs linear time and memory, and what is left out is said in a note.
MAX_DEV = 1023      # a CUDA device ordinal above this is damage, not a device
MAX_GPUS = 256      # distinct GPUs kept
MAX_RECS = 8192     # distinct GPU mentions kept
BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def tests_bus(raw: str) -> str | None:
    """nccl-tests' bracket: '0x1b' (a bus number) or '0000:1b:00' / '1b:00.0'; None when damaged
    ('0x', '0x03:', a stray colon)."""
    if raw.lower().startswith("0x"):
        digits = raw[2:]
        if not digits or len(digits) > 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            return None
        return norm_bus_id(f"{int(digits, 16):02x}:00.0")
    bus = norm_bus_id(raw if raw.count(".") else raw + ".0")
    return bus if BUS_ID.match(bus) else None


def sane(scan: Any) -> None:
    """Drop mentions no real GPU makes (a device ordinal past MAX_DEV), fold repeats, and cap
    what is kept; each drop is a skipped entry with its reason."""
    def ok(rec: Any) -> bool:
        if rec.dev is not None and not 0 <= rec.dev <= MAX_DEV:
            scan.skipped.append(f"device number {rec.dev} (above {MAX_DEV}: not a device ordinal)")
            return False
        return True

    unique = {(r.host, r.dev, r.bus, r.rank, r.name, r.cpus): r for r in scan.recs if ok(r)}
    scan.recs = list(unique.values())
    if len(scan.recs) > MAX_RECS:
        scan.skipped.append(f"{len(scan.recs) - MAX_RECS} GPU mention(s) past the first {MAX_RECS}")
        scan.recs = scan.recs[:MAX_RECS]
    scan.transports = [t for t in scan.transports if ok(t[0]) and ok(t[1])]
    scan.disabled = [d for d in scan.disabled if ok(d[0]) and ok(d[1])]
    scan.nic_distance = [d for d in scan.nic_distance if ok(d[0])]
    for hint in [h for h in scan.hints if not 0 <= h[1] <= MAX_DEV]:
        del scan.hints[hint]
        scan.skipped.append(f"line prefix device [{hint[1]}] (above {MAX_DEV})")
