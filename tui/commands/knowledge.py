"""`distdoctor knowledge validate|show|list`: check a site overlay, explain a cause, check or switch."""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import textwrap
from pathlib import Path
from typing import Any

from ..cli import UsageError
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
"""
TABLES = ("causes", "symptoms", "checks", "switches", "signatures", "harmless", "steps")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("knowledge", help="validate a site overlay, explain a cause, check or switch",
                            description="The knowledge base: causes, checks, switches, log signatures.",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--knowledge", metavar="DIR", default=argparse.SUPPRESS,
                        help="site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True,
                                    parser_class=type(parser))
    validate = actions.add_parser("validate", help="load and cross-check every file")
    validate.add_argument("dir", nargs="?", help="overlay folder to validate on top of the packaged data")
    validate.add_argument("--json", action="store_true", help="print machine-readable JSON")
    show = actions.add_parser("show", help="explain a cause, check, switch, symptom, signature or step")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="print machine-readable JSON")
    listing = actions.add_parser("list", help="list the ids of one table")
    listing.add_argument("table", choices=TABLES)
    listing.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from distdoctor.knowledge import KnowledgeError, load_knowledge

    overlay = getattr(args, "dir", None) or getattr(args, "knowledge", None)
    try:
        kb = load_knowledge(overlay)
    except KnowledgeError as exc:
        missing = exc.key == "-" and exc.file == _overlay_path(overlay)
        if args.action != "validate" or missing:
            # a missing overlay folder is bad usage everywhere; a broken file is bad input to
            # `show` and `list`, and the finding `validate` exists to report
            raise UsageError(f"knowledge: {exc}") from None
        if args.json:
            print_json({"valid": False, "file": exc.file, "key": exc.key, "reason": exc.reason})
        else:
            print(f"knowledge: invalid: {exc}")
        return 1
    if args.action == "validate":
        counts = {t: len(getattr(kb, t)) for t in TABLES}
        if args.json:
            print_json({"valid": True, "version": kb.version, "counts": counts, "files": list(kb.sources)})
        else:
            print(f"knowledge {kb.version}: valid ({', '.join(f'{n} {t}' for t, n in counts.items())})")
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
        print_json({"kind": type(item).__name__.lower(), **_plain(dataclasses.asdict(item))})
    else:
        print(explain(item))
    return 0


def _overlay_path(overlay: str | None) -> str | None:
    """The overlay folder load_knowledge reads: the argument, else $DISTDOCTOR_KNOWLEDGE."""
    from distdoctor.knowledge.loader import OVERLAY_ENV

    chosen = overlay or os.environ.get(OVERLAY_ENV)
    return str(Path(chosen)) if chosen else None


def unknown_id(kb: Any, item_id: str) -> str:
    """One line: the id as typed (cut short, control characters escaped) and the nearest ids."""
    shown = repr(item_id if len(item_id) <= 60 else item_id[:60] + "...")
    ids = [i for t in TABLES for i in getattr(kb, t)]
    lowered = {i.lower(): i for i in ids}
    near = difflib.get_close_matches(item_id.strip().lower()[:100], list(lowered), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(lowered[n] for n in near)}? " if near else ""
    return (f"no cause, check, switch, symptom, signature or step with id {shown} "
            f"({hint}see `distdoctor knowledge list causes`)")


def _plain(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in dict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _para(heading: str, text: str) -> list[str]:
    return [heading, textwrap.indent(textwrap.fill(text, 76), "  "), ""] if text else []


def explain(item: Any) -> str:
    """Fixed headings: what it is / why it happens / fix, then copy-pasteable lines."""
    kind = type(item).__name__.lower()
    lines = [f"{item.id}  ({kind})  {getattr(item, 'title', '')}".rstrip(), ""]
    if kind == "cause":
        lines += [f"Guide section {item.section}", ""]
        lines += _para("What it is", item.what) + _para("Why it happens", item.why)
        lines += _para("Evidence", item.evidence) + _para("Fix", item.fix)
        for fix in item.fixes:
            lines += fix.copy_lines()
    elif kind == "check":
        lines += _para("What it checks", f"probe {item.probe}: {item.fact} {item.op} {item.value!r} -> {item.status}")
        lines += _para("Finding", item.detail) + _para("Fix", item.fix)
        lines += _para("Causes", ", ".join(item.cause_ids))
    elif kind == "switch":
        lines += [f"  {item.env}={item.value}   (backend {item.backend}, bisection order {item.order})", ""]
        lines += _para("Why it matters", item.why) + _para("Permanent fix", item.permanent_fix)
        lines += _para("Implicates", ", ".join(item.implicates))
    else:
        for field in dataclasses.fields(item):
            if field.name != "id":
                lines += _para(field.name, str(_plain(getattr(item, field.name))))
    return "\n".join(lines).rstrip()
