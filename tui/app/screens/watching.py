"""Watch the running job (offered by Classify when a job runs on this node): a live table per rank
(pid, host, state, where, last collective, seconds since progress, CPU) updated from a worker,
which turns into the verdict when a hang is confirmed and leads to the Conclusion step."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static

from ..lang import localise_bindings, resolve, t
from ..widgets import Plain

STALL_S = 60.0  # the app's stall window: a person is watching, a minute without progress says enough


def rank_row(row: Any) -> tuple[str, ...]:
    """One live row: rank, pid, host, state, where, last collective, since progress, CPU."""
    where = t("exit code {code}", code=row.exit_code) if row.state in ("dead", "exited") else row.where or ""
    return (row.rank, str(row.pid or ""), row.host, t(row.state), where, row.last_collective or "",
            f"{row.since_progress_s:.0f} s", f"{row.cpu_pct:.0f}%")


def verdict_text(outcome: Any) -> Text:
    """What the watch found, in a few lines: the outcome, the culprit, the top causes."""
    text = Text()
    if outcome.outcome == "hang":
        text.append(t("Hang confirmed: no rank progressed for {seconds} s.",
                      seconds=(outcome.hang or {}).get("detected_after_s")) + "\n", style="bold")
    elif outcome.outcome == "failed":
        text.append(t("The job failed.") + "\n", style="bold")
    else:
        text.append(t("The job finished.") + "\n", style="bold")
    culprit = (outcome.verdict or {}).get("culprit")
    if culprit:
        text.append(t("Culprit: rank {ranks} ({role}): {why}", ranks=", ".join(culprit.get("ranks") or []),
                      role=t(str(culprit.get("role") or "")), why=culprit.get("why", "")) + "\n")
    for cause in outcome.causes[:3]:
        text.append(f"  {cause['id']}\n")
    if outcome.outcome != "finished":
        text.append(t("c: on to the Conclusion; Esc: back"), style="dim")
    return text


class WatchScreen(ModalScreen[str | None]):
    """The live table; the watch runs in a worker and stops when the screen closes."""

    BINDINGS = [
        Binding("escape,q", "leave", "Back"),
        Binding("c", "conclusion", "Conclusion"),
    ]

    @dataclass
    class JobFound(Message):
        """One training job runs on this node: Classify offers to watch it."""

        job: Any

    @dataclass
    class Tick(Message):
        """The watcher sampled every rank again."""

        rows: list[Any]

    @dataclass
    class Done(Message):
        """The watch ended: the job finished, failed, or hung and was captured."""

        outcome: Any
        error: str = ""

    def __init__(self, ranks: list[Any], found: str, stall_s: float = STALL_S) -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)
        self.ranks, self.found, self.stall_s = ranks, found, stall_s
        self.cancel = threading.Event()
        self.outcome: Any = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box", id="watch-box") as box:
            box.border_title = t("Watching the running job")
            yield Plain(self.found, classes="dim")
            yield Plain(t("Sampling every rank (a hang is confirmed after {seconds} s without progress)...",
                          seconds=f"{self.stall_s:g}"), id="watch-status")
            yield DataTable(id="watch-ranks", cursor_type="row", zebra_stripes=True)
            yield Plain("", id="watch-verdict")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#watch-ranks", DataTable)
        table.add_columns(t("Rank"), "pid", t("Host"), t("State"), t("Where"), t("Last collective"),
                          t("Since progress"), "CPU")
        self.watch_job()

    @work(thread=True, exclusive=True, exit_on_error=False, group="watch", description="watch the running job")
    def watch_job(self) -> None:
        from distdoctor.probes.watch import WatchConfig, watch_job
        from distdoctor.probes.watch.targets import Running, by_pids
        from distdoctor.tui.record.session import state_dir

        pids = [r.pid for r in self.ranks]
        self.evidence = state_dir().parent / "evidence" / self.app.flow.session_id  # type: ignore[attr-defined]
        config = WatchConfig(stall_s=self.stall_s, evidence=self.evidence, cancel=self.cancel,
                             kb=self.app.kb, on_tick=lambda rows: self.post_message(self.Tick(rows)))  # type: ignore[attr-defined]
        try:
            outcome = watch_job(Running(by_pids(pids)), config)
        except OSError as exc:
            self.post_message(self.Done(None, t("the watch stopped: {why}", why=exc.strerror or exc)))
            return
        self.post_message(self.Done(outcome))

    def on_watch_screen_tick(self, message: Tick) -> None:
        table = self.query_one("#watch-ranks", DataTable)
        table.clear()
        for row in message.rows:
            table.add_row(*rank_row(row), key=row.rank)

    def on_watch_screen_done(self, message: Done) -> None:
        status = self.query_one("#watch-status", Static)
        if message.outcome is None:
            status.update(Text(message.error, style="bold"))
            return
        outcome = self.outcome = message.outcome
        if self.cancel.is_set():
            return  # left before the end: nothing was confirmed
        status.update(t("Evidence in {dir}", dir=str(self.evidence)))
        self.on_watch_screen_tick(self.Tick(outcome.rows))
        self.query_one("#watch-verdict", Static).update(verdict_text(outcome))
        self._record(outcome)

    def _record(self, outcome: Any) -> None:
        """The outcome and the evidence it rests on, into the session: Conclusion reads them."""
        app: Any = self.app
        data = {**outcome.to_json(), "ranks": [r.to_dict() for r in outcome.rows], "notes": outcome.notes,
                "command": "watch"}
        app.record("watch", data)
        capture = outcome.capture or {}
        for kind, key in (("logs", "logs_report"), ("stacks", "stacks"), ("fr", "fr"), ("ras", "ras")):
            if isinstance(capture.get(key), dict):
                app.record(kind, capture[key])

    def action_leave(self) -> None:
        self.cancel.set()
        self.dismiss(None)

    def action_conclusion(self) -> None:
        if self.outcome is None or self.outcome.outcome == "finished":
            return
        self.cancel.set()
        self.dismiss("conclusion")
