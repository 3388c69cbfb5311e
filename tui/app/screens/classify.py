"""Step 1, classify: hang or error, then the sub-symptom (or a pasted error line); the suspects."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual import events, on, work
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option, OptionDoesNotExist

from ...record.state import Flow, suspects
from ..lang import resolve, t
from ..nextaction import cause_title, next_hint
from ..widgets import Plain
from .base import StepScreen

if TYPE_CHECKING:  # imported when a paste is matched: the first screen does without (~3 ms)
    from ..messages import LogsAnalysed


def suspects_table(kb: Any, rows: list[dict[str, Any]], pasted: list[dict[str, Any]],
                   learn: bool = False) -> Table | Text:
    """Suspect causes in order, each with why: the symptom weights or the matching log line."""
    if not rows and not pasted:
        return Text(t("No suspects yet: answer above."), style="dim")
    table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(t("Suspect"), ratio=3)
    table.add_column(t("Why"), ratio=2)
    n = 0
    for match in pasted:
        n += 1
        cause = kb.causes.get(match.get("id"))
        title = cause.title if cause else str(match.get("id"))
        table.add_row(str(n), title, t("pasted line matches (score {score})", score=f"{match.get('score', 0):g}"))
    for row in rows:
        n += 1
        cause = kb.causes.get(row["id"])
        title = Text(row["title"])
        if learn and cause:
            title.append("\n" + cause.what, style="dim")
        table.add_row(str(n), title, f"{row['weight']:g} = {row['why']}")
    return table


CHOSEN, UNCHOSEN = "(•) ", "( ) "


def symptom_for(kb: Any, cause_id: str) -> tuple[str, str] | None:
    """(kind, sub-symptom) a cause found in a pasted line points to: the symptom that weighs the
    cause most (a sub-symptom before its parent), or None when no symptom names it."""
    best: tuple[float, int, str] | None = None
    for symptom in kb.symptoms.values():
        weight = float(symptom.causes.get(cause_id, 0) or 0)
        if weight > 0 and (best is None or (weight, bool(symptom.parent)) > best[:2]):
            best = (weight, int(bool(symptom.parent)), symptom.id)
    if best is None:
        return None
    sub = kb.symptoms[best[2]]
    root = sub
    while root.parent and root.parent in kb.symptoms:
        root = kb.symptoms[root.parent]
    return root.id, sub.id


class PasteInput(Input):
    """The paste box: a multi-line paste (a whole traceback) is kept whole in `full` and matched
    at once; the field shows its last line, where a traceback names the error, and a count."""

    full = ""
    KEEPS_WHOLE_PASTE = True  # the app leaves its paste whole (bounded to paste.MAX_PASTE)

    def _on_paste(self, event: events.Paste) -> None:
        from ..paste import clean_paste

        event.text = clean_paste(event.text)  # posted here directly (tests), not through the app
        lines = [ln for ln in event.text.splitlines() if ln.strip()]
        if len(lines) < 2:  # Input's own handler (Textual runs it next) inserts the one line
            self.full = ""
            return
        event.prevent_default()
        event.stop()
        self.full = event.text
        self.value = t("{line}  (+{n} lines pasted)", line=lines[-1].strip(), n=len(lines) - 1)
        self.post_message(self.Submitted(self, self.value))

    def _on_key(self, event: events.Key) -> None:
        # Input's own handler runs next and edits the one line shown: the hidden paste is dropped
        if event.is_printable or event.key in ("backspace", "delete"):
            self.full = ""


class ClassifyScreen(StepScreen):
    """Two questions from the knowledge base's symptoms, and a paste box for an error line."""

    BINDINGS = [Binding("slash", "focus_paste", "Paste a line", key_display="/")]

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        hint = next_hint(kb, step_id)
        if not flow.kind and not flow.pasted:
            return t("Say what you see: choose Hang or Error (arrows, Enter), or paste an error line.")
        if not flow.symptom and not flow.paste_causes:
            # English names the kind by its id ("hang"), as it always did; Chinese by its title
            kind = (kb.symptoms[flow.kind].title if flow.kind in kb.symptoms and resolve() != "en"
                    else flow.kind or t("problem"))
            return t("Choose where the {kind} happens, or paste an error line.", kind=kind)
        top = suspects(kb, flow.symptom)
        lead = flow.paste_causes[0]["id"] if flow.paste_causes else (top[0]["id"] if top else "")
        return t("First suspect: {title}. {hint}", title=cause_title(kb, lead), hint=hint).strip() if lead else hint

    def compose_step(self) -> Iterable[Widget]:
        kb = self.dd.kb
        tops = [s for s in kb.symptoms.values() if not s.parent]
        yield Plain(t("What do you see?"), classes="heading")
        yield OptionList(*(Option(self._kind_prompt(s, False), id=s.id) for s in tops), id="kind")
        yield Plain("", id="sub-label", classes="heading")
        yield OptionList(id="sub")
        yield PasteInput(placeholder=t("or paste an error line (or a whole traceback) here and press Enter"),
                         id="paste")
        yield Plain("", id="paste-result")
        yield Plain(t("Suspects, most likely first"), classes="heading", id="suspects-heading")
        yield Plain(id="suspects")

    @staticmethod
    def _kind_prompt(symptom: Any, chosen: bool) -> Text:
        # the answer by shape, not only by the highlight's colour (which also just follows the keys)
        return Text.assemble(CHOSEN if chosen else UNCHOSEN, (symptom.title, "bold"),
                             t(": {meaning}", meaning=symptom.question))

    def _mark_chosen(self) -> None:
        """(•) before the kind and the place chosen, ( ) before the others."""
        flow = self.dd.flow
        kinds = self.query_one("#kind", OptionList)
        for i in range(kinds.option_count):
            option = kinds.get_option_at_index(i)
            symptom = self.dd.kb.symptoms.get(option.id or "")
            if symptom is not None:
                kinds.replace_option_prompt_at_index(i, self._kind_prompt(symptom, option.id == flow.kind))

    def on_mount(self) -> None:
        super().on_mount()
        flow = self.dd.flow
        if flow.pasted:
            self.query_one("#paste", Input).value = flow.pasted
        if flow.kind:
            kinds = self.query_one("#kind", OptionList)
            try:
                kinds.highlighted = kinds.get_option_index(flow.kind)
            except OptionDoesNotExist:  # a kind the knowledge base no longer has
                self.log.warning(f"unknown symptom kind {flow.kind!r} in session")
        self._show_subs(flow.kind, flow.symptom)
        self._show_suspects()
        self._job: Any = None
        # after the first frame: the search imports the stacks probe and reads every process's
        # /proc entries in a thread, which would compete for the GIL with the first paint
        self.dd.after_first_frame(self.find_running_job)

    # --- a job running on this node: offer to watch it (screens/watching.py) ------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="find-job", description="look for a job here")
    def find_running_job(self) -> None:
        from distdoctor.probes import stacks

        from .watching import WatchScreen

        try:
            jobs = stacks.find_jobs(self.dd.ctx)
        except OSError:
            return  # /proc unreadable: nothing to offer, the method goes on as before
        if len(jobs) == 1:
            self.post_message(WatchScreen.JobFound(jobs[0]))

    def on_watch_screen_job_found(self, message: Any) -> None:
        self._job = message.job
        if not self.query("#watch-job"):
            self.mount(Button(t("w: Watch the running job ({n} ranks)", n=len(self._job.ranks)), id="watch-job"),
                       before=self.query_one("#suspects-heading"))

    @on(Button.Pressed, "#watch-job")
    def _watch_pressed(self) -> None:
        self.key_w()

    def key_w(self) -> None:
        if self._job is None:
            return
        from .watching import WatchScreen

        self.app.push_screen(WatchScreen(self._job.ranks, self._job.describe()), self._watched)

    def _watched(self, result: str | None) -> None:
        if result == "conclusion":
            self.dd.action_goto("conclusion")

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self._show_suspects()  # learn mode may have changed while elsewhere

    def _show_subs(self, kind: str | None, chosen: str | None) -> None:
        subs = self.query_one("#sub", OptionList)
        label = self.query_one("#sub-label", Static)
        children = [s for s in self.dd.kb.symptoms.values() if kind and s.parent == kind]
        subs.display = label.display = bool(children)
        chosen_here = chosen if chosen != kind else None
        subs.set_options(Option(Text.assemble(CHOSEN if s.id == chosen_here else UNCHOSEN, (s.title, "bold"),
                                              f"\n{s.question}"), id=s.id)
                         for s in children)
        if children:
            parent = self.dd.kb.symptoms[kind]
            label.update(t("{title}: where exactly?", title=parent.title))
            ids = [s.id for s in children]
            subs.highlighted = ids.index(chosen) if chosen in ids else 0

    def _show_suspects(self) -> None:
        flow = self.dd.flow
        self._mark_chosen()
        rows = suspects(self.dd.kb, flow.symptom or flow.kind)
        # the answer in words: a list's highlight alone (colour) does not say what was chosen
        chosen = self.dd.kb.symptoms.get(flow.symptom or flow.kind or "")
        self.query_one("#suspects-heading", Static).update(
            t("Suspects for '{title}', most likely first", title=chosen.title) if chosen
            else t("Suspects, most likely first"))
        self.query_one("#suspects", Static).update(
            suspects_table(self.dd.kb, rows, flow.paste_causes, self.dd.learn))

    def _record_classify(self) -> None:
        flow = self.dd.flow
        rows = suspects(self.dd.kb, flow.symptom or flow.kind)
        sub = flow.symptom if flow.symptom != flow.kind else None
        self.dd.record("classify", {"symptom": flow.kind, "sub": sub, "kind": flow.kind,
                                    "text": flow.pasted, "matches": flow.paste_causes,
                                    "suspects": rows})
        self._show_suspects()

    @on(OptionList.OptionSelected, "#kind")
    def _kind_chosen(self, event: OptionList.OptionSelected) -> None:
        kind = event.option.id
        if kind == self.dd.flow.kind and self.dd.flow.symptom:
            self.query_one("#sub", OptionList).focus()
            return
        self.dd.record("answer", {"step": self.step_id, "question": "kind", "answer": kind})
        self._show_subs(kind, None)
        self._show_suspects()
        if self.query_one("#sub", OptionList).display:
            self.query_one("#sub", OptionList).focus()
        else:
            self._record_classify()  # a knowledge base without sub-symptoms: the kind is enough

    @on(OptionList.OptionSelected, "#sub")
    def _sub_chosen(self, event: OptionList.OptionSelected) -> None:
        self.dd.flow.symptom = event.option.id
        self._record_classify()
        self._show_subs(self.dd.flow.kind, self.dd.flow.symptom)

    def action_focus_paste(self) -> None:
        self.query_one("#paste", Input).focus()

    @on(Input.Submitted, "#paste")
    def _pasted(self, event: Input.Submitted) -> None:
        text = (self.query_one("#paste", PasteInput).full or event.value).strip()
        if not text:
            return
        self.query_one("#paste-result", Static).update(t("Matching the line against the log signatures..."))
        self.analyse_paste(text)

    @work(thread=True, exclusive=True, exit_on_error=False, group="paste", description="match pasted line")
    def analyse_paste(self, text: str) -> None:
        from distdoctor.knowledge.logs import analyse_text

        from ..messages import LogsAnalysed

        try:
            report = analyse_text(text, self.dd.kb, symptom=self.dd.flow.symptom)
        except (ValueError, OSError) as exc:
            self.post_message(LogsAnalysed([], None, t("cannot match the line: {error}", error=exc), pasted=text))
            return
        self.post_message(LogsAnalysed([], report.to_dict(), pasted=text))

    def on_logs_analysed(self, message: LogsAnalysed) -> None:
        result = self.query_one("#paste-result", Static)
        flow = self.dd.flow
        flow.pasted = message.pasted
        if message.error:
            result.update(Text(message.error, style="bold"))
            flow.paste_causes = []
        else:
            report = message.report or {}
            causes = [c for c in report.get("causes") or [] if c.get("basis", "evidence") != "prior"]
            flow.paste_causes = [{"id": c["id"], "score": c.get("score", 0), "basis": c.get("basis", "evidence"),
                                  "evidence": c.get("evidence", [])} for c in causes]
            if causes and not flow.kind:
                # the pasted line answers the question too: the report and `sessions` name it
                symptom = symptom_for(self.dd.kb, causes[0]["id"])
                if symptom is not None:
                    flow.kind, flow.symptom = symptom
                    self._show_subs(flow.kind, flow.symptom)
            if causes:
                titles = ", ".join(self._title(c["id"]) for c in causes[:3])
                who = (report.get("verdict") or {}).get("culprit")
                named = t(" (rank {ranks} {role})", ranks=", ".join(who["ranks"]), role=t(who["role"])) if who else ""
                result.update(t("The line matches: {titles}{named}", titles=titles, named=named))
            else:
                result.update(t("The line matches no known signature; choose the symptom above."))
        self._record_classify()
        if isinstance(self.focused, Input):
            # out of the field: the next action's keys (n) must work, not type into it
            self.query_one("#kind", OptionList).focus()

    def _title(self, cause_id: str) -> str:
        cause = self.dd.kb.causes.get(cause_id)
        return cause.title if cause else cause_id


SCREEN = ClassifyScreen  # the step this module shows (tui/app/steps.py)
