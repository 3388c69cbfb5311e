"""The frame of every step screen: step list, content, learn panel, next-action panel, keys."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, Input, OptionList
from textual.worker import Worker, WorkerState

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
    running: str = ""  # what a worker of this screen is doing now, for the next-action panel

    def __init__(self, step_id: str) -> None:
        super().__init__(name=step_id, id=f"step-{step_id}")
        self.step_id = step_id

    @property
    def dd(self) -> DistDoctorApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield StepNav(id="nav")
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
        self.sub_title = f"session {self.dd.flow.session_id}"
        if step:
            self.query_one(LearnPanel).show_step(step)
        self.refresh_chrome()

    def on_screen_resume(self) -> None:
        if self.focused is None:
            targets = [w for w in self.query(self.FIRST_FOCUS) if w.focusable]
            if targets:
                self.set_focus(targets[0], scroll_visible=False)
        self.refresh_chrome()

    def refresh_chrome(self) -> None:
        """Redraw the step list and the next action from the session's current state."""
        if not self.is_mounted:
            return
        app = self.dd
        done = {s for s in app.order if app.flow.done(s)}
        self.query_one(StepNav).show(app.step_titles(), self.step_id, done)
        self.query_one(NextAction).update(app.next_action_text(self.step_id, self.running))

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
            self.worker_failed(event.worker.description or "a background job",
                               f"{type(error).__name__}: {error}")

    def worker_failed(self, what: str, why: str) -> None:
        self.notify(f"{what} failed: {why}", severity="error", timeout=15)

    def set_running(self, what: str) -> None:
        self.running = what
        self.refresh_chrome()

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
