"""Renders a report dict as one self-contained HTML file: inline CSS, the topology as inline SVG."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.printable import clean_block

from .findings import findings_of
from .report_causes import split
from .report_md import SUSPECTS_SHOWN, basis_text, col, tr
from .report_verdict import rank_row_words, words

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif,"Noto Color Emoji","Apple Color Emoji",
"Segoe UI Emoji";max-width:72rem;margin:2rem auto;
padding:0 1rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td{overflow-wrap:break-word}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;font:13px/1.35 ui-monospace,Menlo,Consolas,monospace}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
.status{font-weight:700;padding:0 .35rem;border-radius:.2rem;white-space:nowrap}
.s-fail,.s-error{background:#ffebe9;color:#a40e26}.s-warn{background:#fff8c5;color:#7d4e00}
.s-ok{background:#dafbe1;color:#116329}.s-unavailable{background:#eaeef2;color:#57606a}
.note{border-left:4px solid #7d4e00;padding:.2rem .8rem;background:#fff8c5}
.warning{border:2px solid #a40e26;background:#ffebe9;padding:.5rem 1rem;font-weight:700}
.meta td:first-child{width:12rem;color:#57606a}
.topo-pic{overflow-x:auto}.topo-pic svg{max-width:none;height:auto}
.basis{color:#57606a;font-size:.92em;white-space:nowrap}
details.facts h3{font-size:1rem;margin:.8rem 0 .2rem}
summary{cursor:pointer;font-weight:600}
ol li{margin:.3rem 0}
.verdict{border:2px solid #57606a;border-left-width:.5rem;border-radius:.3rem;padding:.4rem 1rem;
background:#f6f8fa}
.verdict.v-confirmed{border-color:#1a7f37;background:#f0fff4}.verdict.v-likely{border-color:#9a6700;
background:#fffbe6}.verdict .who{font-size:1.1rem;margin:.3rem 0 .5rem}
.verdict dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:0}
.verdict dt{font-weight:600;color:#57606a}.verdict dd{margin:0}.verdict pre{margin:.3rem 0}
.conf{font-weight:700;padding:0 .4rem;border-radius:.2rem;background:#eaeef2;white-space:nowrap}
.c-confirmed{background:#dafbe1;color:#116329}.c-likely{background:#fff8c5;color:#7d4e00}
"""

_SVG_DROP = [
    re.compile(r"<\?xml[^>]*>|<!DOCTYPE[^>]*>", re.I),
    re.compile(r"<(script|foreignObject|iframe)\b.*?</\1\s*>", re.I | re.S),
    re.compile(r"<(script|foreignObject|iframe)\b[^>]*/>", re.I),
    re.compile(r"""\son\w+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)""", re.I),
    # links and sources that leave the file; "#id" references inside the SVG stay
    re.compile(r"""\s(?:xlink:)?(?:href|src)\s*=\s*(?:"(?!#)[^"]*"|'(?!#)[^']*'|(?!["'#])[^\s>]+)""", re.I),
    re.compile(r"@import[^;]*;?|url\(\s*['\"]?(?!#)[^)]*\)", re.I),
]


def sanitize_svg(svg: str) -> str:
    """Keep the picture, drop anything that could run code or fetch from outside the file."""
    for pattern in _SVG_DROP:
        svg = pattern.sub("", svg)
    return svg.strip()


def _svg(facts: Any) -> tuple[str, str]:
    """(svg, note): the picture from distdoctor.probes.topology.to_svg, or why there is none."""
    if not isinstance(facts, dict) or not facts:
        return "", ""
    from distdoctor.probes.topology import to_svg

    try:
        svg = to_svg(facts)
    except Exception as exc:  # a drawing bug must not lose the whole report
        return "", f"topology picture failed: {type(exc).__name__}: {exc}"
    svg = sanitize_svg(str(svg or ""))
    return (svg, "") if svg.lower().startswith("<svg") else ("", "topology picture was not SVG")


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def e(value: Any) -> str:
    return escape("" if value is None else str(value))


