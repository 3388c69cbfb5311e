"""One node's snapshot: every probe's facts, the compared fields and the topology summary."""
from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from distdoctor.knowledge.errors import InputError

from ..base import Probe, ProbeContext, ProbeResult
from ..sweep import run_sweep
from .health import health_value
from .schema import SCHEMA_ID
from .summary import jsonable, summarise, topology_summary

DEADLINE_S = 8.0


class SnapshotError(InputError):
    """The snapshot cannot be taken at all (no probe registry); the message is one line."""


def registry_probes() -> Mapping[str, Probe]:
    """The registered probes, imported only when a snapshot is taken."""
    from ..registry import PROBES

    return PROBES


def iso_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def distdoctor_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("distdoctor")
    except PackageNotFoundError:
        return "unknown"


def snapshot(ctx: ProbeContext, kb: Any = None, *, probes: Mapping[str, Probe] | None = None,
             deadline: float = DEADLINE_S,
             on_result: Callable[[ProbeResult], None] | None = None) -> dict[str, Any]:
    """Run every probe (the registry's unless `probes` is given) under one deadline and return
    the snapshot document (schema distdoctor.snapshot/1). With a knowledge base `kb`, the
    findings of its checks are included too."""
    probes = registry_probes() if probes is None else probes
    start = time.monotonic()
    results = run_sweep(ctx, probes, deadline=deadline, on_result=on_result)
    doc: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "host": socket.gethostname() or "unknown",
        "time": iso_now(),
        "distdoctor": distdoctor_version(),
        "duration_s": round(time.monotonic() - start, 3),
        "python": str(ctx.python),
        # the compared fields come first so a reader meets them before the bulky facts
        "summary": summarise(results),
        "topology": topology_summary(results.get("topology")),
        "probes": {name: {"status": r.status, "reason": r.reason,
                          "duration_s": round(r.duration_s, 4), "facts": jsonable(r.facts)}
                   for name, r in results.items()},
    }
    if kb is not None:
        notes: list[str] = []
        doc["findings"] = _findings(kb, results, notes)
        doc["summary"]["hardware"] = health_value(doc["findings"], kb)
        if notes:
            doc["notes"] = notes
    # written last: a file that does not end with it was cut short (see load.py)
    doc["end"] = SCHEMA_ID
    return doc


def _findings(kb: Any, results: Mapping[str, ProbeResult], notes: list[str]) -> list[dict[str, Any]]:
    from distdoctor.knowledge.evaluate import evaluate

    return [jsonable(f.to_dict()) for f in evaluate(kb, results)]
