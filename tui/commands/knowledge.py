"""`distdoctor knowledge validate|show|list`: check a site overlay, explain a cause, check or switch."""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.evaluate import spelled
from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import print_json

EPILOG = """\
examples:
  distdoctor knowledge validate                 the packaged knowledge base
  distdoctor knowledge validate /etc/distdoctor  a site overlay on top of it
  distdoctor knowledge show p2p-unsupported      what / why / fix for a cause
  distdoctor knowledge list causes

A site overlay is a folder of .toml files using the same tables ([[cause]], [[check]],
[[switch]], [[signature]], [[harmless]], [[symptom]], [[step]]); an entry with an existing id
replaces it, a new id adds one. Point at it with --knowledge DIR or $DISTDOCTOR_KNOWLEDGE.
Its zh/ folder may hold the Chinese texts of its entries (the same ids, text fields only, as
in the packaged data/zh/); validate then requires every text in both languages.
"""
TABLES = ("causes", "symptoms", "checks", "switches", "signatures", "harmless", "steps", "rules")
KNOWLEDGE_HELP = "site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)"
VALIDATE_EPILOG = """\
examples:
  distdoctor knowledge validate                   the packaged knowledge base
  distdoctor knowledge validate /etc/distdoctor   a site overlay on top of it
  distdoctor knowledge validate --knowledge /etc/distdoctor --json

exit codes: 0 valid, 1 an overlay file is invalid (the file, the key and why are
            printed), 2 the overlay folder is missing, or bad usage
"""
SHOW_EPILOG = """\
examples:
  distdoctor knowledge show p2p-unsupported       a cause: what / why / fix
  distdoctor knowledge show hang                  a symptom and the causes it raises
  distdoctor knowledge show logs --json           a method step, machine-readable
  distdoctor knowledge show DL101                 a log rule: mechanism, evidence, when silent, examples
  distdoctor knowledge show p2p-unsupported --knowledge /etc/distdoctor

exit codes: 0 shown, 2 no such id, a broken overlay, or bad usage
"""
LIST_EPILOG = """\
examples:
  distdoctor knowledge list causes
  distdoctor knowledge list switches --json
  distdoctor knowledge list causes --knowledge /etc/distdoctor

exit codes: 0 listed, 2 a broken overlay, or bad usage
"""
ID_HELP = ("the id of a cause, check, switch, symptom, signature or step, e.g. p2p-unsupported, "
           "or of a log rule, e.g. DL101 (`distdoctor knowledge list TABLE` lists them)")


