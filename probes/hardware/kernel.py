"""Kernel log probe: NVIDIA Xid and SXid events with their bus id, PCIe AER errors, NVRM faults.

Reads a recorded node's logs (sos: sos_commands/kernel/dmesg, dmesg_-T, the boot journal;
var/log/kern.log, syslog, messages) or, live, `dmesg` then `journalctl -k`. Facts only: which
Xids were seen and their class in NVIDIA's catalogue; checks.toml judges them."""
from __future__ import annotations

import re
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..base import OK, ProbeContext, ProbeResult, unavailable
from .source import Text, bus_id, glob_files, is_recorded, read_file, run
from .xid import APPLICATION, HARDWARE, classify

NAME = "kernel"
# this boot's kernel messages, as sos records them
BOOT_FILES = ("sos_commands/kernel/dmesg", "sos_commands/kernel/dmesg_-T",
              "sos_commands/logs/journalctl_--no-pager_--boot",
              "sos_commands/logs/journalctl_--no-pager_--catalog_--boot",
              "sos_commands/logs/journalctl_--no-pager_-k")
# syslog files also hold earlier boots: read only when nothing of this boot can be had
LOG_FILES = ("var/log/kern.log", "var/log/syslog", "var/log/messages", "var/log/dmesg")
COMMANDS = (("dmesg",), ("journalctl", "-k", "-b", "--no-pager"))
MAX_EVENTS = 200  # per kind: a flapping GPU can log thousands of the same line

_STAMP = re.compile(r"^\s*(\[[^\]]*\]|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:|"
                    r"\d{4}-\d\d-\d\dT[\d:.+-]+ \S+ kernel:)")
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+),\s*(?P<rest>.*)")
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+),\s*(?P<rest>.*)")
_OFF_BUS = re.compile(r"NVRM: GPU (?:at PCI:)?(?P<bus>[0-9A-Fa-f:.]+):? .*fallen off the bus", re.I)
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d")
_AER_RECEIVED = re.compile(r"received: (?:id=)?([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)")
_UNCORRECTED = re.compile(r"Uncorrect(?:ed|able)|severity=(?:Uncorrected|Fatal)", re.I)
_NVRM_FAULT = re.compile(r"NVRM: .*(RmInitAdapter failed|failed to allocate|GPU is lost|"
                         r"fallen off the bus|initialization failed)", re.I)


def _stamp(line: str) -> tuple[str, str]:
    """(timestamp text or "", the line without it)."""
    match = _STAMP.match(line)
    if not match:
        return "", line.strip()
    rest = line[match.end():].strip()
    inner = _STAMP.match(rest)  # syslog's "host kernel: [  12.3] NVRM: ..."
    if inner and inner.group(1).startswith("["):
        rest = rest[inner.end():].strip()
    return match.group(1).strip("[] "), rest


def when(stamp: str) -> dict[str, Any]:
    """A log stamp as a time: ISO 8601 for `dmesg -T` and journal stamps, seconds since boot
    for plain dmesg; syslog's "Mar  3 10:14:02" has no year and stays text only."""
    text = stamp.strip()
    if re.fullmatch(r"\d+\.\d+", text):
        return {"uptime_s": float(text)}
    for fmt, value in (("%a %b %d %H:%M:%S %Y", text), ("%Y-%m-%dT%H:%M:%S%z", text.split(" ")[0])):
        try:
            return {"time": datetime.strptime(value, fmt).isoformat()}
        except ValueError:
            continue
    return {}


def _sources(ctx: ProbeContext) -> tuple[list[Text], list[str]]:
    """This boot's log (sos's dmesg and journal; live: `dmesg`, `journalctl -k -b`); else the
    syslog files, which may reach back to earlier boots (and faults already repaired)."""
    texts = [found for f in BOOT_FILES if (found := read_file(ctx, f)) is not None]
    if texts:
        return texts, []
    reasons: list[str] = []
    if not is_recorded(ctx):
        for argv in COMMANDS:
            found, why = run(ctx, argv)
            if found is not None and found.text.strip():
                return [found], []
            reasons.append(why or f"{' '.join(argv)}: no output")
    texts = [found for f in LOG_FILES if (found := read_file(ctx, f)) is not None]
    texts += [found for f in glob_files(ctx, "var/log/kern.log.[0-9]")
              if (found := read_file(ctx, f)) is not None]
    return texts, reasons


