"""The app's language: `t` for its texts, the key bar's descriptions in the current language, and
the switch between English and Chinese at run time (texts in knowledge/data/zh/messages/app.toml)."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from distdoctor.knowledge.i18n import LANGS, cells, clip, pad, resolve, t

__all__ = ["LANGS", "NAMES", "cells", "clip", "pad", "resolve", "t", "localise_bindings", "other",
           "wrap_between_wide_characters"]

NAMES = {"en": "English", "zh": "中文"}


def other(lang: str) -> str:
    """The language a switch goes to from `lang` (distdoctor speaks two)."""
    return "zh" if lang == "en" else "en"


def localise_bindings(node: Any) -> None:
    """Give `node` (a screen or the app) its bindings with the descriptions (what the key bar,
    the footer and the help show) in the current language. The English bindings the node was
    built with (its class's, and those Textual adds, such as the command palette's key) are kept
    on first use, so a switch back to English restores them exactly."""
    english = getattr(node, "_english_bindings", None)
    if english is None:
        english = node._english_bindings = node._bindings.copy()
    if resolve() == "en":
        node._bindings = english.copy()
        return
    from textual.binding import BindingsMap

    node._bindings = BindingsMap.from_keys({
        key: [replace(b, description=t(b.description)) if b.description else b for b in bindings]
        for key, bindings in english.key_to_bindings.items()})


# Wide (CJK) characters and the punctuation that must not start a line (it stays with the
# character before it) or end one (it goes with the character after it).
_WIDE = "\u2e80-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef"
_OPEN = "（「『《〈【〔［｛“‘"
_CLOSE = "，。、；：！？）」』》〉】〕］｝”’"
_WORD = rf"[{_OPEN}]*(?:[{_WIDE}]|[^\s{_WIDE}]+)[{_CLOSE}]*"


def wrap_between_wide_characters() -> None:
    """Let Rich (whose line breaking Textual's Content uses too) break a line between two wide
    characters, as Chinese is written, and not only at spaces: a sentence with one space in it
    otherwise leaves half a line empty and pushes the rest down. A word of narrow characters (a
    command, an env line, an id) is still one word, and text without wide characters is split
    exactly as before, so English output does not change. Rich's word pattern is internal: a
    Rich without it keeps its own breaking."""
    import rich._wrap

    if isinstance(getattr(rich._wrap, "re_word", None), re.Pattern):
        rich._wrap.re_word = re.compile(rf"\s*{_WORD}\s*")
