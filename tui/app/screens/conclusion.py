"""Step 6, conclusion: causes ranked by all the evidence, the fix, switches to remove, export."""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Static

from ...record.diagnosis_feed import diagnose_flow
from ...record.ranking import Ranked
from ...record.report_causes import plain_reason
from ...record.session import SAVE_WAIT_S
from ...record.state import Flow
from .. import launchers
from ..lang import t
from ..messages import Exported
from ..widgets import Plain
from .base import StepScreen, row_index

FORMATS = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}


def fix_text(kb: Any, cause_id: str) -> Text:
    cause = kb.causes.get(cause_id)
    if cause is None:
        return Text(t("No fix known for {cause}.", cause=cause_id))
    text = Text()
    text.append(cause.title, style="bold")
    text.append(f"\n{cause.fix}")
    for f in cause.fixes:
        for line in f.copy_lines():
            text.append(f"\n{line}", style="dim" if line.lstrip().startswith("# ") else "")
    return text


def write_error(path: str, exc: OSError) -> str:
    """Why a report could not be written, in words (not "[Errno 2] ...")."""
    folder = os.path.dirname(path) or "."
    if isinstance(exc, FileNotFoundError):
        return t("the folder {folder} does not exist: create it or choose another path", folder=folder)
    if isinstance(exc, PermissionError):
        return t("cannot write in {folder}: permission denied", folder=folder)
    if isinstance(exc, IsADirectoryError):
        return t("{path} is a folder: add a file name ending in .md, .html or .json", path=path)
    return t("cannot write {path}: {why}", path=path, why=exc.strerror or exc)


def record_view(flow: Any) -> dict[str, Any]:
    """The flow as a session record with one event per kind (the latest), for report helpers."""
    return {"id": flow.session_id, "events": [{"kind": k, "data": d} for k, d in flow.events.items()]}


