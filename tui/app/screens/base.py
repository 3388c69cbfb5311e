"""The frame of every step screen: step list, content, learn panel, next-action panel, keys."""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, Input, OptionList
from textual.worker import Worker, WorkerState

from ...record.state import Flow
from ..lang import localise_bindings, resolve, t
from ..nextaction import next_hint
from ..widgets import KeyBar, LearnPanel, NextAction, StepNav

if TYPE_CHECKING:
    from ..app import DistDoctorApp


class StepScreen(Screen[None]):
    """One step of the method. Subclasses add their widgets in `compose_step`."""

    # Focus lands on the step's own list or table, not a text field: letter keys (n, p, l, r...)
    # must work on arrival; a field is one key away (each screen binds one) and Escape leaves it.
    # Textual's AUTO_FOCUS would also scroll that widget into view, hiding the step's top lines.
    AUTO_FOCUS = ""
    FIRST_FOCUS = "#main > OptionList, #main > DataTable"
    BINDINGS = [Binding("escape", "leave_field", "Leave field", show=False)]
    _resumed = False  # set on the first ScreenResume
    running: str = ""  # what a worker of this screen is doing now, for the next-action panel
    # lists/tables whose highlighted row has its result below the table (a finding's what/why/
    # fix): that row goes to the top of the view, leaving the rest of the screen to the result
    RESULT_BELOW: frozenset[str] = frozenset()
    # steps that show the diagnosis pinned above their content (tui.app.verdict.VerdictBanner)
    BANNER = False
    # the command palette's entries for this step's actions: (action, name, help), English (the
    # palette says them in the app's language)
    PALETTE: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def next_action(cls, kb: Any, flow: Flow, step_id: str, order: list[str]) -> str:
        """What the user should do now on this step (the next-action panel), from the session so
        far and the tree: by default the step's why and the tree's next step."""
        step = kb.steps.get(step_id)
        hint = next_hint(kb, step_id)
        return (step.why if step else "") + (" " + hint if hint else "")

    def __init__(self, step_id: str) -> None:
        super().__init__(name=step_id, id=f"step-{step_id}")
        self.step_id = step_id
        if resolve() != "en":
            localise_bindings(self)

    @property
    def dd(self) -> DistDoctorApp:
        return self.app  # type: ignore[return-value]

    def _compositor_refresh(self) -> None:
        """Textual's (private): draw the screen's changes to the terminal. Inside a batch (the
        app's start-up holds one while the first screen mounts) App._display throws the drawn
        frame away: ~8 ms of the first screen drawn twice. Draw once, when the batch is over (the
        app's own messages wait for it)."""
        app = self.app
        if getattr(app, "_batch_count", 0) and not app.is_inline:
            app.call_later(self.refresh)
            return
        super()._compositor_refresh()

    def compose(self) -> ComposeResult:
        from ..tiny import TooSmallNote

        yield TooSmallNote()
        yield Header()
        with Horizontal(id="body"):
            yield StepNav(id="nav")
            with Vertical(id="content"):
                if self.BANNER:
                    from ..verdict import VerdictBanner

                    yield VerdictBanner(id="verdict-banner")
                with VerticalScroll(id="main"):
                    yield LearnPanel(id="learn")
                    yield from self.compose_step()
        # one docked box: two widgets docked at the same edge would overlap, and the key bar
        # hid the next action's second line
        with Vertical(id="bottom"):
            yield NextAction(id="next")
            yield KeyBar(id="keys")

    def compose_step(self) -> Iterable[Widget]:
        return ()

    def on_mount(self) -> None:
        step = self.dd.kb.steps.get(self.step_id)
        order = self.dd.order
        n = order.index(self.step_id) + 1 if self.step_id in order else 0
        self.title = f"{n}/{len(order)} {step.title if step else self.step_id}"
        self.sub_title = t("session {id}", id=self.dd.flow.session_id)
        if step:
            self.query_one(LearnPanel).show_step(step)
        # content that arrives or grows above the focused list (the learn text, a status line)
        # pushes its highlight down: follow it (see keep_highlight_in_view)
        self.watch(self.query_one("#main"), "virtual_size", self._main_resized, init=False)
        self.refresh_chrome()

    def _main_resized(self) -> None:
        if isinstance(self.focused, OptionList) or is_table(self.focused):
            self.follow_highlight(self.focused)

    def on_screen_resume(self, event: events.ScreenResume | None = None) -> None:
        if event is not None and not self._resumed:
            # Textual restyles a resumed screen whole; on the first resume every widget was just
            # styled as it mounted, with the same rules (~5 ms of the first screen)
            event.refresh_styles = False
            self._resumed = True
        if self.focused is None:
            targets = [w for w in self.query(self.FIRST_FOCUS) if w.focusable]
            if targets:
                self.set_focus(targets[0], scroll_visible=False)
        self.refresh_chrome()

    def refresh_chrome(self) -> None:
        """Redraw the step list, the next action and the verdict banner from the session's
        current state."""
        if not self.is_mounted:
            return
        app = self.dd
        done = {s for s in app.order if app.flow.done(s)}
        self.query_one(StepNav).show(app.step_titles(), self.step_id, done)
        self.query_one(NextAction).update(app.next_action_text(self.step_id, self.running))
        if self.BANNER:
            self.refresh_banner()

    def refresh_banner(self) -> None:
        """The diagnosis of everything gathered so far, above the content (none before evidence)."""
        from ..verdict import VerdictBanner

        app = self.dd
        banner = self.query_one(VerdictBanner)
        if not any(k in app.flow.events for k in ("logs", "stacks", "fr", "ras", "repro", "bisect", "check")):
            banner.show(None)
            return
        from ...record.diagnosis_view import session_diagnosis

        banner.show(session_diagnosis(app.kb, app.flow), app.kb)

    def shows_key(self, action: str) -> bool:
        """Whether the key bar lists a key: n on the last step and p on the first do nothing."""
        if action in ("next_step", "prev_step"):
            return self.dd.neighbour(+1 if action == "next_step" else -1, self.step_id) is not None
        return True

    def action_leave_field(self) -> None:
        """Escape: out of a text field to the step's list or table; from there to the step list."""
        if isinstance(self.focused, Input):
            targets = [w for w in self.query(self.FIRST_FOCUS) if w.focusable]
            self.set_focus(targets[0] if targets else self.query_one(StepNav))
        else:
            self.set_focus(self.query_one(StepNav))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised (exit_on_error=False keeps the app up) is reported, not hidden."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.set_running("")
            self.worker_failed(t(event.worker.description or "a background job"),
                               f"{type(error).__name__}: {error}")

    def worker_failed(self, what: str, why: str) -> None:
        self.notify(t("{what} failed: {why}", what=what, why=why), severity="error", timeout=15)

    def set_running(self, what: str) -> None:
        self.running = what
        self.refresh_chrome()

    # --- the highlighted choice stays on screen ----------------------------------------------
    # A list or table inside the scrolling #main keeps its own highlight in view, but not itself:
    # at 80x24 with the learn text above it, the highlight sat below the fold. Each focus and
    # highlight change scrolls #main just enough to show the highlighted row (a whole list of
    # choices when it fits), so the step's top lines stay where they are when nothing moves.
    @on(events.DescendantFocus)
    def show_focus(self, event: events.DescendantFocus | None = None) -> None:
        """The next-action box's title says which box has the keys and where Tab goes."""
        if not self.is_mounted:
            return
        focused = self.focused
        # the tab order from the DOM as it is now (Textual's own chain is refreshed lazily, so
        # a list just shown could be missing from it)
        chain = [w for w in self.query("*") if w.focusable and w.display
                 and all(a.display for a in w.ancestors if isinstance(a, Widget))]
        title = ""
        if focused in chain and len(chain) > 1:
            after = chain[(chain.index(focused) + 1) % len(chain)]
            title = t("▶ {here} · tab: {next}", here=focus_name(focused), next=focus_name(after))
        self.query_one(NextAction).border_title = title

    # DataTable's messages by handler name: importing DataTable here would cost the first screen
    # (which has none) ~13 ms
    @on(events.DescendantFocus)
    @on(OptionList.OptionHighlighted)
    def _highlight_moved(self, event: events.Event) -> None:
        widget = getattr(event, "widget", None) or getattr(event, "control", None)
        if (isinstance(widget, OptionList) or is_table(widget)) and widget.id != "nav":
            self.follow_highlight(widget)

    def on_data_table_row_highlighted(self, event: events.Event) -> None:
        self._highlight_moved(event)

    def on_data_table_cell_highlighted(self, event: events.Event) -> None:
        self._highlight_moved(event)

    def follow_highlight(self, widget: Widget) -> None:
        """Keep `widget`'s highlight in view now (rows already laid out) and once more after the
        next refresh (rows just added or a list just shown), unless something else scrolled the
        page in between: a deliberate scroll (the logs step's, a test's) wins, deterministically."""
        self.keep_highlight_in_view(widget)
        try:
            main = self.query_one("#main")
        except Exception:  # noqa: BLE001 - no #main: nothing to follow
            return
        before = main.scroll_offset.y

        def later() -> None:
            if main.scroll_offset.y == before and self.app.screen is self:
                self.keep_highlight_in_view(widget)

        self.call_after_refresh(later)

    def keep_highlight_in_view(self, widget: Widget) -> None:
        """Scroll #main so that `widget`'s highlighted row (or, for a list of choices that fits,
        the whole list) is inside the visible part of #main."""
        try:
            main = self.query_one("#main")
        except Exception:  # noqa: BLE001 - a screen without #main (none today) has nothing to do
            return
        if not widget.is_mounted or main not in widget.ancestors or widget is not self.focused:
            return
        row = highlighted_row(widget)
        if row is None:
            return
        y, height = row
        # the row in #main's scrollable space: the widget's place in it (virtual regions, so a
        # widget scrolled out of sight counts too), its border, the row inside its own viewport
        base = 0
        node: Widget | None = widget
        while node is not None and node is not main:
            base += node.virtual_region.y
            node = node.parent if isinstance(node.parent, Widget) else None
        top = base + widget.gutter.top + y - int(widget.scroll_offset.y)
        if isinstance(widget, OptionList) and widget.outer_size.height <= main.content_region.height:
            top, height = base, widget.outer_size.height
        at_top = widget.id in self.RESULT_BELOW
        if at_top and is_table(widget) and widget.show_header:
            top, height = top - widget.header_height, height + widget.header_height  # names kept
        main.scroll_to_region(Region(0, top, 1, max(1, height)), animate=False, immediate=True,
                              top=at_top)

    @on(OptionList.OptionSelected, "#nav")
    def _jump(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id and event.option.id != self.step_id:
            self.dd.action_goto(event.option.id)


class GenericStepScreen(StepScreen):
    """A step the app has no dedicated screen for (a site overlay's): its prose, always shown."""

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(LearnPanel).add_class("always")


FOCUS_NAMES = {"nav": "steps", "main": "page (arrows scroll)", "kind": "symptom", "sub": "where", "paste": "paste field",
               "path": "logs path", "causes": "causes", "evidence": "evidence lines",
               "findings": "findings", "runs": "runs", "ranking": "causes",
               "export-path": "export path", "fleet-path": "snapshots path", "outliers": "outliers",
               "python": "python", "nproc": "processes", "timeout": "timeout",
               "drill-choices": "drills"}


def focus_name(widget: Widget) -> str:
    """A box's name in the focus line: its id in words, or its kind."""
    name = FOCUS_NAMES.get(widget.id or "")
    if name:
        return t(name)
    if widget.id:
        return t(widget.id.replace("-", " "))
    label = getattr(widget, "label", None)  # a button says what it does
    return str(label) if label is not None else type(widget).__name__.lower()


def is_table(widget: object) -> bool:
    """Whether `widget` is a DataTable, without importing DataTable (none on the first screen)."""
    module = sys.modules.get("textual.widgets._data_table")
    return module is not None and isinstance(widget, module.DataTable)


def highlighted_row(widget: Widget) -> tuple[int, int] | None:
    """(y, height) of the highlighted row inside the widget's content (scrolling included), or
    None when nothing is highlighted. Uses Textual's row bookkeeping (pinned version)."""
    if isinstance(widget, OptionList):
        if widget.highlighted is None:
            return None
        widget._update_lines()  # noqa: SLF001 - the line map of each option, as scroll_to_highlight uses
        try:
            return widget._index_to_line[widget.highlighted], widget._heights[widget.highlighted]  # noqa: SLF001
        except (KeyError, IndexError, AttributeError):
            return None
    if is_table(widget):
        if not widget.row_count or not widget.show_cursor:
            return None
        region = widget._get_row_region(widget.cursor_row)  # noqa: SLF001 - header included in y
        return region.y, region.height
    return None


def row_index(event: object) -> int:
    """The row a DataTable event is about, as the int key rows are added with; -1 when there is
    none (a cursor left at row -1 by random keys on a tiny or emptied table: row_key is None)."""
    key = getattr(event, "row_key", None)
    value = getattr(key, "value", None)
    try:
        return int(value) if value is not None else -1
    except (TypeError, ValueError):
        return -1
