"""Which language distdoctor speaks (English or Simplified Chinese), in one place.

Order: an explicit choice (`--lang`, given to `set_lang` by the command line or passed in),
then $DISTDOCTOR_LANG, then the POSIX locale variables LC_ALL, LC_MESSAGES, LANG (the first one
set wins, as POSIX says; `zh_*` gives Chinese), else English.

Also here, so that every layer uses the same rules: the user-interface message catalogue
(`t`), the merge of the knowledge base's per-language text files (`merge_texts`) and display
width (`cells`, `wrap`, `clip`: a CJK character takes two terminal cells). No textual, no rich,
no torch: the knowledge layer and the plain-text renderers both import it.
"""
from __future__ import annotations

import os
import re
import textwrap
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

LANGS = ("en", "zh")
ENV = "DISTDOCTOR_LANG"
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")
DATA_DIR = Path(__file__).with_name("data")

# Fields of each knowledge table that are prose for a human; everything else (ids, env lines,
# commands, patterns, weights) is code and never translated. `fix_notes` is a table of the
# notes of a cause's fixes, keyed by the first line of each fix's text (fix_key); `terms` maps
# the same term names to texts.
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "cause": ("title", "what", "why", "fix", "evidence", "fix_notes"),
    "symptom": ("title", "question"),
    "check": ("title", "detail", "ok_title"),
    "switch": ("why", "permanent_fix"),
    "step": ("title", "why", "learn", "terms"),
    "signature": ("description",),
    "harmless": ("description",),
}
# The texts a language must have in full (signature and harmless descriptions are optional).
REQUIRED = ("cause", "symptom", "check", "switch", "step")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")

_current: str | None = None  # set by the command line's --lang (None: not given)


def normalize(value: str | None) -> str | None:
    """'zh', 'zh_CN.UTF-8', 'zh-Hans' -> 'zh'; 'en', 'en_US', 'C', 'POSIX' -> 'en'; '' -> None.
    A locale of another language is English (the only other language distdoctor has)."""
    if not value:
        return None
    low = value.strip().lower()
    if not low:
        return None
    return "zh" if re.match(r"zh([_\-.@]|$)", low) else "en"


def set_lang(lang: str | None) -> None:
    """The command line's --lang for this process (None when it was not given)."""
    global _current
    _current = normalize(lang)


def resolve(explicit: str | None = None, environ: Any = None) -> str:
    """The language to speak: explicit, --lang, $DISTDOCTOR_LANG, LC_ALL, LC_MESSAGES, LANG, en."""
    env = os.environ if environ is None else environ
    for value in (explicit, _current, env.get(ENV)):
        lang = normalize(value)
        if lang:
            return lang
    for name in LOCALE_VARS:
        if env.get(name):  # POSIX: the first one set decides, even when it says C
            return normalize(env[name]) or "en"
    return "en"


# --- the message catalogue -------------------------------------------------------------------

_catalogue: dict[str, dict[str, str]] = {}


def messages(lang: str) -> dict[str, str]:
    """English message -> its translation, from data/<lang>/messages/*.toml (read once)."""
    if lang not in _catalogue:
        table: dict[str, str] = {}
        folder = DATA_DIR / lang / "messages"
        if lang != "en" and folder.is_dir():
            tomllib = _tomllib()
            for path in sorted(folder.glob("*.toml")):
                doc = tomllib.loads(path.read_text(encoding="utf-8"))
                table.update({str(k): str(v) for k, v in doc.get("messages", {}).items()})
        _catalogue[lang] = table
    return _catalogue[lang]


def t(message: str, lang: str | None = None, **values: Any) -> str:
    """`message` in the language (English when it has no translation), then filled with
    `values` by str.format. The English text is the key, so English output never changes."""
    lang = lang or resolve()
    text = messages(lang).get(message, message) if lang != "en" else message
    return text.format(**values) if values else text


def _tomllib() -> Any:
    """The one TOML parser (knowledge/tomlload.py), imported only when a catalogue is read."""
    from . import tomlload
    return tomlload


# --- the knowledge base's per-language files ---------------------------------------------------

