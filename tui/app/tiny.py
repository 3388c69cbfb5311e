"""What a terminal too small for the step screens shows: "make the window larger", never a crash.
Every screen holds a TooSmallNote, shown (and the rest hidden) while the app has the -tiny class."""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from .lang import t

MIN_SIZE = (40, 12)  # the step list takes 18 columns; below this the content has no room


def too_small(width: int, height: int) -> bool:
    return width < MIN_SIZE[0] or height < MIN_SIZE[1]


class TooSmallNote(Widget):
    """The request, cut to the window (no wrapping: Rich cannot wrap into zero columns)."""

    def render(self) -> Text:
        width = max(1, self.size.width)
        words = t("Make the window larger (at least {w}x{h}); q quits.", w=MIN_SIZE[0], h=MIN_SIZE[1])
        lines = [words[i:i + width] for i in range(0, len(words), width)][:max(1, self.size.height)]
        return Text("\n".join(lines), no_wrap=True, overflow="crop")