class ConclusionScreen(StepScreen):
    """Ranks on every visit (the evidence may have grown); records the conclusion when it changes."""

    BINDINGS = [Binding("c", "copy_fix", "Copy fix"), Binding("e", "export", "Export report")]
    RESULT_BELOW = frozenset({"ranking"})  # the highlighted cause's why, under the table
    BANNER = True  # the verdict stays above the causes, whatever the scroll
    PALETTE = (("copy_fix", "Copy the fix", "Copy the top cause's fix lines"),
               ("export", "Export the report", "Write the session as md, html or json"))

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        if not flow.events:
            def key(step: str) -> str:
                return str(order.index(step) + 1) if step in order else "?"

            return t("No evidence yet: classify the symptom first ({classify}), or load the job's logs ({logs}).",
                     classify=key("classify"), logs=key("logs"))
        if not diagnose_flow(kb, flow).confident:  # no cause named: nothing to fix yet
            return t("Not enough evidence to name a cause: collect what Next in the verdict above says; "
                     "e exports the report.")
        return t("Apply the fix of the top cause, remove the debugging switches, e exports the report.")

    def compose_step(self) -> Iterable[Widget]:
        yield Plain(t("Causes, ranked by all the evidence"), classes="heading first")
        yield DataTable(id="ranking", cursor_type="row")
        yield Plain("", id="why")
        yield Plain(t("Fix"), classes="heading")
        yield Plain("", id="fix")
        yield Plain(t("Remove afterwards"), classes="heading")
        yield Plain("", id="remove")
        yield Plain(t("Export the report (.md, .html or .json)"), classes="heading")
        with Horizontal(classes="row"):
            yield Input(f"./distdoctor-{self.dd.flow.session_id}.md", id="export-path")
            yield Button(t("Export"), id="export", variant="primary")
        yield Plain("", id="export-status")

    def on_mount(self) -> None:
        self.ranked: list[Ranked] = []
        self.query_one("#ranking", DataTable).add_columns("#", t("Basis"), t("Cause"), t("Strongest evidence"))
        super().on_mount()
        self.conclude()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self.is_mounted and hasattr(self, "ranked"):
            self.conclude()

    def conclude(self) -> None:
        kb, flow = self.dd.kb, self.dd.flow
        d = diagnose_flow(kb, flow)  # once: the ranking and the culprit come from the same diagnosis
        self.ranked = [r for r in d.causes if r.id in kb.causes]
        who = dict(d.culprit, summary=d.summary) if d.culprit else None
        table = self.query_one("#ranking", DataTable)
        table.clear()
        for n, r in enumerate(self.ranked, 1):
            cause = kb.causes.get(r.id)
            table.add_row(str(n), t(r.basis), cause.title if cause else r.id,
                          Text(plain_reason(r.reasons[0]) if r.reasons else "", overflow="ellipsis", no_wrap=True),
                          key=str(n - 1))
        if not self.ranked:
            self.query_one("#why", Static).update(t("No evidence yet: classify the symptom first (1)."))
            self.query_one("#fix", Static).update("")
        else:
            self._explain(0)
            self.query_one("#fix", Static).update(fix_text(kb, self.ranked[0].id))
        remove = self.switches()
        lines = [t("{env}: {why}", env=f"{s['name']}={s.get('value', '')}", why=s["why"]) for s in remove]
        if "logs" in flow.events:  # we cannot see whether the job got the Logs step's lines
            lines.append(t("If you added the Logs step's logging lines to the job ({names}), remove them too.",
                           names=", ".join(name for name in launchers.switches_to_remove()
                                           if name not in {s["name"] for s in remove})))
        self.query_one("#remove", Static).update("\n".join(lines) or t("No debugging switch found."))
        data = {"causes": [{"id": r.id, "score": r.score, "basis": r.basis, "why": list(r.reasons), "strong": r.strong}
                           for r in self.ranked], "culprit": who,
                "fixes": [{"cause": self.ranked[0].id, "fix": kb.causes[self.ranked[0].id].fix}]
                if self.ranked and self.ranked[0].id in kb.causes else [],
                "switches_to_remove": remove}
        if self.ranked and flow.events.get("conclusion") != data:
            self.dd.record("conclusion", data)

    def switches(self) -> list[dict[str, str]]:
        """The switches to remove afterwards, as the report lists them."""
        from ...record.report import latest
        from ...record.report_conclusion import switches_to_remove

        return switches_to_remove(record_view(self.dd.flow), self.dd.kb, latest)

    def _explain(self, index: int) -> None:
        r = self.ranked[index]
        cause = self.dd.kb.causes.get(r.id)
        text = Text()
        text.append(t("Why: "), style="bold")
        # the basis and its evidence, not the engine's internal scores
        text.append(t("basis {basis}; ", basis=t(r.basis)) + t("; ").join(plain_reason(w) for w in r.reasons))
        if cause and self.dd.learn:
            text.append(f"\n{cause.what} {cause.why}", style="dim")
        self.query_one("#why", Static).update(text)

    @on(DataTable.RowHighlighted, "#ranking")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        index = row_index(event)
        if 0 <= index < len(self.ranked):
            self._explain(index)
            self.query_one("#fix", Static).update(fix_text(self.dd.kb, self.ranked[index].id))

    @on(DataTable.RowSelected, "#ranking")
    def _selected(self) -> None:
        """Enter on a cause: its why and fix, which sit below the table at 80x24."""
        self.query_one("#fix").scroll_visible(animate=False)

    def action_copy_fix(self) -> None:
        """Copy the highlighted cause's fix lines (comments included: they paste harmlessly)."""
        row = self.query_one("#ranking", DataTable).cursor_row
        cause = self.dd.kb.causes.get(self.ranked[row].id) if 0 <= row < len(self.ranked) else None
        if cause is None or not cause.fixes:
            self.notify(t("No fix lines to copy for this cause."))
            return
        self.dd.copy_text("\n".join(line for f in cause.fixes for line in f.copy_lines("")), "fix lines")

    # --- export -----------------------------------------------------------------------------
    def action_export(self) -> None:
        """e: the export field, in view and focused: its suffix picks the format, Enter writes."""
        field = self.query_one("#export-path", Input)
        field.focus(scroll_visible=False)
        self.query_one("#export-status", Static).update(
            t("Enter writes the report; the name's suffix picks the format: .md, .html or .json."))
        self.call_after_refresh(self.query_one("#export-status").scroll_visible, animate=False)

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export")
    def write_export(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if not path:
            return
        fmt = FORMATS.get(Path(path).suffix.lower())
        if fmt is None:
            self.on_exported(Exported(path, t("the file name must end in .md, .html or .json")))
            return
        if not self.dd.flow.events:
            self.on_exported(Exported(path, t("nothing to export yet: classify the symptom first (1)")))
            return
        # absolute: the report lands in the app's working folder, which the user may not know
        target = os.path.abspath(os.path.expanduser(path))
        self.query_one("#export-status", Static).update(t("Writing {path} ...", path=target))
        self.export(target, fmt)

    @work(thread=True, exclusive=True, exit_on_error=False, group="export", description="export report")
    def export(self, path: str, fmt: str) -> None:
        from ...record.report import RENDERERS, build_report
        from ...record.session import SessionError

        if not self.dd.saver.flush(timeout=SAVE_WAIT_S):
            self.post_message(Exported(path, t("the session is still being saved to {directory}; try again",
                                               directory=self.dd.store.directory)))
            return
        try:
            record = self.dd.store.load(self.dd.flow.session_id)
            text = RENDERERS[fmt](build_report(record, self.dd.kb))
            Path(path).write_text(text, encoding="utf-8")
        except SessionError as exc:
            self.post_message(Exported(path, str(exc)))
            return
        except OSError as exc:
            self.post_message(Exported(path, write_error(path, exc)))
            return
        self.post_message(Exported(path))

    def on_exported(self, message: Exported) -> None:
        status = self.query_one("#export-status", Static)
        if message.error:
            status.update(Text(t("ERROR {why}", why=message.error), style="bold"))
        else:
            status.update(t("OK wrote {path}", path=message.path))
        # the line under the field says it, brought into view: a toast said it too, and at 80x24
        # it covered the field and the line
        self.call_after_refresh(status.scroll_visible, animate=False)


SCREEN = ConclusionScreen  # the step this module shows (tui/app/steps.py)