def register(sub: argparse._SubParsersAction) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = sub.add_parser("knowledge", help=t("validate a site overlay, explain a cause, check or switch"),
                            description=t("The knowledge base: causes, checks, switches, log signatures."),
                            epilog=t(EPILOG), formatter_class=raw)
    parser.add_argument("--knowledge", metavar="DIR", default=argparse.SUPPRESS, help=t(KNOWLEDGE_HELP))
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True,
                                    parser_class=type(parser))
    validate = actions.add_parser("validate", help=t("load and cross-check every file"),
                                  description=t("Load the packaged knowledge base and an overlay on "
                                              "top of it, and cross-check every file."),
                                  epilog=t(VALIDATE_EPILOG), formatter_class=raw)
    validate.add_argument("dir", nargs="?", metavar="DIR",
                          help=t("overlay folder to validate on top of the packaged data "
                               "(the same as --knowledge DIR)"))
    show = actions.add_parser("show", help=t("explain a cause, check, switch, symptom, signature, step or log rule"),
                              description=t("Explain one entry of the knowledge base."),
                              epilog=t(SHOW_EPILOG), formatter_class=raw)
    show.add_argument("id", metavar="ID", help=t(ID_HELP))
    listing = actions.add_parser("list", help=t("list the ids of one table"),
                                 description=t("List the ids of one table of the knowledge base."),
                                 epilog=t(LIST_EPILOG), formatter_class=raw)
    listing.add_argument("table", choices=TABLES)
    for action in (validate, show, listing):
        action.add_argument("--json", action="store_true", help=t("print machine-readable JSON"))
        # after the action too, as on every other command; SUPPRESS keeps a value given before it
        action.add_argument("--knowledge", metavar="DIR", default=argparse.SUPPRESS, help=t(KNOWLEDGE_HELP))
        action.add_argument("--lang", choices=("en", "zh"), default=argparse.SUPPRESS,
                            help=t("language of the text output (also $DISTDOCTOR_LANG, else the locale)"))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from distdoctor.knowledge import KnowledgeError, load_knowledge

    given = getattr(args, "dir", None), getattr(args, "knowledge", None)
    if all(given) and _overlay_path(given[0]) != _overlay_path(given[1]):
        raise UsageError(t("validate {dir} and --knowledge {other} name two overlays: give one", dir=given[0],
                           other=given[1]))
    overlay = given[0] or given[1]
    try:
        kb = load_knowledge(overlay)
        if args.action == "validate":  # the other language's files too (a broken zh/ file)
            load_knowledge(overlay, lang="zh" if i18n.resolve() == "en" else "en")
    except KnowledgeError as exc:
        missing = exc.key == "-" and exc.file == _overlay_path(overlay)
        if args.action != "validate" or missing:
            # a missing overlay folder is bad usage everywhere; a broken file is bad input to
            # `show` and `list`, and the finding `validate` exists to report
            raise UsageError(t("knowledge: {error}", error=exc)) from None
        if args.json:
            print_json({"valid": False, "file": exc.file, "key": exc.key, "reason": exc.reason})
        else:
            print(t("knowledge: invalid: {error}", error=exc))
        return 1
    if args.action == "validate":
        missing = _untranslated(overlay)
        if missing:
            file, problem = missing[0]
            key, _sep, why = problem.partition(": ")
            reason = t("{why} ({n} text(s) lack a usable Chinese translation)", why=why, n=len(missing))
            if args.json:
                print_json({"valid": False, "file": file, "key": key, "reason": reason,
                            "untranslated": [f"{f}: {k}" for f, k in missing]})
            else:
                print(t("knowledge: invalid: {error}", error=f"{file}: {key}: {reason}"))
                for f, k in missing[1:20]:
                    print(f"  {f}: {k}")
            return 1
        counts = {table: len(getattr(kb, table)) for table in TABLES}
        if args.json:
            print_json({"valid": True, "version": kb.version, "counts": counts, "files": list(kb.sources)})
        else:
            shown = ", ".join(f"{n} {table}" for table, n in counts.items())
            print(t("knowledge {version}: valid ({counts})", version=kb.version, counts=shown))
            for src in kb.sources:
                print(f"  {src}")
        return 0
    if args.action == "list":
        table = getattr(kb, args.table)
        if args.json:
            print_json(sorted(table))
        else:
            for item_id, item in table.items():
                print(f"{item_id:32} {getattr(item, 'title', getattr(item, 'description', ''))}")
        return 0
    item = kb.find(args.id)
    if item is None:
        raise UsageError(unknown_id(kb, args.id))
    if args.json:
        print_json({"kind": type(item).__name__.lower(), **_plain(item)})
    else:
        print(explain(item))
    return 0


def _untranslated(overlay: str | None) -> list[tuple[str, str]]:
    """(folder, 'kind.id.field: why') for each text without a usable Chinese translation
    (missing or stale): the packaged ones always; an overlay's once it has a zh/ folder (a
    site that writes only English stays valid)."""
    from distdoctor.knowledge.i18n import DATA_DIR

    folders = [DATA_DIR] + [Path(p) for p in [_overlay_path(overlay)] if p and (Path(p) / "zh").is_dir()]
    return [(str(folder / "zh"), key) for folder in folders for key in i18n.untranslated(folder)]


def _overlay_path(overlay: str | None) -> str | None:
    """The overlay folder load_knowledge reads: the argument, else $DISTDOCTOR_KNOWLEDGE."""
    from distdoctor.knowledge.loader import overlay_dir

    chosen = overlay_dir(overlay)[0]
    return str(Path(chosen)) if chosen else None


def unknown_id(kb: Any, item_id: str) -> str:
    """One line: the id as typed (cut short, control characters escaped), the nearest ids if any
    are close, and how to list them all."""
    shown = repr(item_id if len(item_id) <= 60 else item_id[:60] + "...")
    ids = [i for table in TABLES for i in getattr(kb, table)]  # a log rule's too: dl101 -> DL101
    lowered = {i.lower(): i for i in ids}
    # 0.7: one typo in a four-letter id still matches (hnag -> hang), "bogus" -> "logs" does not
    near = difflib.get_close_matches(item_id.strip().lower()[:100], list(lowered), n=3, cutoff=0.7)
    hint = f"did you mean {', '.join(lowered[n] for n in near)}? " if near else ""
    # the line names the tables of the knowledge base proper; a log rule's id (DL101) is found too
    # (`knowledge list rules`), and a near miss of one is suggested above
    return (f"no cause, check, switch, symptom, signature or step with id {shown} "
            f"({hint}every id: `distdoctor knowledge list {'|'.join(TABLES[:-1])}`)")


