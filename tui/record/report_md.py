"""Renders a report dict (see report.build_report) as Markdown."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.printable import clean_block

from .findings import findings_of
from .report_causes import basis_words, split
from .report_verdict import rank_row_words, words

# Backticks stay: the knowledge base's prose uses them for commands, and a stray one only
# changes how text looks, never what it says.
_ESCAPE = re.compile(r"([\\|<*])")
PROBLEMS = ("fail", "error", "warn")  # findings shown with their detail and fix
SUSPECTS_SHOWN = 3  # the symptom's usual suspects named in the Symptom section


def tr(message: str, **values: Any) -> str:
    """A fixed phrase in the report's language (knowledge/i18n.py; English is the key)."""
    return i18n.t(message, **values)


def col(name: str) -> str:
    """A column or row heading: its own key, since "step" or "kind" mean something else in a log."""
    text = tr(f"report column: {name}")
    return name if text.startswith("report column: ") else text


def basis_text(cause: Mapping[str, Any]) -> str:
    """basis_words in the report's language: "evidence: 8 log lines" / "证据：8 行日志"."""
    if i18n.resolve() == "en":
        return basis_words(cause)
    basis, n = str(cause.get("basis") or "?"), int(cause.get("evidence_count") or 0)
    detail = {"evidence": tr("{n} log line(s)", n=n) if n else tr("runs or dumps"),
              "facts": tr("what the logs and checks show about the setup"),
              "prior": tr("the symptom's usual suspects")}.get(basis, "")
    return tr("{basis}: {detail}", basis=tr(basis), detail=detail) if detail else tr(basis)


def esc(value: Any) -> str:
    """Inline text safe inside a Markdown paragraph or table cell."""
    text = "" if value is None else str(value)
    return _ESCAPE.sub(r"\\\1", text).replace("\r", "").replace("\n", " ")


