"""A self-contained SVG picture for the HTML report: NUMA panels with their GPUs and nearest NICs,
then a GPU x GPU grid coloured by P2P status and labelled with the link code."""
from __future__ import annotations

from html import escape as _html_escape
from typing import Any

from distdoctor.knowledge.printable import clean

from .model import P2P_BAD, P2P_GOOD

FILL = {"good": "#c8e6c9", "bad": "#ffcdd2", "unknown": "#eeeeee", "self": "#9e9e9e", "none": "#ffffff"}
PANEL_W, GPU_H, ROW_H = 330, 28, 36  # wide enough for three NIC names uncut


def escape(body: str) -> str:
    """&, < and > as entities (xml.sax.saxutils.escape's job, without importing urllib for it)."""
    return _html_escape(clean(body), quote=False)  # a control code is not even valid XML


def text(x: float, y: float, body: str, size: int = 11, weight: str = "normal",
         anchor: str = "start", fill: str = "#212121") -> str:
    return (f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" font-weight="{weight}" '
            f'text-anchor="{anchor}" fill="{fill}">{escape(body)}</text>')


def rect(x: float, y: float, w: float, h: float, fill: str, stroke: str = "#616161", rx: int = 3,
         dash: bool = False) -> str:
    extra = ' stroke-dasharray="4 3"' if dash else ""
    return (f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="{rx}" fill="{fill}" '
            f'stroke="{stroke}"{extra}/>')


def status_class(status: str) -> str:
    if status in P2P_GOOD:
        return "good"
    return "bad" if status in P2P_BAD else "unknown"


def panels(facts: dict[str, Any], x0: float, y0: float, per_row: int) -> tuple[list[str], float, float]:
    """NUMA panels, `per_row` to a row; returns the elements, the width and the bottom y."""
    gpus = {g["id"]: g for g in facts["gpus"]}
    out: list[str] = []
    y, bottom, width = y0, y0, 0.0
    for i, group in enumerate(facts["numa"]):
        col = i % per_row
        if col == 0 and i:
            y = bottom + 14
        x = x0 + col * (PANEL_W + 14)
        height = 30 + len(group["gpus"]) * ROW_H
        title = f"NUMA {group['id']}" if group["id"] is not None else "NUMA node not shown"
        if group.get("cpus"):
            title += f" · CPUs {group['cpus']}"
        out.append(rect(x, y, PANEL_W, height, "#fafafa", "#9e9e9e", 6))
        out.append(text(x + 10, y + 19, title[:44], 12, "bold"))
        for j, key in enumerate(group["gpus"]):
            gpu = gpus[key]
            gy = y + 30 + j * ROW_H
            out.append(rect(x + 10, gy, 104, GPU_H, "#e3f2fd", "#1565c0", 3, dash=not gpu["seen"]))
            out.append(text(x + 62, gy + 18, key[:15], 11, "bold", "middle"))
            if gpu["nearest_nics"]:
                nics = ", ".join(gpu["nearest_nics"][:3]) + ("…" if len(gpu["nearest_nics"]) > 3 else "")
                out.append(f'<line x1="{x + 114:.0f}" y1="{gy + 14:.0f}" x2="{x + 140:.0f}" y2="{gy + 14:.0f}" '
                           'stroke="#4682b4" stroke-dasharray="3 2"/>')
                out.append(text(x + 144, gy + 12, gpu["nic_link"] or "", 10, fill="#4682b4"))
                out.append(text(x + 144, gy + 25, nics, 11))  # whole names: a cut one names no device
        bottom = max(bottom, y + height)
        width = max(width, x + PANEL_W - x0)
    return out, width, bottom


def grid(facts: dict[str, Any], x0: float, y0: float) -> tuple[list[str], float, float]:
    ids = [g["id"] for g in facts["gpus"]]
    lookup = {frozenset((p["a"], p["b"])): p for p in facts["pairs"]}
    label_w = max(60, 7 * max(len(i) for i in ids) + 10)
    cell_w = max(46, 7 * max(len(p["link"] or "P2P") for p in facts["pairs"]) + 10) if facts["pairs"] else 46
    out = [text(x0, y0, "GPU x GPU: link code, colour = P2P", 12, "bold")]
    top = y0 + 12
    for c, key in enumerate(ids):
        out.append(text(x0 + label_w + c * cell_w + cell_w / 2, top + 12, key[:8], 9, anchor="middle"))
    for r, a in enumerate(ids):
        y = top + 18 + r * 22
        out.append(text(x0, y + 15, a, 10))
        for c, b in enumerate(ids):
            x = x0 + label_w + c * cell_w
            if a == b:
                out.append(rect(x, y, cell_w - 2, 20, FILL["self"], "#ffffff", 0))
                continue
            p = lookup.get(frozenset((a, b)))
            if p is None:
                out.append(rect(x, y, cell_w - 2, 20, FILL["none"], "#e0e0e0", 0))
                continue
            out.append(rect(x, y, cell_w - 2, 20, FILL[status_class(p["p2p"])], "#ffffff", 0))
            body = p["link"] or {"used": "P2P", "unused": "SHM"}.get(p["p2p"], "?")
            out.append(text(x + (cell_w - 2) / 2, y + 14, body, 10, anchor="middle"))
    return out, label_w + len(ids) * cell_w, top + 18 + len(ids) * 22


def legend(x: float, y: float) -> list[str]:
    out = []
    for i, (name, key) in enumerate((("P2P usable", "good"), ("no P2P", "bad"), ("not shown", "unknown"))):
        out.append(rect(x + i * 120, y, 14, 14, FILL[key], "#9e9e9e", 2))
        out.append(text(x + i * 120 + 20, y + 11, name, 10))
    return out


def to_svg(facts: dict[str, Any]) -> str:
    """A standalone `<svg>` document (no scripts, no external references)."""
    nvlink = {True: "yes", False: "no", None: "not shown"}[facts["nvlink"]]
    body = [text(20, 26, f"GPU topology ({facts['source']})", 15, "bold"),
            text(20, 46, f"{len(facts['gpus'])} GPUs, {len(facts['nics'])} NICs · P2P: {facts['p2p']} · "
                         f"NVLink: {nvlink}", 12)]
    per_row = min(4, max(1, len(facts["numa"])))
    elements, width, bottom = panels(facts, 20, 60, per_row)
    body += elements
    g_elems, g_width, g_bottom = grid(facts, 20, bottom + 30)
    body += g_elems
    body += legend(20, g_bottom + 14)
    w = int(max(width, g_width, 380) + 40)
    h = int(g_bottom + 44)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            'font-family="Helvetica, Arial, sans-serif" role="img" '
            f'aria-label="GPU topology: P2P {escape(facts["p2p"])}">\n'
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>\n' + "\n".join(body) + "\n</svg>\n")
