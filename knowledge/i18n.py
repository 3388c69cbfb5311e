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
import sys
import textwrap
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterable

LANGS = ("en", "zh")
ENV = "DISTDOCTOR_LANG"
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")
DATA_DIR = Path(__file__).with_name("data")

# Fields of each knowledge table that are prose for a human; everything else (ids, env lines,
# commands, patterns, weights) is code and never translated. `fix_notes` stands for the notes
# of a cause's fixes, in the order of its `fixes`; `terms` maps the same term names to texts.
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
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


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
                                f"[[symptom]], [[check]], [[switch]], [[step]], [[signature]], [[harmless]])")
                for n, entry in enumerate(entries):
                    _merge_one(tables, kind, n, entry, str(path), applies, error)
    return read_files


def _merge_one(tables: Any, kind: str, n: int, entry: Any, file: str,
               applies: Callable[[str], bool], error: Callable[[str, str, str], Exception]) -> None:
    entry_id = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(entry_id, str) or entry_id not in tables[kind]:
        raise error(file, f"{kind}[{n}].id", f"no {kind} with id {entry_id!r} to translate")
    where = f"{kind}.{entry_id}"
    src, english = tables[kind][entry_id]
    extra = set(entry) - {"id", *TEXT_FIELDS[kind]}
    if extra:
        raise error(file, where, f"not a text field: {', '.join(sorted(extra))} (only "
                    f"{', '.join(TEXT_FIELDS[kind])} are translated)")
    if not applies(src):
        return
    merged = dict(english)
    for name, text in entry.items():
        if name == "id":
            continue
        if name == "fix_notes":
            merged["fixes"] = _notes(english.get("fixes"), text, file, where, error)
        elif name == "terms":
            merged["terms"] = _terms(english.get("terms") or {}, text, file, where, error)
        else:
            if not isinstance(text, str):
                raise error(file, f"{where}.{name}", "must be a string")
            _same_placeholders(str(english.get(name, "")), text, file, f"{where}.{name}", error)
            merged[name] = text
    tables[kind][entry_id] = (src, merged)


def _notes(fixes: Any, notes: Any, file: str, where: str, error: Callable) -> Any:
    if not isinstance(fixes, list) or not isinstance(notes, list) or len(notes) != len(fixes) \
            or not all(isinstance(x, str) for x in notes):
        raise error(file, f"{where}.fix_notes", "must be one string per fix, in the fixes' order")
    out = []
    for fix, note in zip(fixes, notes):
        if isinstance(fix, dict) and note:
            fix = {**fix, "note": note}
        out.append(fix)
    return out


def _terms(english: Any, terms: Any, file: str, where: str, error: Callable) -> dict[str, Any]:
    if not isinstance(terms, dict) or not all(isinstance(v, str) for v in terms.values()):
        raise error(file, f"{where}.terms", "must be a table of strings")
    unknown = set(terms) - set(english)
    if unknown:
        raise error(file, f"{where}.terms", f"no such term: {', '.join(sorted(unknown))}")
    return {**dict(english), **terms}


def _same_placeholders(english: str, text: str, file: str, where: str, error: Callable) -> None:
    """A check's template is filled with the probe's facts: a translation must name the same."""
    want, got = set(_PLACEHOLDER.findall(english)), set(_PLACEHOLDER.findall(text))
    if want != got:
        raise error(file, where, f"placeholders differ from the English text (English "
                    f"{sorted(want)}, here {sorted(got)})")


def untranslated(base: Path = DATA_DIR, lang: str = "zh") -> list[str]:
    """'kind.id.field' for every packaged English text with no translation in `lang`
    (every required table; signatures and harmless lines are optional)."""
    tomllib = _tomllib()

    def load(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for path in sorted(folder.glob("*.toml")):
            for kind, entries in tomllib.loads(path.read_text(encoding="utf-8")).items():
                if kind in TEXT_FIELDS and isinstance(entries, list):
                    for e in entries:
                        out.setdefault(kind, {})[e["id"]] = e
        return out

    english, other = load(base), load(base / lang)
    missing = []
    for kind in REQUIRED:
        for entry_id, entry in english.get(kind, {}).items():
            have = other.get(kind, {}).get(entry_id, {})
            for name in TEXT_FIELDS[kind]:
                if name == "fix_notes":
                    wanted = any(f.get("note") for f in entry.get("fixes", []))
                    notes = have.get("fix_notes") or []
                    gaps = [i for i, f in enumerate(entry.get("fixes", []))
                            if f.get("note") and not (i < len(notes) and notes[i])]
                    if wanted and gaps:
                        missing.append(f"{kind}.{entry_id}.fix_notes{gaps}")
                elif name == "terms":
                    gone = sorted(set(entry.get("terms", {})) - set(have.get("terms", {})))
                    if gone:
                        missing.append(f"{kind}.{entry_id}.terms{gone}")
                elif entry.get(name) and not have.get(name):
                    missing.append(f"{kind}.{entry_id}.{name}")
    return missing


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