def status(word: Any) -> str:
    """Status as a word and a colour, never colour alone."""
    w = str(word or "").lower()
    return f'<span class="status s-{e(w)}">{e(w.upper())}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], raw_cols: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if i in raw_cols else wrap(c)}</td>" for i, c in enumerate(row))
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_BREAK_AFTER = re.compile(r"([/_.:=,;\\-]+)(?=\w)")
LONG = 24  # a token this long gets break points after its separators


def wrap(value: Any) -> str:
    """Escaped text whose long tokens (paths, NCCL_* names, versions, hashes) may break after a
    separator (<wbr>), so a narrow column wraps at `/` or `_` rather than mid-word."""
    out = []
    for token in re.split(r"(\s+)", "" if value is None else str(value)):
        if len(token) >= LONG and not token.isspace():
            out.append("<wbr>".join(escape(part) for part in _BREAK_AFTER.sub("\\1\0", token).split("\0")))
        else:
            out.append(escape(token))
    return "".join(out)


def pre(text: Any) -> str:
    return f"<pre>{e(text)}</pre>"


def _header(r: Mapping[str, Any]) -> str:
    out = f"<h1>{e(r.get('title', tr('distdoctor report')))}</h1>"
    if not r.get("redacted"):
        out += ('<p class="warning">' + e(tr("WARNING: redaction was turned off.")) + " "
                + e(tr("This report may contain tokens, passwords and keys. Do not share it.")) + "</p>")
    return out


def _verdict(r: Mapping[str, Any]) -> str:
    """The first section, one highlighted box: the culprit and where, how sure, what happened, the
    cause and where it is explained, the next action (the fix, or what to collect), recurrence."""
    v = _d(r.get("verdict"))
    out = f"<h2>{e(tr('Verdict'))}</h2>"
    if not v:
        return out + f"<p>{e(tr('No rank is named by the evidence gathered.'))}</p>"
    who, w = _d(v.get("culprit")), words(v)
    confidence = str(v.get("confidence") or "unknown")
    head = f"<strong>{e(w['culprit'])}</strong>"
    if who.get("location"):
        head += " " + e(tr("at {where}", where="\0")).replace("\0", f"<code>{wrap(who['location'])}</code>")
    head += f' <span class="conf c-{e(confidence)}">{e(w["confidence"])}</span>'
    rows = []
    if v.get("summary"):
        rows.append((tr("What happened:"), wrap(v["summary"])))
    if v.get("cause"):
        rows.append((tr("Cause:"), f"<strong>{e(v.get('title'))}</strong> (<code>{e(v['cause'])}</code>); "
                     + e(tr("explained by {command}", command="\0")).replace("\0", f"<code>{e(v.get('explain'))}</code>")))
    action = _d(v.get("next_action"))
    if action.get("text") or v.get("command"):
        label = tr("Fix:") if action.get("kind") == "fix" else tr("Collect next:")
        body = wrap(action.get("text"))
        if v.get("command"):
            body += pre(v["command"])
        collect = [str(c) for c in _l(v.get("collect")) if str(c) != str(v.get("command") or "")]
        if action.get("kind") == "collect" and collect:
            body += "<ul>" + "".join(f"<li><code>{wrap(c)}</code></li>" for c in collect) + "</ul>"
        rows.append((label, body))
    if w["recurrence"]:
        rows.append((tr("Recurrence:"), e(w["recurrence"])))
    return (out + f'<div class="verdict v-{e(confidence)}"><p class="who">{head}</p><dl>'
            + "".join(f"<dt>{e(k)}</dt><dd>{val}</dd>" for k, val in rows) + "</dl></div>")


def _ranks(r: Mapping[str, Any]) -> str:
    """How each rank ended, one row per rank (the diagnosis's per-rank statuses)."""
    data = _d(r.get("ranks"))
    if not _l(data.get("rows")):
        return ""
    return (f"<h2>{e(tr('How each rank ended'))}</h2>"
            + table([col(c) for c in _l(data.get("columns"))],
                  [rank_row_words(row, _l(data.get("columns"))) for row in _l(data.get("rows"))]))


