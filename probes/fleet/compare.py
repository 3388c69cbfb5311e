"""Comparing snapshots: the fields every node must agree on, the majority and the odd ones out."""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ...knowledge.units import human_size
from . import health
from .fields import FIELDS, cause_of
from .hosts import host_problem
from .load import record_of
from .schema import MAY_DIFFER, SUMMARY_FIELDS

SWITCH = "switch:"
LABELS = {f.id: f.label for f in FIELDS}  # how each field is shown (fields.toml)


def _records(snapshots: Iterable[Mapping[str, Any]],
             skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Compact records as load_snapshots makes them; full documents are reduced here."""
    out = []
    for i, snap in enumerate(snapshots):
        if "fields" in snap and "node" in snap:
            out.append(snap)  # type: ignore[arg-type]
            continue
        record, reason = record_of(snap, str(snap.get("file", f"<snapshot {i}>")))
        if record is None:
            skipped.append({"file": f"<snapshot {i}>", "reason": reason})
        else:
            out.append(record)
    return out


def _unique_names(records: list[dict[str, Any]]) -> list[str]:
    """Node names, with the file name added where two snapshots claim the same host."""
    seen = Counter(r["node"] for r in records)
    return [r["node"] if seen[r["node"]] == 1 else f"{r['node']} ({r.get('file') or i})"
            for i, r in enumerate(records)]


def _majority(counts: Counter) -> tuple[Any, int]:
    # ties go to the value that sorts first, so the answer does not depend on file order
    value, count = min(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return value, count


def compare(snapshots: Iterable[Mapping[str, Any]],
            skipped: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Group nodes by the fields that must agree and name, for each disagreeing field, the
    majority value and the outliers. Takes load_snapshots() records or full snapshot documents.
    Result (compare's --json): {"nodes", "agreed", "disagreements", "groups", "outliers",
    "skipped", "may_differ"}; an outlier's "count" is how many nodes hold the majority value.
    Fields in schema.MAY_DIFFER that differ go to "may_differ" (shown, never outliers)."""
    skipped = list(skipped or [])
    records = _records(snapshots, skipped)
    names = _unique_names(records)
    n = len(records)
    # Nodes of a fleet mostly repeat a few rows of values: group them first, so everything
    # after this one pass over the nodes works on the distinct rows only.
    # load_snapshots shares one fields dict between equal summaries: group by identity first
    shared: dict[int, list[int]] = defaultdict(list)
    objects: dict[int, Mapping[str, Any]] = {}
    for i, record in enumerate(records):
        fields = record["fields"]
        shared[id(fields)].append(i)
        objects[id(fields)] = fields
    rows: dict[tuple, list[int]] = defaultdict(list)
    for ident, members in shared.items():
        fields = objects[ident]
        switches = fields.get("switches")
        rows[(tuple(map(fields.get, SUMMARY_FIELDS)),
              tuple(sorted(switches.items())) if switches else ())].extend(members)
    flats = {row: _flat(row) for row in rows}
    counters: dict[str, Counter] = defaultdict(Counter)
    for row, members in rows.items():
        for field, value in flats[row].items():
            counters[field][value] += len(members)
    fields = list(SUMMARY_FIELDS) if rows else []
    fields += sorted(f for f in counters if f.startswith(SWITCH))
    for field in fields:
        unset = n - sum(counters[field].values())
        if unset:  # a switch that some nodes do not set at all
            counters[field][None] += unset

    agreed: dict[str, Any] = {}
    disagreements: list[dict[str, Any]] = []
    may_differ: list[dict[str, Any]] = []
    split: list[str] = []
    for field in fields:
        counts = counters[field]
        if field == health.FIELD:  # a node not checked (an older snapshot) is no hardware outlier
            counts = Counter({v: c for v, c in counts.items() if v is not None}) or counts
        value, count = _majority(counts)
        if field == health.FIELD and health.HEALTHY in counts:  # a faulty majority is still faulty
            value, count = health.HEALTHY, counts[health.HEALTHY]
        if len(counts) == 1:
            agreed[field] = value
            continue
        if field in MAY_DIFFER:
            may_differ.append({"field": field, "values": [
                {"value": v, "count": c} for v, c in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]})
            continue
        split.append(field)
        disagreements.append({
            "field": field, "majority": value, "majority_count": count,
            # no majority to trust: the first value is named only so the output is stable
            "tie": sorted(counts.values())[-2] == count and field != health.FIELD,
            "cause_id": (health.causes_of(v for v in counts if v != value) if field == health.FIELD
                         else cause_of(field)),
            "values": [{"value": v, "count": c}
                       for v, c in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]})

    majority = tuple(d["majority"] for d in disagreements)
    majority_count = tuple(d["majority_count"] for d in disagreements)
    outliers: list[dict[str, Any]] = []
    groups: dict[tuple, list[str]] = defaultdict(list)
    for row, members in rows.items():
        key = tuple(map(flats[row].get, split))
        nodes = [names[i] for i in members]
        groups[key].extend(nodes)
        if key == majority:
            continue
        for field, value, maj, count in zip(split, key, majority, majority_count):
            if value != maj and not (field == health.FIELD and value is None):
                outliers.extend({"node": node, "field": field, "value": value, "majority": maj,
                                 "count": count, "tie": counters[field][value] == count}
                                for node in nodes)
    order = {f: i for i, f in enumerate(split)}
    outliers.sort(key=lambda o: (order[o["field"]], o["node"]))
    group_list = [{"count": len(nodes), "values": dict(zip(split, key)), "nodes": sorted(nodes)}
                  for key, nodes in groups.items()]
    group_list.sort(key=lambda g: (-g["count"], g["nodes"][0]))
    # A snapshot names its own host: validated like a host given to `fleet collect`, so a
    # hostile one ("-oProxyCommand=...") is only ever shown as data, never put in a command.
    bad_hosts = [{"node": name, "host": r["node"], "reason": why}
                 for name, r in zip(names, records) if (why := host_problem(str(r["node"])))]
    return {"nodes": n, "agreed": agreed, "disagreements": disagreements, "groups": group_list,
            "outliers": outliers, "skipped": skipped, "bad_hosts": bad_hosts, "may_differ": may_differ}


def _flat(row: tuple) -> dict[str, Any]:
    """A row's compared fields in one level: switches become "switch:NAME" keys."""
    values, switches = row
    flat = dict(zip(SUMMARY_FIELDS, values))
    flat.update((SWITCH + name, value) for name, value in switches)
    return flat


def label(field: str) -> str:
    return field[len(SWITCH):] if field.startswith(SWITCH) else LABELS.get(field, field)


def show(field: str, value: Any) -> str:
    """A value as people read it: bytes in GiB, unset switches and unknown facts named so."""
    if value is None:
        return "unset" if field.startswith(SWITCH) else "unknown"
    if field == "shm_bytes" and isinstance(value, int):
        return human_size(value)
    return str(value)


def outlier_line(outlier: Mapping[str, Any]) -> str:
    """"node-17: driver 535.104.05, 63 others 550.54.15"."""
    field = outlier["field"]
    others = "other" if outlier["count"] == 1 else "others"
    tie = " (an even split: neither side is the odd one out)" if outlier.get("tie") else ""
    return (f"{outlier['node']}: {label(field)} {show(field, outlier['value'])}, "
            f"{outlier['count']} {others} {show(field, outlier['majority'])}{tie}")
