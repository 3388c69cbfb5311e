"""Widgets every step screen shares: the step list, the next-action panel, the learn panel."""
from __future__ import annotations

import asyncio
import os
from typing import Any

from rich.text import Text
from textual.suggester import Suggester
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from distdoctor.knowledge.i18n import messages

from .lang import cells, clip, resolve, t

# Status is always a word first; colour only repeats it (readable on a monochrome SSH session).
STATUS_WORDS: dict[str, tuple[str, str]] = {
    "ok": ("OK", "bold green"), "warn": ("WARN", "bold yellow"), "fail": ("FAIL", "bold red"),
    "unavailable": ("N/A", "dim"), "error": ("ERROR", "bold magenta"),
    "running": ("RUNNING", "bold cyan"), "waiting": ("WAITING", "dim"),
    "pass": ("PASS", "bold green"), "passed": ("PASS", "bold green"), "failed": ("FAIL", "bold red"),
}


def status_text(status: str) -> Text:
    word, style = STATUS_WORDS.get(status, (status.upper() or "?", ""))
    return Text(t(word), style=style)


class Plain(Static):
    """A Static that shows text as given: paths, log lines and plans may contain [brackets]."""

    def __init__(self, content: Any = "", **kwargs: Any) -> None:
        super().__init__(content, markup=False, **kwargs)


# Sidebar labels: one word each, so the list stays one line per step in an 80-column terminal
# (the header shows the step's full title). A step with its own screen module is labelled by
# its id in words ("repro": Repro; its Chinese in the app's catalogue, with the screen's other
# texts); a step without one (a site overlay's) gets its title, cut to fit.
LABEL_WIDTH = 11


def step_label(step_id: str, title: str) -> str:
    from .steps import screen_module

    label = t(step_id.replace("-", " ").capitalize()) if screen_module(step_id) else title
    # by display width: a Chinese title takes two cells a character
    return label if cells(label) <= LABEL_WIDTH else clip(label, LABEL_WIDTH, "…")


class StepNav(OptionList):
    """The method's steps in order: where you are (>), what is done (✓); Enter jumps to a step."""

    def show(self, steps: list[tuple[str, str]], current: str, done: set[str]) -> None:
        highlighted = 0
        options = []
        for n, (step_id, title) in enumerate(steps):
            mark = ">" if step_id == current else ("✓" if step_id in done else " ")
            options.append(Option(f"{mark} {n + 1} {step_label(step_id, title)}", id=step_id))
            if step_id == current:
                highlighted = n
        self.set_options(options)
        self.highlighted = highlighted


class KeyBar(Static):
    """The keys that work here, as text that wraps onto a second line in a narrow terminal.
    Textual's Footer builds a widget per key and rebuilds them on every focus change, which
    doubled the first screen's start-up time."""

    DEFAULT_CSS = """
    KeyBar { height: auto; max-height: 2; background: $panel; color: $text-muted; padding: 0 1; }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._changed)
        self._changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _changed(self, screen: Any) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        text = Text()
        if isinstance(screen.focused, Input):
            # letters type into the field; the way out is not obvious to a newcomer
            text.append("esc", style="bold")
            text.append(f" {t('leave field')}  ")
        seen: set[str] = set()
        shows = getattr(screen, "shows_key", None)
        for active in screen.active_bindings.values():
            binding = active.binding
            # a disabled key is left out rather than dimmed: dim alone is colour alone
            if not binding.show or not active.enabled or binding.description in seen:
                continue
            if shows is not None and not shows(binding.action):
                continue
            seen.add(binding.description)
            text.append(self.app.get_key_display(binding), style="bold")
            text.append(f" {binding.description}  ")
        text.append("^p", style="bold")
        text.append(f" {t('palette')}")
        self.update(text)


class NextAction(Plain):
    """Always visible: the one thing to do now."""


def term_name(term: str) -> str:
    """A term of the method as the reader's language names it, beside the word the logs and the
    docs use ("挂起（hang）"); names that are code (NCCL_DEBUG, /dev/shm, SeqNum) stay as they are."""
    alias = messages(resolve()).get(f"term name: {term}")
    return f"{alias}（{term}）" if alias else term


class LearnPanel(Static):
    """Why this step exists and what its terms mean (shown in learn mode)."""

    def show_step(self, step: Any) -> None:
        text = Text()
        text.append(t("Why this step: "), style="bold")
        text.append(step.why or "")
        if step.learn:
            text.append("\n" + step.learn)
        for term, meaning in step.terms.items():
            text.append(f"\n{term_name(term)}", style="bold")
            text.append(t(": {meaning}", meaning=meaning))
        self.update(text)


class PathSuggester(Suggester):
    """Completes file and folder names as they are typed (a folder gets a trailing slash)."""

    LIMIT = 5000  # entries looked at per folder: a huge folder must not stall typing

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        expanded = os.path.expanduser(value)
        folder, prefix = os.path.split(expanded)
        if not value.endswith(prefix):  # a bare "~user": nothing typed after it to complete
            return None
        # a folder on a slow network file system must not freeze the keyboard: list it in a thread
        found = await asyncio.to_thread(self.scan, folder or ".", prefix)
        if found is None:
            return None
        name, is_dir = found
        return value[: len(value) - len(prefix)] + name + ("/" if is_dir else "")

    def scan(self, folder: str, prefix: str) -> tuple[str, bool] | None:
        """The first entry of `folder` (by name) starting with `prefix`, and whether it is a folder."""
        try:
            with os.scandir(folder) as entries:
                names = []
                for n, entry in enumerate(entries):
                    if n >= self.LIMIT:
                        break
                    if entry.name.startswith(prefix) and (prefix.startswith(".") or not entry.name.startswith(".")):
                        names.append((entry.name, entry.is_dir()))
        except OSError:
            return None
        return min(names) if names else None
