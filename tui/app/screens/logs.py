"""Step 2, logs: the lines that turn logging on for this launcher, then load and read the logs."""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Static

from ...record.diagnosis_feed import diagnose_flow
from ...record.state import Flow
from .. import launchers
from ..lang import cells, clip, t
from ..messages import LogsAnalysed, StacksTaken
from ..nextaction import cause_title, next_hint
from ..widgets import PathSuggester, Plain
from . import logs_sources
from .base import StepScreen, row_index

MAX_NAME = 24  # the Where column's share of an 80-column screen
TABLE_ROWS = 12  # app.tcss: the max-height of a DataTable in a step


def short_names(paths: Iterable[str]) -> dict[str, str]:
    """A name per log file that tells them apart: the file name when that is unique, else the
    path below the folder they share (a folder of runs often holds many `log.txt`)."""
    from distdoctor.knowledge.logs.timeline import short

    paths = sorted(set(paths))
    # torchrun's --log-dir holds one folder per rank: `1/stderr.log`, as the CLI names them
    names = {p: short(p) for p in paths}
    if len(set(names.values())) == len(names):
        return names
    try:
        root = os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:  # relative and absolute paths mixed
        root = ""
    out = {}
    for p in paths:
        folder, name = os.path.split(os.path.relpath(p, root) if root else p)
        # keep the start of the folder (run folders are often numbered) and the file name
        room = max(8, MAX_NAME - cells(name) - 1)
        out[p] = name if not folder else (
            f"{folder}/{name}" if cells(folder) <= room else f"{clip(folder, room, '…')}/{name}")
    return out


def launcher_text(launcher: launchers.Launcher) -> Text:
    """'Launcher: torchrun (TORCHELASTIC_RUN_ID is set)' in the app's language."""
    return Text.assemble((t("Launcher: "), "bold"), t(launcher.name),
                         (t(" ({why})", why=launcher.evidence), "dim"))


