"""The switches that make evidence exist (knobs.toml, validated on load): for a torch and NCCL version, the exact
environment lines (and launcher options) that turn on NCCL logs, torch's distributed debug
output, Flight Recorder dumps, NCCL RAS and per-rank launcher logs.

Names and defaults follow GUIDE section 3 and the torch 2.13 binary (it still reads the old names
TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE next to the new ones). Where the
release that introduced a name is uncertain the range is drawn where the line is known to work:
TORCH_FR_DUMP_TEMP_FILE is advised from 2.10, its old name (still read) before that.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from distdoctor.knowledge import cache
from distdoctor.knowledge.frozen import Frozen, frozen
from distdoctor.knowledge.i18n import t

FR_DIR = "/tmp/fr_dumps"


@frozen
class Knob(Frozen):
    """One line to set. Version bounds: min inclusive, max exclusive; None = unbounded."""

    source: str  # nccl-logs | torch-debug | flight-recorder | error-handling | ras | launcher
    line: str  # NAME=value, or a command line when kind is "command"
    what: str
    kind: str = "env"
    torch_min: str | None = None
    torch_max: str | None = None
    nccl_min: str | None = None
    nccl_max: str | None = None
    needs_nccl: bool = False


SOURCES = ("nccl-logs", "torch-debug", "flight-recorder", "error-handling", "ras", "launcher")
KINDS = ("env", "command")


def parse_knobs(text: str, where: str = "knobs.toml") -> tuple[Knob, ...]:
    """The [[knob]] entries of a knobs.toml text; a ValueError naming the entry when one is
    malformed (an unknown key, source or kind, a bound that is not a version, a missing field)."""
    from distdoctor.knowledge import tomlload  # tomllib: ~9 ms to import, only on a cache miss

    names = {f.name for f in fields(Knob)}
    out: list[Knob] = []
    for n, entry in enumerate(tomlload.loads(text).get("knob", []), 1):
        name = f"{where}: knob {n} ({entry.get('line', '?')})"
        unknown = set(entry) - names
        if unknown:
            raise ValueError(f"{name}: unknown key(s) {', '.join(sorted(unknown))}")
        if not all(isinstance(entry.get(k), str) and entry[k] for k in ("source", "line", "what")):
            raise ValueError(f"{name}: source, line and what must be non-empty strings")
        if entry["source"] not in SOURCES or entry.get("kind", "env") not in KINDS:
            raise ValueError(f"{name}: source must be one of {', '.join(SOURCES)}; kind one of {', '.join(KINDS)}")
        for bound in ("torch_min", "torch_max", "nccl_min", "nccl_max"):
            if bound in entry and (not isinstance(entry[bound], str) or vtuple(entry[bound]) is None):
                raise ValueError(f"{name}: {bound} must be a version such as \"2.9\"")
        if not isinstance(entry.get("needs_nccl", False), bool):
            raise ValueError(f"{name}: needs_nccl must be true or false")
        out.append(Knob(**entry))
    return tuple(out)


@frozen
class KnobLine(Frozen):
    """One line to set, for the versions at hand, with the versions it applies to (`applies`)."""

    source: str
    line: str
    kind: str
    what: str
    applies: str  # e.g. "torch >= 2.9", "NCCL >= 2.24", "any version"


def vtuple(text: str | None) -> tuple[int, ...] | None:
    """'2.13.0+cpu' -> (2, 13, 0); None when there is no version."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", text or "")
    return tuple(int(x) for x in match.group(1).split(".")) if match else None


def _load_knobs() -> tuple[Knob, ...]:
    """knobs.toml's knobs, from the start-up cache (knowledge/cache.py, keyed on the file and this
    module) when it holds them: parsing the TOML costs ~6 ms of every `distdoctor logs`. The file
    is read next to this module, as the knowledge files are: importlib.resources would first
    import its readers and zipfile (~8 ms)."""
    text = Path(__file__).with_name("knobs.toml").read_text(encoding="utf-8")
    key = cache.digest([text, *cache.source_parts(__file__)])
    hit = cache.load("knobs", key)
    if isinstance(hit, list):
        try:
            return tuple(Knob(**entry) for entry in hit)
        except TypeError:  # a file of another shape: parse again
            pass
    knobs = parse_knobs(text)
    cache.store("knobs", key, [asdict(k) for k in knobs])
    return knobs


