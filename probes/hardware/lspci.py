"""A parser for `lspci -vvv` / `lspci -nnvv` device blocks: class, vendor, bridge bus ranges,
link capability and status, and ACS control bits."""
from __future__ import annotations

import re
from typing import Any

_HEAD = re.compile(r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
                   r"(?P<cls>[^:]+?)(?: \[(?P<code>[0-9a-fA-F]{4})\])?:\s+(?P<desc>.*)$")
_BUS = re.compile(r"Bus: primary=([0-9a-f]+), secondary=([0-9a-f]+), subordinate=([0-9a-f]+)")
_LNK = re.compile(r"Lnk(Cap|Sta):\s.*?Speed ([\d.]+)GT/s(?: \((\w+)\))?, Width x(\d+)(?: \((\w+)\))?")
_ACS = re.compile(r"ACSCtl:\s+(.*)$")
_GPU_CLASSES = ("VGA compatible controller", "3D controller")


def parse(text: str) -> list[dict[str, Any]]:
    """One dict per device: slot, class, description, is_gpu, secondary/subordinate bus (bridges),
    link cap/status, acs_ctl flags."""
    devices: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            match = _HEAD.match(line)
            current = None
            if match:
                slot = match["slot"].lower()
                if slot.count(":") == 1:
                    slot = "0000:" + slot
                cls = match["cls"].strip()
                desc = match["desc"]
                current = {"slot": slot, "class": cls, "desc": desc,
                           "is_gpu": cls in _GPU_CLASSES and ("NVIDIA" in desc or "[10de:" in desc),
                           "is_bridge": cls.startswith("PCI bridge")}
                devices.append(current)
            continue
        if current is None:
            continue
        if (m := _BUS.search(line)):
            current["secondary"], current["subordinate"] = int(m[2], 16), int(m[3], 16)
        elif (m := _LNK.search(line)):
            kind = "cap" if m[1] == "Cap" else "sta"
            current[f"link_{kind}"] = {"speed_gts": float(m[2]), "width": int(m[4]),
                                       "speed_note": m[3] or "", "width_note": m[5] or ""}
        elif (m := _ACS.search(line)):
            current["acs_ctl"] = {flag[:-1]: flag.endswith("+") for flag in m[1].split()
                                  if flag[-1:] in "+-"}
    return devices


def domain_bus(slot: str) -> tuple[str, int]:
    domain, bus, _ = slot.split(":")
    return domain, int(bus, 16)
