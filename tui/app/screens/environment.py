"""Step 3, environment: the probes in a background worker, findings, what / why / fix."""
from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, ProgressBar, Static
from textual.worker import get_current_worker

from distdoctor.knowledge.evaluate import Finding

from ...record.state import Flow
from ..lang import t
from ..messages import ProbeDone, SweepDone, SweepStarted
from ..nextaction import next_hint
from ..widgets import Plain, status_text
from .base import StepScreen, row_index

# findings about the interpreter the probes asked (this app's own when the job's is not known)
INTERPRETER_CHECKS = frozenset({"torch-not-installed", "torch-import-fails"})
STATUS_ORDER = {"fail": 0, "error": 1, "warn": 2, "unavailable": 3, "ok": 4}


def explain(kb: Any, finding: Finding) -> Text:
    """What / why / fix of a finding: its own text, then the prose of the causes it points at."""
    text = Text()
    text.append(t("What: "), style="bold")
    text.append(t("{title}. {detail}", title=finding.title, detail=finding.detail).strip())
    causes = [kb.causes[c] for c in finding.cause_ids if c in kb.causes]
    for cause in causes:
        text.append("\n" + t("Why: "), style="bold")
        text.append(t("{title}: {why}", title=cause.title, why=cause.why))
    fix = finding.fix or "; ".join(c.fix for c in causes)
    if fix:
        text.append("\n" + t("Fix: "), style="bold")
        text.append(fix)
    if finding.check in INTERPRETER_CHECKS:
        # the fix names the command line's flag; in the app the field has a key
        text.append("\n" + t("In this app: "), style="bold")
        text.append(t("on Repro (4) press i and give the job's python; then r here checks it again."))
    more = [f for c in causes for f in c.fixes if f.text.strip() not in fix]
    if more:
        text.append("\n" + t("Other fixes:"), style="bold")
        for f in more:
            text.append("\n" + "\n".join(f.copy_lines()))
    return text


