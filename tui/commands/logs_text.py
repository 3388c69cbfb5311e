"""Plain-text rendering of a `distdoctor logs` result (no textual, no rich: pipes and terminals).

The result is the `logs --json` document; its verdict is read once into a typed Diagnosis."""
from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.diagnosis import Diagnosis, fix_for_backend
from distdoctor.knowledge.printable import clean
from distdoctor.knowledge.ranks import span as rank_span
from distdoctor.knowledge.units import human_size

WIDTH = 120  # when stdout is not a terminal and $COLUMNS is unset
MIN_WIDTH = 60
# colour codes and other escape sequences that logs carry; shown raw they would repaint the
# terminal (or leak into a pipe), so evidence is printed without them
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def width() -> int:
    """The output width: $COLUMNS, else the terminal's, else WIDTH for a pipe or file."""
    return max(MIN_WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def printable(text: str) -> str:
    """A log line fit for a terminal: escape sequences dropped, other control characters shown."""
    text = _ESCAPES.sub("", str(text))
    # the one sanitiser (knowledge/printable.py): a newline in a file name is shown, never
    # printed, so a file name cannot fake an output line; tabs stay
    return "\t".join(clean(part) for part in text.split("\t"))


def _(message: str, **values: Any) -> str:
    """A fixed phrase in the output's language (knowledge/i18n.py; English is the key)."""
    return i18n.t(message, **values)


def _clip(text: str, limit: int) -> str:
    # display width: a CJK character takes two cells
    return i18n.clip(" ".join(printable(text).split()), limit)


def _wrap(text: str, cols: int, first: str, rest: str) -> list[str]:
    """Prose wrapped to the width (never a command: those stay on one line to copy and paste);
    Chinese breaks between characters, counted in display cells."""
    return i18n.wrap(printable(text), cols, first, rest)


def _who(rank: Any) -> str:
    """'rank 3' for a rank number; NCCL's host:pid when the log names no rank."""
    rank = str(rank)
    return _("rank {rank}", rank=rank) if rank.isdigit() else _("process {who}", who=printable(rank))


def _located(file: str, line: Any, text: str, indent: str, cols: int) -> list[str]:
    """`file:line: text` on one line when it fits, else the location and the text below it.
    The location is never cut: it is what one pastes into an editor or `less +N`."""
    where = f"{printable(file)}:{line}:"
    if len(indent) + i18n.cells(where) + 1 + i18n.cells(" ".join(str(text).split())) <= cols:
        return [f"{indent}{where} {_clip(text, cols)}"]
    inner = indent + "  "
    return [f"{indent}{where}", inner + _clip(text, cols - len(inner))]


def next_action(kb: Any, cause_id: str, data: dict[str, Any], cols: int | None = None) -> list[str]:
    """The cause's first fix, copy-pasteable, with its note; prose wrapped, commands whole."""
    cols = cols or width()
    cause = kb.causes.get(cause_id)
    if cause is None:
        return _wrap(_("Not a guide cause ({cause_id}): see the evidence above; for a SIGKILL "
                       "check the host's OOM killer:", cause_id=cause_id), cols, "", "") + [
            "  dmesg -T | grep -i -E 'killed process|oom'"]
    out = _wrap(f"{cause.fix}".strip(), cols - 2, "", "")
    if cause.fixes:
        fix = fix_for_backend(cause.fixes, ((data.get("facts") or {}).get("job") or {}).get("backend"))
        # a multi-line fix is a snippet: every line indented alike, none of them wrapped
        out.extend(f"  {ln}" for ln in str(fix.text).splitlines())
        if fix.note:
            out.extend(_wrap(f"({fix.note})", cols - 2, "  ", "   "))
    return out


def render(data: dict[str, Any], kb: Any, top: int = 5, cols: int | None = None) -> str:
    """The `logs --json` document `data` as text; its verdict is the Diagnosis (or, for a
    LogReport.to_dict() not yet diagnosed, the analysis's own, which states no confidence)."""
    cols = cols or width()
    lines: list[str] = []
    skipped = data.get("skipped") or []
    lines.append(_("Read {n} file(s), {size}", n=data['files_read'], size=human_size(data['bytes_read']))
                 + (_("; skipped {n}", n=len(skipped)) if skipped else "") + _("."))
    for s in skipped[:20]:
        lines.append("  " + _("skipped {path}: {reason}", path=printable(s['path']),
                              reason=printable(s['reason'])))
    if len(skipped) > 20:
        lines.append("  " + _("... and {n} more skipped", n=len(skipped) - 20))
    for note in data.get("notes") or []:
        lines.extend(_wrap(_("note: {note}", note=note), cols, "  ", "    "))
    causes = data.get("causes") or []
    said = data.get("verdict") or {}
    verdict = Diagnosis.from_dict(said)
    unsure = verdict.confidence == "unknown"
    lines.append("")
    lines.extend(_verdict(verdict, kb, cols))
    if not causes:
        lines.append(_("No known failure signature in these logs."))
        lines.extend(_wrap(_("Next: turn on NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL, "
                             "rerun the job, and read its new logs:"), cols, "", ""))
        lines.append("  distdoctor logs <dir> --symptom hang")
    else:
        if unsure and verdict.failed:
            lines.extend(_wrap(_("Where to look first (not enough evidence for any of them: no fix until "
                                 "the evidence names one):"), cols, "", ""))
        elif not verdict.failed:
            lines.extend(_wrap(_("No failure line in these logs. What they show about the set-up, and "
                                 "what the symptom points at (facts and priors, not evidence):"),
                               cols, "", ""))
        else:
            lines.append(_("Most likely causes (basis: evidence = lines that show the failure, facts = "
                           "what the logs show, prior = the symptom alone):"))
        for n, c in enumerate(causes[:top], 1):
            cause = kb.causes.get(c["id"])
            title = cause.title if cause else _("outside the guide's causes")
            basis = _(str(c.get('basis', 'evidence')))  # the JSON keeps the English word
            lines.extend(_wrap(f"{n:>2}. {c['id']}  [{basis}]  {title}", cols, "", "      "))
            why_, against_ = _("why: "), _("against: ")
            for why in [r for r in c.get("reasons", []) if not r.startswith("signatures:")][:3]:
                lines.extend(_wrap(why_ + why, cols, "      ", "           "))
            for e in c.get("evidence", [])[:4]:
                lines.extend(_located(e["file"], e["line"], e["text"], "      ", cols))
            for against in c.get("against", [])[:2]:
                lines.extend(_wrap(against_ + against, cols, "      ", "           "))
        if len(causes) > top:
            lines.append("    " + _("... {n} more (--top {top})", n=len(causes) - top, top=len(causes)))
    ff = data.get("first_failure")
    if ff:
        lines.append("")
        who = f"{_who(ff['rank'])}, " if ff.get("rank") is not None else ""
        lines.append(_("First failure: {where}", where=f"{who}{printable(ff['file'])}:{ff['line']}"))
        lines.append(f"  {_clip(ff['text'], cols - 2)}")
    lines.extend(_timeline(data.get("timeline") or {}, verdict.ranks, cols)
                 or _collectives(data.get("ranks") or {}))
    lines.extend(_disagreements(data.get("facts") or {}, cols))
    if causes and not unsure:
        lines.append("")
        lines.append(_("Next action:"))
        lines.extend(("  " + ln) if ln else ln for ln in next_action(kb, causes[0]["id"], data, cols))
    # the history's repeat offender is written beside the diagnosis (tui/commands/logs.py:remember)
    lines.extend(_memory(verdict, said.get("repeat_offender"), cols))
    if verdict.collect:
        lines.append("")
        lines.append(_("Collect next (copy-paste):"))
        lines.extend(f"  {printable(c)}" for c in verdict.collect)
    return "\n".join(lines) + "\n"


def _memory(verdict: Diagnosis, bad: Any, cols: int) -> list[str]:
    """Seen before (the incident history) and a repeat-offender host (`bad`) with the command that
    takes it out of service (printed, never run)."""
    out: list[str] = []
    seen = list(verdict.seen_before)
    if seen:
        out += ["", _("Seen before:")]
        for x in seen[:5]:
            what = x.get("resolution") or _("no resolution recorded")
            out.extend(_wrap(f"{x.get('time') or '?'}  #{x.get('id')}  {what}  ({x.get('why') or ''})",
                             cols, "  ", "    "))
    if isinstance(bad, dict) and bad.get("host"):
        out += ["", _("Repeat offender: {host} was the culprit in {n} incidents; to take it out of service:",
                      host=printable(str(bad["host"])), n=bad.get("incidents", "?"))]
        out.extend(f"  {printable(c)}" for c in bad.get("commands") or [])
    return out


def _verdict(verdict: Diagnosis, kb: Any, cols: int) -> list[str]:
    """The answer first: the cause and how sure, or that the evidence cannot tell; then who failed
    first, who was stuck, who waited, and whether a restart will help."""
    who = verdict.culprit
    out: list[str] = []
    confidence = verdict.confidence
    cause = verdict.cause
    if cause:
        known = kb.causes.get(cause)
        out.extend(_wrap(_("Verdict ({confidence}): {cause}: {title}", confidence=_(confidence), cause=cause,
                           title=known.title if known else _("outside the guide's causes")), cols, "", "  "))
    elif verdict.failed:
        out.extend(_wrap(_("Verdict (unknown): not enough evidence in these logs to name a cause; what to "
                           "collect next is below."), cols, "", "  "))
    if who:
        ranks = rank_span([str(r) for r in who.get("ranks") or []]) or "?"
        out.append(_("Culprit: rank {ranks} ({role})", ranks=printable(ranks), role=_(str(who.get('role')))))
    elif verdict.failed:
        out.append(_("Culprit: not named by these logs (no rank's own lines show who failed first)"))
    if verdict.summary:
        out.extend(_wrap(verdict.summary, cols, "  ", "  "))
    if verdict.recurrence:
        out.append(_("Restart: {recurrence}", recurrence=_(RECURRENCE.get(verdict.recurrence, verdict.recurrence))))
    return out + ([""] if out else [])


RECURRENCE = {"will-recur": "it will happen again until the cause is fixed",
              "may-pass": "it may pass on a rerun (a transient)",
              "exclude-node": "exclude the node until it is repaired"}


STATUS_WORDS = {"lost-peer": "lost peer", "timed-out": "timed out", "no-end-seen": "no end seen"}
ENDS = {"crashed": "crashed", "killed": "killed", "lost-peer": "lost peer", "timeout": "timed out",
        "exited": "exited", "finished": "finished", "unknown": "no end seen"}


def _timeline(timeline: dict[str, dict[str, Any]], status: Mapping[str, Any], cols: int) -> list[str]:
    """One row per rank: how its lines end and where it was (the per-rank timeline)."""
    rows = [(r, t) for r, t in timeline.items() if (t.get("end") or {}).get("kind") != "unknown"
            or t.get("last_collective") or t.get("step")]
    if not rows:
        return []
    out = ["", _("Ranks (how each rank's own lines end; last collective from the watchdog):")]
    for r, t in rows[:16]:
        end = t.get("end") or {}
        lc = t.get("last_collective") or {}
        at = " ".join(p for p in (f"SeqNum {lc['seq']}" if lc.get("seq") is not None else "",
                                  str(lc.get("op") or "")) if p)
        step = t.get("step") or {}
        doing = ", ".join(p for p in (at, f"{_(str(step.get('kind')))} {step.get('n')}" if step else "")
                          if p)
        detail = end.get("type") or ""
        word = (status.get(r) or {}).get("status")  # the diagnosis's one word, as in the JSON
        ends = _(STATUS_WORDS.get(word, word) if word else ENDS.get(end.get('kind', ''), end.get('kind', '')))
        # padded by display width: the columns stay aligned when the words are Chinese
        line = f"  {i18n.pad(_('rank {rank}', rank=i18n.pad(printable(r), 4)), 9)} {i18n.pad(ends, 11)} {doing}"
        if detail:
            line += f"  {detail}"
        out.append(i18n.clip(printable(line), cols))
    if len(rows) > 16:
        out.append("  " + _("... {n} more ranks (--json for all)", n=len(rows) - 16))
    return out


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
    out = ["", _("Ranks (last collective from the watchdog):")]
    rows = sorted(groups.items(), key=lambda kv: (kv[0][0] != "crashed", -len(kv[1])))[:12]
    spans = [printable(_clip(rank_span(rs), 40)) for _, rs in rows]
    pad = max(i18n.cells(s) for s in spans)
    for ((status, seq, op, pos), _n), span in zip(rows, spans):
        # a watchdog line may name the op without its SeqNum (or the reverse)
        where = " ".join(p for p in (f"SeqNum {seq}" if seq is not None else "", op or "") if p)
        who = _("rank {rank}", rank=i18n.pad(span, pad))
        out.append(f"  {who}  {i18n.pad(_(status or ''), 8)} {where} {pos or ''}".rstrip())
    if len(groups) > 12:
        out.append("  " + _("... {n} more groups (--json for all)", n=len(groups) - 12))
    return out


def _disagreements(facts: dict[str, Any], cols: int) -> list[str]:
    bad = facts.get("disagree") or []
    if not bad:
        return []
    out = ["", _("Facts that differ across ranks:")]
    for k in bad:
        vals = facts.get("values", {}).get(k, {})
        out.extend(_wrap(f"{k}: " + _("; ").join(_("{value} on rank {ranks}", value=v, ranks=rs)
                                                 for v, rs in vals.items()),
                         cols, "  ", "    "))
    return out
