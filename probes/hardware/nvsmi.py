"""A parser for `nvidia-smi -q` text (whole, or one `-d` section, or a pasted fragment) and
`nvidia-smi nvlink -s` / `-e`: one record per GPU with the health fields a node check needs."""
from __future__ import annotations

import re
from typing import Any

from .source import bus_id

Node = dict[str, Any]  # child name -> Node; the line's own value under ""
_LINE = re.compile(r"^(?P<key>[^:]+?)\s*:\s?(?P<value>.*)$")
_INT = re.compile(r"^\s*(\d+)")


def tree(text: str) -> Node:
    """The indentation tree of `nvidia-smi -q`: "Key : value" lines and section headers."""
    root: Node = {}
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("[...]") or stripped.startswith("====="):
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        match = _LINE.match(stripped) if " : " in stripped or stripped.endswith(" :") else None
        key, value = (match["key"].strip(), match["value"].strip()) if match else (stripped, "")
        name, n = key, 2
        while name in parent:  # repeated keys (processes): keep each
            name, n = f"{key}#{n}", n + 1
        node: Node = {"": value}
        parent[name] = node
        stack.append((indent, node))
    return root


def value(node: Node | None, *path: str) -> str | None:
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node.get("") if isinstance(node, dict) else None


def child(node: Node | None, *names: str) -> Node | None:
    """The first of `names` present under node (nvidia-smi renamed sections across drivers)."""
    if not isinstance(node, dict):
        return None
    return next((node[n] for n in names if n in node), None)


def number(text: str | None) -> int | None:
    match = _INT.match(text or "")
    return int(match.group(1)) if match else None


