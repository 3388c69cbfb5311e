"""The validated knowledge base kept in the cache (knowledge/cache.py), so a command does not parse
the TOML files and compile every pattern again to check it (~0.1 s of each start). The key is a
hash of every file the load reads (packaged, overlay, translations), the code that validates
them, and the load's options: a changed file or overlay is a miss."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import cache
from .model import Cause, Check, Fix, Harmless, KnowledgeBase, Rule, Signature, Step, Switch, Symptom

_CLASSES: dict[str, type] = {c.__name__: c for c in (Cause, Check, Fix, Harmless, KnowledgeBase, Rule,
                                                     Signature, Step, Switch, Symptom)}
# the modules whose code decides what a load returns or rejects
_CODE = ("loader.py", "model.py", "i18n.py", "regex_guard.py", "tree.py", "tomlload.py", "kbcache.py", "evaluate.py")
_HERE = Path(__file__).parent


def toml_files(folder: Path) -> list[Path]:
    """The files a load reads from a folder, in its order (loader._read_dir, i18n.merge_texts)."""
    return sorted(p for p in folder.glob("*.toml") if p.is_file())


def key(folders: list[Path], options: tuple) -> str | None:
    """The cache key of a load reading `folders` (those that are not folders are skipped, as the
    load skips a missing translation folder; a missing overlay is an error raised before this)."""
    files: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            files += toml_files(folder)
    try:
        parts = [repr(options), *cache.source_parts(*(str(_HERE / c) for c in _CODE)),
                 *cache.source_parts(*map(str, files))]
    except OSError:
        return None
    return cache.digest(parts)


def encode(value: Any) -> Any:
    """JSON-able form: tuples, mappings and dataclasses tagged (mappings as key-value pairs, so
    the only JSON objects are tags) for decode() to rebuild them exactly. TypeError for anything
    else (a TOML date in a check's value): that base is not cached."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, tuple):
        return {"t": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, MappingProxyType):
        return {"p": _pairs_of(value)}
    if isinstance(value, dict):
        return {"d": _pairs_of(value)}
    cls = type(value)
    if dataclasses.is_dataclass(value) and _CLASSES.get(cls.__name__) is cls:
        return {"c": cls.__name__, "f": [[f.name, encode(getattr(value, f.name))] for f in dataclasses.fields(value)]}
    raise TypeError(f"not cacheable: {cls.__name__}")


def _pairs_of(mapping: Mapping) -> list[list[Any]]:
    if not all(isinstance(k, str) for k in mapping):
        raise TypeError("a mapping key that is not a string")
    return [[k, encode(v)] for k, v in mapping.items()]


def _dict(pairs: Any) -> dict[str, Any]:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                              for p in pairs):
        raise ValueError("not a cached mapping")
    return dict(pairs)


def _tag(obj: dict[str, Any]) -> Any:
    """json's object_hook: every JSON object of a cache file is a tag (or the file's own
    {"key", "value"}); anything else is a foreign file (ValueError)."""
    if len(obj) == 1:
        ((tag, val),) = obj.items()
        if tag == "t" and isinstance(val, list):
            return tuple(val)
        if tag == "p":
            return MappingProxyType(_dict(val))
        if tag == "d":
            return _dict(val)
    elif len(obj) == 2:
        cls = _CLASSES.get(obj.get("c"))  # type: ignore[arg-type]
        if cls is not None and "f" in obj:
            return cls(**_dict(obj["f"]))
        if "key" in obj and "value" in obj:
            return obj
    raise ValueError("not a cached value")


def decode(text: str | bytes) -> Any:
    """The value encode() made, from its JSON; ValueError (or TypeError) for anything else."""
    return json.loads(text, object_hook=_tag)


def load(name: str, cache_key: str) -> KnowledgeBase | None:
    """The cached knowledge base, or None (a miss, or a file that does not decode to one)."""
    kb = cache.load(name, cache_key, object_hook=_tag)
    if not isinstance(kb, KnowledgeBase) or not all(
            isinstance(getattr(kb, f.name), Mapping) for f in dataclasses.fields(kb)
            if f.name not in ("version", "root_step", "sources")):
        return None
    return kb


def store(name: str, cache_key: str, kb: KnowledgeBase) -> None:
    try:
        doc = encode(kb)
    except (TypeError, RecursionError):
        return
    cache.store(name, cache_key, doc)