def _plain(value: Any) -> Any:
    # not dataclasses.asdict: it deep-copies, and a step's terms or a symptom's weights are
    # read-only mappings that cannot be copied (show logs --json crashed)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in dict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ids and commands stay whole: never split at a hyphen or inside a long word
_WRAP = {"width": 76, "break_on_hyphens": False, "break_long_words": False}
LABELS = {"causes": "raises"}  # a symptom's causes: the weight it adds to each


def _(message: str, **values: Any) -> str:
    """A heading or fixed phrase in the output's language (knowledge/i18n.py)."""
    return i18n.t(message, **values)


def _fill(text: str, first: str = "", rest: str = "") -> str:
    """textwrap.fill by display width: Chinese lines break between characters, and a CJK
    character counts two cells (English goes through textwrap unchanged)."""
    return "\n".join(i18n.wrap(text, _WRAP["width"], first, rest))


def _para(heading: str, text: str) -> list[str]:
    return [_(heading), textwrap.indent(_fill(text), "  "), ""] if text else []


def _field(name: str, value: Any) -> list[str]:
    """One field of a symptom, step, signature or harmless line, readable: a table of weights,
    `name: a, b` for a list, verbatim one-liners for patterns and ids, wrapped prose otherwise."""
    label = _(LABELS.get(name, name))
    if isinstance(value, Mapping):
        if not value:
            return []
        width = max(len(str(k)) for k in value)
        if all(isinstance(v, (int, float)) for v in value.values()):
            rows = [f"  {k:<{width}}  {float(v):+}" for k, v in value.items()]
        else:
            rows = [_fill(f"{k}: {v}", "  ", "    ") for k, v in value.items()]
        return [label, *rows, ""]
    if isinstance(value, (list, tuple)):
        return [_fill(f"{label}: {', '.join(map(str, value))}", "", "  "), ""] if value else []
    if not isinstance(value, str) or name == "pattern" or " " not in value:
        # a regex must be read exactly as written; a number or an id fits on one line
        return [f"{label}: {value}", ""] if value != "" else []
    return _para(label, value)


def _rule(rule: Any) -> list[str]:
    """A log rule as a linter documents one: what it encodes, the evidence it needs, when it stays
    silent, then its firing example and its silent twin, verbatim (log lines are never wrapped)."""
    lines = [_("Cause: {cause}", cause=rule.cause)]
    if rule.retired:
        lines.append(_("Retired: the analysis no longer applies this rule; its id is never reused"))
    if rule.symptom:
        lines.append(_("Symptom: {symptom}", symptom=rule.symptom))
    lines.append("")
    lines += _para("What it encodes", rule.mechanism) + _para("Evidence it needs", rule.evidence)
    lines += _para("When it stays silent", rule.silent)
    for heading, text in (("Example", rule.example), ("Silent twin", rule.silent_example)):
        lines += [_(heading), *("  " + ln for ln in text.strip("\n").splitlines()), ""]
    return lines


def explain(item: Any) -> str:
    """Fixed headings: what it is / why it happens / fix, then copy-pasteable lines."""
    kind = type(item).__name__.lower()
    # the kind's name in the output's language ("step" is also a log word: its own key)
    shown = _(f"knowledge kind: {kind}")
    lines = [f"{item.id}  ({kind if shown.startswith('knowledge kind: ') else shown})  "
             f"{getattr(item, 'title', '')}".rstrip(), ""]
    if kind == "cause":
        lines += [_("Guide section {section}", section=item.section), ""]
        lines += _para("What it is", item.what) + _para("Why it happens", item.why)
        lines += _para("Evidence", item.evidence) + _para("Fix", item.fix)
        for fix in item.fixes:
            lines += fix.copy_lines()
    elif kind == "check":
        lines += _para("What it checks", _("probe {probe}", probe=item.probe)
                       + f": {item.fact} {item.op} {spelled(item.value)} -> {item.status}")
        lines += _para("Finding", item.detail) + _para("Fix", item.fix)
        lines += _para("Causes", ", ".join(item.cause_ids))
    elif kind == "rule":
        lines += _rule(item)
    elif kind == "switch":
        lines += [f"  {item.env}={item.value}   "
                  + _("(backend {backend}, bisection order {order})", backend=item.backend, order=item.order), ""]
        lines += _para("Why it matters", item.why) + _para("Permanent fix", item.permanent_fix)
        lines += _para("Implicates", ", ".join(item.implicates))
    else:
        for field in dataclasses.fields(item):
            if field.name not in ("id", "title"):  # both are on the first line
                lines += _field(field.name, getattr(item, field.name))
    return "\n".join(lines).rstrip()
