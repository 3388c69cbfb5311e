"""The Repro step, and the frame it shares with Bisect (bisect.py): the plan, a Run key, live
output, a results table."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Log, Select, Static

from ...record.state import Flow, is_stopped
from ..lang import t
from ..messages import PythonFound, RunFinished, RunLine, RunRow
from ..nextaction import crashed_ranks, next_hint, run_outcome
from ..widgets import STATUS_WORDS, Plain, status_text
from .base import StepScreen, row_index
from .repro_words import app_words

BACKENDS = [("auto", "auto"), ("nccl", "nccl"), ("gloo", "gloo")]


def stuck_at(result: dict[str, Any]) -> str:
    """Where a failed or hung run stopped progressing; nothing for one the user stopped."""
    where = result.get("stuck_at")
    if where == "exit" and result.get("outcome") == "pass":
        return t("slow to exit: killed at the timeout after every rank finished")
    return t("stuck at {where}", where=where) if where and result.get("outcome") != "stopped" else ""


def result_row(label: str, result: dict[str, Any]) -> dict[str, Any]:
    """One results-table row from a ReproResult dict."""
    outcome = str(result.get("outcome", "?"))
    detail = stuck_at(result)
    causes = [c.get("id", c) if isinstance(c, dict) else c for c in result.get("causes") or []]
    if causes:
        detail = (detail + "; " if detail else "") + ", ".join(map(str, causes))
    detail = detail or str(result.get("first_error") or "")
    return {"label": label, "outcome": outcome, "duration_s": result.get("duration_s", 0),
            "detail": detail, "log": str(result.get("log") or "")}


def used_python(result: dict[str, Any]) -> str:
    """The interpreter a recorded repro or bisection ran (`command` starts with it), or ""."""
    command = result.get("command") or (result.get("baseline") or {}).get("command") or []
    return str(command[0]) if command and isinstance(command[0], str) else ""


class RunScreen(StepScreen):
    """What the repro and the bisection screens share: options, plan, run, stop, output."""

    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("x", "stop", "Stop"),
        Binding("i", "focus_python", "Interpreter"),
    ]
    kind = "repro"
    what = "minimal repro"

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        hint = next_hint(kb, step_id)
        event = flow.events.get(step_id)
        what = t(cls.what)
        if not event:
            crashed = crashed_ranks(flow)
            if crashed and "conclusion" in order:
                # a clear crash in the logs: this node's transports are not in question
                return t("The logs show rank {ranks} crashed: the {what} tests this node's transports, "
                         "not that crash. {n} skips to Conclusion; r runs it anyway.", ranks=crashed,
                         what=what, n=order.index("conclusion") + 1)
            return t("r runs the {what} (x stops it). {hint}", what=what, hint=hint).strip()
        if is_stopped(event):
            return t("The {what} was stopped before a result; r runs it again.", what=what)
        return f"{run_outcome(kb, step_id, event)} {hint}".strip()

    def compose_step(self) -> Iterable[Widget]:
        with Horizontal(classes="row options"):
            yield Plain(t("ranks"), classes="label")
            yield Input("2", placeholder="2", id="nproc", type="integer", classes="small")
            yield Plain(t("backend"), classes="label")
            yield Select(BACKENDS, value="auto", allow_blank=False, id="backend")
            yield Plain(t("timeout"), classes="label")
            yield Input("60", placeholder="60", id="timeout", type="number", classes="small")
        with Horizontal(classes="row options"):
            yield Plain("python", classes="label")
            yield Input(placeholder=t("the failing job's python (i): python3 on PATH when empty"), id="python")
        yield Plain("", id="python-how", classes="dim")
        with Horizontal(classes="row"):
            yield Button(t("Run"), id="run", variant="primary")
            yield Button(t("Stop"), id="stop", disabled=True)
            yield Plain("", id="timer")
        # the plan below the Run key: at 80x24 a bisection's plan pushed the key below the fold
        yield Plain(t("What would run, and why"), classes="heading", id="plan-heading")
        yield Plain("", id="plan")
        yield Plain(t("Runs (Enter on a run: its log)"), classes="heading", id="runs-heading")
        yield DataTable(id="runs", cursor_type="row")
        yield Log(id="output", max_lines=5000)

    def on_mount(self) -> None:
        super().on_mount()
        self.cancel: threading.Event | None = None
        self.started = 0.0
        self.timer = self.set_interval(1.0, self._tick, pause=True)
        self.query_one("#runs", DataTable).add_columns(t("Run"), t("Result"), t("Seconds"), t("Detail"))
        self.logs: list[str] = []  # the runs table's rows -> their log files
        # the interpreter given or found once in this session (or used by a recorded run)
        python = used_python(self.dd.flow.events.get(self.kind) or {}) or self.dd.job_python()
        if python:
            self.query_one("#python", Input).value = python
            self.query_one("#python-how", Static).update(t("The job's python for this session; i changes it."))
        else:
            self.query_one("#python-how", Static).update(t("Looking for the job's python (a running job, the logs' paths) ..."))
            self.find_python()
        self.query_one("#backend", Select).value = self.dd.run_backend
        self.watch(self.dd, "learn", self._learn_changed, init=False)
        self._show_plan()
        self.shown_for = self.option_values()
        previous = self.dd.flow.events.get(self.kind)
        if previous:
            self._show_result(previous)

    @work(thread=True, exclusive=True, exit_on_error=False, group="python", description="find the job's python")
    def find_python(self) -> None:
        found = self.dd.find_job_python()
        self.post_message(PythonFound(found.python, found.how) if found else PythonFound(""))

    def on_python_found(self, message: PythonFound) -> None:
        field = self.query_one("#python", Input)
        how = self.query_one("#python-how", Static)
        if field.value.strip():  # typed while we looked: the person's answer stands
            return
        if not message.python:
            how.update(t("The job's python was not found (no running job, no torch path in the logs): "
                         "press i and type it, e.g. /path/to/venv/bin/python."))
            return
        field.value = message.python
        self.dd.set_job_python(message.python, message.how)
        how.update(t("The job's python, found {how}; i changes it.", how=message.how))

    def action_focus_python(self) -> None:
        self.query_one("#python", Input).focus()

    def options(self) -> Any:
        """ReproOptions from the fields; the job's environment is the probed one."""
        from distdoctor.probes.repro import ReproOptions

        nproc = int(self.query_one("#nproc", Input).value or 2)
        timeout = float(self.query_one("#timeout", Input).value or 60)
        backend = str(self.query_one("#backend", Select).value)
        python = self.query_one("#python", Input).value.strip()
        return ReproOptions(nproc=nproc, backend=backend, timeout=timeout, python=python,
                            base_env=dict(self.dd.ctx.env))

    def _show_plan(self) -> None:
        plan = self.query_one("#plan", Static)
        from distdoctor.probes.repro import plan as make_plan

        lines = self.plan_lines([t(line) for line in make_plan(self.options(), self.dd.kb)])
        self.query_one("#plan-heading", Static).update(t("What would run, and why"))
        plan.update("\n".join(f"- {line}" for line in lines))
        self.showing_plan = True

    def plan_lines(self, lines: list[str]) -> list[str]:
        return lines

    def _learn_changed(self) -> None:
        if getattr(self, "showing_plan", False):  # learn mode explains each switch in the plan
            self._show_plan()

    @on(Input.Changed, "#nproc, #timeout, #python")
    @on(Select.Changed, "#backend")
    def _options_changed(self) -> None:
        # a field's Changed also arrives for the value it was given on mount (and the python
        # filled in from an earlier run): only a real edit replaces a recorded result
        values = self.option_values()
        if not self.is_mounted or values == getattr(self, "shown_for", None):
            return
        self.shown_for = values
        self.dd.run_backend = values[-1]
        try:
            self._show_plan()
        except ValueError as exc:  # half-typed number
            self.query_one("#plan", Static).update(t("ERROR {why}", why=exc))

    def option_values(self) -> tuple[str, ...]:
        return (*(self.query_one(f"#{id_}", Input).value for id_ in ("nproc", "timeout", "python")),
                str(self.query_one("#backend", Select).value))

    # --- run / stop -------------------------------------------------------------------------
    @on(Button.Pressed, "#run")
    def action_run(self) -> None:
        if self.cancel is not None:
            self.notify(t("the {what} is already running (x stops it)", what=t(self.what)))
            return
        from distdoctor.probes.repro import validate

        try:
            opts = self.options()
            validate(opts)
        except ValueError as exc:  # ReproInputError is a ValueError
            self.notify(str(exc), severity="error")
            return
        self.python_used = opts.python
        if opts.python:
            self.dd.set_job_python(opts.python, t("given"))
        self.cancel = threading.Event()
        self.dd.cancel_events.add(self.cancel)
        self.query_one("#runs", DataTable).clear()
        self.logs = []
        self.query_one("#output", Log).clear()
        # the live output is below the plan: bring the timer, the runs and the output up
        self.query_one("#run").scroll_visible(animate=False, top=True)
        self.query_one("#run", Button).disabled = True
        self.query_one("#stop", Button).disabled = False
        self.started = time.monotonic()
        self._tick()
        self.timer.resume()
        self.set_running(t("Running the {what}: live output below; x stops it.", what=t(self.what)))
        self.execute(opts, self.cancel)

    @on(Button.Pressed, "#stop")
    def action_stop(self) -> None:
        if self.cancel is not None:
            self.cancel.set()
            self.query_one("#timer", Static).update(" " + t("stopping..."))

    def worker_failed(self, what: str, why: str) -> None:
        super().worker_failed(what, why)
        self.on_run_finished(RunFinished(self.kind, None, why))

    def _tick(self) -> None:
        elapsed = int(time.monotonic() - self.started)
        self.query_one("#timer", Static).update(" " + t("running {time}", time=f"{elapsed // 60:02d}:{elapsed % 60:02d}"))

    def execute(self, opts: Any, cancel: threading.Event) -> None:
        raise NotImplementedError

    def on_run_line(self, message: RunLine) -> None:
        self.query_one("#output", Log).write_line(message.line)

    def on_run_row(self, message: RunRow) -> None:
        row = message.row
        self.query_one("#runs", DataTable).add_row(
            t(row["label"]) if row["label"] in ("repro", "baseline") else row["label"], status_text(row["outcome"]),
            f"{float(row['duration_s'] or 0):.1f}",
            Text(row["detail"], overflow="ellipsis", no_wrap=True), key=str(len(self.logs)))
        self.logs.append(str(row.get("log") or ""))

    @on(DataTable.RowSelected, "#runs")
    def _open_log(self, event: DataTable.RowSelected) -> None:
        """Enter on a run: the end of its log, where a failing run says why."""
        from .logviewer import LogViewerScreen

        index = row_index(event)
        path = self.logs[index] if 0 <= index < len(self.logs) else ""
        if not path:
            self.notify(t("this run has no log file"), severity="warning")
            return
        self.app.push_screen(LogViewerScreen(path, 0))

    def on_run_finished(self, message: RunFinished) -> None:
        self.timer.pause()
        if self.cancel is not None:
            self.dd.cancel_events.discard(self.cancel)
        self.cancel = None
        self.query_one("#run", Button).disabled = False
        self.query_one("#stop", Button).disabled = True
        self.set_running("")
        timer = self.query_one("#timer", Static)
        if message.error:
            message = RunFinished(message.kind, message.result, app_words(message.error))
            timer.update(Text(" " + t("ERROR {why}", why=message.error), style="bold"))
            # the timer can sit below the fold: say it where it is seen too
            self.notify(t("The {what} could not run: {error}", what=t(self.what), error=message.error),
                        severity="error", timeout=15)
            timer.scroll_visible(animate=False)
            return
        elapsed = time.monotonic() - self.started
        stopped = is_stopped(message.result or {})
        timer.update(" " + (t("stopped after {s} s", s=f"{elapsed:.1f}") if stopped
                            else t("finished in {s} s", s=f"{elapsed:.1f}")))
        if message.result is not None:
            if getattr(self, "python_used", ""):
                self.dd.set_job_python(self.python_used, t("given"), keep=True)
            self.dd.record(self.kind, message.result)
            self.showing_plan = False
            self.query_one("#plan-heading", Static).update(t("Result"))
            self.query_one("#plan", Static).update(self.summary(message.result))

    def _show_result(self, result: dict[str, Any]) -> None:
        self.showing_plan = False
        self.query_one("#timer", Static).update(" " + t("recorded earlier; r runs again"))
        self.query_one("#plan-heading", Static).update(t("Result"))
        self.query_one("#plan", Static).update(self.summary(result))
        for row in self.rows(result):
            self.on_run_row(RunRow(row))

    def rows(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return [result_row("repro", result)]

    def summary(self, result: dict[str, Any]) -> Text:
        return Text(t("Outcome: {outcome}", outcome=t(str(result.get("outcome", "?")).upper())))


class ReproScreen(RunScreen):
    """One node, two ranks, the job's Python and environment: init, all-reduce, exit."""

    kind, what = "repro", "minimal repro"
    PALETTE = (("run", "Run the minimal repro", "One node, two processes, all-reduce"),)

    def plan_lines(self, lines: list[str]) -> list[str]:
        # the plan describes a bisection; its first line is the baseline, which is the repro
        return lines[:1] + [t("if it passes, this node's local setup is fine: the cause is between "
                              "nodes or in the training code; if it fails, the node itself is")]

    @work(thread=True, exclusive=True, exit_on_error=False, group="repro", description="minimal repro")
    def execute(self, opts: Any, cancel: threading.Event) -> None:
        from distdoctor.probes.repro import check_python, run_repro

        try:
            # a python without torch would "fail at init"; say what is wrong instead
            info = check_python(opts)
            self.post_message(RunLine(f"distdoctor: torch {info.torch} at {info.python}, backend "
                                      f"{info.backend_for(opts.backend)}"))
            result = run_repro(replace(opts, python=info.python, torch=info.torch), self.dd.kb,
                               on_line=lambda line: self.post_message(RunLine(line)), cancel=cancel)
        except (OSError, ValueError) as exc:
            self.post_message(RunFinished(self.kind, None, str(exc)))
            return
        data = result.to_dict()
        self.post_message(RunRow(result_row("repro", data)))
        self.post_message(RunFinished(self.kind, data))

    def summary(self, result: dict[str, Any]) -> Text:
        text = Text()
        text.append(t("Outcome: "), style="bold")
        outcome = str(result.get("outcome", "?"))
        word = status_text(outcome)
        text.append_text(word)
        if STATUS_WORDS.get(outcome, (outcome.upper(),))[0].lower() != outcome:  # the English word
            text.append(f" ({outcome})")
        if stuck_at(result):
            text.append(f"; {stuck_at(result)}")
        if result.get("first_error"):
            text.append("\n" + t("First error: {error}", error=result["first_error"]))
        return text


SCREEN = ReproScreen  # the step this module shows (tui/app/steps.py)
