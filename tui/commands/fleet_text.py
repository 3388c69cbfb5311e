"""The text view of `distdoctor fleet compare`: what agrees, what differs, and where to look next."""
from __future__ import annotations

import shlex
import textwrap
from typing import Any

from distdoctor.probes.fleet.compare import label, outlier_line, show

from .logs_text import printable, width


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _names(nodes: list[str], limit: int = 6) -> str:
    shown = ", ".join(nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")


def _wrapped(lines: list[str], cols: int) -> list[str]:
    """Each line made safe for a terminal (a snapshot's host or value may hold escape codes or
    newlines) and wrapped to the width under its own indent; commands and comments never are."""
    out: list[str] = []
    for line in lines:
        # each entry is one line: a newline inside came from a value and must not start a new one
        line = printable(line.replace("\r", "\\r").replace("\n", "\\n"))
        if len(line) <= cols or line.lstrip().startswith(("ssh ", "distdoctor ")):
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        if line.lstrip().startswith("# "):
            # a comment's continuation is a comment too: pasted into a shell, a bare
            # continuation line would run as a command of its own
            out.extend(textwrap.wrap(line, cols, subsequent_indent=indent + "# ",
                                     break_on_hyphens=False, break_long_words=True) or [line])
            continue
        # a continuation lines up after the label ("agree: ", "node-3: ") when there is one
        head, sep, _ = line.lstrip().partition(": ")
        hang = indent + " " * (len(head) + 2) if sep and len(head) < 24 else indent + "  "
        out.extend(textwrap.wrap(line, cols, subsequent_indent=hang, break_on_hyphens=False,
                                 break_long_words=False) or [line])
    return out


def render_compare(result: dict[str, Any], max_lines: int = 20, cols: int | None = None) -> str:
    """compare()'s result as text; at most `max_lines` outlier lines per field, wrapped to
    `cols` (default: the terminal's width, or 120 in a pipe)."""
    return "\n".join(_wrapped(_compare_lines(result, max_lines), cols or width()))


def _compare_lines(result: dict[str, Any], max_lines: int) -> list[str]:
    n, skipped = result["nodes"], result["skipped"]
    lines = [f"{_plural(n, 'node')} compared" + (f", {_plural(len(skipped), 'file')} skipped"
                                                  if skipped else "")]
    if result["agreed"]:
        agreed = ", ".join(f"{label(f)} {show(f, v)}" for f, v in result["agreed"].items())
        lines.append(f"agree: {agreed}")
    by_field: dict[str, list[dict[str, Any]]] = {}
    for outlier in result["outliers"]:
        by_field.setdefault(outlier["field"], []).append(outlier)
    if result["disagreements"]:
        lines.append("")
        lines.append(f"DIFFER: {_plural(len(result['disagreements']), 'field')}")
    for d in result["disagreements"]:
        field = d["field"]
        spread = ", ".join(f"{show(field, v['value'])} on {v['count']}" for v in d["values"][:4])
        more = f", {len(d['values']) - 4} other values" if len(d["values"]) > 4 else ""
        cause = f" [{d['cause_id']}]" if d["cause_id"] else ""
        lines.append(f"  {label(field)}: {spread}{more}{cause}")
        outliers = by_field.get(field, [])
        for outlier in outliers[:max_lines]:
            lines.append(f"    {outlier_line(outlier)}")
        if len(outliers) > max_lines:
            lines.append(f"    ... and {len(outliers) - max_lines} more nodes (--json lists all)")
    if len(result["groups"]) > 1:
        majority = {d["field"]: d["majority"] for d in result["disagreements"]}
        lines.append("")
        lines.append(f"groups ({len(result['groups'])} kinds of node):")
        for group in result["groups"][:10]:
            odd = {f: v for f, v in group["values"].items() if v != majority[f]}
            values = ", ".join(f"{label(f)} {show(f, v)}" for f, v in odd.items()) or "majority"
            lines.append(f"  {_plural(group['count'], 'node')} [{values}]: {_names(group['nodes'])}")
        if len(result["groups"]) > 10:
            lines.append(f"  ... and {len(result['groups']) - 10} more groups (--json lists all)")
    if skipped:
        lines.append("")
        lines.append("skipped:")
        lines.extend(f"  {s['file']}: {s['reason']}" for s in skipped)
    lines.extend(_next(result))
    return lines


def _next(result: dict[str, Any]) -> list[str]:
    if result["nodes"] < 2:
        return ["", "only one node: collect more, e.g. distdoctor fleet collect --via ssh "
                    "--hostfile hosts.txt -o fleet/"]
    if not result["outliers"]:
        return ["", "every node agrees: the fleet's versions are not the cause."]
    nodes = list(dict.fromkeys(o["node"] for o in result["outliers"]))
    causes = sorted({d["cause_id"] for d in result["disagreements"] if d["cause_id"]})
    bad = {b["node"]: b for b in result.get("bad_hosts", [])}
    out = ["", "next:"]
    for node in nodes[:3]:
        if node in bad:  # never inside a command: shown quoted, as data, with why
            shown = ascii(bad[node]["host"])
            shown = shown if len(shown) <= 60 else shown[:56] + "...'"
            out.append(f"  # the snapshot names its host {shown}: not a valid host name "
                       f"({bad[node]['reason']}); find the node by its file and check it by hand")
            continue
        host = node.split(" (")[0]
        out.append(f"  ssh -- {shlex.quote(host)} distdoctor check   # everything else on this node")
    for cause in causes:
        out.append(f"  distdoctor knowledge show {shlex.quote(cause)}   # why it matters, how to fix")
    if any(d["field"].startswith("switch:") for d in result["disagreements"]):
        out.append("  set the same switches on every node (job environment and /etc/nccl.conf)")
    out.append("  rebuild the odd nodes from the same image as the majority, then collect and "
               "compare again")
    return out
