"""The Textual app: one screen (mode) per step of the method, the session record behind them."""
from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen

from ..record.session import SAVE_WAIT_S, SessionStore, SessionWriter, new_id
from ..record.state import Flow
from .guards import InputGuards
from .jobpython import JobPython
from .lang import LANGS, NAMES, localise_bindings, other, resolve, t, wrap_between_wide_characters
from .nextaction import next_action
from .palette import DistDoctorCommands
from .steps import screen_class

if TYPE_CHECKING:
    from .messages import KnowledgeChecked, SessionNotSaved


FIRST_FRAME_LATEST_S = 2.0  # what waits for the first frame runs by then even if none was seen

# The step's screen (tui/app/steps.py), imported when the step is first opened, so the first
# screen does not pay for DataTable, Log or the probes. Unknown steps get GenericStepScreen.
def _make_screen(step_id: str) -> Screen[Any]:
    return screen_class(step_id)(step_id)  # type: ignore[call-arg]


def method_order(kb: Any) -> list[str]:
    """The steps in the method's order: the longest path from the root step, as
    `distdoctor.knowledge.tree.main_path` computes it, without importing networkx (a quarter of a
    second of the app's start-up). Ties go to the earlier `next` entry; a cycle ends the walk (the
    deferred tree check reports it)."""
    best: dict[str, list[str]] = {}

    def longest(step_id: str, path: frozenset[str]) -> list[str]:
        if step_id in best:
            return best[step_id]
        step = kb.steps.get(step_id)
        tails = [longest(n, path | {n}) for n in (step.next if step else ()) if n not in path]
        result = [step_id] + max(tails, key=len, default=[])
        best[step_id] = result
        return result

    return longest(kb.root_step, frozenset({kb.root_step}))


RELABEL_MODE = "-relabel"  # the blank mode shown while the step screens are rebuilt


