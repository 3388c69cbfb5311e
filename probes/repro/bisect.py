"""One-switch bisection: a baseline, then each switch alone, in the knowledge base's order."""
from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from distdoctor.knowledge.i18n import t

from ...knowledge.model import KnowledgeBase, Switch
from ..secret_names import mask_env
from .options import ReproInputError, ReproOptions, check_python
from .run import ReproResult, new_run_dir, run_repro
from .script import routable_address

INTERFACE = "<interface>"
SAFE_RE = re.compile(r"[^A-Za-z0-9_.-]")
REMINDER = ("Debugging switches must not stay in production scripts: find and fix the root cause, "
            "then remove {env} from the job's environment.")


@dataclass(frozen=True)
class Trial:
    """One switch with one value: exactly one variable changed against the baseline."""

    switch: Switch
    value: str

    @property
    def label(self) -> str:
        return f"{self.switch.env}={self.value}"


@dataclass
class BisectRun:
    trial: Trial
    result: ReproResult

    def to_dict(self) -> dict[str, Any]:
        return {"switch": self.trial.switch.id, "env": self.trial.label,
                "outcome": self.result.outcome, "duration_s": round(self.result.duration_s, 3),
                "causes": [c["id"] for c in self.result.causes], "log": self.result.log}


@dataclass
class BisectResult:
    """Baseline, runs and the passing switch; `to_dict()` is `distdoctor bisect --json`."""

    backend: str
    baseline: ReproResult
    runs: list[BisectRun] = field(default_factory=list)
    # the one switch that turned the failing baseline into a pass, with its cause (passing_switch_of)
    passing_switch: dict[str, Any] | None = None
    run_dir: str = ""
    stopped: bool = False
    skipped: list[dict[str, str]] = field(default_factory=list)  # trials that change nothing
    # what a passing baseline says ({"rules_out": ids, "points_at": ids}): after_a_pass()
    if_passed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def baseline_passed(self) -> bool:
        return self.baseline.passed

    @property
    def found(self) -> bool:
        """A switch explained the failure, or there was no failure to explain."""
        return self.passing_switch is not None or self.baseline_passed

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend, "baseline": self.baseline.to_dict(),
                               "runs": [r.to_dict() for r in self.runs],
                               # "verdict" is the same, under the name sessions and scripts already read
                               "passing_switch": self.passing_switch, "verdict": self.passing_switch,
                               "baseline_passed": self.baseline_passed, "stopped": self.stopped,
                               "skipped": self.skipped, "run_dir": self.run_dir}
        if self.baseline_passed:
            out["rules_out"] = list(self.if_passed.get("rules_out", ()))
            out["points_at"] = list(self.if_passed.get("points_at", ()))
        return out


def not_applicable(kb: KnowledgeBase, backend: str) -> frozenset[str]:
    """The causes a run on `backend` cannot speak to: on Gloo, those that need a GPU or NCCL
    (causes.toml `needs`); a CPU bisection saying "look at cuda-oom" is noise."""
    if backend != "gloo":
        return frozenset()
    return frozenset(cause_id for cause_id, cause in kb.causes.items()
                     if set(getattr(cause, "needs", ()) or ()) & {"gpu", "nccl"})


def after_a_pass(kb: KnowledgeBase, backend: str = "") -> dict[str, tuple[str, ...]]:
    """What a minimal job passing on this node says (causes.toml `repro_pass`): the node-local
    causes it rules out and the ones it points at, less those the backend cannot speak to."""
    skip = not_applicable(kb, backend)
    return {key: tuple(cid for cid, cause in kb.causes.items()
                       if getattr(cause, "repro_pass", "") == word and cid not in skip)
            for key, word in (("rules_out", "rules-out"), ("points_at", "points-at"))}


def candidate_interfaces() -> list[str]:
    """Up interfaces with an address: the one holding this node's routable address first, then
    the other non-loopback ones by name, then loopback."""
    stats = psutil.net_if_stats()
    addrs = psutil.net_if_addrs()
    usable = [name for name, st in stats.items() if st.isup and any(
        a.family in (socket.AF_INET, socket.AF_INET6) for a in addrs.get(name, ()))]
    loopback = [n for n in usable if "loopback" in stats[n].flags or n == "lo"]
    routable = routable_address()
    routed = {n for n in usable if any(a.address == routable for a in addrs.get(n, ()))}
    others = sorted((n for n in usable if n not in loopback), key=lambda n: (n not in routed, n))
    return others + sorted(loopback)


def applicable(kb: KnowledgeBase, backend: str) -> list[Switch]:
    return [s for s in kb.switches_in_order() if s.backend in (backend, "any")]


def find_switch(kb: KnowledgeBase, name: str) -> tuple[Switch, str | None]:
    """A switch by id or variable name, optionally `=VALUE`; ReproInputError when unknown."""
    key, sep, value = name.partition("=")
    for sw in kb.switches_in_order():
        if key in (sw.id, sw.env):
            return sw, (value if sep else None)
    known = ", ".join(s.id for s in kb.switches_in_order())
    raise ReproInputError(t("--switch {name}: unknown switch (one of {known})", name=repr(name), known=known))


