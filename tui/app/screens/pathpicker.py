"""A file and folder picker (DirectoryTree) for the paths the steps load."""
from __future__ import annotations

import os
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Footer, Static

from ..lang import localise_bindings, resolve, t
from ..widgets import Plain


class PathPickerScreen(ModalScreen[str | None]):
    """Enter on a file picks it; s picks the highlighted folder; Escape cancels."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("s", "pick_folder", "Pick folder"),
        Binding("backspace", "up", "Parent folder"),
    ]

    def __init__(self, start: str = ".") -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)
        path = Path(os.path.expanduser(start))
        while not path.is_dir() and path != path.parent:
            path = path.parent
        self.start = path if path.is_dir() else Path(".")

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box") as box:
            box.border_title = t("Pick logs: Enter picks a file, s the highlighted folder")
            yield Plain(str(self.start.resolve()), id="picker-root", classes="dim")
            yield DirectoryTree(self.start, id="tree")
        yield Footer()

    @on(DirectoryTree.FileSelected)
    def _file(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(str(event.path))

    def action_pick_folder(self) -> None:
        node = self.query_one(DirectoryTree).cursor_node
        if node is None or node.data is None:
            self.dismiss(str(self.start))
            return
        path = Path(node.data.path)
        self.dismiss(str(path if path.is_dir() else path.parent))

    def action_up(self) -> None:
        tree = self.query_one(DirectoryTree)
        parent = Path(tree.path).resolve().parent
        tree.path = parent
        self.query_one("#picker-root", Static).update(str(parent))

    def action_cancel(self) -> None:
        self.dismiss(None)