def merge_texts(tables: dict[str, dict[str, tuple[str, dict[str, Any]]]],
                folders: Iterable[tuple[Path, Callable[[str], bool]]],
                read: Callable[[Path], dict[str, Any]], error: Callable[[str, str, str], Exception]
                ) -> list[str]:
    """Put each translated text over the English one in the raw entries, before validation.
    `folders`: (folder, applies) pairs; `applies(file)` says whether a translation in that
    folder may replace the text of an entry read from `file` (the packaged translations only
    translate packaged entries: an overlay that redefines a cause brings its own). A
    translation of an id nobody defined, of a field that is not text, or that changes a
    template's {placeholders} is a broken file. Returns the files read."""
    read_files: list[str] = []
    for folder, applies in folders:
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.glob("*.toml") if p.is_file()):
            doc = read(path)
            read_files.append(str(path))
            for kind, entries in doc.items():
                if kind == "meta":
                    continue
                if kind not in TEXT_FIELDS or not isinstance(entries, list):
                    raise error(str(path), kind, "unknown table (a language file holds [[cause]], "
                                "[[symptom]], [[check]], [[switch]], [[step]], [[signature]], [[harmless]])")
                for n, entry in enumerate(entries):
                    _merge_one(tables, kind, n, entry, str(path), applies, error)
    return read_files


def _merge_one(tables: Any, kind: str, n: int, entry: Any, file: str,
               applies: Callable[[str], bool], error: Callable[[str, str, str], Exception]) -> None:
    """Fatal: an unknown id (ids are stable, GUIDE.md), a field that is not text, a wrong type.
    Not fatal, the English text stays and `untranslated` reports it: a translation that went
    stale when the English changed (other placeholders, a fix or term no longer there), so an
    English edit never stops distdoctor from starting in Chinese."""
    entry_id = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(entry_id, str) or entry_id not in tables[kind]:
        raise error(file, f"{kind}[{n}].id", f"no {kind} with id {entry_id!r} to translate")
    where = f"{kind}.{entry_id}"
    src, english = tables[kind][entry_id]
    extra = set(entry) - {"id", *TEXT_FIELDS[kind]}
    if extra:
        raise error(file, where, f"not a text field: {', '.join(sorted(extra))} (only "
                    f"{', '.join(TEXT_FIELDS[kind])} are translated)")
    for name, text in entry.items():
        shape = dict if name in ("fix_notes", "terms") else str
        if name != "id" and (not isinstance(text, shape) or (shape is dict and not all(
                isinstance(v, str) for v in text.values()))):
            raise error(file, f"{where}.{name}", "must be a table of strings" if shape is dict
                        else "must be a string")
    if not applies(src):
        return
    merged = dict(english)
    for name, text in entry.items():
        if name == "fix_notes":
            merged["fixes"] = [{**fix, "note": text[fix_key(fix)]}
                               if isinstance(fix, dict) and text.get(fix_key(fix)) else fix
                               for fix in english.get("fixes") or []]
        elif name == "terms":
            terms = english.get("terms") or {}
            merged["terms"] = {**dict(terms), **{k: v for k, v in text.items() if k in terms}}
        elif name != "id" and not _placeholders_differ(str(english.get(name, "")), text):
            merged[name] = text
    tables[kind][entry_id] = (src, merged)


def fix_key(fix: Any) -> str:
    """A fix's note is translated under the first line of the fix's text (the code itself, which
    never changes by language), so adding or reordering fixes keeps every translation."""
    return str(fix.get("text", "")).split("\n", 1)[0].strip() if isinstance(fix, dict) else ""


def _placeholders_differ(english: str, text: str) -> str:
    """A check's template is filled with the probe's facts: a translation must name the same
    {placeholders}. '' when it does, else why not."""
    want, got = set(_PLACEHOLDER.findall(english)), set(_PLACEHOLDER.findall(text))
    return "" if want == got else f"placeholders differ (English {sorted(want)}, here {sorted(got)})"


