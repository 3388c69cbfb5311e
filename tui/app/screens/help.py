"""The help screen: every key of the app and of each step screen, gathered from their bindings."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

INTRO = ("distdoctor walks a hung or failing multi-GPU PyTorch job to its root cause: "
         "classify -> logs -> environment -> minimal repro -> bisection -> conclusion. "
         "Everything you do is saved in the session; `distdoctor --resume` reopens it. "
         "To practise on a real fault: `distdoctor drill list`, then `distdoctor --drill NAME`.")

from ..lang import localise_bindings, resolve, t
from ..widgets import Plain

KEY_NAMES = {"question_mark": "?", "slash": "/", "plus": "+", "minus": "-", "escape": "Esc",
             "backspace": "Backspace"}


def _rows(bindings: Iterable[Any]) -> list[tuple[str, str]]:
    """(keys, what) per action: bindings of one action (? and F1) share a row."""
    rows: dict[tuple[str, str], list[str]] = {}
    for b in bindings:
        if not isinstance(b, Binding) or not b.description or b.action.startswith("goto_index"):
            continue  # the digits are listed once as "1-9"
        for key in b.key.split(","):
            shown = b.key_display if b.key_display and "," not in b.key else KEY_NAMES.get(key, key)
            keys = rows.setdefault((b.action, t(b.description)), [])
            if shown not in keys:
                keys.append(shown)
    return [(", ".join(keys), what) for (_, what), keys in rows.items()]


def _section(title: str, rows: Iterable[tuple[str, str]]) -> list[Any]:
    """A heading, then the keys: one small table per section, so a long heading does not widen
    the key column of every row (and squeeze the descriptions) in an 80-column terminal."""
    table = Table(box=None, expand=True, show_header=False, padding=(0, 1))
    table.add_column("key", style="bold", no_wrap=True, min_width=14)
    table.add_column("what", ratio=1)
    for keys, what in rows:
        table.add_row(keys, what)
    return [Text(title, style="underline"), table]


def key_table(app: Any) -> Group:
    """All keys: the app's, then each step screen's under its step title, then the dialogs'."""
    from ..steps import screen_class
    from .logviewer import LogViewerScreen
    from .pathpicker import PathPickerScreen
    from .topology import FleetScreen, TopologyScreen

    parts = _section(t("Everywhere"), [
        *_rows(app.BINDINGS),
        ("1-9", t("Go to that step")),
        ("ctrl+p", t("Command palette: every action by name")),
        ("tab, shift+tab", t("Move between fields; arrows and Enter inside lists")),
        ("Esc", t("Leave a text field (then to the step list); closes a dialog")),
    ])
    seen: set[type] = set()
    for step_id in app.order:
        cls = screen_class(step_id)
        if cls in seen:
            continue
        seen.add(cls)
        rows = _rows(getattr(cls, "BINDINGS", ()))
        if rows:
            parts += _section(app.kb.steps[step_id].title, rows)
    for title, dialog in (("Log viewer (Enter on an evidence line or a run)", LogViewerScreen),
                          ("Log picker (b on the Logs step; Enter picks a file)", PathPickerScreen),
                          ("Topology (t on the Environment step)", TopologyScreen),
                          ("Fleet (f on the Environment step)", FleetScreen)):
        parts += _section(t(title), _rows(dialog.BINDINGS))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """All keys on one page; Escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self) -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = t("Help: keys")
            box.border_subtitle = t("Esc closes; arrows scroll")
            yield Plain(t(INTRO), id="help-intro")
            yield Plain(key_table(self.app), id="help-keys")