def parse(texts: list[Text]) -> dict[str, Any]:
    """The events in the kernel log texts, de-duplicated across sources (one event in dmesg and
    in the journal counts once)."""
    earlier: set[str] = set()  # lines of the sources already read: one event, two logs
    xids: dict[tuple[int, str], dict[str, Any]] = {}
    sxids: dict[tuple[int, str], dict[str, Any]] = {}
    off_bus: list[str] = []
    aer_uncorrected: list[str] = []
    aer_corrected = 0
    nvrm: list[str] = []
    for text in texts:
        here: set[str] = set()
        for raw in text.text.splitlines():
            if "NVRM" not in raw and "SXid" not in raw and "AER" not in raw and "PCIe Bus Error" not in raw:
                continue
            stamp, line = _stamp(raw)
            if line in earlier:
                continue
            here.add(line)
            if (m := _XID.search(line)):
                code, bus = int(m["code"]), bus_id(m["bus"])
                category, name = classify(code)
                item = xids.setdefault((code, bus), {"code": code, "bus": bus, "category": category,
                                                     "name": name, "count": 0, "first": stamp,
                                                     "last": stamp, "message": m["rest"][:300]})
                if not item["count"]:
                    item.update(when(stamp))
                item["count"] += 1
                item["last"] = stamp or item["last"]
                if "fallen off the bus" in line.lower() and bus not in off_bus:
                    off_bus.append(bus)
            elif (m := _SXID.search(line)):
                code, bus = int(m["code"]), bus_id(m["bus"])
                fatal = m["rest"].lower().startswith("fatal")
                item = sxids.setdefault((code, bus), {"code": code, "bus": bus, "fatal": fatal,
                                                      "count": 0, "first": stamp,
                                                      "message": m["rest"][:300]})
                item["count"] += 1
            elif (m := _OFF_BUS.search(line)):
                if bus_id(m["bus"]) not in off_bus:
                    off_bus.append(bus_id(m["bus"]))
            elif "AER: " in line or "PCIe Bus Error" in line:
                found = _AER_RECEIVED.search(line) or _BDF.search(line)
                where = found.group(1 if found.re is _AER_RECEIVED else 0) if found else "?"
                if _UNCORRECTED.search(line):
                    if where not in aer_uncorrected and len(aer_uncorrected) < MAX_EVENTS:
                        aer_uncorrected.append(where)
                elif "Corrected" in line:
                    aer_corrected += 1
            if _NVRM_FAULT.search(line) and len(nvrm) < 20 and line not in nvrm:
                nvrm.append(line[:300])
        earlier |= here
    events = sorted(xids.values(), key=lambda x: (x["bus"], x["code"]))[:MAX_EVENTS]
    hardware = [f"Xid {x['code']} ({x['name']}) on {x['bus']} x{x['count']}"
                for x in events if x["category"] == HARDWARE]
    application = [f"Xid {x['code']} ({x['name']}) on {x['bus']} x{x['count']}"
                   for x in events if x["category"] == APPLICATION]
    other = [f"Xid {x['code']} ({x['name']}) on {x['bus']} x{x['count']}"
             for x in events if x["category"] not in (HARDWARE, APPLICATION)]
    sx = sorted(sxids.values(), key=lambda x: (x["bus"], x["code"]))[:MAX_EVENTS]
    return {
        "xids": events,
        "xid_hardware": hardware,
        "xid_application": application,
        "xid_other": other,
        "xid_hardware_buses": sorted({x["bus"] for x in events if x["category"] == HARDWARE}),
        "sxids": sx,
        "sxid_fatal": [f"SXid {x['code']} on {x['bus']} x{x['count']}" for x in sx if x["fatal"]],
        "sxid_nonfatal_count": sum(x["count"] for x in sx if not x["fatal"]),
        "fallen_off_bus": off_bus,
        "aer_uncorrected": aer_uncorrected,
        "aer_corrected_count": aer_corrected,
        "nvrm_faults": nvrm,
    }


def probe_kernel(ctx: ProbeContext) -> ProbeResult:
    """Xid/SXid, AER and NVRM events in the node's kernel log."""
    texts, reasons = _sources(ctx)
    if not texts and is_recorded(ctx):
        return unavailable(NAME, "not in this recorded node (no sos_commands/kernel/dmesg, dmesg_-T, "
                                 "sos_commands/logs/journalctl_--no-pager_--boot or var/log/kern.log)")
    if not texts:
        return unavailable(NAME, "no kernel log: " + ("; ".join(r for r in reasons if r)
                                                       or "no dmesg, journal or kern.log"))
    facts = parse(texts)
    facts["sources"] = [t.origin for t in texts]
    facts["earlier_boots_possible"] = all(t.origin in LOG_FILES or t.origin.startswith("var/log/")
                                          for t in texts)
    return ProbeResult(NAME, OK, MappingProxyType(facts))
