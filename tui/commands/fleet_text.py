"""The text view of `distdoctor fleet compare`: what agrees, what differs, and where to look next."""
from __future__ import annotations

import shlex
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t
from distdoctor.probes.fleet.compare import label, show
from distdoctor.probes.fleet.hosts import ssh_destination

from .common import wrap
from .logs_text import printable, width


def _count(n: int, one: str, many: str) -> str:
    """`one` or `many` (catalogue keys with {n}) for n."""
    return t(one, n=n) if n == 1 else t(many, n=n)


def _names(nodes: list[str], limit: int = 6) -> str:
    shown = t(", ").join(nodes[:limit])
    return shown + (t(" and {n} more", n=len(nodes) - limit) if len(nodes) > limit else "")


def _label(field: str) -> str:
    """A field's name as people read it; a switch's name is code and stays as it is."""
    return label(field) if field.startswith("switch:") else t(label(field))


def _show(field: str, value: Any) -> str:
    """A value; only the words for a missing one ("unset", "unknown") are translated."""
    return t(show(field, value)) if value is None else show(field, value)


def _outlier_line(outlier: dict[str, Any]) -> str:
    """compare.outlier_line in the output's language: "node-17: driver 535.104.05, 63 others
    550.54.15" (the same text in English)."""
    field = outlier["field"]
    values = {"node": outlier["node"], "field": _label(field), "value": _show(field, outlier["value"]),
              "count": outlier["count"], "majority": _show(field, outlier["majority"]),
              "tie": t(" (an even split: neither side is the odd one out)") if outlier.get("tie") else ""}
    if outlier["count"] == 1:
        return t("{node}: {field} {value}, {count} other {majority}{tie}", **values)
    return t("{node}: {field} {value}, {count} others {majority}{tie}", **values)


def _wrapped(lines: list[str], cols: int) -> list[str]:
    """Each line made safe for a terminal (a snapshot's host or value may hold escape codes or
    newlines) and wrapped to the width under its own indent; commands and comments never are."""
    out: list[str] = []
    for line in lines:
        # each entry is one line: a newline inside came from a value and must not start a new one
        line = printable(line.replace("\r", "\\r").replace("\n", "\\n"))
        if i18n.cells(line) <= cols or line.lstrip().startswith(("ssh ", "distdoctor ")):
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        if line.lstrip().startswith("# "):
            # a comment's continuation is a comment too: pasted into a shell, a bare
            # continuation line would run as a command of its own
            out.extend(wrap(line, cols, "", indent + "# ", break_long_words=True) or [line])
            continue
        # a continuation lines up after the label ("agree: ", "node-3: ", "一致：") when there is one
        head, sep, _ = line.lstrip().partition(": ")
        if not sep:
            head, sep, _ = line.lstrip().partition("：")
        hang = indent + " " * i18n.cells(head + sep) if sep and i18n.cells(head) < 24 else indent + "  "
        out.extend(wrap(line, cols, "", hang, break_long_words=False) or [line])
    return out


def render_compare(result: dict[str, Any], max_lines: int = 20, cols: int | None = None) -> str:
    """compare()'s result as text; at most `max_lines` outlier lines per field, wrapped to
    `cols` (default: the terminal's width, or 120 in a pipe)."""
    return "\n".join(_wrapped(_compare_lines(result, max_lines), cols or width()))


