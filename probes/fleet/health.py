"""The snapshot's hardware-health field: which hardware checks found a problem on the node
("none" when the hardware probes ran and found nothing). `fleet compare` measures every node
against a healthy one for it, not against the majority: three nodes with a bad GPU out of
four do not make the healthy fourth the odd one."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

FIELD = "hardware"
HEALTHY = "none"
# the probes whose findings make the field (the ones that read a recorded node)
PROBES = ("kernel", "gpu_health", "pcie", "infiniband", "limits")
_CAUSES = re.compile(r"\(([a-z0-9, -]+)\)$")


def health_value(findings: Iterable[Mapping[str, Any]], kb: Any = None) -> str | None:
    """"xid-hardware-error, gpu-row-remap-pending (gpu-hardware-fault)"; "none"; None when no
    hardware probe could run. Advisory checks (hardening advice) are left out."""
    ran, problems, causes = False, [], []
    for finding in findings:
        if finding.get("probe") not in PROBES:
            continue
        status = finding.get("status")
        if status in ("ok", "warn", "fail"):
            ran = True
        if status not in ("warn", "fail"):
            continue
        check = kb.checks.get(finding.get("check")) if kb is not None else None
        if check is not None and getattr(check, "advisory", False):
            continue
        problems.append(str(finding.get("check")))
        causes += [c for c in finding.get("cause_ids") or () if c not in causes]
    if not ran:
        return None
    if not problems:
        return HEALTHY
    return ", ".join(sorted(problems)) + (f" ({', '.join(causes)})" if causes else "")


def causes_of(values: Iterable[Any]) -> str | None:
    """The cause most named by these field values (the unhealthy nodes'), or None."""
    counts: Counter = Counter()
    for value in values:
        match = _CAUSES.search(str(value or ""))
        if match:
            counts.update(c.strip() for c in match.group(1).split(","))
    return min(counts, key=lambda c: (-counts[c], c)) if counts else None