def untranslated(base: Path = DATA_DIR, lang: str = "zh") -> list[str]:
    """'kind.id.field: why' for every English text of `base` (the packaged data, or an overlay)
    with no usable translation in base/<lang>/: missing, or stale (other placeholders, a fix
    or term the English no longer has). Signatures and harmless lines are optional."""
    tomllib = _tomllib()

    def load(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for path in sorted(folder.glob("*.toml")):
            for kind, entries in tomllib.loads(path.read_text(encoding="utf-8")).items():
                if kind in TEXT_FIELDS and isinstance(entries, list):
                    for e in entries:
                        if isinstance(e, dict) and isinstance(e.get("id"), str):
                            out.setdefault(kind, {})[e["id"]] = e
        return out

    english, other = load(base), load(base / lang)
    problems = []
    for kind in TEXT_FIELDS:
        for entry_id, entry in english.get(kind, {}).items():
            have = other.get(kind, {}).get(entry_id, {})
            for name in TEXT_FIELDS[kind]:
                where = f"{kind}.{entry_id}.{name}"
                if name == "fix_notes":
                    fixes = {fix_key(f): f for f in entry.get("fixes", []) if isinstance(f, dict)}
                    notes = have.get("fix_notes") or {}
                    problems += [f"{where}: no translation of the note of '{k}'" for k, f in fixes.items()
                                 if f.get("note") and not notes.get(k) and kind in REQUIRED]
                    problems += [f"{where}: no fix starts with '{k}' (stale)" for k in notes if k not in fixes]
                elif name == "terms":
                    terms, mine = entry.get("terms") or {}, have.get("terms") or {}
                    problems += [f"{where}: no translation of '{k}'" for k in terms
                                 if k not in mine and kind in REQUIRED]
                    problems += [f"{where}: no term '{k}' (stale)" for k in mine if k not in terms]
                elif name in have:
                    why = _placeholders_differ(str(entry.get(name, "")), str(have[name]))
                    if why:
                        problems.append(f"{where}: {why} (stale)")
                elif entry.get(name) and kind in REQUIRED:
                    problems.append(f"{where}: no translation")
    return problems


# --- display width -----------------------------------------------------------------------------

def cells(text: str) -> int:
    """Terminal cells `text` takes: a wide (CJK) character two, a combining mark none."""
    if text.isascii():
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def clip(text: str, limit: int, ellipsis: str = "...") -> str:
    """`text` cut to `limit` cells, ending with `ellipsis` when cut."""
    if cells(text) <= limit:
        return text
    room, out = max(limit - cells(ellipsis), 1), ""
    for ch in text:
        if cells(out + ch) > room:
            break
        out += ch
    return out + ellipsis


def pad(text: str, width: int) -> str:
    """`text` left-aligned in `width` cells (format's `<` counts characters, not cells)."""
    return text + " " * max(width - cells(text), 0)


# CJK punctuation that must not begin a line (it stays with the character before it)
_NO_START = set("，。、；：！？）」』》〉】,.;:!?)")
_NO_END = set("（「『《〈【")  # CJK opening brackets that must not end a line


def wrap(text: str, cols: int, first: str = "", rest: str = "") -> list[str]:
    """Wrap to `cols` cells. Text of narrow characters only goes to textwrap unchanged (English
    output stays what it was); otherwise a line may break between two wide characters, never
    inside a run of narrow ones (a command, an env line, an id), nor before CJK punctuation."""
    if cells(text) == len(text):
        return textwrap.wrap(text, cols, initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False, break_long_words=False) or [first.rstrip()]
    tokens = re.findall(r"\s+|[^\s\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]+|.", text)
    lines: list[str] = []
    line, started = first, False  # leading spaces of the text are kept, as textwrap keeps them
    for tok in tokens:
        if tok.isspace():
            if line.strip() or not started:
                line += " " * len(tok.replace("\n", " "))
            continue
        started = True
        if line.strip() and cells(line + tok) > cols and tok not in _NO_START:
            done, carry = line.rstrip(), ""
            if done[-1] in _NO_END and done[:-1].strip():  # an opening bracket starts the next line
                done, carry = done[:-1].rstrip(), done[-1]
            lines.append(done)
            line = rest + carry
        line += tok
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines
