"""App-wide messages: what workers report back to the screens (small dataclasses)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from distdoctor.knowledge.evaluate import Finding


@dataclass
class SweepStarted(Message):
    """The sweep began: these probes are running."""

    names: list[str]


@dataclass
class ProbeDone(Message):
    """One probe of the sweep finished (any status)."""

    name: str
    status: str
    reason: str
    facts: dict[str, Any]


@dataclass
class SweepDone(Message):
    """The sweep and its evaluation finished; `error` says why it could not run at all."""

    findings: tuple[Finding, ...]
    facts: dict[str, dict[str, Any]]
    statuses: dict[str, str]
    duration_s: float
    error: str = ""


@dataclass
class LogsAnalysed(Message):
    """Log analysis of files (or of pasted text) finished; `report` is LogReport.to_dict()."""

    paths: list[str]
    report: dict[str, Any] | None
    error: str = ""
    pasted: str = ""
    missing: bool = False  # a path does not exist: nothing was read


@dataclass
class StacksTaken(Message):
    """`distdoctor stacks` of the one job on this node finished (or could not run: `error`)."""

    doc: dict[str, Any] | None
    error: str = ""


@dataclass
class RunLine(Message):
    """One line of live output from a repro or bisection run."""

    line: str


@dataclass
class RunRow(Message):
    """One run of a repro or bisection finished: a row for the results table."""

    row: dict[str, Any]


@dataclass
class RunFinished(Message):
    """A repro or bisection finished (or was stopped); `result` is its to_dict()."""

    kind: str
    result: dict[str, Any] | None
    error: str = ""


@dataclass
class FleetCompared(Message):
    """Fleet snapshots were loaded and compared."""

    result: dict[str, Any] | None
    paths: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class Exported(Message):
    """The report was written (or could not be)."""

    path: str
    error: str = ""


@dataclass
class ContextRead(Message):
    """Lines around a log line were read: (line number, text) pairs."""

    lines: list[tuple[int, str]]
    error: str = ""


@dataclass
class KnowledgeChecked(Message):
    """The deferred check of the knowledge base's tree finished; `error` is empty when sound."""

    error: str = ""


@dataclass
class SessionNotSaved(Message):
    """The session writer could not save an event (posted from its thread)."""

    error: str


@dataclass
class PythonFound(Message):
    """The search for the job's interpreter ended: `python` and how it was found, or "" for none."""

    python: str
    how: str = ""