def trials(kb: KnowledgeBase, backend: str, names: Sequence[str] | None = None,
           interfaces: Sequence[str] | None = None) -> list[Trial]:
    """The runs after the baseline, one variable each; `<interface>` expands per interface."""
    if names:
        chosen = [find_switch(kb, n) for n in names]
        for sw, _ in chosen:
            if sw.backend not in (backend, "any"):
                raise ReproInputError(t("--switch {id}: applies to the {backend} backend, this run uses {used}",
                                        id=sw.id, backend=sw.backend, used=backend))
    else:
        chosen = [(sw, None) for sw in applicable(kb, backend)]
    nics = list(interfaces) if interfaces is not None else None
    out: list[Trial] = []
    for sw, fixed in chosen:
        if fixed is not None:
            out.append(Trial(sw, fixed))
        elif sw.value == INTERFACE:
            if nics is None:
                nics = candidate_interfaces()
            out.extend(Trial(sw, nic) for nic in nics)
        else:
            out.append(Trial(sw, sw.value))
    return out


def plan(opts: ReproOptions, kb: KnowledgeBase, backend: str | None = None,
         switches: Sequence[str] | None = None) -> list[str]:
    """What a bisection would run and why, one line each, for showing before it starts.
    `backend` is the resolved backend when known; for "auto" both candidates are listed."""
    backend = backend or opts.backend
    backends = [backend] if backend in ("nccl", "gloo") else ["nccl", "gloo"]
    added = "".join(f" + {k}={v}" for k, v in mask_env(opts.env).items())
    shown = backend if len(backends) == 1 else t("auto (nccl with CUDA, else gloo)")
    lines = [t("baseline: {n} ranks on this node, backend {backend}, the job's environment{added} + "
               "NCCL_DEBUG=INFO; after {seconds}s without finishing it counts as a hang", n=opts.nproc,
               backend=shown, added=added, seconds=f"{opts.timeout:g}")]
    for name in backends:
        prefix = "" if len(backends) == 1 else f"[{name}] "
        try:
            steps = trials(kb, name, switches)
        except ReproInputError as exc:
            lines.append(f"{prefix}{exc}")
            continue
        for trial in steps:
            causes = ", ".join(trial.switch.implicates)
            lines.append(prefix + t("then alone: {switch} (if only this passes: {causes}). {why}",
                                    switch=trial.label, causes=causes, why=trial.switch.why))
    lines.append(t("each switch alone on top of the baseline's environment, never two at once; "
                   "a passing baseline stops there and rules out this node's local setup"))
    return lines


def passing_switch_of(trial: Trial, kb: KnowledgeBase) -> dict[str, Any]:
    """The switch that made the job pass, the cause it implicates and what to do about it."""
    cause = trial.switch.implicates[0] if trial.switch.implicates else ""
    title = kb.causes[cause].title if cause in kb.causes else ""
    return {"switch": trial.switch.id, "env": trial.label, "cause": cause,
            "causes": list(trial.switch.implicates), "cause_title": title,
            "why": trial.switch.why, "permanent_fix": trial.switch.permanent_fix,
            "reminder": REMINDER.format(env=trial.switch.env)}


def run_bisect(opts: ReproOptions, kb: KnowledgeBase, switches: Sequence[str] | None = None,
               on_run: Callable[[str, ReproResult], None] | None = None,
               cancel: threading.Event | None = None, *, backend: str | None = None,
               keep_going: bool = False, interfaces: Sequence[str] | None = None,
               on_line: Callable[[str, str], None] | None = None) -> BisectResult:
    """Baseline, then each switch alone on top of the user's environment. Stops at the first
    switch that passes (or after a passing baseline) unless `keep_going`. `backend` is the
    resolved one (see options.check_python), asked of the target python when not given.
    `on_run(label, result)` is called after each run; `on_line(label, line)`
    for every output line."""
    if backend is None or backend == "auto":
        backend = opts.backend if opts.backend != "auto" else \
            check_python(opts).backend_for(opts.backend)
    steps = trials(kb, backend, switches, interfaces)  # bad names fail before anything runs
    root = Path(opts.run_dir) if opts.run_dir else new_run_dir("bisect")

    def one(label: str, run_opts: ReproOptions, folder: str) -> ReproResult:
        line_cb = (lambda line: on_line(label, line)) if on_line else None
        result = run_repro(replace(run_opts, run_dir=root / folder), kb, line_cb, cancel)
        if on_run is not None:
            on_run(label, result)
        return result

    baseline = one("baseline", opts, "00-baseline")
    out = BisectResult(backend, baseline, run_dir=str(root), stopped=baseline.outcome == "stopped",
                       if_passed=after_a_pass(kb, backend))
    if out.stopped or (baseline.passed and not keep_going):
        return out
    job_env = {**(os.environ if opts.base_env is None else opts.base_env), **dict(opts.env)}
    for n, trial in enumerate(steps, 1):
        if cancel is not None and cancel.is_set():  # stopped between two runs: start no more
            out.stopped = True
            break
        if job_env.get(trial.switch.env) == trial.value:
            # the baseline already ran with it: a second run would change nothing
            out.skipped.append({"switch": trial.switch.id, "env": trial.label,
                                "reason": "already set in the job's environment"})
            continue
        env = {**dict(opts.env), trial.switch.env: trial.value}
        folder = SAFE_RE.sub("_", f"{n:02d}-{trial.switch.id}-{trial.value}")[:80]
        result = one(trial.label, replace(opts, env=env), folder)
        out.runs.append(BisectRun(trial, result))
        if result.outcome == "stopped":
            out.stopped = True
            break
        if result.passed and not baseline.passed and out.passing_switch is None:
            out.passing_switch = passing_switch_of(trial, kb)
            if not keep_going:
                break
    return out