def _leaves(node: Node, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    out = []
    for key, sub in node.items():
        if key == "":
            continue
        if len(sub) == 1:
            out.append(((*path, key), sub[""]))
        else:
            out.extend(_leaves(sub, (*path, key)))
    return out


def _items(node: Node) -> list[tuple[str, str]]:
    """(key, value) of every line below node, sections with a value of their own included
    ("HW Slowdown : Active" has its own sub-reasons)."""
    out = []
    for key, sub in node.items():
        if key == "":
            continue
        if sub.get(""):
            out.append((key, sub[""]))
        out.extend(_items(sub))
    return out


def _ecc_sum(node: Node | None, uncorrectable: bool) -> tuple[int | None, int | None]:
    """(total, SRAM part) of the correctable or uncorrectable counters of one ECC scope. Reads
    the Ampere+ form ("SRAM Uncorrectable", "DRAM Uncorrectable") and the older one ("Single
    Bit" / "Double Bit" with per-memory lines and a Total)."""
    if not node:
        return None, None
    total, sram, seen = 0, 0, False
    old = child(node, "Double Bit" if uncorrectable else "Single Bit")
    if old is not None:
        n = number(value(old, "Total"))
        if n is None:
            ns = [number(v) for _, v in _leaves(old)]
            n = sum(x for x in ns if x is not None) if any(x is not None for x in ns) else None
        return n, None
    word = "Uncorrectable" if uncorrectable else "Correctable"
    for path, text in _leaves(node):
        leaf = path[-1]
        if word not in leaf or (not uncorrectable and "Uncorrectable" in leaf):
            continue
        n = number(text)
        if n is None:
            continue
        seen = True
        total += n
        if "SRAM" in leaf:
            sram += n
    return (total, sram) if seen else (None, None)


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    low = text.strip().lower()
    return True if low == "yes" else False if low == "no" else None


def gpu_record(bus: str, node: Node) -> dict[str, Any]:
    """The health fields of one GPU section."""
    ecc = child(node, "ECC Errors")
    volatile, aggregate = child(ecc, "Volatile"), child(ecc, "Aggregate")
    vu, vu_sram = _ecc_sum(volatile, True)
    au, au_sram = _ecc_sum(aggregate, True)
    vc, _ = _ecc_sum(volatile, False)
    ac, _ = _ecc_sum(aggregate, False)
    retired = child(node, "Retired Pages")
    retired_pending = None
    if retired:
        pending_key = next((k for k in retired if k and "Pending" in k), None)
        retired_pending = _yes(value(retired, pending_key)) if pending_key else None
    remap = child(node, "Remapped Rows")
    link = child(child(node, "PCI"), "GPU Link Info")
    gen, width = child(link, "PCIe Generation"), child(link, "Link Width")
    reasons = child(node, "Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reason")
    active = [key for key, v in _items(reasons or {}) if v.strip().lower() == "active"]
    fabric = child(node, "Fabric")
    reset = child(node, "GPU Reset Status")
    return {
        "bus": bus,
        "product": value(node, "Product Name"),
        "pstate": value(node, "Performance State"),
        "utilization_pct": number(value(node, "Utilization", "Gpu")),
        "idle": "Idle" in active,
        "throttle_active": [r for r in active if r != "Idle"],
        "ecc_mode": value(child(node, "ECC Mode", "Ecc Mode"), "Current"),
        "ecc_volatile_uncorrectable": vu, "ecc_volatile_uncorrectable_sram": vu_sram,
        "ecc_aggregate_uncorrectable": au, "ecc_aggregate_uncorrectable_sram": au_sram,
        "ecc_volatile_correctable": vc, "ecc_aggregate_correctable": ac,
        "retired_pending": retired_pending,
        "remap_correctable": number(value(remap, "Correctable Error")),
        "remap_uncorrectable": number(value(remap, "Uncorrectable Error")),
        "remap_pending": _yes(value(remap, "Pending")),
        "remap_failure": _yes(value(remap, "Remapping Failure Occurred")),
        "sram_threshold_exceeded": _yes(value(aggregate, "SRAM Threshold Exceeded"))
        or _yes(value(volatile, "SRAM Threshold Exceeded")),
        "fabric_state": value(fabric, "State"), "fabric_status": value(fabric, "Status"),
        "reset_required": _yes(value(reset, "Reset Required")),
        "drain_and_reset": _yes(value(reset, "Drain and Reset Recommended")),
        "pcie_gen_current": number(value(gen, "Current")),
        "pcie_gen_max": number(value(gen, "Max")),
        "pcie_width_current": number(value(width, "Current")),
        "pcie_width_max": number(value(width, "Max")),
    }


def parse_query(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header: driver and CUDA version, one record per GPU) of `nvidia-smi -q` output. A
    fragment without a "GPU <bus id>" header (a pasted ECC block) is one GPU of unknown bus."""
    root = tree(text)
    header = {"driver": value(root, "Driver Version"), "cuda": value(root, "CUDA Version")}
    gpus = [gpu_record(bus_id(key[4:].split("#")[0]), node) for key, node in root.items()
            if key.startswith("GPU ") and re.match(r"GPU [0-9A-Fa-f]+:", key)]
    if not gpus and any(k in root for k in ("ECC Errors", "Retired Pages", "Remapped Rows", "PCI")):
        gpus = [gpu_record("unknown", root)]
    return header, gpus


_NVL_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: [^)]*\))?\s*$")
_NVL_LINK = re.compile(r"^\s+Link (\d+): (.*)$")


def parse_nvlink_status(text: str) -> dict[str, dict[str, Any]]:
    """`nvidia-smi nvlink -s`: per GPU ("GPU 0: NVIDIA H100 ..."), active and inactive links."""
    out: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        if (m := _NVL_GPU.match(line)):
            current = out.setdefault(f"GPU {m[1]}", {"name": m[2], "active": 0, "inactive": []})
        elif current is not None and (m := _NVL_LINK.match(line)):
            if "inactive" in m[2].lower() or "<" in m[2]:
                current["inactive"].append(int(m[1]))
            else:
                current["active"] += 1
    return out


_NVL_ERR = re.compile(r"^\s+(Replay Errors|Recovery Errors|CRC Errors|CRC Flit Errors|"
                      r"CRC Data Errors)\s*:\s*(\d+)", re.I)


def parse_nvlink_errors(text: str) -> dict[str, dict[str, int]]:
    """`nvidia-smi nvlink -e`: per GPU, each error counter summed over its links."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        if (m := _NVL_GPU.match(line)):
            current = out.setdefault(f"GPU {m[1]}", {})
            continue
        # "Link 0: Replay Errors: 0" or a counter on its own line under "Link 0:"
        body = re.sub(r"^\s+Link \d+:\s*", "    ", line)
        if current is not None and (m := _NVL_ERR.match(body)):
            key = m[1].lower().replace(" ", "_")
            current[key] = current.get(key, 0) + int(m[2])
    return out
