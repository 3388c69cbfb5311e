"""Loads the TOML knowledge files (and a site overlay) into a validated KnowledgeBase."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import i18n, kbcache
from .errors import KnowledgeError
from .frozen import Frozen, frozen
from .lazyre import lazy
from .model import (
    STATUSES,
    Cause,
    Check,
    Fix,
    Harmless,
    KnowledgeBase,
    Rule,
    Signature,
    Step,
    Switch,
    Symptom,
)

DATA_DIR = Path(__file__).with_name("data")
OVERLAY_ENV = "DISTDOCTOR_KNOWLEDGE"
OPS = ("eq", "ne", "lt", "le", "gt", "ge", "true", "false", "present", "absent",
       "nonempty", "empty", "in", "not_in", "contains", "matches")
FIX_KINDS = ("env", "command", "code")
PREMISES = ("crash", "no-crash")
RECURRENCES = ("will-recur", "may-pass", "exclude-node")
REPRO_PASS = ("rules-out", "points-at")
NEEDS = ("gpu", "nccl")
ANSWER_NEEDS = ("culprit", "waiters")
# What the log analyser reads from a signature's tags (knowledge/logs): anything else is a typo.
SIGNATURE_TAGS = ("failure", "crash", "wait", "consequence", "context", "tail", "end", "resume",
                  "launcher", "spawn", "main-work", "catch-all", "multi-node", "store-server", "port-taken")
MAX_WEIGHT = 100.0  # a signature weight or symptom prior; scores must stay finite numbers
ID_RE = lazy(r"^[a-z0-9][a-z0-9_.-]*$")  # lazy: only a load the cache did not hold checks ids
# a log rule's id is a linter's: DL and three digits, never reused (knowledge/data/rules.toml)
RULE_ID_RE = lazy(r"^DL[1-9]\d\d$")
# A knowledge file is a few dozen KiB and nests 5 deep ([[cause]] -> fixes -> fix table).
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 8




@frozen
class _Raw(Frozen):
    """Entries gathered from files before validation; later files override by id (the three
    containers fill up; the fields are never set again)."""

    tables: dict[str, dict[str, tuple[str, dict[str, Any]]]]
    meta: dict[str, Any]
    sources: list[str]


KINDS = ("cause", "symptom", "check", "switch", "signature", "harmless", "step", "rule")


def _read_dir(directory: Path, raw: _Raw, origin: str = "") -> None:
    if not directory.is_dir():
        what = "not a directory" if directory.exists() else "no such directory"
        raise KnowledgeError(str(directory), "-", what + origin)
    # regular files only: a FIFO or device named *.toml would block the read or never end
    for path in sorted(p for p in directory.glob("*.toml") if p.is_file()):
        doc = _read_toml(path)
        raw.sources.append(str(path))
        for key, value in doc.items():
            if key == "meta":
                if not isinstance(value, dict):
                    raise KnowledgeError(str(path), key, "must be a table ([meta])")
                raw.meta.update(value)
                continue
            if key not in KINDS:
                raise KnowledgeError(str(path), key, f"unknown table (expected one of {', '.join(KINDS)})")
            if not isinstance(value, list):
                raise KnowledgeError(str(path), key, f"must be an array of tables ([[{key}]])")
            seen: set[str] = set()
            for n, entry in enumerate(value):
                entry_id = entry.get("id") if isinstance(entry, dict) else None
                if not isinstance(entry_id, str) or not (RULE_ID_RE if key == "rule" else ID_RE).match(entry_id):
                    raise KnowledgeError(str(path), f"{key}[{n}].id", "missing or malformed id"
                                         + (" (a log rule's id is DL and three digits)" if key == "rule" else ""))
                if key == "rule" and entry_id in seen:
                    raise KnowledgeError(str(path), f"{key}[{n}].id", f"{entry_id} is given twice: rule ids "
                                         "are unique and never reused")
                seen.add(entry_id)
                raw.tables[key][entry_id] = (str(path), entry)


def _read_toml(path: Path) -> dict[str, Any]:
    """One knowledge file, size- and depth-limited; every failure is a one-line KnowledgeError."""
    from . import tomlload  # not needed when the cache answers (kbcache)

    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise KnowledgeError(str(path), "-", f"too big for a knowledge file ({size} bytes; at most "
                                 f"{MAX_FILE_BYTES >> 20} MiB)")
        doc = tomlload.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeError(str(path), "-", f"unreadable: {exc}") from None
    except tomlload.TOMLDecodeError as exc:
        raise KnowledgeError(str(path), "-", f"invalid TOML: {exc}") from None
    except RecursionError:
        raise KnowledgeError(str(path), "-", "invalid TOML: nested deeper than the parser's stack "
                             f"allows (a knowledge file nests at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise KnowledgeError(str(path), "-", f"invalid TOML: {str(exc).split(';')[0]}") from None
    where = _too_deep(doc)
    if where:
        raise KnowledgeError(str(path), where, f"nested more than {MAX_DEPTH} levels deep")
    return doc


def _too_deep(doc: Any) -> str:
    """The key path of the first value nested past MAX_DEPTH ('' when none); iterative."""
    todo: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while todo:
        value, where, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return where or "-"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                name = f"{where}[{key}]" if isinstance(value, list) else \
                    (f"{where}.{key}" if where else str(key))
                todo.append((item, name[:200], depth + 1))
    return ""


def _build(kind: str, cls: type, file: str, entry: dict[str, Any],
           convert: dict[str, Callable[[Any], Any]]) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = set(entry) - names
    where = f"{kind}.{entry['id']}"
    if unknown:
        raise KnowledgeError(file, where, f"unknown field(s): {', '.join(sorted(unknown))}")
    required = {f.name for f in fields(cls) if f.default is f.default_factory is MISSING}
    missing = required - set(entry)
    if missing:
        raise KnowledgeError(file, where, f"missing field(s): {', '.join(sorted(missing))}")
    values = dict(entry)
    for name, fn in convert.items():
        if name in values:
            try:
                values[name] = fn(values[name])
            except (TypeError, ValueError, KeyError, re.error) as exc:
                raise KnowledgeError(file, f"{where}.{name}", str(exc)) from None
    for f in fields(cls):  # annotations are strings here (from __future__ import annotations)
        want, words = {"str": (str, "a string"), "int": (int, "an integer")}.get(str(f.type), (None, ""))
        if want and f.name in values and not isinstance(values[f.name], want):
            raise KnowledgeError(file, f"{where}.{f.name}",
                                 f"must be {words}, not {type(values[f.name]).__name__}")
    return cls(**values)


def _fixes(items: Iterable[Any]) -> tuple[Fix, ...]:
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError("each fix must be a table with a text string")
        if item.get("kind") not in FIX_KINDS:
            raise ValueError(f"fix kind must be one of {FIX_KINDS}")
        out.append(Fix(kind=item["kind"], text=item["text"], note=item.get("note", "")))
    return tuple(out)


def _weights(table: Any) -> MappingProxyType:
    return MappingProxyType({str(k): float(v) for k, v in dict(table).items()})


def _strings(items: Any) -> tuple[str, ...]:
    """A TOML array of strings (ids, tags): anything else is a broken entry, not a crash later."""
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError("must be an array of strings")
    return tuple(items)


def _regex(pattern: str) -> str:
    """A pattern that compiles and has no catastrophic-backtracking shape (the timed check
    runs later, for overlay patterns only: the packaged ones are tested)."""
    from . import regex_guard

    if not isinstance(pattern, str):
        raise ValueError("must be a string")
    re.compile(pattern)
    regex_guard.check(pattern, timed=False)
    return pattern


def _flag(value: Any) -> bool:
    """A TOML boolean (`retired = true`): a string "false" would read as true."""
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _string(value: Any) -> str:
    """A pattern kept unchecked (patterns=False): still a string, so the model stays typed."""
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def overlay_dir(overlay: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """The site overlay folder (the argument, else $DISTDOCTOR_KNOWLEDGE; None when neither) and
    where it came from (' (set by $DISTDOCTOR_KNOWLEDGE)' or ''). The one place that decides."""
    if overlay:
        return os.fspath(overlay), ""
    chosen = (os.environ if env is None else env).get(OVERLAY_ENV)
    return (chosen, f" (set by ${OVERLAY_ENV})") if chosen else (None, "")


def load_knowledge(overlay: str | os.PathLike[str] | None = None, *,
                   base: Path = DATA_DIR, use_env: bool = True, tree: bool = True,
                   patterns: bool = True, lang: str | None = None) -> KnowledgeBase:
    """Load the packaged knowledge, then the overlay (argument, else $DISTDOCTOR_KNOWLEDGE).
    `tree=False` skips the tree check, which imports networkx (~0.25 s), and `patterns=False`
    skips compiling each log pattern to check it (~15 ms): the app does both after its first
    screen is up, with a full load. `lang` (default: knowledge/i18n.py's choice) puts the texts of
    data/<lang>/ and the overlay's <lang>/ over the English ones; ids and code never change."""
    overlay, origin = overlay_dir(overlay, os.environ if use_env else {})
    lang = i18n.resolve(lang)
    # a load is a function of the files it reads, the code and these options: cached (kbcache)
    folders = [base, *([Path(overlay)] if overlay else [])]
    folders += [f / lang for f in folders] if lang != "en" else []
    options = (str(base), overlay, lang, tree, patterns)
    name = f"knowledge-{lang}-{'t' if tree else ''}{'p' if patterns else ''}"
    cache_key = kbcache.key(folders, options) if base.is_dir() and (not overlay or Path(overlay).is_dir()) else None
    if cache_key:
        kb = kbcache.load(name, cache_key)
        if kb is not None:
            return kb
    kb = _load(base, overlay, origin, lang, tree, patterns)
    # stored only when the files did not change while they were read
    if cache_key and kbcache.key(folders, options) == cache_key:
        kbcache.store(name, cache_key, kb)
    return kb


def _load(base: Path, overlay: str | None, origin: str, lang: str, tree: bool, patterns: bool) -> KnowledgeBase:
    raw = _Raw({k: {} for k in KINDS}, {}, [])
    _read_dir(base, raw)
    packaged_rules = set(raw.tables["rule"])
    if overlay:
        _read_dir(Path(overlay), raw, origin)
    if lang != "en":  # packaged translations translate packaged entries; an overlay's, any
        home = base.resolve()
        folders = [(base / lang, lambda file: Path(file).resolve().parent == home)]
        folders += [(Path(overlay) / lang, lambda file: True)] if overlay else []
        raw.sources.extend(i18n.merge_texts(raw.tables, folders, _read_toml, KnowledgeError))
    tuple_ = _strings
    regex = _regex if patterns else _string
    specs: dict[str, tuple[type, dict[str, Callable[[Any], Any]]]] = {
        "cause": (Cause, {"fixes": _fixes, "needs": tuple_, "answer_needs": tuple_}),
        "symptom": (Symptom, {"causes": _weights}),
        "check": (Check, {"cause_ids": tuple_, "unless": tuple_}),
        "switch": (Switch, {"implicates": tuple_}),
        "signature": (Signature, {"pattern": regex, "tags": tuple_, "weight": float}),
        "harmless": (Harmless, {"pattern": regex}),
        "step": (Step, {"next": tuple_, "terms": lambda t: MappingProxyType(dict(t))}),
        "rule": (Rule, {"retired": _flag}),
    }
    built: dict[str, dict[str, Any]] = {}
    files: dict[tuple[str, str], str] = {}
    for kind, (cls, convert) in specs.items():
        built[kind] = {}
        for entry_id, (file, entry) in raw.tables[kind].items():
            built[kind][entry_id] = _build(kind, cls, file, entry, convert)
            files[(kind, entry_id)] = file
    kb = KnowledgeBase(
        version=str(raw.meta.get("version", "0")),
        causes=MappingProxyType(built["cause"]),
        symptoms=MappingProxyType(built["symptom"]),
        checks=MappingProxyType(built["check"]),
        switches=MappingProxyType(built["switch"]),
        signatures=MappingProxyType(built["signature"]),
        harmless=MappingProxyType(built["harmless"]),
        steps=MappingProxyType(built["step"]),
        root_step=str(raw.meta.get("root_step", "classify")),
        sources=tuple(raw.sources),
        rules=MappingProxyType(built["rule"]),
    )
    for rule_id in set(kb.rules) - packaged_rules:
        # the code passes a rule's id: a rule the code does not apply would document nothing
        raise KnowledgeError(files[("rule", rule_id)], f"rule.{rule_id}", "a log rule is code: an overlay "
                             "may reword a packaged rule, not add one")
    validate(kb, lambda kind, entry_id: files.get((kind, entry_id), "?"), tree=tree,
             patterns=patterns)
    if patterns:
        _time_overlay_patterns(kb, files, base)
    return kb


def _time_overlay_patterns(kb: KnowledgeBase, files: dict[tuple[str, str], str], base: Path) -> None:
    """Run every overlay pattern (signatures, harmless lines, `matches` checks) against strings
    built to make it backtrack, under a time budget; the packaged ones are tested instead."""
    from . import regex_guard

    base_dir = str(base.resolve())
    tables = (("signature", kb.signatures, "pattern"), ("harmless", kb.harmless, "pattern"),
              ("check", kb.checks, "value"))
    for kind, table, attr in tables:
        for entry_id, entry in table.items():
            file = files.get((kind, entry_id), "?")
            # resolved both sides: a checkout reached through a symbolic link is still packaged
            if os.path.dirname(os.path.realpath(file)).startswith(base_dir):
                continue
            if kind == "check" and getattr(entry, "op", "") != "matches":
                continue
            pattern = getattr(entry, attr)
            try:
                if not isinstance(pattern, str):
                    raise ValueError("must be a string (a regular expression)")
                re.compile(pattern)
                regex_guard.check(pattern, timed=True)
            except (ValueError, re.error) as exc:
                raise KnowledgeError(file, f"{kind}.{entry_id}.{attr}", str(exc)) from None


def _need_weight(weight: float, file: str, key: str) -> None:
    if not (math.isfinite(weight) and 0 <= weight <= MAX_WEIGHT):
        raise KnowledgeError(file, key, f"must be a number from 0 to {MAX_WEIGHT:g}, not {weight!r}")


def validate(kb: KnowledgeBase, file_of: Callable[[str, str], str], tree: bool = True,
             patterns: bool = True) -> None:
    """Resolve every cross-reference; raise KnowledgeError on the first broken one."""
    def need_cause(kind: str, entry_id: str, key: str, cause_id: str) -> None:
        if cause_id not in kb.causes:
            raise KnowledgeError(file_of(kind, entry_id), f"{kind}.{entry_id}.{key}",
                                 f"unknown cause id {cause_id!r}")

    for s in kb.symptoms.values():
        if s.kind not in ("hang", "error"):
            raise KnowledgeError(file_of("symptom", s.id), f"symptom.{s.id}.kind", "must be hang or error")
        if s.parent and s.parent not in kb.symptoms:
            raise KnowledgeError(file_of("symptom", s.id), f"symptom.{s.id}.parent", f"unknown symptom {s.parent!r}")
        for c in s.causes:
            need_cause("symptom", s.id, "causes", c)
    for cause in kb.causes.values():
        for key, value, allowed in (("premise", cause.premise, PREMISES), ("recurrence", cause.recurrence, RECURRENCES),
                                    ("repro_pass", cause.repro_pass, REPRO_PASS)):
            if value and value not in allowed:
                raise KnowledgeError(file_of("cause", cause.id), f"cause.{cause.id}.{key}",
                                     f"unknown {key} {value!r} (one of {', '.join(allowed)})")
        unknown = set(cause.answer_needs) - set(ANSWER_NEEDS)
        if unknown:
            raise KnowledgeError(file_of("cause", cause.id), f"cause.{cause.id}.answer_needs",
                                 f"unknown value(s) {', '.join(sorted(unknown))} (one of {', '.join(ANSWER_NEEDS)})")
        unknown = set(cause.needs) - set(NEEDS)
        if unknown:
            raise KnowledgeError(file_of("cause", cause.id), f"cause.{cause.id}.needs",
                                 f"unknown need(s) {', '.join(sorted(unknown))} (one of {', '.join(NEEDS)})")
    from .evaluate import value_error  # only when a knowledge base is validated (not from the cache)
    for c in kb.checks.values():
        if c.op not in OPS:
            raise KnowledgeError(file_of("check", c.id), f"check.{c.id}.op", f"unknown op {c.op!r} (one of {', '.join(OPS)})")
        if c.status not in STATUSES:
            raise KnowledgeError(file_of("check", c.id), f"check.{c.id}.status", f"unknown status {c.status!r}")
        why = value_error(c.op, c.value)
        if why:
            raise KnowledgeError(file_of("check", c.id), f"check.{c.id}.value", why)
        for cid in c.cause_ids:
            need_cause("check", c.id, "cause_ids", cid)
        for other in c.unless:
            if kb.checks.get(other) is None or kb.checks[other].probe != c.probe or other == c.id:
                raise KnowledgeError(file_of("check", c.id), f"check.{c.id}.unless",
                                     f"{other!r} is not another check of probe {c.probe!r}")
    for sw in kb.switches.values():
        for cid in sw.implicates:
            need_cause("switch", sw.id, "implicates", cid)
    for s in kb.symptoms.values():
        for c, w in s.causes.items():
            _need_weight(w, file_of("symptom", s.id), f"symptom.{s.id}.causes.{c}")
    for sig in kb.signatures.values():
        where = f"signature.{sig.id}"
        if sig.cause != "other":
            need_cause("signature", sig.id, "cause", sig.cause)
        _need_weight(sig.weight, file_of("signature", sig.id), f"{where}.weight")
        unknown = sorted(set(sig.tags) - set(SIGNATURE_TAGS))
        if unknown:
            raise KnowledgeError(file_of("signature", sig.id), f"{where}.tags",
                                 f"unknown tag {unknown[0]!r} (one of {', '.join(SIGNATURE_TAGS)})")
    names: dict[str, str] = {}
    for rule in kb.rules.values():
        where = f"rule.{rule.id}"
        need_cause("rule", rule.id, "cause", rule.cause)
        if rule.symptom and rule.symptom not in kb.symptoms:
            raise KnowledgeError(file_of("rule", rule.id), f"{where}.symptom", f"unknown symptom {rule.symptom!r}")
        if rule.name in names:
            raise KnowledgeError(file_of("rule", rule.id), f"{where}.name",
                                 f"{rule.name!r} is also the name of {names[rule.name]}")
        names[rule.name] = rule.id
        for key in ("name", "mechanism", "evidence", "silent", "example", "silent_example"):
            if not getattr(rule, key).strip():
                raise KnowledgeError(file_of("rule", rule.id), f"{where}.{key}", "must not be empty")
    for kind, table in (("signature", kb.signatures), ("harmless", kb.harmless)) if patterns else ():
        for entry in table.values():
            # a pattern that matches an empty line matches every line: all of it would be evidence
            if re.search(entry.pattern, "") is not None:
                raise KnowledgeError(file_of(kind, entry.id), f"{kind}.{entry.id}.pattern",
                                     "matches an empty line, so it would match every line")
    if tree:
        from .tree import check_tree  # networkx is only needed here

        check_tree(kb, file_of)