def _metadata(r: Mapping[str, Any]) -> str:
    s, v = _d(r.get("session")), _d(r.get("versions"))
    out = f"<h2>{e(tr('Session'))}</h2>"
    rows = [[col("session"), s.get("id")], [col("host"), s.get("host")], [col("created"), s.get("created")],
            [col("updated"), s.get("updated")], [col("report generated"), r.get("generated")],
            ["distdoctor", v.get("distdoctor")], [col("knowledge"), v.get("knowledge")],
            [col("redacted"), col("yes") if r.get("redacted") else col("NO")],
            [col("pseudonymized"), col("yes") if r.get("pseudonymized") else col("no")]]
    return out + '<table class="meta"><tbody>' + "".join(
        f"<tr><td>{e(a)}</td><td>{e(b)}</td></tr>" for a, b in rows) + "</tbody></table>"


def _symptom(r: Mapping[str, Any]) -> str:
    s = r.get("symptom")
    out = f"<h2>{e(tr('Symptom'))}</h2>"
    if not isinstance(s, dict):
        return out + f"<p>{e(tr('Not classified.'))}</p>"
    kind = col(str(s["kind"])) if s.get("kind") else tr("not chosen (only a line was pasted)")
    out += f"<p><strong>{e(kind)}</strong>"
    out += f": {e(s.get('title') or s.get('sub'))}</p>" if s.get("sub") else "</p>"
    if s.get("text"):
        out += f"<p>{e(tr('Pasted line:'))}</p>" + pre(s["text"])
    suspects = _l(s.get("suspects"))
    if suspects:
        # where the symptom alone says to look first: a few, not the whole prior list with scores
        out += (f"<p>{e(tr('Where this symptom usually comes from (before any evidence):'))}</p><ol>"
                + "".join(f"<li><code>{e(x.get('id'))}</code> {e(x.get('title'))}</li>"
                          for x in suspects[:SUSPECTS_SHOWN]) + "</ol>")
        if len(suspects) > SUSPECTS_SHOWN:
            out += f"<p>{e(tr('and {n} more', n=len(suspects) - SUSPECTS_SHOWN))}</p>"
    answers = _l(r.get("answers"))
    if answers:
        out += "<ul>" + "".join(f"<li>{e(a.get('question'))}: <strong>{e(a.get('answer'))}</strong></li>"
                                for a in answers) + "</ul>"
    return out