class LogsScreen(StepScreen):
    """Logging switches to copy; a path (completion or a tree) to analyse; causes and evidence."""

    BANNER = True  # the verdict (culprit, confidence, next action) above the page

    BINDINGS = [
        Binding("c", "copy", "Copy lines"),
        Binding("f", "focus_path", "Load logs"),
        Binding("b", "browse", "Browse"),
        Binding("s", "stacks", "Stacks now"),
        Binding("k", "knobs", "More evidence"),
    ]
    PALETTE = (("copy", "Copy the logging switches", "Copy the lines that turn logging on"),
               ("focus_path", "Load logs", "Type a log file or folder to analyse"),
               ("browse", "Browse for logs", "Pick a log file or folder in a tree"))

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        hint = next_hint(kb, step_id)
        event = flow.events.get("logs")
        if not event and flow.kind == "hang":
            # during a hang the logs usually say nothing: where each rank is now says more
            return t("If the job still hangs, press s: every rank's stack now, and the odd one out. "
                     "Then load its logs (f) or copy the logging lines (c).")
        if not event:
            return t("Copy the logging lines (c) into the job, rerun it, then press f, type the logs' path and Enter.")
        causes = event.get("causes") or []
        if not causes:
            return t("No known failure signature in {n} path(s). {hint}", n=len(flow.log_paths), hint=hint).strip()
        if not diagnose_flow(kb, flow).confident:  # candidates only: the verdict above says so
            return t("Not enough evidence to name a cause: collect what Next in the verdict above says. {hint}",
                     hint=hint).strip()
        who = (event.get("verdict") or {}).get("culprit") if isinstance(event.get("verdict"), dict) else None
        named = t("Rank {ranks} {role}; ", ranks=", ".join(map(str, who.get("ranks") or [])),
                  role=t(str(who.get("role")))) if isinstance(who, dict) else ""
        return t("{named}logs point at: {title}. Enter on an evidence line shows it. {hint}", named=named,
                 title=cause_title(kb, causes[0]["id"]), hint=hint).strip()

    def compose_step(self) -> Iterable[Widget]:
        launcher = launchers.for_env(self.dd.ctx.env)
        self.launcher = launcher
        yield Plain(launcher_text(launcher), id="launcher", classes="heading first")
        yield Plain(t("Add these lines to the job, rerun it (c copies them):"), classes="dim")
        yield Plain(Text(launcher.text), id="switch-lines", classes="code")
        yield Plain(t("Load the logs: a file or a folder (→ completes, b browses)"), classes="heading")
        with Horizontal(classes="row"):
            yield Input(placeholder=launchers.LOG_DIR, suggester=PathSuggester(), id="path")
            yield Button(t("Browse"), id="browse")
        yield Plain("", id="logs-status")
        yield Plain(t("Diagnosis (Enter on a cause: its lines)"), classes="heading")
        yield DataTable(id="causes", cursor_type="row", zebra_stripes=True)
        yield Plain(t("Evidence (Enter shows the line in its file)"), classes="heading")
        yield DataTable(id="evidence", cursor_type="row")

    def on_mount(self) -> None:
        super().on_mount()
        # the numbers first: a long cause title must not push them out of an 80-column screen
        self.query_one("#causes", DataTable).add_columns("#", t("Basis"), t("Lines"), t("Cause"))
        self.query_one("#evidence", DataTable).add_columns("#", t("Where"), t("Line"))
        self._evidence: list[tuple[str, int]] = []
        self._first_evidence: dict[int, int | None] = {}  # cause row -> its first evidence row
        self._no_lines: dict[int, str] = {}  # cause row -> why it has none
        self._reveal = False  # scroll the diagnosis into view when the tables are laid out
        self.watch(self.query_one("#causes"), "virtual_size", self._causes_sized, init=False)
        flow = self.dd.flow
        if flow.log_paths:
            self.query_one("#path", Input).value = flow.log_paths[0]
        if flow.events.get("logs"):
            self._show(flow.events["logs"])

    # --- actions ----------------------------------------------------------------------------
    def action_copy(self) -> None:
        if getattr(self, "_knobs", False):
            self.dd.copy_text(logs_sources.knobs_copy(self._versions()), "evidence switches")
        else:
            self.dd.copy_text(self.launcher.text, "logging lines")

    def _versions(self) -> dict[str, Any]:
        """torch and NCCL versions from the Environment step, when it ran (else every line shows
        the versions it applies to)."""
        facts = ((self.dd.flow.events.get("check") or {}).get("facts") or {}).get("versions") or {}
        torch = facts.get("torch") if isinstance(facts, dict) else None
        nccl = facts.get("nccl") if isinstance(facts, dict) else None
        return {"torch": torch.get("version") if isinstance(torch, dict) else None,
                "nccl": nccl.get("loaded") if isinstance(nccl, dict) else None}

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
        self.query_one("#logs-status", Static).update(t("Reading {paths} ...", paths=", ".join(paths)))
        self.set_running(t("Reading the logs"))
        self.analyse(paths)

    @work(thread=True, exclusive=True, exit_on_error=False, group="logs", description="analyse logs")
    def analyse(self, typed: list[str]) -> None:
        # even the existence check runs here: a stat on a hung network mount never returns
        paths = [os.path.expanduser(p) for p in typed]
        missing = [t for t, p in zip(typed, paths) if not os.path.exists(p)]
        if missing:
            self.post_message(LogsAnalysed(paths, None, t("ERROR no such file or folder: {path}", path=missing[0]),
                                           missing=True))
            return
        from distdoctor.knowledge.logs import analyse

        try:
            report = analyse(paths, self.dd.kb, symptom=self.dd.flow.symptom)
        except (OSError, ValueError) as exc:
            self.post_message(LogsAnalysed(paths, None, t("cannot read the logs: {error}", error=exc)))
            return
        if report.nothing_readable():  # nothing to diagnose is not a diagnosis
            self.post_message(LogsAnalysed(paths, None, t("ERROR {why}", why=report.nothing_readable())))
            return
        data = report.to_dict()
        fr = logs_sources.flight_recorder([p for p in paths if os.path.isdir(p)])
        if fr is not None:  # a folder of the job's logs that also holds Flight Recorder dumps
            data["flight_recorder"] = fr
        from distdoctor.probes.topology_paste import add_pasted_topology

        add_pasted_topology(data, paths, self.dd.flow.symptom)
        self.post_message(LogsAnalysed(paths, data))

    def on_logs_analysed(self, message: LogsAnalysed) -> None:
        self.set_running("")
        if message.error:
            self.query_one("#logs-status", Static).update(Text(message.error, style="bold"))
            for table in self.query(DataTable):  # an earlier load's diagnosis is not this one's
                table.clear()
            self._evidence, self._first_evidence = [], {}
            if message.missing:
                return  # a typo, not an answer
            # the path itself is an answer worth keeping even when it could not be analysed
            self.dd.record("answer", {"step": self.step_id, "question": "log_paths",
                                      "answer": message.paths})
            return
        data = dict(message.report or {})
        data.setdefault("paths", message.paths)
        fr = data.pop("flight_recorder", None)
        self.dd.record("logs", data)
        if fr is not None:
            self.dd.record("fr", fr)
        self._show(data)
        # the diagnosis is below the fold at 80x24: bring it up (once laid out with the new
        # text), ready for arrows and Enter
        self.query_one("#causes", DataTable).focus(scroll_visible=False)
        self._reveal = True
        self.call_after_refresh(self._reveal_diagnosis)

    def _reveal_diagnosis(self) -> None:
        """Scroll the status line to the top. A DataTable sizes itself when idle, so this runs
        again when the causes table's size changes: scrolling before stops short."""
        if not self._reveal:
            return
        self.query_one("#logs-status").scroll_visible(animate=False, top=True)
        table = self.query_one("#causes", DataTable)
        if table.size.height >= min(table.row_count + 1, TABLE_ROWS):  # laid out: later resizes are not ours
            self._reveal = False

    def _causes_sized(self) -> None:
        if self._reveal:
            self.call_after_refresh(self._reveal_diagnosis)

    # --- other sources ----------------------------------------------------------------------
    def action_stacks(self) -> None:
        """Every rank's stack now, on this node (py-spy): where each rank is, and the odd one."""
        self.query_one("#logs-status", Static).update(t("Taking every rank's stack with py-spy ..."))
        self.set_running(t("Taking stacks"))
        self.take_stacks()

    @work(thread=True, exclusive=True, exit_on_error=False, group="stacks", description="take stacks")
    def take_stacks(self) -> None:
        doc, error = logs_sources.stacks_now(self.dd.ctx)
        self.post_message(StacksTaken(doc, error))

    def on_stacks_taken(self, message: StacksTaken) -> None:
        self.set_running("")
        status = self.query_one("#logs-status", Static)
        if message.doc is None:
            status.update(Text(message.error, style="bold"))
            return
        from distdoctor.probes.stacks import as_evidence

        self.dd.record("stacks", {**message.doc, "evidence": as_evidence(message.doc)})
        status.update(logs_sources.stacks_text(message.doc))

    def action_knobs(self) -> None:
        """Toggle the copy block between the logging lines and every evidence switch."""
        block = self.query_one("#switch-lines", Static)
        self._knobs = not getattr(self, "_knobs", False)
        block.update(logs_sources.knobs_text(self._versions()) if self._knobs else Text(self.launcher.text))

    # --- display ----------------------------------------------------------------------------
    def _show(self, data: dict[str, Any]) -> None:
        kb = self.dd.kb
        files = [f for rank in (data.get("ranks") or {}).values() if isinstance(rank, dict)
                 for f in rank.get("files") or []]
        seen = logs_sources.launcher_from_logs(((data.get("facts") or {}).get("job")) or {}, files)
        if seen is not None and seen.id != self.launcher.id:
            self.launcher = seen
            self.query_one("#launcher", Static).update(launcher_text(seen))
            self.query_one("#switch-lines", Static).update(Text(seen.text))
        causes, confident = self.diagnosed(data.get("causes") or [])
        files = data.get("files_read")
        files_n = len(files) if isinstance(files, list) else files
        skipped = data.get("skipped") or []
        status = t("Read {n} file(s)", n=files_n if files_n is not None else "?")
        if skipped:
            status += t(", skipped {n}", n=len(skipped))
        status += (t(": no known failure signature.") if not causes
                   else t(": {n} cause(s) found.", n=len(causes)) if confident
                   # the diagnosis names none of them: the verdict above says what to collect
                   else t(": {n} candidate cause(s), not enough evidence to name one.", n=len(causes)))
        # the culprit and the story are in the verdict banner above the page
        first = data.get("first_failure")
        named = [str(ev.get("file", "?")) for c in causes for ev in c.get("evidence") or []
                 if isinstance(ev, dict)]
        if isinstance(first, dict):
            named.append(str(first.get("file", "?")))
        names = short_names(named)
        if isinstance(first, dict) and first.get("text"):
            rank = t("rank {rank}, ", rank=first["rank"]) if first.get("rank") is not None else ""
            file = str(first.get("file", "?"))
            where = f"{names.get(file, os.path.basename(file))}:{first.get('line', '?')}"
            status += "\n" + t("First failure ({rank}{where}): {text}", rank=rank, where=where,
                                text=str(first["text"]).strip())
        self.query_one("#logs-status", Static).update(status)
        table = self.query_one("#causes", DataTable)
        table.clear()
        evidence = self.query_one("#evidence", DataTable)
        evidence.clear()
        self._evidence = []
        self._first_evidence = {}
        self._no_lines = {}
        for n, cause in enumerate(causes, 1):
            known = kb.causes.get(cause.get("id"))
            # one line can match several signatures of the same cause: list it once
            lines = list({(str(ev.get("file")), ev.get("line")): ev
                          for ev in cause.get("evidence") or [] if isinstance(ev, dict)}.values())
            title = known.title if known else (
                t("Other: not a distributed-training cause (see the lines)") if cause.get("id") == "other"
                else str(cause.get("id")))
            table.add_row(str(n), t(str(cause.get("basis") or ("facts" if cause.get("lead") else "evidence"))),
                          str(len(lines)), title,
                          key=str(n - 1))
            self._first_evidence[n - 1] = len(self._evidence) if lines else None
            self._no_lines[n - 1] = no_lines_reason(cause, title)
            for ev in lines:
                file = str(ev.get("file", "?"))
                where = f"{names.get(file, os.path.basename(file))}:{ev.get('line', '?')}"
                evidence.add_row(str(n), where, Text(str(ev.get("text", "")).strip(), no_wrap=True),
                                 key=str(len(self._evidence)))
                self._evidence.append((str(ev.get("file", "")), int(ev.get("line") or 1)))

    def diagnosed(self, causes: list[Any]) -> tuple[list[dict[str, Any]], bool]:
        """The log analysis's causes in the one diagnosis's order, without those it leaves out
        (a GPU cause on a Gloo job on CPU, say) or argues away: the table agrees with the banner
        and the Conclusion step. The lines stay the log analysis's. With whether the diagnosis
        names a cause (confirmed or likely) or found only candidates (not enough evidence)."""
        if self.dd.flow.events.get("logs") is None:
            return [c for c in causes if isinstance(c, dict)], True
        diagnosis = diagnose_flow(self.dd.kb, self.dd.flow)
        order = {r.id: n for n, r in enumerate(diagnosis.causes)}
        kept = [c for c in causes if isinstance(c, dict) and (str(c.get("id")) in order or c.get("id") == "other")]
        return sorted(kept, key=lambda c: order.get(str(c.get("id")), len(order))), diagnosis.confident

    @on(DataTable.RowSelected, "#causes")
    def _to_evidence(self, event: DataTable.RowSelected) -> None:
        """Enter on a cause: its evidence lines, ready for Enter to open one."""
        key = row_index(event)
        if key < 0:
            return
        row = self._first_evidence.get(key)
        if row is None or row >= len(self._evidence):
            # Enter that did nothing looked broken: say why this cause has no lines
            self.notify(self._no_lines.get(key) or t("No log lines for this cause."), timeout=12)
            return
        evidence = self.query_one("#evidence", DataTable)
        evidence.move_cursor(row=row)
        evidence.focus()

    @on(DataTable.RowSelected, "#evidence")
    def _open_evidence(self, event: DataTable.RowSelected) -> None:
        from .logviewer import LogViewerScreen

        index = row_index(event)
        if 0 <= index < len(self._evidence):
            path, line = self._evidence[index]
            self.app.push_screen(LogViewerScreen(path, line))


def no_lines_reason(cause: dict[str, Any], title: str) -> str:
    """Why a cause has no log lines to show: its basis says what it rests on instead."""
    basis = str(cause.get("basis") or "")
    reasons = "; ".join(str(r) for r in cause.get("reasons") or [] if r)
    if basis == "prior":
        why = t("it is listed because of the symptom you chose (basis: prior); nothing in these "
                "logs shows it. The Environment, Repro and Bisect steps can confirm or rule it out.")
    elif basis == "facts":
        why = t("it rests on what the logs show about the setup (basis: facts), not on a failure line")
    else:
        why = t("basis: {basis}", basis=t(basis) if basis else t("unknown"))
    return (t("No log lines for '{title}': {why}", title=title, why=why)
            + (t(" ({reasons}).", reasons=reasons) if reasons else ""))


SCREEN = LogsScreen  # the step this module shows (tui/app/steps.py)
