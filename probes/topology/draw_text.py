"""Terminal pictures of a topology: GPUs grouped by NUMA node with their NICs, labelled GPU links,
and a matrix view. Both fit the width they are given (80 columns by default)."""
from __future__ import annotations

import textwrap
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean, clean_block

from .model import P2P_MEANING, link_rank

# the words are catalogue keys (t(MARK[...]) in mark); the codes in brackets are not words
MARK = {"OK": "ok", "used": "used", "unused": "no (SHM)", "disabled": "no (NCCL)", "unknown": "?",
        "U": "? (U)"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def mark(status: str) -> str:
    return t(MARK[status]) if status in MARK else t("no ({code})", code=status)


MAX_TEXT = 4096  # one line of a drawing past this is cut before wrapping (textwrap is slow on it)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """textwrap for ASCII text (English stays what it was), display cells otherwise."""
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "\u2026"
    if text.isascii():
        return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False)
    return i18n.wrap(text, width, "", indent)


def fit(lines: list[str], width: int) -> list[str]:
    """Wrap anything longer than `width` (display cells), keeping the line's indentation for
    the continuation."""
    out: list[str] = []
    for line in lines:
        if i18n.cells(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        out += _wrap(line, width, indent) or [""]
    return out


def nic_label(facts: dict[str, Any], nic_id: str) -> str:
    nic = next((n for n in facts["nics"] if n["id"] == nic_id), None)
    if nic and nic["name"] and nic["name"] != nic_id:
        return f"{clean(nic_id, 64)} {clean(nic['name'], 64)}"  # names come from the input
    return clean(nic_id, 64)


def heading(facts: dict[str, Any]) -> list[str]:
    nvlink = {True: t("yes"), False: t("no"), None: t("not shown")}[facts["nvlink"]]
    seen = [g for g in facts["gpus"] if g["seen"]]
    n = len(facts["gpus"])
    count = t("{n} GPU", n=n) if n == 1 else t("{n} GPUs", n=n)
    if len(seen) != len(facts["gpus"]):
        count += t(" ({n} named)", n=len(seen))
    n = len(facts["nics"])
    nics = (t(", {n} NIC", n=n) if n == 1 else t(", {n} NICs", n=n)) if facts["nics"] else ""
    if facts.get("nics_total") and facts["nics_total"] > len(facts["nics"]):
        nics += t(" shown of {total}", total=facts["nics_total"])
    bad = facts["pairs_without_p2p"]
    support = t(facts["p2p"]) + (t(" (without: {pairs})", pairs=", ".join(bad[:3]) + ("..." if len(bad) > 3 else ""))
                                 if bad else "")
    return [t("GPU topology from {source}: {count}{nics}", source=facts["source"], count=count, nics=nics),
            t("P2P: {verdict}   NVLink: {nvlink}", verdict=support, nvlink=nvlink)]


def gpu_line(facts: dict[str, Any], gpu: dict[str, Any]) -> str:
    name = gpu.get("name") or ""
    name = f" {clean(name.removeprefix('NVIDIA ')[:24])}" if name else ""
    line = f"  {clean(gpu['id'], 64)}{name}"
    if not gpu["seen"]:
        line += t(" (implied, not in the input)")
    if gpu["nearest_nics"]:
        nics = ", ".join(nic_label(facts, n) for n in gpu["nearest_nics"][:4])
        more = f" +{len(gpu['nearest_nics']) - 4}" if len(gpu["nearest_nics"]) > 4 else ""
        line += f" ──{gpu['nic_link']}── {nics}{more}"
    return line


def numa_sections(facts: dict[str, Any]) -> list[str]:
    by_id = {g["id"]: g for g in facts["gpus"]}
    lines: list[str] = []
    for group in facts["numa"]:
        if group["id"] is not None:
            title = f"NUMA {group['id']}" + (f" · CPUs {group['cpus']}" if group["cpus"] else "")
        else:
            title = f"CPUs {group['cpus']}" if group["cpus"] else t("NUMA node not shown")
        lines.append(title)
        lines += [gpu_line(facts, by_id[g]) for g in group["gpus"]]
    near = {n for g in facts["gpus"] for n in g["nearest_nics"]}
    far = [n for n in facts["nics"] if n["id"] not in near]
    if far:
        lines.append(t("Other NICs: ") + t(", ").join(
            f"{nic_label(facts, n['id'])}" + (t(" ({link} to the nearest GPU)", link=n["gpu_link"]) if n["gpu_link"] else "")
            for n in far))
    return lines


def link_sections(facts: dict[str, Any], width: int) -> list[str]:
    pairs = facts["pairs"]
    if not pairs:
        return [t("GPU links: none shown by this input")]
    groups: dict[tuple[str, str], list[str]] = {}
    for p in pairs:  # a log gives the transport NCCL took, not a link code
        link = p["link"] or "/".join(tr.split("/")[0] for tr in p.get("transports", [])[:1]) or "?"
        groups.setdefault((link, p["p2p"]), []).append(f"{p['a']}-{p['b']}")
    seen = sum(g["seen"] for g in facts["gpus"])
    total = seen * (seen - 1) // 2
    lines = [f"{i18n.pad(t('GPU links'), 12)} {i18n.pad('P2P', 10)} {t('pairs')}"]
    for (link, status), names in sorted(groups.items(), key=lambda kv: (link_rank(kv[0][0]), kv[0][1])):
        head = f"  {link:<10} {i18n.pad(mark(status), 10)} "
        body = (t("every pair ({n})", n=len(names)) if len(groups) == 1 and len(names) == total > 1
                else " ".join(names))
        wrapped = _wrap(body, max(20, width - i18n.cells(head)))
        lines.append(head + wrapped[0])
        lines += [" " * i18n.cells(head) + rest for rest in wrapped[1:]]
    codes = sorted({p["p2p"] for p in pairs} - {"OK", "used"})
    if codes:
        lines.append("  " + t("; ").join(f"{mark(c)} = {t(P2P_MEANING.get(c, c))}" for c in codes))
    return lines


def draw_text(facts: dict[str, Any], width: int = 80) -> str:
    """The drawing the CLI and the app's Environment step show."""
    lines = heading(facts) + [""] + numa_sections(facts) + [""] + link_sections(facts, width)
    return clean_block("\n".join(fit(lines, width)))  # no control code from the input


def cell(facts: dict[str, Any], a: str, b: str, lookup: dict) -> str:
    if a == b:
        return "X"
    p = lookup.get((a, b)) or lookup.get((b, a))
    if p is None:
        return "."
    if not p["link"]:  # only a log saw this pair: say what it saw
        return {"used": "P2P", "unused": "SHM", "disabled": "off!"}.get(p["p2p"], "?")
    suffix = {"OK": "", "used": "", "unknown": "?", "U": "?"}.get(p["p2p"], "!")
    return f"{p['link']}{suffix}"


def draw_matrix(facts: dict[str, Any], width: int = 80) -> str:
    """A `topo -m`-like grid: GPU x GPU (link code; '!' no P2P, '?' P2P unknown), then GPU x NIC."""
    gpus = [g["id"] for g in facts["gpus"]]
    lookup = {(p["a"], p["b"]): p for p in facts["pairs"]}
    col = max([6] + [len(g) + 1 for g in gpus])
    lines = heading(facts) + [""]
    lines += grid(gpus, gpus, lambda a, b: cell(facts, a, b, lookup), col, width)
    nic_links = {(n["gpu"], n["nic"]): n["link"] for n in facts.get("nic_links", [])}
    nics = [n["id"] for n in facts["nics"]]
    if nics and nic_links:
        lines.append("")
        ncol = max([6] + [len(n) + 1 for n in nics])
        lines += grid(gpus, nics, lambda a, b: nic_links.get((a, b), "."), ncol, width)
    lines += [""] + t(MATRIX_LEGEND).splitlines()
    return clean_block("\n".join(fit(lines, width)))


MATRIX_LEGEND = """\
'!' P2P not available, '?' P2P not shown by this input, '.' no link shown;
P2P/SHM: the transport NCCL took (from a log)"""


def grid(rows: list[str], cols: list[str], value, col: int, width: int) -> list[str]:
    """Rows x columns, split into column chunks that fit `width`."""
    label = max(len(r) for r in rows) + 2
    per = max(1, (width - label) // col)
    out: list[str] = []
    for start in range(0, len(cols), per):
        chunk = cols[start:start + per]
        out.append(" " * label + "".join(c.ljust(col) for c in chunk).rstrip())
        for r in rows:
            out.append(r.ljust(label) + "".join(value(r, c).ljust(col) for c in chunk).rstrip())
        if start + per < len(cols):
            out.append("")
    return out
