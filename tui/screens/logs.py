"""Step 2, logs: the lines that turn logging on for this launcher, then load and read the logs."""
from __future__ import annotations

import os
from typing import Any, Iterable

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Static

from .. import launchers
from ..messages import LogsAnalysed
from ..widgets import PathSuggester, Plain
from .base import StepScreen


class LogsScreen(StepScreen):
    """Logging switches to copy; a path (completion or a tree) to analyse; causes and evidence."""

    BINDINGS = [
        Binding("c", "copy", "Copy lines"),
        Binding("f", "focus_path", "Load logs"),
        Binding("b", "browse", "Browse"),
    ]

    def compose_step(self) -> Iterable[Widget]:
        launcher = launchers.for_env(self.dd.ctx.env)
        self.launcher = launcher
        yield Plain(Text.assemble(("Launcher: ", "bold"), launcher.name, (f" ({launcher.evidence})", "dim")),
                     id="launcher", classes="heading first")
        yield Plain("Add these lines to the job, rerun it (c copies them):", classes="dim")
        yield Plain(Text(launcher.text), id="switch-lines", classes="code")
        yield Plain("Load the logs: a file or a folder (Tab completes, b browses)", classes="heading")
        with Horizontal(classes="row"):
            yield Input(placeholder=launchers.LOG_DIR, suggester=PathSuggester(), id="path")
            yield Button("Browse", id="browse")
        yield Plain("", id="logs-status")
        yield Plain("Diagnosis", classes="heading")
        yield DataTable(id="causes", cursor_type="row", zebra_stripes=True)
        yield Plain("Evidence (Enter shows the line in its file)", classes="heading")
        yield DataTable(id="evidence", cursor_type="row")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#causes", DataTable).add_columns("#", "Cause", "Score", "Lines")
        self.query_one("#evidence", DataTable).add_columns("#", "Where", "Line")
        self._evidence: list[tuple[str, int]] = []
        flow = self.dd.flow
        if flow.log_paths:
            self.query_one("#path", Input).value = flow.log_paths[0]
        if flow.events.get("logs"):
            self._show(flow.events["logs"])

    # --- actions ----------------------------------------------------------------------------
    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.launcher.text)
        self.notify("Logging lines copied (your terminal must allow OSC 52 clipboard access).")

    def action_focus_path(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Button.Pressed, "#browse")
    def action_browse(self) -> None:
        from .pathpicker import PathPickerScreen

        start = self.query_one("#path", Input).value.strip() or "."
        self.app.push_screen(PathPickerScreen(start), self._picked)

    def _picked(self, path: str | None) -> None:
        if path:
            self.query_one("#path", Input).value = path
            self.load([path])

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if path:
            self.load([path])

    def load(self, paths: list[str]) -> None:
        status = self.query_one("#logs-status", Static)
        missing = [p for p in paths if not os.path.exists(os.path.expanduser(p))]
        if missing:
            status.update(Text(f"ERROR no such file or folder: {missing[0]}", style="bold"))
            return
        status.update(f"Reading {', '.join(paths)} ...")
        self.set_running("Reading the logs")
        self.analyse([os.path.expanduser(p) for p in paths])

    @work(thread=True, exclusive=True, exit_on_error=False, group="logs", description="analyse logs")
    def analyse(self, paths: list[str]) -> None:
        try:
            from distdoctor.knowledge.logs import analyse
        except ImportError as exc:
            self.post_message(LogsAnalysed(paths, None, f"log analysis not available: {exc}"))
            return
        try:
            report = analyse(paths, self.dd.kb, symptom=self.dd.flow.symptom)
        except (OSError, ValueError) as exc:
            self.post_message(LogsAnalysed(paths, None, f"cannot read the logs: {exc}"))
            return
        self.post_message(LogsAnalysed(paths, report.to_dict()))

    def on_logs_analysed(self, message: LogsAnalysed) -> None:
        self.set_running("")
        if message.error:
            self.query_one("#logs-status", Static).update(Text(message.error, style="bold"))
            # the path itself is an answer worth keeping even when it could not be analysed
            self.dd.record("answer", {"step": self.step_id, "question": "log_paths",
                                      "answer": message.paths})
            return
        data = dict(message.report or {})
        data.setdefault("paths", message.paths)
        self.dd.record("logs", data)
        self._show(data)

    # --- display ----------------------------------------------------------------------------
    def _show(self, data: dict[str, Any]) -> None:
        kb = self.dd.kb
        causes = data.get("causes") or []
        files = data.get("files_read")
        files_n = len(files) if isinstance(files, list) else files
        skipped = data.get("skipped") or []
        status = f"Read {files_n if files_n is not None else '?'} file(s)"
        if skipped:
            status += f", skipped {len(skipped)}"
        status += f": {len(causes)} cause(s) found." if causes else ": no known failure signature."
        first = data.get("first_failure")
        if isinstance(first, dict) and first.get("text"):
            rank = f"rank {first['rank']}, " if first.get("rank") is not None else ""
            where = f"{os.path.basename(str(first.get('file', '?')))}:{first.get('line', '?')}"
            status += f"\nFirst failure ({rank}{where}): {str(first['text']).strip()}"
        self.query_one("#logs-status", Static).update(status)
        table = self.query_one("#causes", DataTable)
        table.clear()
        evidence = self.query_one("#evidence", DataTable)
        evidence.clear()
        self._evidence = []
        for n, cause in enumerate(causes, 1):
            known = kb.causes.get(cause.get("id"))
            # one line can match several signatures of the same cause: list it once
            lines = list({(str(ev.get("file")), ev.get("line")): ev
                          for ev in cause.get("evidence") or [] if isinstance(ev, dict)}.values())
            title = known.title if known else (
                "Other: not a distributed-training cause (see the lines)" if cause.get("id") == "other"
                else str(cause.get("id")))
            table.add_row(str(n), title,
                          f"{float(cause.get('score') or 0):.1f}", str(len(lines)), key=str(n - 1))
            for ev in lines:
                where = f"{os.path.basename(str(ev.get('file', '?')))}:{ev.get('line', '?')}"
                evidence.add_row(str(n), where, Text(str(ev.get("text", "")).strip(), no_wrap=True),
                                 key=str(len(self._evidence)))
                self._evidence.append((str(ev.get("file", "")), int(ev.get("line") or 1)))

    @on(DataTable.RowSelected, "#evidence")
    def _open_evidence(self, event: DataTable.RowSelected) -> None:
        from .logviewer import LogViewerScreen

        index = int(event.row_key.value or 0)
        if 0 <= index < len(self._evidence):
            path, line = self._evidence[index]
            self.app.push_screen(LogViewerScreen(path, line))