class EnvironmentScreen(StepScreen):
    """Runs the probe sweep when first opened (never before), unless the session already has one."""

    BINDINGS = [
        Binding("r", "rerun", "Rerun probes"),
        Binding("t", "topology", "Topology"),
        Binding("f", "fleet", "Fleet"),
        Binding("a", "toggle_ok", "Show OK"),
    ]
    PALETTE = (("rerun", "Run the environment probes", "Check this node again"),
               ("topology", "Show the GPU topology", "Topology picture and P2P advice"),
               ("fleet", "Compare fleet snapshots", "Load snapshots from other nodes"))

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        hint = next_hint(kb, step_id)
        if not flow.done("environment"):
            return t("Probes run when this step opens; r reruns them.")
        findings = flow.findings
        fails = [f for f in findings if f.status == "fail"]
        warns = [f for f in findings if f.status == "warn"]
        if not fails and not warns:
            return t("No FAIL or WARN on this node. {hint}", hint=hint).strip()
        worst = (fails or warns)[0]
        return t("{fails} FAIL, {warns} WARN; first: {title}. {hint}", fails=len(fails), warns=len(warns),
                 title=worst.title, hint=hint).strip()
    show_ok = False  # OK findings are many and say nothing to act on: listed on request
    RESULT_BELOW = frozenset({"findings"})  # the highlighted finding's what / why / fix

    def compose_step(self) -> Iterable[Widget]:
        with Horizontal(classes="row"):
            yield ProgressBar(total=1, show_eta=False, id="progress")
            yield Plain("", id="sweep-status")
        yield Plain("", id="probe-lines", classes="status-line")
        yield Plain(t("Findings (arrows: what / why / fix)"), classes="heading", id="findings-heading")
        yield DataTable(id="findings", cursor_type="row")
        yield Plain("", id="detail")
        with Horizontal(classes="row buttons"):
            yield Button(t("Topology"), id="topology")
            yield Button(t("Fleet"), id="fleet")
            yield Button(t("Rerun"), id="rerun")

    def on_mount(self) -> None:
        super().on_mount()
        # the short columns first: a long finding title must not push them off an 80-column screen
        self.query_one("#findings", DataTable).add_columns(t("Status"), t("Probe"), t("Finding"))
        self.statuses: dict[str, tuple[str, str]] = {}
        self.findings: list[Finding] = []
        event = self.dd.flow.events.get("check")
        if self.dd.flow.done(self.step_id) and event:
            # a check recorded earlier (by the app or by `distdoctor check --session`): show it
            probes = event.get("probes") or {}
            self.statuses = {n: (p.get("status", "?"), p.get("reason", "")) for n, p in probes.items()}
            self._show_probe_lines()
            bar = self.query_one("#progress", ProgressBar)
            bar.update(total=max(1, len(probes)), progress=max(1, len(probes)))
            self.query_one("#sweep-status", Static).update(" " + t("recorded earlier; r reruns"))
            self._show_findings(self.dd.flow.findings)
        else:
            self.action_rerun()

    # --- the sweep --------------------------------------------------------------------------
    def action_rerun(self) -> None:
        self.statuses = {}
        self.query_one("#sweep-status", Static).update(" " + t("starting..."))
        self.set_running(t("Probing this node..."))
        self.sweep()

    @work(thread=True, exclusive=True, exit_on_error=False, group="probes", description="environment probes")
    def sweep(self) -> None:
        worker = get_current_worker()
        from distdoctor.probes.sweep import run_sweep

        probes = self.dd.probes
        if probes is None:
            from distdoctor.probes.registry import PROBES as probes
        self.post_message(SweepStarted(list(probes)))
        start = time.monotonic()

        def on_result(result: Any) -> None:
            if not worker.is_cancelled:
                self.post_message(ProbeDone(result.name, result.status, result.reason, dict(result.facts)))

        # the job's python answers the versions probe (this app's own may have no torch)
        python = self.dd.job_python()
        if not python:
            found = self.dd.find_job_python()
            if found is not None:
                python = found.python
                self.app.call_from_thread(self.dd.set_job_python, found.python, found.how)
        results = run_sweep(self.dd.probe_context(python), probes, on_result=on_result)
        if worker.is_cancelled:
            return
        facts = {name: dict(r.facts) for name, r in results.items()}
        statuses = {name: r.status for name, r in results.items()}
        from distdoctor.knowledge.evaluate import evaluate

        findings = tuple(evaluate(self.dd.kb, results))
        self.post_message(SweepDone(findings, facts, statuses, time.monotonic() - start))

    def worker_failed(self, what: str, why: str) -> None:
        super().worker_failed(what, why)
        self.query_one("#sweep-status", Static).update(Text(" " + t("ERROR: the sweep failed"), style="bold"))
        self.query_one("#detail", Static).update(t("{what} failed: {why}", what=what, why=why))

    def on_sweep_started(self, message: SweepStarted) -> None:
        names = message.names
        self.statuses = {name: ("running", "") for name in names}
        self.query_one("#progress", ProgressBar).update(total=len(names), progress=0)
        self.query_one("#sweep-status", Static).update(" " + t("{done} of {n} probes done", done=0, n=len(names)))
        self._show_probe_lines()

    def on_probe_done(self, message: ProbeDone) -> None:
        self.statuses[message.name] = (message.status, message.reason)
        done = sum(1 for s, _ in self.statuses.values() if s != "running")
        self.query_one("#progress", ProgressBar).update(progress=done)
        self.query_one("#sweep-status", Static).update(" " + t("{done} of {n} probes done", done=done, n=len(self.statuses)))
        self._show_probe_lines()
        bad = [n for n, (s, _) in self.statuses.items() if s in ("fail", "warn", "error")]
        self.set_running(t("Probing this node: {done} of {n} done", done=done, n=len(self.statuses))
                         + (t("; {names} need a look", names=", ".join(bad)) if bad else "") + "...")

    def on_sweep_done(self, message: SweepDone) -> None:
        self.set_running("")
        status = self.query_one("#sweep-status", Static)
        if message.error and not message.statuses:
            status.update(Text(" " + t("ERROR: nothing ran (see below)"), style="bold"))
            self.query_one("#detail", Static).update(message.error)
            return
        for name, st in message.statuses.items():
            self.statuses.setdefault(name, (st, ""))
        self._show_probe_lines(message.findings)
        status.update(" " + t("{n} probes done", n=len(message.statuses)) +
                      (t("; {error}", error=message.error) if message.error else ""))
        probes = {n: {"status": s, "reason": r} for n, (s, r) in self.statuses.items()}
        self.dd.record("check", {"host": socket.gethostname(), "duration_s": round(message.duration_s, 3),
                                 "findings": [f.to_dict() for f in message.findings], "facts": message.facts,
                                 "probes": probes})
        topo = message.facts.get("topology")
        if topo and message.statuses.get("topology") not in ("unavailable", "error"):
            self.dd.record("topo", topo)
        self._show_findings(message.findings)

    # --- display ----------------------------------------------------------------------------
    def _show_probe_lines(self, findings: Sequence[Finding] = ()) -> None:
        """One line per probe: how it ran, and once it ran, its worst finding ("WARN 2 warnings"):
        a probe that ran but found problems must not read OK."""
        found: dict[str, list[str]] = {}
        for f in findings:
            found.setdefault(f.probe, []).append(f.status)
        table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
        table.add_column("probe", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("reason", overflow="ellipsis", no_wrap=True, ratio=1)
        for name, (status, reason) in self.statuses.items():
            problems = sorted((s for s in found.get(name, []) if s in ("fail", "warn")),
                              key=lambda s: STATUS_ORDER[s])
            if status == "ok" and problems:
                status = problems[0]
                fails, warns = problems.count("fail"), problems.count("warn")
                reason = t(", ").join(([t("{n} failed", n=fails)] if fails else [])
                                      + ([t("{n} warning" + "s" * (warns > 1), n=warns)] if warns else []))
            table.add_row(name, status_text(status), Text(t(reason) if reason else reason, style="dim"))
        self.query_one("#probe-lines", Static).update(table)

    def _show_findings(self, findings: Sequence[Finding]) -> None:
        self.all_findings = sorted(findings, key=lambda f: STATUS_ORDER.get(f.status, 5))
        self.findings = [f for f in self.all_findings if self.show_ok or f.status != "ok"]
        hidden = len(self.all_findings) - len(self.findings)
        self.query_one("#findings-heading", Static).update(
            t("Findings (arrows: what / why / fix)")
            + (t("; {n} OK not listed, a lists them", n=hidden) if hidden else ""))
        table = self.query_one("#findings", DataTable)
        table.clear()
        for n, f in enumerate(self.findings):
            table.add_row(status_text(f.status), f.probe, f.title, key=str(n))
        if self.findings:
            self.query_one("#detail", Static).update(explain(self.dd.kb, self.findings[0]))
        else:
            self.query_one("#detail", Static).update(
                t("No problem found ({n} checks OK).", n=hidden) if hidden else t("No findings."))

    def action_toggle_ok(self) -> None:
        self.show_ok = not self.show_ok
        self._show_findings(getattr(self, "all_findings", []))

    @on(DataTable.RowHighlighted, "#findings")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        index = row_index(event)
        if 0 <= index < len(self.findings):
            self.query_one("#detail", Static).update(explain(self.dd.kb, self.findings[index]))

    @on(DataTable.RowSelected, "#findings")
    def _selected(self) -> None:
        """Enter on a finding: its what / why / fix, which can sit below the fold at 80x24."""
        self.query_one("#detail").scroll_visible(animate=False)

    # --- topology and fleet -----------------------------------------------------------------
    @on(Button.Pressed, "#topology")
    def action_topology(self) -> None:
        from .topology import TopologyScreen

        facts = (self.dd.flow.events.get("topo")
                 or ((self.dd.flow.events.get("check") or {}).get("facts") or {}).get("topology"))
        status, reason = getattr(self, "statuses", {}).get("topology", ("", ""))
        self.app.push_screen(TopologyScreen(facts or {}, status, reason))

    @on(Button.Pressed, "#fleet")
    def action_fleet(self) -> None:
        from .topology import FleetScreen

        self.app.push_screen(FleetScreen())

    @on(Button.Pressed, "#rerun")
    def _rerun_pressed(self) -> None:
        self.action_rerun()


SCREEN = EnvironmentScreen  # the step this module shows (tui/app/steps.py)