KNOBS: tuple[Knob, ...] = _load_knobs()


def log_switches(log_dir: str = "/tmp") -> tuple[tuple[str, str], ...]:
    """(name, value) of every log switch (the nccl-logs and torch-debug knobs), the NCCL log
    files under `log_dir`: the lines the app's Logs step shows for each launcher."""
    out = []
    for k in KNOBS:
        if k.kind == "env" and k.source in ("nccl-logs", "torch-debug"):
            name, _, value = k.line.partition("=")
            if name == "NCCL_DEBUG_FILE":
                value = log_dir.rstrip("/") + "/" + value.rsplit("/", 1)[-1]
            out.append((name, value))
    return tuple(out)


def _in(version: tuple[int, ...] | None, low: str | None, high: str | None) -> bool:
    if version is None:
        return True  # unknown: show the line, its label says which versions it is for
    return (low is None or version >= vtuple(low)) and (high is None or version < vtuple(high))  # type: ignore[operator]


def applies_text(k: Knob) -> str:
    parts = []
    for name, low, high in (("torch", k.torch_min, k.torch_max), ("NCCL", k.nccl_min, k.nccl_max)):
        if low and high:
            parts.append(f"{low} <= {name} < {high}")
        elif low:
            parts.append(f"{name} >= {low}")
        elif high:
            parts.append(f"{name} < {high}")
    if k.needs_nccl and not (k.nccl_min or k.nccl_max):
        parts.append("NCCL (CUDA builds)")
    return ", ".join(parts) or "any version"


def knob_lines(torch_version: str | None, nccl_version: str | None, *,
               has_nccl: bool | None = None) -> list[KnobLine]:
    """The lines that apply to this torch and NCCL. Unknown versions keep every alternative (each
    says its range); has_nccl=False (a CPU build) drops the NCCL-only lines."""
    torch_v, nccl_v = vtuple(torch_version), vtuple(nccl_version)
    if has_nccl is None:
        has_nccl = True if nccl_v else None
    out = []
    for k in KNOBS:
        if k.needs_nccl and has_nccl is False:
            continue
        if not _in(torch_v, k.torch_min, k.torch_max) or not _in(nccl_v, k.nccl_min, k.nccl_max):
            continue
        out.append(KnobLine(k.source, k.line, k.kind, k.what, applies_text(k)))
    return out


def missing_sources(torch_version: str | None, nccl_version: str | None, *,
                    has_nccl: bool | None = None) -> list[str]:
    """One line per source of evidence this stack cannot give, with why (in the output's
    language: the lines are prose for a human)."""
    torch_v, nccl_v = vtuple(torch_version), vtuple(nccl_version)
    why = []
    if has_nccl is False:
        why.append(t("NCCL logs, dump on timeout and RAS: this torch has no NCCL (a CPU build, Gloo only)"))
    elif nccl_v is not None and nccl_v < (2, 24):
        why.append(t("NCCL RAS: needs NCCL 2.24 or later (found {version})", version=nccl_version))
    if torch_v is not None and torch_v < (2, 5):
        why.append(t("Flight Recorder: needs torch 2.5 or later (found {version})", version=torch_version))
    return why


def versions_of(facts: Mapping[str, Any]) -> tuple[str | None, str | None, bool | None]:
    """(torch version, NCCL version, whether torch has NCCL) from the versions probe's facts."""
    torch = facts.get("torch") or {}
    if not torch.get("present"):
        return None, None, None
    version = torch.get("version")
    built_for_gpu = bool(torch.get("cuda")) or bool(torch.get("hip"))
    nccl = (facts.get("nccl") or {})
    loaded = nccl.get("loaded")
    if not loaded and built_for_gpu and len(nccl.get("versions") or []) == 1:
        loaded = nccl["versions"][0]
    return version, loaded, built_for_gpu if version else None
