"""What reaches the app from the terminal, made safe (issue 25): pastes cleaned and bounded in the
byte stream and as events, a field that takes no more than MAX_FIELD keys, and a window too small
for the step screens covered by "make the window larger" (tui/app/tiny.py)."""
from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import Input


class InputGuards:
    """Mixed into the App (before App in its bases); `too_small` is set by the app's __init__."""

    too_small = False

    def get_driver_class(self) -> Any:
        """Textual's driver, except on a Linux terminal: the same one with pastes cleaned and
        bounded before its parser (tui/app/paste.py)."""
        driver = super().get_driver_class()
        from textual.drivers.linux_driver import LinuxDriver

        if driver is LinuxDriver:
            from .driver import PasteSafeLinuxDriver

            return PasteSafeLinuxDriver
        return driver

    async def on_event(self, event: events.Event) -> None:
        """A paste cleaned and bounded whatever delivered it; a field that holds MAX_FIELD
        characters takes no more keys (a flood of keys must stay linear); while the window is
        too small only quitting works."""
        from .paste import MAX_FIELD, clean_paste

        if isinstance(event, events.Paste):
            event.text = clean_paste(event.text)
            focused = self.focused
            if isinstance(focused, Input) and not getattr(focused, "KEEPS_WHOLE_PASTE", False):
                # a one-line field takes what fits in MAX_FIELD, like keys
                event.text = event.text[:max(0, MAX_FIELD - len(focused.value))]
                if not event.text:
                    return
        elif isinstance(event, events.Key):
            if self.too_small and event.key not in ("q", "ctrl+c", "ctrl+q"):
                return
            focused = self.focused
            if event.is_printable and isinstance(focused, Input) and len(focused.value) >= MAX_FIELD:
                return
        await super().on_event(event)

    async def _on_resize(self, event: events.Resize) -> None:
        """Below tiny.MIN_SIZE the step screens cannot be drawn (a zero-width column crashed
        Rich): the app's -tiny class hides them behind "make the window larger" until it grows,
        set before the new size is laid out."""
        self.set_tiny(event.size.width, event.size.height)
        # (Textual runs App._on_resize itself after this one: the handlers of every class run)

    def set_tiny(self, width: int, height: int) -> None:
        from .tiny import too_small

        small = too_small(width, height)
        if small == self.too_small:
            return
        self.too_small = small
        self.set_class(small, "-tiny")
        # now, not after the next message: the new size is laid out before a deferred restyle,
        # and a zero-width column is what crashed
        self.stylesheet.update(self, animate=False)
