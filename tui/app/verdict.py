"""The verdict banner: the diagnosis in a few lines above the Logs and Conclusion steps' content,
visible whatever the scroll. It only formats a typed `Diagnosis` (tui.record.diagnosis_view)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

from ..record.diagnosis_view import verdict_rows
from .lang import cells, clip, t

if TYPE_CHECKING:
    from distdoctor.knowledge.diagnosis import Diagnosis

CONFIDENCE_STYLE = {"confirmed": "bold green", "likely": "bold yellow", "unknown": "bold"}


def banner_text(diagnosis: Diagnosis, kb: Any = None, width: int = 60) -> Text:
    """Culprit, where and confidence on the first line, then what happened, then the next action:
    four lines at most at 80 columns (the causes and the fix are on the page below)."""
    rows = dict(verdict_rows(diagnosis, kb))
    confidence = diagnosis.confidence
    text = Text()
    text.append(rows.get("culprit", ""), style="bold")
    if "location" in rows:
        text.append(t(" at {where}", where=rows["location"]))
    if "confidence" in rows:
        text.append(" · ")
        text.append(rows["confidence"], style=CONFIDENCE_STYLE.get(confidence, "bold"))
    if "summary" in rows:
        text.append("\n" + clip(rows["summary"], max(20, 2 * width - 8), "…"))
    if diagnosis.next_action.get("kind") == "fix":
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

    verdict: Diagnosis | None = None
    kb: Any = None

    @property
    def diagnosis(self) -> dict[str, Any] | None:
        """What is shown, as `--json` and the report carry it (tests compare the three)."""
        return self.verdict.to_dict() if self.verdict else None

    def show(self, diagnosis: Diagnosis | None, kb: Any = None) -> None:
        """Show `diagnosis`, or hide the banner for None."""
        self.verdict, self.kb = diagnosis, kb
        self.set_class(diagnosis is not None, "-shown")
        self._draw()

    def on_resize(self) -> None:
        self._draw()  # the story and the next action are cut to two lines each at this width

    def _draw(self) -> None:
        width = self.content_size.width or (self.app.size.width - 24)
        self.update(banner_text(self.verdict, self.kb, max(20, width)) if self.verdict else "")
