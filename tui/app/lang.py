"""The app's language: `t` for its texts, the key bar's descriptions in the current language, and
the switch between English and Chinese at run time (texts in knowledge/data/zh/messages/app.toml)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from distdoctor.knowledge.i18n import LANGS, cells, clip, pad, resolve, t

__all__ = ["LANGS", "NAMES", "cells", "clip", "pad", "resolve", "t", "localise_bindings", "other"]

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
