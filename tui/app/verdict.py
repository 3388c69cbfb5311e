"""The verdict banner: the diagnosis in a few lines above the Logs and Conclusion steps' content,
visible whatever the scroll. It only formats `Diagnosis.to_dict()` (tui.record.diagnosis_view)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..record.diagnosis_view import verdict_rows
from .lang import cells, clip, t

CONFIDENCE_STYLE = {"confirmed": "bold green", "likely": "bold yellow", "unknown": "bold"}


def banner_text(diagnosis: Mapping[str, Any], kb: Any = None, width: int = 60) -> Text:
    """Culprit, where and confidence on the first line, then what happened, then the next action:
    four lines at most at 80 columns (the causes and the fix are on the page below)."""
    rows = dict(verdict_rows(diagnosis, kb))
    confidence = str(diagnosis.get("confidence") or "") if isinstance(diagnosis, Mapping) else ""
    text = Text()
    text.append(rows.get("culprit", ""), style="bold")
    if "location" in rows:
        text.append(t(" at {where}", where=rows["location"]))
    if "confidence" in rows:
        text.append(" · ")
        text.append(rows["confidence"], style=CONFIDENCE_STYLE.get(confidence, "bold"))
    if "summary" in rows:
        text.append("\n" + clip(rows["summary"], max(20, 2 * width - 8), "…"))
    action = diagnosis.get("next_action") if isinstance(diagnosis, Mapping) else None
    if isinstance(action, Mapping) and action.get("kind") == "fix":
        rows.pop("command", None)  # a fix's code is on the page below; its words fit here
    if "next" in rows or "command" in rows:
        text.append("\n")
        text.append(t("Next: "), style="bold")
        room = 2 * width - 16 - cells(rows.get("command", ""))
        text.append(clip(rows.get("next", ""), max(20, room), "…"))
        if "command" in rows:
            text.append(("  " if "next" in rows else "") + rows["command"], style="bold")
    return text


class VerdictBanner(Static):
    """The diagnosis, pinned above a step's scrolling content; hidden until there is one."""

    DEFAULT_CSS = """
    VerdictBanner {
        height: auto;
        max-height: 6;
        padding: 0 1;
        margin: 0 1 0 1;
        border-left: thick $accent;
        background: $boost;
        display: none;
    }
    VerdictBanner.-shown { display: block; }
    """

    diagnosis: Mapping[str, Any] | None = None
    kb: Any = None

    def show(self, diagnosis: Mapping[str, Any] | None, kb: Any = None) -> None:
        """Show `diagnosis` (a Diagnosis.to_dict()), or hide the banner for None."""
        self.diagnosis, self.kb = diagnosis, kb
        self.set_class(bool(diagnosis), "-shown")
        self._draw()

    def on_resize(self) -> None:
        self._draw()  # the story and the next action are cut to two lines each at this width

    def _draw(self) -> None:
        width = self.content_size.width or (self.app.size.width - 24)
        self.update(banner_text(self.diagnosis, self.kb, max(20, width)) if self.diagnosis else "")
