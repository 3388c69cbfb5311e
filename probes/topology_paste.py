"""The GPU topology pasted with a log (issue 21: context pasted with the log is evidence):
`nvidia-smi topo -m` / `topo -p2p` matrices, NCCL's graph and path lines, read from the log files
themselves. Bounded: small regular files only, and only those that hold a topology mark. Outside
the topology package, so that a log without one never pays for its parsers and drawings."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

MAX_FILE = 2 << 20  # a paste, not a job's whole log: larger files are not read again
MAX_FILES = 32
# a topo matrix's header row, or NCCL's INFO lines about channels and P2P (a cheap test first)
MARKS = ("GPU0", "NCCL INFO")


def _files(paths: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for name in paths:
        p = Path(name)
        try:
            found = [p] if p.is_file() else sorted(x for x in p.iterdir() if x.is_file()) if p.is_dir() else []
        except OSError:
            found = []
        out += [x for x in found if _small(x)]
        if len(out) >= MAX_FILES:
            return out[:MAX_FILES]
    return out


def _small(p: Path) -> bool:
    try:
        return 0 < p.stat().st_size <= MAX_FILE
    except OSError:
        return False


def pasted_topology(paths: Iterable[str]) -> dict[str, Any] | None:
    """The `topo --json` dict of the first log file that holds a GPU topology, or None (no file
    holds one, or none can be read). Standard input ("-") was consumed by the log reader: skipped."""
    for p in _files(x for x in paths if x != "-"):
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        if not any(m in text for m in MARKS):
            continue
        from .topology import TopologyInputError, analyse  # the parsers and networkx: only for a marked file

        try:
            facts = analyse(text, p.name)
        except TopologyInputError:
            continue
        if facts.get("pairs"):
            return facts
    return None


def add_pasted_topology(data: dict[str, Any], paths: Iterable[str], symptom: str | None) -> None:
    """Keep the pasted topology with a hang's log result (`data["topology"]`), where the one
    diagnosis reads it; a hang is the only symptom it weighs, so nothing is read again otherwise."""
    if not str(data.get("symptom") or symptom or "").startswith("hang"):
        return
    found = pasted_topology(paths)
    if found:
        data["topology"] = found
