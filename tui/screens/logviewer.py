"""A log line in its context: the lines around it, read without loading the whole file."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ..messages import ContextRead

CONTEXT = 12  # lines either side; + and - change it

from ..widgets import Plain


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


def render_context(pairs: list[tuple[int, str]], target: int) -> Text:
    """Numbered lines; the target line is marked with '>' (not by colour alone) and reversed."""
    text = Text(no_wrap=True, overflow="ellipsis")
    width = len(str(max((n for n, _ in pairs), default=target)))
    for n, line in pairs:
        mark = ">" if n == target else " "
        style = "reverse bold" if n == target else ""
        text.append(f"{mark}{n:>{width}} | ", style="dim" if n != target else style)
        text.append(line.rstrip("\n") + "\n", style=style)
    return text


class LogViewerScreen(ModalScreen[None]):
    """Shows `path` around `line`; Escape closes."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("plus", "more", "More context", key_display="+"),
        Binding("minus", "less", "Less context", key_display="-"),
    ]

    def __init__(self, path: str, line: int, context: int = CONTEXT) -> None:
        super().__init__()
        self.path, self.line, self.context = path, line, context

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box") as box:
            box.border_title = f"{self.path}:{self.line}"
            yield Plain("Reading...", id="context")
        yield Footer()

    def on_mount(self) -> None:
        self.read()

    def action_more(self) -> None:
        self.context *= 2
        self.read()

    def action_less(self) -> None:
        self.context = max(2, self.context // 2)
        self.read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="context", description="read log context")
    def read(self) -> None:
        try:
            from distdoctor.knowledge.logs import read_context
        except ImportError as exc:
            self.post_message(ContextRead([], f"log viewer not available: {exc}"))
            return
        first = max(1, self.line - self.context)
        try:
            lines = read_context(self.path, self.line, self.context, self.context)
        except (OSError, ValueError) as exc:
            self.post_message(ContextRead([], f"cannot read {self.path}: {exc}"))
            return
        self.post_message(ContextRead(numbered(lines, first)))

    def on_context_read(self, message: ContextRead) -> None:
        body = self.query_one("#context", Static)
        if message.error:
            body.update(Text(message.error, style="bold"))
        else:
            body.update(render_context(message.lines, self.line))
