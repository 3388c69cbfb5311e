"""Plain-text rendering of a `distdoctor logs` result (no textual, no rich: pipes and terminals)."""
from __future__ import annotations

from typing import Any

WIDTH = 160


def _clip(text: str, width: int = WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _span(ranks: list[str]) -> str:
    nums = sorted(int(r) for r in ranks if r.isdigit())
    parts, i = [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    names = [r for r in ranks if not r.isdigit()]
    parts.extend(names[:4] + ([f"+{len(names) - 4} more"] if len(names) > 4 else []))
    return ",".join(parts)


def next_action(kb: Any, cause_id: str, data: dict[str, Any]) -> list[str]:
    """The cause's first fix, copy-pasteable, with its note."""
    cause = kb.causes.get(cause_id)
    if cause is None:
        return [f"Not a guide cause ({cause_id}): see the evidence above; "
                "for a SIGKILL check the host's OOM killer: dmesg -T | grep -i -E 'killed process|oom'"]
    if cause.fixes:
        fix = cause.fixes[0]
        out = [f"{cause.fix}".strip(), f"  {fix.text}"]
        if fix.note:
            out.append(f"  ({fix.note})")
        return out
    return [cause.fix]


def render(data: dict[str, Any], kb: Any, top: int = 5) -> str:
    lines: list[str] = []
    skipped = data.get("skipped") or []
    lines.append(f"Read {data['files_read']} file(s), {_size(data['bytes_read'])}"
                 + (f"; skipped {len(skipped)}" if skipped else "") + ".")
    for s in skipped[:20]:
        lines.append(f"  skipped {s['path']}: {s['reason']}")
    if len(skipped) > 20:
        lines.append(f"  ... and {len(skipped) - 20} more skipped")
    for note in data.get("notes") or []:
        lines.append(f"  note: {note}")
    causes = data.get("causes") or []
    lines.append("")
    if not causes:
        lines.append("No known failure signature in these logs.")
        lines.append("Next: turn on NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL, rerun, and read "
                     "the new logs:  distdoctor logs <dir> --symptom hang")
    else:
        lines.append("Most likely causes:")
        for n, c in enumerate(causes[:top], 1):
            cause = kb.causes.get(c["id"])
            title = cause.title if cause else "outside the guide's causes"
            lines.append(f"{n:>2}. {c['id']}  (score {c['score']:g})  {title}")
            for why in [r for r in c.get("reasons", []) if not r.startswith("signatures:")][:3]:
                lines.append(f"      why: {_clip(why, WIDTH - 11)}")
            for e in c.get("evidence", [])[:4]:
                lines.append(f"      {e['file']}:{e['line']}: {_clip(e['text'], WIDTH - 10)}")
        if len(causes) > top:
            lines.append(f"    ... {len(causes) - top} more (--top {len(causes)})")
    ff = data.get("first_failure")
    if ff:
        lines.append("")
        who = f"rank {ff['rank']}, " if ff.get("rank") is not None else ""
        lines.append(f"First failure: {who}{ff['file']}:{ff['line']}")
        lines.append(f"  {_clip(ff['text'])}")
    lines.extend(_collectives(data.get("ranks") or {}))
    lines.extend(_disagreements(data.get("facts") or {}))
    if causes:
        lines.append("")
        lines.append("Next action:")
        lines.extend("  " + ln for ln in next_action(kb, causes[0]["id"], data))
    return "\n".join(lines) + "\n"


def _collectives(ranks: dict[str, dict[str, Any]]) -> list[str]:
    groups: dict[tuple, list[str]] = {}
    for r, row in ranks.items():
        lc = row.get("last_collective") or {}
        if row.get("status") == "seen" and not lc:
            continue
        key = (row.get("status"), lc.get("seq"), lc.get("op"), row.get("position", ""))
        groups.setdefault(key, []).append(r)
    if not groups:
        return []
    out = ["", "Ranks (last collective from the watchdog):"]
    rows = sorted(groups.items(), key=lambda kv: (kv[0][0] != "crashed", -len(kv[1])))
    for (status, seq, op, pos), rs in rows[:12]:
        where = f"SeqNum {seq} {op}" if seq is not None or op else ""
        out.append(f"  rank {_clip(_span(rs), 40):<40} {status:<12} {where} {pos}".rstrip())
    if len(rows) > 12:
        out.append(f"  ... {len(rows) - 12} more groups (--json for all)")
    return out


def _disagreements(facts: dict[str, Any]) -> list[str]:
    bad = facts.get("disagree") or []
    if not bad:
        return []
    out = ["", "Facts that differ across ranks:"]
    for k in bad:
        vals = facts.get("values", {}).get(k, {})
        out.append(f"  {k}: " + _clip("; ".join(f"{v} on rank {rs}" for v, rs in vals.items()), WIDTH - 6))
    return out
