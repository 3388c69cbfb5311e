"""The switches that make evidence exist, as data: for a torch and NCCL version, the exact
environment lines (and launcher options) that turn on NCCL logs, torch's distributed debug
output, Flight Recorder dumps, NCCL RAS and per-rank launcher logs.

Names and defaults follow GUIDE section 3 and the torch 2.13 binary (it still reads the old names
TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE next to the new ones). Where the
release that introduced a name is uncertain the range is drawn where the line is known to work:
TORCH_FR_DUMP_TEMP_FILE is advised from 2.10, its old name (still read) before that.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from distdoctor.knowledge.i18n import t

FR_DIR = "/tmp/fr_dumps"


@dataclass(frozen=True)
class Knob:
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


KNOBS: tuple[Knob, ...] = (
    Knob("nccl-logs", "NCCL_DEBUG=INFO", "NCCL's connection setup, transports and errors in every "
         "rank's log", needs_nccl=True),
    Knob("nccl-logs", "NCCL_DEBUG_SUBSYS=INIT,NET", "only init and network lines (COLL adds one line "
         "per collective)", nccl_min="2.4", needs_nccl=True),
    Knob("nccl-logs", "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log", "one NCCL log per process (%h host, %p "
         "pid) instead of mixed into stdout", nccl_min="2.4", needs_nccl=True),
    Knob("torch-debug", "TORCH_DISTRIBUTED_DEBUG=DETAIL", "collective checks and per-rank details "
         "from torch.distributed (OFF|INFO|DETAIL)", torch_min="1.9"),
    Knob("torch-debug", "TORCH_CPP_LOG_LEVEL=INFO", "torch's C++ log lines (process group "
         "creation, watchdog)", torch_min="2.0"),
    Knob("flight-recorder", "TORCH_FR_BUFFER_SIZE=2000", "Flight Recorder: keep the last 2000 "
         "collectives of every rank (0 = off; set it: older releases default to off)", torch_min="2.9"),
    Knob("flight-recorder", "TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "Flight Recorder under its old "
         "name: keep the last 2000 collectives (0 = off, the default in older releases)",
         torch_min="2.5", torch_max="2.9"),
    Knob("flight-recorder", "TORCH_NCCL_DUMP_ON_TIMEOUT=1", "dump every rank's Flight Recorder "
         "buffer when the watchdog times out", torch_min="2.5", needs_nccl=True),
    Knob("flight-recorder", f"TORCH_FR_DUMP_TEMP_FILE={FR_DIR}/rank_", "where the dumps go: "
         f"<prefix><rank> (mkdir -p {FR_DIR} first); read them with `distdoctor fr {FR_DIR}`",
         torch_min="2.10", needs_nccl=True),
    Knob("flight-recorder", f"TORCH_NCCL_DEBUG_INFO_TEMP_FILE={FR_DIR}/rank_", "where the dumps "
         f"go, old name: <prefix><rank> (mkdir -p {FR_DIR} first); read them with `distdoctor fr "
         f"{FR_DIR}`", torch_min="2.5", torch_max="2.10", needs_nccl=True),
    Knob("error-handling", "TORCH_NCCL_ASYNC_ERROR_HANDLING=3", "0 none, 1 abort communicator and "
         "tear down the process, 2 abort only, 3 tear down without abort (the default); Flight "
         "Recorder dumps need 3", torch_min="2.2", needs_nccl=True),
    Knob("error-handling", "NCCL_ASYNC_ERROR_HANDLING=1", "old name: tear the process down on an "
         "NCCL error or timeout instead of hanging", torch_max="2.2", needs_nccl=True),
    Knob("ras", "NCCL_RAS_ENABLE=1", "NCCL's RAS thread in every process (on by default); ask it "
         "during a hang with `distdoctor ras` or `ncclras`", nccl_min="2.24", needs_nccl=True),
    Knob("ras", "ncclras", "ask the RAS thread during a hang, on a node of the job (text output)",
         kind="command", nccl_min="2.24", nccl_max="2.28.7", needs_nccl=True),
    Knob("ras", "ncclras -f json", "JSON answer from the RAS client (text before 2.28.7)",
         kind="command", nccl_min="2.28.7", needs_nccl=True),
    Knob("launcher", "torchrun --log-dir ./rank-logs --redirects 3 --tee 3 ...", "one stdout and "
         "stderr file per rank under ./rank-logs, still echoed to the console", kind="command",
         torch_min="1.10"),
    Knob("launcher", "srun --output=%x-%j-%t.out --error=%x-%j-%t.err ...", "Slurm: one file per "
         "task (%x job name, %j job id, %t task = rank)", kind="command"),
)


@dataclass(frozen=True)
class KnobLine:
    source: str
    line: str
    kind: str
    what: str
    applies: str  # e.g. "torch >= 2.9", "NCCL >= 2.24", "any version"


def vtuple(text: str | None) -> tuple[int, ...] | None:
    """'2.13.0+cpu' -> (2, 13, 0); None when there is no version."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", text or "")
    return tuple(int(x) for x in match.group(1).split(".")) if match else None


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