def _conclusion(r: Mapping[str, Any]) -> str:
    c = _d(r.get("conclusion"))
    out = f"<h2>{e(tr('Conclusion'))}</h2>"
    causes = _l(c.get("causes"))
    if not causes:
        out += f"<p>{e(tr('No cause identified yet: the session holds no evidence that points at one.'))}</p>"
    else:
        source = {"conclusion": "as concluded in the session",
                  "combined": "ranked from all the evidence gathered"}.get(str(c.get("source")), "")
        out += f"<p>{e(tr('Causes {source}, most likely first:', source=tr(source) if source else ''))}</p>"
        if c.get("note"):
            out += f'<p class="note">{e(c["note"])}</p>'
        main, considered = split(causes)
        out += "<ol>"
        for cause in main:
            items = [f"<li><code>{wrap(line)}</code></li>" for line in _l(cause.get("evidence_lines"))]
            more = int(cause.get("evidence_count") or 0) - len(_l(cause.get("evidence_lines")))
            if more > 0:
                items.append(f"<li>{e(tr('and {n} more line(s): see Log evidence', n=more))}</li>")
            items += [f"<li>{e(tr('check: '))}{wrap(c)}</li>" for c in _l(cause.get("checks"))]
            if _l(cause.get("reasons")):
                items.append(f"<li>{e(tr('why: '))}{wrap('; '.join(_l(cause.get('reasons'))))}</li>")
            items.append("<li>" + e(tr("explained by {command}", command="\0")).replace(
                "\0", f"<code>distdoctor knowledge show {e(cause.get('id'))}</code>") + "</li>")
            out += (f"<li><strong><code>{e(cause.get('id'))}</code></strong> {e(cause.get('title'))} "
                    f'<span class="basis">{e(tr("basis: {basis}", basis=basis_text(cause)))}</span>'
                    + (f"<ul>{''.join(items)}</ul>" if items else "") + "</li>")
        out += "</ol>"
        if considered:
            out += ("<details><summary>" + e(tr("Also considered: {n} cause(s) with neither evidence "
                                                "nor a failed check", n=len(considered)))
                    + "</summary><ul>" + "".join(
                        f"<li><code>{e(c.get('id'))}</code> {e(c.get('title'))} "
                        f"{e(tr('(basis: {basis})', basis=tr(str(c.get('basis')))))}"
                        + (f": {wrap('; '.join(_l(c.get('reasons'))))}" if _l(c.get("reasons")) else "")
                        + "</li>" for c in considered) + "</ul></details>")
    fixes = _l(r.get("fixes"))
    if fixes:
        out += f"<h2>{e(tr('Fixes'))}</h2>"
        for fix in fixes:
            out += (f"<h3>{e(fix.get('title'))} (<code>{e(fix.get('cause'))}</code>)</h3>"
                    f"<p>{e(fix.get('fix'))}</p>")
            for f in _l(fix.get("fixes")):
                out += (f"<p>{e(f.get('note'))}</p>" if f.get("note") else "") + pre(f.get("text", ""))
    switches = _l(r.get("switches_to_remove"))
    out += f"<h2>{e(tr('Switches to remove later'))}</h2>"
    if switches:
        out += ("<p>" + e(tr("Debugging switches must not stay in production scripts: find the root cause, "
                             "then remove each of these.")) + "</p>")
        out += table([col("switch"), col("value"), col("where"), col("why")],
                     [[s.get("name"), s.get("value"), s.get("where"), s.get("why")] for s in switches])
    else:
        out += f"<p>{e(tr('None found in the checked environment or the bisection.'))}</p>"
    return out


def _steps(r: Mapping[str, Any]) -> str:
    steps = _l(r.get("steps"))
    if not steps:
        return f"<h2>{e(tr('Steps taken'))}</h2><p>{e(tr('No step recorded yet.'))}</p>"
    return f"<h2>{e(tr('Steps taken'))}</h2>" + table(
        ["#", col("step"), col("kind"), col("time"), col("result")],
        [[s.get("n"), s.get("step"), s.get("kind"), s.get("time"), s.get("summary")] for s in steps])


def _findings(r: Mapping[str, Any]) -> str:
    out = ""
    findings = findings_of(r)
    if findings:
        out += f"<h2>{e(tr('Findings'))}</h2>" + table(
            [col("status"), col("finding"), col("detail"), col("causes"), col("fix")],
            [[status(f.status), wrap(f.title), wrap(f.detail), wrap(", ".join(f.cause_ids)), wrap(f.fix)]
             for f in findings],
            raw_cols=range(5))
    evidence = _l(r.get("evidence"))
    if evidence:
        out += f"<h2>{e(tr('Log evidence'))}</h2>"
        by_cause: dict[str, list[dict[str, Any]]] = {}
        for ev in evidence:
            by_cause.setdefault(str(ev.get("cause")), []).append(ev)
        for cause, lines in by_cause.items():
            out += f"<h3><code>{e(cause)}</code></h3>" + pre(
                "\n".join(f"{x.get('file')}:{x.get('line')}: {x.get('text')}" for x in lines))
    first = _d(_d(r.get("logs")).get("first_failure"))
    if first:
        rank = f"rank {first['rank']}, " if first.get("rank") not in (None, "") else ""
        where = f"{rank}{first.get('file')}:{first.get('line')}"
        out += f"<p>{e(tr('First failure: {where}', where=where))}</p>" + pre(first.get("text", ""))
    return out