def _compare_lines(result: dict[str, Any], max_lines: int) -> list[str]:
    n, skipped = result["nodes"], result["skipped"]
    lines = [t("{nodes} compared", nodes=_count(n, "{n} node", "{n} nodes"))
             + (t(", {files} skipped", files=_count(len(skipped), "{n} file", "{n} files"))
                if skipped else "")]
    if result["agreed"]:
        agreed = t(", ").join(f"{_label(f)} {_show(f, v)}" for f, v in result["agreed"].items())
        lines.append(t("agree: {fields}", fields=agreed))
    by_field: dict[str, list[dict[str, Any]]] = {}
    for outlier in result["outliers"]:
        by_field.setdefault(outlier["field"], []).append(outlier)
    if result["disagreements"]:
        lines.append("")
        lines.append(t("DIFFER: {fields}", fields=_count(len(result["disagreements"]), "{n} field", "{n} fields")))
    for d in result["disagreements"]:
        field = d["field"]
        spread = t(", ").join(t("{value} on {n}", value=_show(field, v["value"]), n=v["count"])
                              for v in d["values"][:4])
        more = t(", {n} other values", n=len(d["values"]) - 4) if len(d["values"]) > 4 else ""
        cause = f" [{d['cause_id']}]" if d["cause_id"] else ""
        lines.append(f"  {_label(field)}{t(': ')}{spread}{more}{cause}")
        outliers = by_field.get(field, [])
        for outlier in outliers[:max_lines]:
            lines.append(f"    {_outlier_line(outlier)}")
        if len(outliers) > max_lines:
            lines.append("    " + t("... and {n} more nodes (--json lists all)", n=len(outliers) - max_lines))
    if len(result["groups"]) > 1:
        majority = {d["field"]: d["majority"] for d in result["disagreements"]}
        lines.append("")
        lines.append(t("groups ({n} kinds of node):", n=len(result["groups"])))
        for group in result["groups"][:10]:
            odd = {f: v for f, v in group["values"].items() if v != majority[f]}
            values = t(", ").join(f"{_label(f)} {_show(f, v)}" for f, v in odd.items()) or t("majority")
            lines.append(f"  {_count(group['count'], '{n} node', '{n} nodes')} [{values}]{t(': ')}"
                         f"{_names(group['nodes'])}")
        if len(result["groups"]) > 10:
            lines.append("  " + t("... and {n} more groups (--json lists all)", n=len(result["groups"]) - 10))
    if skipped:
        lines.append("")
        lines.append(t("skipped:"))
        lines.extend(f"  {s['file']}{t(': ')}{s['reason']}" for s in skipped)
    lines.extend(_next(result))
    return lines


def _next(result: dict[str, Any]) -> list[str]:
    if result["nodes"] < 2:
        return ["", t("only one node: collect more, e.g. distdoctor fleet collect --via ssh "
                      "--hostfile hosts.txt -o fleet/")]
    if not result["outliers"]:
        return ["", t("every node agrees: the fleet's versions are not the cause.")]
    nodes = list(dict.fromkeys(o["node"] for o in result["outliers"]))
    causes = sorted({d["cause_id"] for d in result["disagreements"] if d["cause_id"]})
    even = all(o.get("tie") for o in result["outliers"])
    if even:  # no majority to trust: name no node, check both sides and bring a third
        nodes = list(dict.fromkeys(n for g in result["groups"] for n in g["nodes"]))
    bad = {b["node"]: b for b in result.get("bad_hosts", [])}
    out = ["", t("next:")]
    if even:
        out.append("  " + t("the nodes split evenly: no node is the odd one out. Break the tie with a third node, "
                            "or check each side:"))
        out.append("  distdoctor fleet collect --via ssh --hostfile hosts.txt -o fleet/   # "
                   + t("collect a third node"))
    for node in nodes[:3]:
        if node in bad:  # never inside a command: shown quoted, as data, with why
            shown = ascii(bad[node]["host"])
            shown = shown if len(shown) <= 60 else shown[:56] + "...'"
            out.append("  # " + t("the snapshot names its host {host}: not a valid host name ({reason}); "
                                  "find the node by its file and check it by hand", host=shown,
                                  reason=bad[node]["reason"]))
            continue
        host = node.split(" (")[0]
        *port, name = ssh_destination(host)  # node9:22 is `ssh -p 22 -- node9`: ssh takes no port there
        out.append(f"  ssh {shlex.join(port) + ' ' if port else ''}-- {shlex.quote(name)} distdoctor check   "
                   f"# {t('everything else on this node')}")
    for cause in causes:
        out.append(f"  distdoctor knowledge show {shlex.quote(cause)}   # {t('why it matters, how to fix')}")
    if any(d["field"].startswith("switch:") for d in result["disagreements"]):
        out.append("  " + t("set the same switches on every node (job environment and /etc/nccl.conf)"))
    if not even:
        out.append("  " + t("rebuild the odd nodes from the same image as the majority, then collect and "
                            "compare again"))
    return out
