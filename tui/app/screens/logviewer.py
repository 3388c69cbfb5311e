"""A log line in its context: the lines around it, read without loading the whole file."""
from __future__ import annotations

from collections import deque
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ..lang import cells, localise_bindings, resolve, t
from ..messages import ContextRead
from ..widgets import Plain

CONTEXT = 12  # lines either side; + and - change it


def numbered(lines: Any, first: int) -> list[tuple[int, str]]:
    """(line number, text) pairs from what read_context gives: pairs, dicts or plain strings."""
    out: list[tuple[int, str]] = []
    items = getattr(lines, "lines", lines)
    for n, item in enumerate(items or []):
        if isinstance(item, (tuple, list)) and len(item) >= 2:
            out.append((int(item[0]), str(item[1])))
        elif isinstance(item, dict):
            out.append((int(item.get("line", first + n)), str(item.get("text", ""))))
        else:
            out.append((first + n, str(item)))
    return out


def render_context(pairs: list[tuple[int, str]], target: int, width: int = 0) -> Text:
    """Numbered lines; the target line is marked with '>' (not by colour alone) and reversed.
    `width` is the line numbers' width (default: that of the largest here)."""
    text = Text()
    width = width or len(str(max((n for n, _ in pairs), default=target)))
    for i, (n, line) in enumerate(pairs):
        mark = ">" if n == target else " "
        style = "reverse bold" if n == target else ""
        text.append(f"{mark}{n:>{width}} | ", style="dim" if n != target else style)
        text.append(line.rstrip("\n") + ("\n" if i < len(pairs) - 1 else ""), style=style)
    return text


def tail(path: str, count: int) -> list[tuple[int, str]]:
    """The last `count` lines of a file as (number, text), streaming: a run's log may be large."""
    last: deque[tuple[int, str]] = deque(maxlen=count)
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            last.append((n, line.rstrip("\r\n")))
    return list(last)


def tail_cells(text: str, width: int) -> str:
    """The end of `text` that fits in `width` cells (a path's end says which file)."""
    out = ""
    for ch in reversed(text):
        if cells(ch + out) > width:
            break
        out = ch + out
    return out


class LogViewerScreen(ModalScreen[None]):
    """Shows `path` around `line` (or its last lines when `line` is 0); Escape closes."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("plus", "more", "More context", key_display="+"),
        Binding("minus", "less", "Less context", key_display="-"),
    ]

    def __init__(self, path: str, line: int, context: int = CONTEXT) -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)
        self.path, self.line, self.context = path, line, context

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box", id="context-box") as box:
            title = f"{self.path}:{self.line}" if self.line else t("{path} (end)", path=self.path)
            # the end of a long path says which file (`.../1/stderr.log:6`): cut the start
            room = max(24, min(100, self.app.size.width * 9 // 10) - 8)
            box.border_title = title if cells(title) <= room else "…" + tail_cells(title, room - 1)
            # three parts, so the marked line can be scrolled to however the lines above wrap
            yield Plain(t("Reading..."), id="context")
            yield Plain("", id="context-target")
            yield Plain("", id="context-after")
        yield Footer()

    def on_mount(self) -> None:
        self.centre = False  # bring the marked line to the middle once the new lines are laid out
        self.watch(self.query_one("#context-box"), "virtual_size", self._recentre, init=False)
        self.read()

    def _recentre(self) -> None:
        """Scroll the marked line (the end, for a run's log) to the middle of the box. Runs when
        the box's content size changes too: scrolling before the new lines are laid out stops
        short of them."""
        if not self.centre:
            return
        box = self.query_one("#context-box", VerticalScroll)
        target = self.query_one("#context-target" if self.line else "#context-after")
        if self.line:
            box.scroll_to_center(target, animate=False, immediate=True)
        else:
            box.scroll_end(animate=False, immediate=True)

    def action_more(self) -> None:
        self.context *= 2
        self.read()

    def action_less(self) -> None:
        self.context = max(2, self.context // 2)
        self.read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="context", description="read log context")
    def read(self) -> None:
        if not self.line:
            try:
                lines = tail(self.path, 2 * self.context)
            except OSError as exc:
                self.post_message(ContextRead([], t("cannot read {path}: {error}", path=self.path,
                                                    error=exc.strerror or exc)))
                return
            self.post_message(ContextRead(lines))
            return
        from distdoctor.knowledge.logs import read_context

        first = max(1, self.line - self.context)
        try:
            lines = read_context(self.path, self.line, self.context, self.context)
        except (OSError, ValueError) as exc:
            self.post_message(ContextRead([], t("cannot read {path}: {error}", path=self.path, error=exc)))
            return
        self.post_message(ContextRead(numbered(lines, first)))

    def on_context_read(self, message: ContextRead) -> None:
        before, target, after = (self.query_one(f"#{id_}", Static)
                                 for id_ in ("context", "context-target", "context-after"))
        before.display = True
        if message.error:
            before.update(Text(message.error, style="bold"))
            target.update("")
            after.update("")
            return
        pairs = list(message.lines)
        width = len(str(max((n for n, _ in pairs), default=self.line)))
        if not pairs:
            before.update(t("line {n} is past the end of the file", n=self.line) if self.line else t("(empty file)"))
            target.update("")
            after.update("")
            return
        mark = self.line if self.line else pairs[-1][0]
        parts = ([p for p in pairs if p[0] < mark], [p for p in pairs if p[0] == mark],
                 [p for p in pairs if p[0] > mark])
        for widget, part in zip((before, target, after), parts):
            widget.display = bool(part)
            widget.update(render_context(part, self.line, width) if part else "")
        self.centre = True
        self.call_after_refresh(self._recentre)