def _environment(r: Mapping[str, Any]) -> str:
    """The raw facts, folded (a reader opens them when a finding needs checking), by probe."""
    rows = _l(r.get("environment"))
    if not rows:
        return ""
    groups: dict[str, list[Any]] = {}
    for x in rows:
        groups.setdefault(str(x.get("group")), []).append([e(x.get("name")), wrap(x.get("value"))])
    out = (f'<h2>{e(tr("Environment facts"))}</h2><details class="facts"><summary>'
           + e(tr("{n} facts from {g} probes: {names}", n=len(rows), g=len(groups), names=", ".join(groups)))
           + "</summary>")
    for group, facts in groups.items():
        out += f"<h3>{e(group)}</h3>" + table([col("fact"), col("value")], facts, raw_cols=(0, 1))
    return out + "</details>"


def _topology(r: Mapping[str, Any]) -> str:
    t = r.get("topology")
    if not isinstance(t, dict):
        return ""
    out = f'<h2>{e(tr("Topology"))}</h2><div class="topo">'
    summary = _d(t.get("summary"))
    if summary:
        out += "<p>" + ", ".join(f"{e(k)}: <strong>{e(v)}</strong>" for k, v in summary.items()) + "</p>"
    svg, note = _svg(t.get("facts"))
    if svg:
        # drawn a third larger than its own size so its 10-11px labels read at 100% zoom; a
        # narrow window scrolls it sideways rather than shrinking the text again
        m = re.search(r'\bwidth="(\d+)"', svg)
        if m:
            svg = svg.replace("<svg ", f'<svg style="width:{int(m.group(1)) * 4 // 3}px" ', 1)
        out += f'<div class="topo-pic">{svg}</div>'
    elif t.get("text"):
        out += pre(t["text"])
    for text in (note, t.get("note") if not t.get("text") else ""):
        if text:
            out += f"<p><em>{e(text)}</em></p>"
    advice = _l(t.get("advice"))
    if advice:
        out += "<ul>" + "".join(f"<li>{e(a)}</li>" for a in advice) + "</ul>"
    return out + "</div>"


def _tables(title: str, data: Any) -> str:
    if not isinstance(data, dict):
        return ""
    out = f"<h2>{e(tr(title))}</h2>"
    if _l(data.get("summary")):  # name/value rows: no header row of blanks
        out += '<table class="meta"><tbody>' + "".join(
            "<tr>" + "".join(f"<td>{wrap(c)}</td>" for c in _l(row)) + "</tr>"
            for row in _l(data.get("summary"))) + "</tbody></table>"
    for t in _l(data.get("tables")):
        out += f"<h3>{e(t.get('title'))}</h3>" + table(_l(t.get("columns")), _l(t.get("rows")))
        if t.get("more"):
            out += f"<p>{e(tr('({n} more rows not shown)', n=t['more']))}</p>"
    if data.get("log_tail"):
        out += (f"<details><summary>{e(tr('Last lines of its output'))}</summary>" + pre(data["log_tail"])
                + "</details>")
    return out


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one HTML file with nothing to fetch: inline CSS and SVG, no scripts."""
    body = (_header(report) + _verdict(report) + _ranks(report) + _symptom(report) + _conclusion(report)
            + _steps(report)
            + _findings(report) + _environment(report) + _topology(report)
            + _tables("Minimal repro", report.get("repro")) + _tables("Bisection", report.get("bisect"))
            + _tables("Fleet comparison", report.get("fleet"))
            + _tables("Stacks (where each rank was)", report.get("stacks"))
            + _tables("Flight Recorder", report.get("flight_recorder")) + _metadata(report))
    lang = "zh-Hans" if i18n.resolve() == "zh" else "en"  # CJK fonts and line breaking in browsers
    return (f"<!DOCTYPE html>\n<html lang=\"{lang}\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{e(report.get('title', tr('distdoctor report')))}</title><style>{CSS}</style></head>"
            f"<body>{clean_block(body)}</body></html>\n")  # no control code from a session