class DistDoctorApp(InputGuards, JobPython, App[int]):
    """Walks an incident through the method; every result goes into the session record."""

    CSS_PATH = "app.tcss"
    TITLE = "distdoctor"
    COMMANDS = App.COMMANDS | {DistDoctorCommands}
    BINDINGS = [
        Binding("n", "next_step", "Next step"),
        Binding("p", "prev_step", "Prev step"),
        Binding("l", "toggle_learn", "Learn"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", show=False),
        Binding("q", "quit", "Quit"),
        *(Binding(str(i), f"goto_index({i})", f"Go to step {i}", show=False) for i in range(1, 10)),
    ]

    learn: reactive[bool] = reactive(False)

    def __init__(self, kb: Any, ctx: Any, store: SessionStore, flow: Flow, order: list[str],
                 start: str, learn: bool = False, probes: Mapping[str, Any] | None = None,
                 check_knowledge: str | None = None, overlay: str | None = None) -> None:
        # Modes are per instance (the steps come from the data): set before App.__init__ copies them.
        self.MODES = {step_id: partial(self._new_screen, step_id) for step_id in order}
        self.DEFAULT_MODE = start
        super().__init__()
        self.kb, self._ctx, self.store, self.flow, self.order = kb, ctx, store, flow, order
        self.saver = SessionWriter(store, self._not_saved)
        self.probes = probes  # None: distdoctor.probes.registry.PROBES, imported when first run
        # The overlay ("" for none) whose full validation was deferred past the first screen;
        # None when the knowledge base came in fully validated.
        self.check_knowledge = check_knowledge
        # Stop events of running repro/bisect jobs: set on quit so no torchrun outlives the app
        # (thread workers cannot be interrupted, and the interpreter waits for them at exit).
        self.cancel_events: set[threading.Event] = set()
        self.set_reactive(DistDoctorApp.learn, learn)
        self._gc_paused = False  # set while start-up holds garbage collection off
        # what waits for the first frame (after_first_frame); None once it is drawn
        self._first_frame: list[Callable[[], Any]] | None = []
        self.closing = False  # set by exit(): no more screens from then on
        self.too_small = False  # the window is below tiny.MIN_SIZE: TooSmallScreen covers the steps
        self.run_backend = "auto"  # the backend chosen on one run step (repro, bisect) is the other's
        # the language the app speaks (--lang, $DISTDOCTOR_LANG, the locale); the palette switches it
        self.lang = resolve()
        # the overlay the knowledge base came from, to reload it in another language
        self.overlay = overlay if overlay is not None else (check_knowledge or None)
        if self.lang != "en":
            localise_bindings(self)
            wrap_between_wide_characters()

    @property
    def ctx(self) -> Any:
        """The probes' context (runner, root, environment); this host's when none was given, made
        when first used: the first screen runs no probe, and importing them costs it ~4 ms."""
        if self._ctx is None:
            from distdoctor.probes.base import ProbeContext

            self._ctx = ProbeContext()
        return self._ctx

    def _not_saved(self, error: str) -> None:
        # the messages module (sixteen dataclasses, ~3 ms) is imported when first needed
        from .messages import SessionNotSaved

        self.post_message(SessionNotSaved(error))

    def _new_screen(self, step_id: str) -> Screen[Any]:
        screen = _make_screen(step_id)
        # Textual calls refresh_css for a mode's new screen (its CSS count, -1, lags the app's),
        # which parses the whole stylesheet afresh, dropping the parse cache: ~25 ms of the first
        # screen's start-up, for the same rules (the variables change only with the theme, and a
        # theme change bumps the count again). Do the rest of refresh_css: restyle the app.
        count = getattr(self, "_css_update_count", None)  # private in Textual: guard it
        if isinstance(count, int):
            screen._css_update_count = count
            self.stylesheet.update(self, animate=False)
        return screen

    def on_load(self) -> None:
        size = self.size  # the terminal's, from the driver, before the first screen is laid out
        self.set_tiny(size.width, size.height)
        # No garbage collection until the first screen is painted (as Textual's own
        # PAUSE_GC_ON_SCROLL does for smooth scrolling): building the screen allocates enough to
        # run the collector a few dozen times over the knowledge base (~25 ms of ~170).
        self._gc_paused = gc.isenabled()
        gc.disable()

    def _resume_gc(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            gc.enable()

    def on_unmount(self) -> None:
        self._resume_gc()  # an app that exits before its first paint
        if not self.saver.flush(timeout=SAVE_WAIT_S):
            self.exit(return_code=1, message=t(
                "distdoctor: the last results were not saved within {wait}s (the session keeps "
                "what came before): is {directory} on a file system that hangs?",
                wait=f"{SAVE_WAIT_S:g}", directory=self.store.directory))

    def on_mount(self) -> None:
        self.set_class(self.learn, "-learn")  # set_reactive in __init__ runs no watcher
        self.set_timer(FIRST_FRAME_LATEST_S, self._first_frame_drawn)
        self.after_first_frame(self._resume_gc)
        if self.check_knowledge is not None:
            # importing networkx in a thread competes for the GIL with the first frame
            self.after_first_frame(partial(self.validate_knowledge, self.check_knowledge or None))

    def after_first_frame(self, callback: Callable[[], Any]) -> None:
        """Run `callback` once the first frame has been drawn (soon, when it already has).
        call_after_refresh is not enough: Textual runs those callbacks when idle even while its
        start-up batch holds the first frame back, so work started there (a worker's imports)
        delayed that frame."""
        if self._first_frame is None:
            self.call_later(callback)
        else:
            self._first_frame.append(callback)

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        super()._display(screen, renderable)  # Textual's (private): a frame to the terminal
        if self._first_frame is not None and renderable is not None and not getattr(self, "_batch_count", 0):
            self._first_frame_drawn()

    def _first_frame_drawn(self) -> None:
        """Run what waited for the first frame (once). Also called by a timer from on_mount, so
        a Textual release that no longer calls `_display` delays this work, never loses it."""
        if self._first_frame is None:
            return
        callbacks, self._first_frame = self._first_frame, None
        for callback in callbacks:
            self.call_later(callback)

    @work(thread=True, exit_on_error=False, group="knowledge", description="check the method's tree")
    def validate_knowledge(self, overlay: str | None) -> None:
        from distdoctor.knowledge import KnowledgeError, load_knowledge

        from .messages import KnowledgeChecked

        try:
            load_knowledge(overlay)
        except KnowledgeError as exc:
            self.post_message(KnowledgeChecked(str(exc)))
            return
        self.post_message(KnowledgeChecked())

    def on_knowledge_checked(self, message: KnowledgeChecked) -> None:
        if message.error:
            self.exit(return_code=2, message=t("distdoctor: error: knowledge: {error}", error=message.error))

    # --- session -----------------------------------------------------------------------------
    def record(self, kind: str, data: Any) -> None:
        """Fold a result into the flow and save it to the session at once (off the event loop)."""
        self.flow.apply(kind, data)
        self.saver.append(self.flow.session_id, kind, data)
        self.refresh_chrome()

    def copy_text(self, text: str, what: str) -> None:
        """Put `text` on the clipboard by the route that works here (OSC 52, wrapped for tmux's
        passthrough when needed), keep it in a file too, and say which happened: a copy tmux
        drops must not read as "copied"."""
        from . import clipboard

        if getattr(self, "_clip_route", None) is None:
            self._clip_route = clipboard.route()
        route = self._clip_route
        name = f"{self.flow.session_id}-{what.replace(' ', '-')}.txt"
        try:
            path: Any = clipboard.save(self.store.directory.parent / "copied", name, text)
        except OSError as exc:
            path = None
            where = t("could not keep them in a file either ({why})", why=exc.strerror or exc)
        else:
            home = str(Path.home())
            path = "~" + str(path)[len(home):] if str(path).startswith(home + "/") else str(path)
            where = t("also in {path}", path=path)
        self._clipboard = text  # what Textual's own copy keeps, for paste inside the app
        if route.mode != "none" and self._driver is not None:
            self._driver.write(clipboard.osc52(text, route.mode))
        if route.mode == "none":
            self.notify(t("Not copied: {why}. The {what} are in {path}", why=route.why, what=t(what),
                          path=path) if path else
                        t("Not copied: {why}; {where}", why=route.why, where=where),
                        severity="warning", timeout=20)
        else:
            self.notify(t("{What} sent to the clipboard by {why}; {where}", What=t(what).capitalize(),
                          why=route.why, where=where), timeout=12)

    def on_session_not_saved(self, message: SessionNotSaved) -> None:
        self.notify(t("session not saved: {error}", error=message.error), severity="error", timeout=10)

    def refresh_chrome(self) -> None:
        refresh = getattr(self.screen, "refresh_chrome", None)
        if refresh:
            refresh()

    # --- data for the chrome -----------------------------------------------------------------
    def step_titles(self) -> list[tuple[str, str]]:
        return [(s, self.kb.steps[s].title) for s in self.order]

    def next_action_text(self, step_id: str, running: str = "") -> str:
        return next_action(self.kb, self.flow, step_id, self.order, running)

    # --- navigation --------------------------------------------------------------------------
    @property
    def current_step(self) -> str:
        return self.current_mode

    def action_goto(self, step_id: str) -> None:
        # a key typed just after q: a screen mounted while the app closes has no widgets
        if step_id in self.order and not self.closing:
            self.switch_mode(step_id)

    def action_goto_index(self, n: int) -> None:
        if 1 <= n <= len(self.order):
            self.action_goto(self.order[n - 1])

    def neighbour(self, delta: int, step_id: str | None = None) -> str | None:
        """The step after (delta +1) or before (-1) `step_id` (default: the current one), or None."""
        current = step_id or self.current_step
        if delta > 0:
            step = self.kb.steps.get(current)
            # the next step is the tree's edge, so a site overlay can branch the method
            if step and step.next and step.next[0] in self.order:
                return step.next[0]
        i = self.order.index(current) + delta if current in self.order else 0
        return self.order[i] if 0 <= i < len(self.order) else None

    def action_next_step(self) -> None:
        step = self.neighbour(+1)
        if step:
            self.action_goto(step)

    def action_prev_step(self) -> None:
        step = self.neighbour(-1)
        if step:
            self.action_goto(step)

    def action_stop_runs(self) -> None:
        for event in list(self.cancel_events):
            event.set()

    async def action_quit(self) -> None:
        self.action_stop_runs()
        self.exit()

    def exit(self, *args: Any, **kwargs: Any) -> None:
        self.closing = True
        super().exit(*args, **kwargs)

    def action_toggle_learn(self) -> None:
        self.learn = not self.learn

    def watch_learn(self, learn: bool) -> None:
        self.set_class(learn, "-learn")

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def run_step_action(self, step_id: str, action: str) -> None:
        """Open a step and run one of its screen's actions (for the command palette)."""
        if step_id not in self.order:
            self.notify(t("this method has no '{step}' step", step=step_id), severity="warning")
            return
        await self.switch_mode(step_id)
        await self.screen.run_action(action)

    def action_drills(self) -> None:
        """Drills run in their own app (they start a real job): say how, with the list."""
        from distdoctor.probes.drill import DRILLS

        self.notify(t("Run one in a shell: distdoctor --drill NAME (distdoctor drill list shows which "
                      "you passed). Drills: {drills}", drills=", ".join(DRILLS)), title=t("Drills"),
                    timeout=20)

    def palette_commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """(name, help, callback) for every action: the command palette lists these."""
        out: list[tuple[str, str, Callable[[], Any]]] = []
        for n, (step_id, title) in enumerate(self.step_titles(), 1):
            out.append((t("Go to step {n}: {title}", n=n, title=title), self.kb.steps[step_id].why,
                        partial(self.action_goto, step_id)))
        out += [
            (t("Next step"), t("Open the step after this one"), self.action_next_step),
            (t("Previous step"), t("Open the step before this one"), self.action_prev_step),
            (t("Toggle learn mode"), t("Explain why each step exists and what its terms mean"),
             self.action_toggle_learn),
            (t("Help: all keys"), t("Every key of every screen"), self.action_help),
        ]
        for step_id in self.order:  # each step's screen declares its actions' entries
            for action, name, help_ in screen_class(step_id).PALETTE:
                out.append((t(name), t(help_), partial(self.run_step_action, step_id, action)))
        out.append((t("Stop the running job"), t("Cancel a running repro or bisection"),
                    self.action_stop_runs))
        out.append((t("Practise on a drill"), t("A small job with one real fault, diagnosed and scored"),
                    self.action_drills))
        # the same name in both languages, so it is found whichever one the app speaks now
        out.append((t("Language: English / 中文"), t("Switch to {language}", language=NAMES[other(self.lang)]),
                    partial(self.action_language, other(self.lang))))
        # no "Quit" here: Textual's own palette entry calls action_quit, which stops a running
        # repro first (a second entry called exit(), and the exit waited for the run)
        return out

    def get_system_commands(self, screen: Screen[Any]) -> Any:
        """Textual's own palette entries (theme, quit, keys, screenshot), in the app's language."""
        for command in super().get_system_commands(screen):
            if self.lang == "en":
                yield command
            else:
                yield command._replace(title=t(command.title), help=t(command.help))

    def action_command_palette(self) -> None:
        if self.lang == "en":
            super().action_command_palette()
            return
        from textual.command import CommandPalette

        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(CommandPalette(id="--command-palette", placeholder=t("Search for commands…")))

    def search_themes(self) -> None:
        if self.lang == "en":
            super().search_themes()
            return
        from textual.command import CommandPalette
        from textual.theme import ThemeProvider

        self.push_screen(CommandPalette(providers=[ThemeProvider], placeholder=t("Search for themes…")))

    # --- language ----------------------------------------------------------------------------
    def action_language(self, lang: str) -> None:
        """Speak `lang` from now on, without a restart: the knowledge base's texts are reloaded
        in it, the keys relabelled, and every step screen built again from the session (each
        screen builds its texts from the session and `t`, so nothing is lost). Refused while a
        job runs: its screen is the one that listens to it."""
        if lang not in LANGS or lang == self.lang:
            return
        if self.cancel_events or any(getattr(s, "running", "") for stack in self._screen_stacks.values()
                                     for s in stack):
            self.notify(t("A job is running: switch the language when it has finished (x stops it)."),
                        severity="warning")
            return
        from distdoctor.knowledge import KnowledgeError, load_knowledge
        from distdoctor.knowledge.i18n import set_lang

        try:
            kb = load_knowledge(self.overlay, tree=False, patterns=False, lang=lang)
        except KnowledgeError as exc:
            self.notify(t("cannot load the knowledge base in {language}: {error}",
                          language=NAMES[lang], error=exc), severity="error", timeout=15)
            return
        set_lang(lang)  # the process's language: every t() from now on, workers included
        self.lang, self.kb = lang, kb
        self._clip_route = None  # its reason is worded in the old language
        localise_bindings(self)
        if lang != "en":
            wrap_between_wide_characters()
        # in a task of its own: removing a mode completes after the current message, so awaiting
        # it inside this handler would wait for itself
        self.run_worker(self._rebuild_screens(), group="language", exclusive=True,
                        description="switch the language")

    async def _rebuild_screens(self) -> None:
        """Every step screen afresh in the current language: the other steps' when next opened,
        this one's now, through a blank mode for a moment (a mode's screen cannot be removed
        while it shows, and the new one has the same id). Dialogs above it close with it: they
        were built in the old language."""
        current = self.current_mode
        self.add_mode(RELABEL_MODE, Screen)
        await self.switch_mode(RELABEL_MODE)
        for step_id in self.order:
            if step_id in self._modes:
                await self.remove_mode(step_id)
                self.add_mode(step_id, partial(self._new_screen, step_id))
        await self.switch_mode(current)
        await self.remove_mode(RELABEL_MODE)
        self.refresh_bindings()

def make_app(kb: Any, ctx: Any, store: SessionStore, *, session_id: str | None = None,
             learn: bool = False, resume: str | None = None,
             probes: Mapping[str, Any] | None = None,
             check_knowledge: str | None = None, overlay: str | None = None) -> DistDoctorApp:
    """Build the app: nothing here probes the host. `resume` ("last" or an id) reopens a session
    at its first step not done; raises SessionError when it cannot be read. `probes` replaces
    the registry's probes (tests inject recorded ones); they run only on the Environment step.
    `ctx` None is this host's ProbeContext, made when a probe first needs it.
    `check_knowledge` (an overlay path, "" for none) asks for the knowledge base's full check in
    the background, for a `kb` loaded with `tree=False`. `overlay` is the overlay `kb` came
    from (default: `check_knowledge`), read again when the language changes."""
    order = method_order(kb)
    if resume:
        record = store.load(resume)
        flow = Flow.from_record(record)
        start = flow.first_undone(order)
    else:
        flow = Flow(session_id=session_id or new_id())
        start = order[0]
    return DistDoctorApp(kb, ctx, store, flow, order, start, learn=learn, probes=probes,
                         check_knowledge=check_knowledge, overlay=overlay)
