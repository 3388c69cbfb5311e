"""The Linux terminal driver with pastes cleaned before Textual's parser sees them
(tui/app/paste.py says why); everything else is Textual's own `LinuxDriver`."""
from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

from .paste import PasteFilter


class PasteSafeParser(XTermParser):
    """XTermParser fed through a PasteFilter."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._paste = PasteFilter()

    def feed(self, data: str):  # type: ignore[no-untyped-def, override]
        if not data:  # "" is the end of input for Textual's parser
            return super().feed(data)
        filtered = self._paste.feed(data)
        # a chunk held back whole (inside a paste) gives nothing yet, and must not read as the end
        return super().feed(filtered) if filtered else ()


class PasteSafeLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread parses with PasteSafeParser (the loop is Textual 8.2's)."""

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        EVENT_READ = selectors.EVENT_READ
        parser = PasteSafeParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode
        read = os.read

        def process_selector_events(selector_events: list[tuple[selectors.SelectorKey, int]],
                                    final: bool = False) -> None:
            for last, (_key, mask) in loop_last(selector_events):
                if mask & EVENT_READ:
                    unicode_data = decode(read(fileno, 1024 * 4), final=final and last)
                    if not unicode_data:
                        break
                    for event in feed(unicode_data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process_selector_events(selector.select(0.1))
            selector.unregister(self.fileno)
            process_selector_events(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:
                for _event in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