def fence(text: str, lang: str = "") -> str:
    """A fenced block longer than any backtick run inside, so log lines cannot break out of it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _header(r: Mapping[str, Any]) -> list[str]:
    out = [f"# {esc(r.get('title', tr('distdoctor report')))}\n"]
    if not r.get("redacted"):
        out.append("> **" + tr("WARNING: redaction was turned off.") + "** " + tr(
            "This report may contain tokens, passwords and keys. Do not share it.") + "\n")
    return out


def _verdict(r: Mapping[str, Any]) -> list[str]:
    """The first section, one box (a quote block): the culprit and where, how sure, what happened,
    the cause and where it is explained, the next action (the fix, or what to collect), whether
    it will come back."""
    v = _d(r.get("verdict"))
    out = [f"## {tr('Verdict')}\n"]
    if not v:
        return out + [tr("No rank is named by the evidence gathered.") + "\n"]
    who, w = _d(v.get("culprit")), words(v)
    head = f"**{esc(w['culprit'])}**"
    if who.get("location"):
        head += " " + tr("at {where}", where=f"`{code(who['location'])}`")
    head += f" · **{esc(w['confidence'])}**"
    box = [head]
    if v.get("summary"):
        box.append(f"{tr('What happened:')} {esc(v['summary'])}")
    if v.get("cause"):
        box.append(f"{tr('Cause:')} **{esc(v.get('title'))}** (`{code(v['cause'])}`); "
                   + tr("explained by {command}", command=f"`{code(v.get('explain'))}`"))
    action = _d(v.get("next_action"))
    if action.get("text"):
        label = tr("Fix:") if action.get("kind") == "fix" else tr("Collect next:")
        box.append(f"{label} {esc(action['text'])}")
    lines = [f"> {line}" for part in box for line in (part, "")]
    if v.get("command"):
        lines += ["> " + ln if ln else ">" for ln in fence(str(v["command"]),
                                                         "python" if "(" in str(v["command"]) else "sh").splitlines()]
        lines.append(">")
    collect = [str(c) for c in _l(v.get("collect")) if str(c) != str(v.get("command") or "")]
    if action.get("kind") == "collect" and collect:
        lines += [f"> - `{code(c)}`" for c in collect] + [">"]
    if w["recurrence"]:
        lines.append(f"> {tr('Recurrence:')} {esc(w['recurrence'])}")
    while lines and lines[-1] in (">", "> "):
        lines.pop()
    return out + ["\n".join(lines) + "\n"]


def code(value: Any) -> str:
    """Text inside a `code span`: a backtick in it would end the span."""
    return str(value or "").replace("`", "'").replace("\n", " ")


def _ranks(r: Mapping[str, Any]) -> list[str]:
    """How each rank ended, one row per rank (the diagnosis's per-rank statuses)."""
    data = _d(r.get("ranks"))
    if not _l(data.get("rows")):
        return []
    return [f"## {tr('How each rank ended')}\n",
            table([col(c) for c in _l(data.get("columns"))],
                  [rank_row_words(row, _l(data.get("columns"))) for row in _l(data.get("rows"))])]


def _metadata(r: Mapping[str, Any]) -> list[str]:
    session, versions = _d(r.get("session")), _d(r.get("versions"))
    out = [f"## {tr('Session')}\n"]
    out.append(table(["", ""], [
        [col("session"), session.get("id")], [col("host"), session.get("host")],
        [col("created"), session.get("created")], [col("updated"), session.get("updated")],
        [col("report generated"), r.get("generated")],
        ["distdoctor", versions.get("distdoctor")], [col("knowledge"), versions.get("knowledge")],
        [col("redacted"), col("yes") if r.get("redacted") else col("NO")],
        [col("pseudonymized"), col("yes") if r.get("pseudonymized") else col("no")],
    ]))
    return out


def _symptom(r: Mapping[str, Any]) -> list[str]:
    s = r.get("symptom")
    if not isinstance(s, dict):
        return [f"## {tr('Symptom')}\n", tr("Not classified.") + "\n"]
    kind = col(str(s["kind"])) if s.get("kind") else tr("not chosen (only a line was pasted)")
    out = [f"## {tr('Symptom')}\n", f"**{esc(kind)}**"
           + (f": {esc(s.get('title') or s.get('sub'))}" if s.get("sub") else "") + "\n"]
    if s.get("text"):
        out.append(tr("Pasted line:") + "\n\n" + fence(str(s["text"])))
    suspects = _l(s.get("suspects"))
    if suspects:
        # where the symptom alone says to look first: a few, not the whole prior list with scores
        out.append(tr("Where this symptom usually comes from (before any evidence):") + "\n")
        out += [f"{n}. `{esc(x.get('id'))}` {esc(x.get('title'))}"
                for n, x in enumerate(suspects[:SUSPECTS_SHOWN], 1)]
        if len(suspects) > SUSPECTS_SHOWN:
            out.append(tr("and {n} more", n=len(suspects) - SUSPECTS_SHOWN))
        out.append("")
    for a in _l(r.get("answers")):
        out.append(f"- {esc(a.get('question'))}: **{esc(a.get('answer'))}**")
    return out + [""]


def _conclusion(r: Mapping[str, Any]) -> list[str]:
    c = _d(r.get("conclusion"))
    out = [f"## {tr('Conclusion')}\n"]
    causes = _l(c.get("causes"))
    if not causes:
        return out + [tr("No cause identified yet: the session holds no evidence that points at one.") + "\n"]
    source = {"conclusion": "as concluded in the session",
              "combined": "ranked from all the evidence gathered"}.get(str(c.get("source")), "")
    out.append(tr("Causes {source}, most likely first:", source=tr(source) if source else "") + "\n")
    if c.get("note"):
        out.append(f"> {esc(c['note'])}\n")
    main, considered = split(causes)
    for n, cause in enumerate(main, 1):
        out.append(f"{n}. **`{esc(cause.get('id'))}`** {esc(cause.get('title'))} "
                   f"{tr('(basis: {basis})', basis=esc(basis_text(cause)))}")
        # a code span shows a log line as it is (backslash escapes do not apply inside one)
        out += ["   - `" + str(line).replace("`", "'").replace("\n", " ") + "`"
                for line in _l(cause.get("evidence_lines"))]
        more = int(cause.get("evidence_count") or 0) - len(_l(cause.get("evidence_lines")))
        if more > 0:
            out.append("   - " + tr("and {n} more line(s): see Log evidence", n=more))
        out += [f"   - {tr('check: ')}{esc(c)}" for c in _l(cause.get("checks"))]
        if _l(cause.get("reasons")):
            out.append(f"   - {tr('why: ')}{esc('; '.join(_l(cause.get('reasons'))))}")
        out.append("   - " + tr("explained by {command}", command=f"`distdoctor knowledge show {code(cause.get('id'))}`"))
    out.append("")
    if considered:
        out.append("<details><summary>" + tr("Also considered: {n} cause(s) with neither evidence "
                                             "nor a failed check", n=len(considered)) + "</summary>\n")
        out += [f"- `{esc(c.get('id'))}` {esc(c.get('title'))} "
                f"{tr('(basis: {basis})', basis=esc(tr(str(c.get('basis')))))}"
                + (f": {esc('; '.join(_l(c.get('reasons'))))}" if _l(c.get("reasons")) else "")
                for c in considered]
        out.append("\n</details>\n")
    if _l(r.get("fixes")):
        out.append(f"## {tr('Fixes')}\n")
        for fix in _l(r.get("fixes")):
            out.append(f"### {esc(fix.get('title'))} (`{esc(fix.get('cause'))}`)\n")
            out.append(esc(fix.get("fix")) + "\n")
            for f in _l(fix.get("fixes")):
                if f.get("note"):
                    out.append(esc(f["note"]) + "\n")
                lang = {"env": "sh", "command": "sh", "code": "python"}.get(str(f.get("kind")), "")
                out.append(fence(str(f.get("text", "")), lang))
    switches = _l(r.get("switches_to_remove"))
    out.append(f"## {tr('Switches to remove later')}\n")
    if switches:
        out.append(tr("Debugging switches must not stay in production scripts: find the root cause, "
                      "then remove each of these.") + "\n")
        out.append(table([col("switch"), col("value"), col("where"), col("why")],
                         [[s.get("name"), s.get("value"), s.get("where"), s.get("why")] for s in switches]))
    else:
        out.append(tr("None found in the checked environment or the bisection.") + "\n")
    return out


def _steps(r: Mapping[str, Any]) -> list[str]:
    steps = _l(r.get("steps"))
    if not steps:
        return [f"## {tr('Steps taken')}\n", tr("No step recorded yet.") + "\n"]
    return [f"## {tr('Steps taken')}\n", table(["#", col("step"), col("kind"), col("time"), col("result")],
                                      [[s.get("n"), s.get("step"), s.get("kind"), s.get("time"),
                                        s.get("summary")] for s in steps])]


def _findings(r: Mapping[str, Any]) -> list[str]:
    out = []
    findings = findings_of(r)
    if findings:
        out.append(f"## {tr('Findings')}\n")
        # a problem gets its detail as prose and its fix as a block one can copy: in a table
        # cell a command is escaped (\\|, \\<) and wraps wherever the viewer likes
        problems = [f for f in findings if f.status in PROBLEMS]
        for f in problems:
            causes = ", ".join(f"`{esc(c)}`" for c in f.cause_ids)
            out.append(f"- **{esc(f.status.upper())}** {esc(f.title)}" + (f" ({causes})" if causes else ""))
            if f.detail:
                out.append(f"\n  {esc(f.detail)}")
            if f.fix:
                out.append("\n" + "\n".join("  " + ln if ln else ln for ln in fence(f.fix, "sh").splitlines()))
            out.append("")
        rest = [f for f in findings if f.status not in PROBLEMS]
        if rest:
            out.append(table([col("status"), col("finding"), col("detail")],
                             [[f.status.upper(), f.title, f.detail] for f in rest]))
    evidence = _l(r.get("evidence"))
    if evidence:
        out.append(f"## {tr('Log evidence')}\n")
        by_cause: dict[str, list[dict[str, Any]]] = {}
        for e in evidence:
            by_cause.setdefault(str(e.get("cause")), []).append(e)
        for cause, lines in by_cause.items():
            out.append(f"`{esc(cause)}`:\n")
            out.append(fence("\n".join(f"{e.get('file')}:{e.get('line')}: {e.get('text')}" for e in lines)))
    logs = _d(r.get("logs"))
    first = _d(logs.get("first_failure"))
    if first:
        rank = f"rank {esc(first['rank'])}, " if first.get("rank") not in (None, "") else ""
        out.append(tr("First failure: {where}", where=f"{rank}{esc(first.get('file'))}:"
                                                      f"{esc(first.get('line'))}") + "\n")
        out.append(fence(str(first.get("text", ""))))
    return out


def _environment(r: Mapping[str, Any]) -> list[str]:
    """The raw facts, folded (a reader opens them when a finding needs checking), by probe."""
    rows = _l(r.get("environment"))
    if not rows:
        return []
    groups: dict[str, list[Any]] = {}
    for e in rows:
        groups.setdefault(str(e.get("group")), []).append([e.get("name"), e.get("value")])
    out = [f"## {tr('Environment facts')}\n",
           "<details><summary>" + tr("{n} facts from {g} probes: {names}", n=len(rows), g=len(groups),
                                     names=esc(', '.join(groups))) + "</summary>\n"]
    for group, facts in groups.items():
        out += [f"**{esc(group)}**\n", table([col("fact"), col("value")], facts)]
    return out + ["</details>\n"]


def _topology(r: Mapping[str, Any]) -> list[str]:
    t = r.get("topology")
    if not isinstance(t, dict):
        return []
    out = [f"## {tr('Topology')}\n"]
    summary = _d(t.get("summary"))
    if summary:
        out.append(", ".join(f"{esc(k)}: **{esc(v)}**" for k, v in summary.items()) + "\n")
    if t.get("text"):
        out.append(fence(str(t["text"]), "text"))
    elif t.get("note"):
        out.append(f"_{esc(t['note'])}_\n")
    out += [f"- {esc(a)}" for a in _l(t.get("advice"))]
    return out + [""]


def tables_md(title: str, data: Any) -> list[str]:
    if not isinstance(data, dict):
        return []
    out = [f"## {tr(title)}\n"]
    if _l(data.get("summary")):
        out.append(table([col("item"), col("value")], _l(data.get("summary"))))
    for t in _l(data.get("tables")):
        out.append(f"{esc(t.get('title'))}:\n")
        out.append(table(_l(t.get("columns")), _l(t.get("rows"))))
        if t.get("more"):
            out.append(tr("({n} more rows not shown)", n=t['more']) + "\n")
    if data.get("log_tail"):
        out.append(tr("Last lines of its output:") + "\n")
        out.append(fence(str(data["log_tail"])))
    return out


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as one Markdown document."""
    parts = (_header(report) + _verdict(report) + _ranks(report) + _symptom(report) + _conclusion(report)
             + _steps(report)
             + _findings(report) + _environment(report) + _topology(report)
             + tables_md("Minimal repro", report.get("repro"))
             + tables_md("Bisection", report.get("bisect"))
             + tables_md("Fleet comparison", report.get("fleet"))
             + tables_md("Stacks (where each rank was)", report.get("stacks"))
             + tables_md("Flight Recorder", report.get("flight_recorder")) + _metadata(report))
    return clean_block("\n".join(parts).rstrip() + "\n")  # no control code from a session reaches a terminal
