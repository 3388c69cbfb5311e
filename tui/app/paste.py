"""Pastes made safe before any widget sees them: control codes out, size bounded.

A terminal sends a paste between ESC[200~ and ESC[201~. Textual's parser reissues an escape
sequence inside a paste (an ANSI colour code copied from a coloured log) as key presses, and
`Input` inserts each key into a new copy of its value: a 1 MB coloured paste became a million
keys and quadratic work (12 minutes, 2.6 GB, `q` ignored); a paste the terminal does not bracket
arrives as keys too. `PasteFilter` cleans the byte stream before the parser, in one linear pass,
keeping the last MAX_PASTE characters (a traceback names its error at the end), and makes an
unbracketed flood one paste; `clean_paste` does the same for a Paste event built elsewhere."""
from __future__ import annotations

import re

MAX_PASTE = 64 * 1024  # characters of a paste kept: a whole traceback, never a whole log
MAX_FIELD = 4096  # characters one field takes from the keyboard (a path, a line)
START, END = "\x1b[200~", "\x1b[201~"
# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), any other ESC + one character, and the C0/C1
# controls except newline and tab; an escape sequence cut off at the end of a chunk waits for the next
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[^\[\]]|"
                      r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PARTIAL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*)?$")
MAX_PARTIAL = 256  # an unfinished escape longer than this is dropped, not kept waiting
FLOOD = 256  # characters in one read of the terminal that can only be a paste


def clean_paste(text: str, limit: int = MAX_PASTE) -> str:
    """`text` without escape sequences and control characters (newlines and tabs kept; CR LF
    and lone CR become newlines), cut to its last `limit` characters."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if len(text) > 4 * limit:  # cleaning never makes text longer: look only at what can stay
        text = text[-4 * limit:]
    text = _CONTROL.sub("", text)
    text = text.replace("\x1b", "")
    return text[-limit:]


class PasteFilter:
    """Feed it the terminal's input as it arrives; it returns the same input with every paste
    cleaned and bounded (outside a paste, everything passes unchanged). Linear in the input;
    holds at most MAX_PASTE characters of a paste and MAX_PARTIAL of an unfinished sequence."""

    def __init__(self, limit: int = MAX_PASTE) -> None:
        self.limit = limit
        self.in_paste = False
        self.carry = ""  # input held back: a marker or escape sequence cut by a chunk's end
        self.paste = ""
        # the last read ended in a lone ESC, passed on at once (it is usually the Escape key):
        # if the next read goes on with "[200~", that ESC began a paste the parser has half seen
        self.after_esc = False
        self.raw_start = False  # the paste's start marker already went to the parser

    def feed(self, data: str) -> str:
        data = self.carry + data
        self.carry = ""
        if not self.in_paste and not self.after_esc and is_flood(data):
            # a paste the terminal did not bracket (tmux paste-buffer without -p, bracketed paste
            # off): one Paste, not a key event per character (each one a trip through the app)
            return START + clean_paste(data, self.limit) + END
        out: list[str] = []
        while data:
            if not self.in_paste:
                if self.after_esc:
                    rest = START[1:]
                    if data.startswith(rest):
                        out.append(rest)
                        data = data[len(rest):]
                        self.after_esc, self.in_paste, self.paste, self.raw_start = False, True, "", True
                        continue
                    if rest.startswith(data):  # "[20": still maybe
                        self.carry = data
                        break
                    self.after_esc = False
                at = data.find(START)
                if at < 0:
                    # a paste's start cut by the read: wait for the rest; a lone ESC goes on at
                    # once (the Escape key must not wait for the next key) and is remembered
                    keep = _marker_prefix(data, START)
                    if keep == 1:
                        out.append(data)
                        self.after_esc = True
                        break
                    out.append(data[:len(data) - keep])
                    self.carry = data[len(data) - keep:]
                    break
                out.append(data[:at])
                data = data[at + len(START):]
                self.in_paste, self.paste, self.raw_start = True, "", False
                continue
            at = data.find(END)
            if at < 0:
                # a CR at the end may be half of a CR LF: it waits, or it would become two newlines
                keep = max(_marker_prefix(data, END), _partial(data), int(data.endswith("\r")))
                self._add(data[:len(data) - keep])
                self.carry = data[len(data) - keep:]
                break
            self._add(data[:at])
            data = data[at + len(END):]
            out.append(("" if self.raw_start else START) + self.paste + END)
            self.in_paste, self.paste, self.raw_start = False, "", False
        return "".join(out)

    def _add(self, raw: str) -> None:
        self.paste = (self.paste + clean_paste(raw, self.limit))[-self.limit:]


def is_flood(data: str) -> bool:
    """One read of FLOOD characters or more, with no paste marker and no mouse report in it: no
    one types that fast, and a mouse drag (many reports in one read) is not a paste."""
    return (len(data) >= FLOOD and START not in data and END not in data
            and "\x1b[<" not in data and "\x1b[M" not in data)


def _marker_prefix(data: str, marker: str) -> int:
    """How many characters at the end of `data` could be the start of `marker`."""
    for n in range(min(len(marker) - 1, len(data)), 0, -1):
        if marker.startswith(data[-n:]):
            return n
    return 0


def _partial(data: str) -> int:
    """The length of an escape sequence left unfinished at the end of `data` (0 for none, or
    when it is too long to be one)."""
    tail = data[-MAX_PARTIAL:]
    match = _PARTIAL.search(tail)
    return len(match.group(0)) if match else 0
