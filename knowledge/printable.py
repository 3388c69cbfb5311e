"""The one sanitiser for text that came from input and is printed: control codes, lone surrogates
and bidi overrides become visible escapes, long text is cut, and any plain data structure (shared
references, cycles, nesting of any depth) is rendered within a budget.

Every renderer that prints names, paths or values read from files (`fr`, the topology drawing,
`sessions`, the Markdown and HTML reports, the log file names) calls `clean` on a field or
`clean_block` on a whole block of output: a file name can never fake an output line, an op name can
never set the terminal's title or clear the screen.
"""
from __future__ import annotations

import re
from typing import Any

from .lazyre import lazy

# C0 controls (tab and newline included: a field never spans lines), DEL, C1 controls, lone
# surrogates (unprintable in UTF-8), bidi embeddings/overrides/isolates (they reorder what
# follows: "Trojan Source"), and the line/paragraph separators some terminals honour.
_UNSAFE = lazy("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# the same, keeping tab and newline: for a block of output lines
_UNSAFE_BLOCK = lazy("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069]")
ELLIPSIS = "\u2026"
INT_BITS = 256  # a wider integer is not a size, a rank or a count: shown by its width


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(text: Any, limit: int | None = None) -> str:
    """`text` as one safe line: every control code, lone surrogate and bidi control escaped
    (`\\x1b`, `\\n`, `\\ud800`), cut to `limit` characters with an ellipsis. Not a string: its
    bounded plain-text rendering."""
    if not isinstance(text, str):
        return plain_text(text, limit or 4096)
    if limit is not None and len(text) > limit:
        text = text[:limit] + ELLIPSIS
    if text.isascii() and text.isprintable():
        return text
    return _UNSAFE.sub(_escape, text)


def clean_block(text: str) -> str:
    """A block of output lines made safe: newlines and tabs kept, every other control code,
    lone surrogate and bidi control escaped."""
    if text.isascii() and not _UNSAFE_BLOCK.search(text):
        return text
    return _UNSAFE_BLOCK.sub(_escape, text)


def _scalar(obj: Any, cap: int, top: bool) -> str | None:
    """The text of a scalar (None for a container)."""
    if isinstance(obj, str):
        if len(obj) > cap:
            obj = obj[:cap]
        return clean(obj) if top else repr(obj)
    if isinstance(obj, bool) or obj is None:
        return str(obj)
    if isinstance(obj, int):
        # str() of a huge int is slow and, past 4300 digits, raises ValueError
        return str(obj) if obj.bit_length() <= INT_BITS else f"<int of {obj.bit_length()} bits>"
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, (bytes, bytearray)):
        return repr(bytes(obj[:cap]))
    if isinstance(obj, (list, tuple, dict)):
        return None
    return f"<{type(obj).__name__}>"


def plain_text(obj: Any, cap: int = 4096, memo: dict[int, str] | None = None, *,
               tuples_as_lists: bool = False, max_depth: int = 64) -> str:
    """`str(obj)` for plain data (lists, tuples, dicts, strings, numbers), at most `cap`
    characters (then an ellipsis). Bounded whatever the shape: a list shared a billion times is
    expanded only until the budget is spent, a cycle prints as `[...]`, nesting of any depth is
    walked without recursion (deeper than `max_depth` it prints as `[…]`). `memo` (id -> text) lets the callers of one document share the
    texts of shared objects; the objects must stay alive while it is used."""
    text = _scalar(obj, cap, True)
    if text is not None:
        return text
    memo = {} if memo is None else memo
    done = memo.get(id(obj))
    if done is not None:
        return done
    # frame: [node, items, next index, parts, length so far, open, close, is dict]
    stack: list[list[Any]] = []
    active: set[int] = set()

    def push(node: Any) -> None:
        if isinstance(node, dict):
            items: Any = node
            opener, closer, is_dict = "{", "}", True
        elif isinstance(node, tuple) and not tuples_as_lists:
            items, opener, closer, is_dict = node, "(", ")", False
        else:
            items, opener, closer, is_dict = node, "[", "]", False
        if is_dict:
            items = list(_dict_items(node, cap))
        active.add(id(node))
        stack.append([node, items, 0, [], 0, opener, closer, is_dict])

    push(obj)
    result = ""
    while stack:
        frame = stack[-1]
        node, items, i, parts, length = frame[0], frame[1], frame[2], frame[3], frame[4]
        if i < len(items) and length <= cap:
            child = items[i]
            frame[2] = i + 1
            piece = _scalar(child, cap, False)
            if piece is None:
                piece = memo.get(id(child))
            if piece is None:
                if id(child) in active:
                    piece = "{...}" if isinstance(child, dict) else "[...]"
                elif len(stack) >= max_depth:
                    piece = "{" + ELLIPSIS + "}" if isinstance(child, dict) else "[" + ELLIPSIS + "]"
                else:
                    push(child)
                    continue
            parts.append(piece)
            frame[4] = length + len(piece) + 2
            continue
        stack.pop()
        active.discard(id(node))
        if frame[7]:
            body = ", ".join(f"{parts[j]}: {parts[j + 1]}" for j in range(0, len(parts) - 1, 2))
        else:
            body = ", ".join(parts)
            if frame[5] == "(" and len(items) == 1 and len(parts) == 1:
                body += ","
        text = frame[5] + body + (ELLIPSIS if i < len(items) else "") + frame[6]
        if len(text) > cap:
            text = text[:cap] + ELLIPSIS
        memo[id(node)] = text
        if stack:
            parent = stack[-1]
            parent[3].append(text)
            parent[4] += len(text) + 2
        else:
            result = text
    return result


def _dict_items(node: dict[Any, Any], cap: int) -> list[Any]:
    out: list[Any] = []
    for n, (key, value) in enumerate(node.items()):
        if n * 4 > cap:
            break
        out += (key, value)
    return out
