"""Frozen dataclasses for everything the knowledge base holds (knowledge/frozen.py: defined at no
cost, since every command that reads the knowledge base imports them)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from .frozen import Frozen, frozen

STATUSES = ("ok", "warn", "fail", "unavailable", "error")


@frozen
class Fix(Frozen):
    """One copy-pasteable remedy: an env line, a shell command or a code snippet."""

    kind: str  # "env" | "command" | "code"
    text: str
    note: str = ""

    def copy_lines(self, indent: str = "  ") -> list[str]:
        """The fix as lines to paste: its note as a `#` comment above the text, and every line
        indented alike, so a code snippet keeps its own indentation."""
        note = [f"{indent}# {self.note}"] if self.note else []
        return note + [indent + line for line in self.text.splitlines()]


@frozen
class Cause(Frozen):
    """A root cause with a stable id from GUIDE.md section 2."""

    id: str
    title: str
    what: str
    why: str
    fix: str
    fixes: tuple[Fix, ...]
    section: str
    evidence: str = ""
    # what the cause needs to apply at all ("gpu", "nccl"): left out, with the reason, for a job
    # that has neither (a Gloo job on CPU)
    needs: tuple[str, ...] = ()
    # what it says about the culprit: "crash" (a rank died) or "no-crash" (none did); a culprit
    # whose role contradicts it argues against the cause
    premise: str = ""
    # should they restart? will-recur (code or configuration), may-pass (a transient),
    # exclude-node (a node or GPU fault)
    recurrence: str = ""
    # what must be shown for the cause to be an answer rather than where to look first:
    # "culprit" (a timeout shows only that some rank was late, which every hang shows: the rank
    # must be named), "waiters" (a rank that died deadlocks the job only if others are seen waiting)
    answer_needs: tuple[str, ...] = ()
    # a rank that died of this cause is explained by it: it, not "a rank died and the others
    # wait" (the consequence), is the answer
    explains_crash: bool = False
    # a set-up cause (launchers, interface, rank variables, checkpoints, versions): with evidence
    # of its own it outranks a crash that is only inferred from a peer's lost connection or a
    # launcher's exit code
    setup: bool = False
    # what a minimal repro passing on this node says about it: "rules-out" (node-local: the minimal
    # job would have failed too), "points-at" (it needs the real job: look there next), "" nothing
    repro_pass: str = ""


@frozen
class Symptom(Frozen):
    """A classification answer (hang/error or a sub-symptom) and how it shifts suspicion."""

    id: str
    kind: str  # "hang" | "error"
    title: str
    question: str
    parent: str  # "" for the two top-level symptoms
    causes: Mapping[str, float]  # cause id -> prior weight, higher is more likely


@frozen
class Check(Frozen):
    """Judges one probe fact: when `op value` holds, the finding has `status`."""

    id: str
    probe: str
    fact: str
    op: str
    value: Any
    status: str
    title: str
    detail: str
    cause_ids: tuple[str, ...]
    fix: str = ""
    ok_title: str = ""
    # a hardening advice (no explicit timeout, Flight Recorder off): a risk for the next incident,
    # never evidence for this one
    advisory: bool = False
    # ids of checks of the same probe that make this one moot: when one of them fires, this one
    # is not judged (a /dev/shm too small is not also "nearly full")
    unless: tuple[str, ...] = ()


@frozen
class Switch(Frozen):
    """A one-at-a-time bisection switch, in the guide's order."""

    id: str
    env: str
    value: str  # "<interface>" means one run per candidate interface
    backend: str  # "nccl" | "gloo" | "any"
    order: int
    implicates: tuple[str, ...]
    why: str
    permanent_fix: str


@frozen
class Signature(Frozen):
    """A log line pattern that is evidence for a cause."""

    id: str
    pattern: str
    cause: str
    weight: float
    description: str = ""
    tags: tuple[str, ...] = ()


@frozen
class Harmless(Frozen):
    """A log line pattern that must never count as evidence."""

    id: str
    pattern: str
    description: str = ""


@frozen
class Rule(Frozen):
    """A structural rule of the log analysis (knowledge/logs), documented like a linter rule: the
    code that applies it passes its stable id (DL101...) with every score it adds."""

    id: str
    name: str
    cause: str
    mechanism: str  # what it encodes and why (GUIDE.md)
    evidence: str  # the lines it needs
    silent: str  # when it must stay silent
    example: str  # a short log it fires on, written from the real formats
    silent_example: str  # the near-identical healthy twin it stays silent on
    symptom: str = ""  # the symptom the example is analysed with ("" for none)
    # a rule the code no longer applies keeps its id, so the id is never given to another rule
    retired: bool = False

    @property
    def title(self) -> str:
        return self.name


@frozen
class Step(Frozen):
    """A node of the method's decision tree."""

    id: str
    title: str
    kind: str  # "step" | "conclusion"
    next: tuple[str, ...]
    why: str = ""
    learn: str = ""
    terms: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@frozen
class KnowledgeBase(Frozen):
    """The whole validated knowledge base, with any site overlay already applied."""

    version: str
    causes: Mapping[str, Cause]
    symptoms: Mapping[str, Symptom]
    checks: Mapping[str, Check]
    switches: Mapping[str, Switch]
    signatures: Mapping[str, Signature]
    harmless: Mapping[str, Harmless]
    steps: Mapping[str, Step]
    root_step: str
    sources: tuple[str, ...] = ()
    rules: Mapping[str, Rule] = field(default_factory=lambda: MappingProxyType({}))

    def switches_in_order(self) -> list[Switch]:
        return sorted(self.switches.values(), key=lambda s: (s.order, s.id))

    def find(self, item_id: str) -> Any:
        """Return the cause, check, switch, symptom, signature, step or log rule with this id, or None."""
        for table in (self.causes, self.checks, self.switches, self.symptoms, self.signatures,
                      self.steps, self.harmless, self.rules):
            if item_id in table:
                return table[item_id]
        return None
