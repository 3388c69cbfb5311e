"""`distdoctor history`: past incidents, the nodes that keep failing, and what fixed them."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, print_json
from .exitcodes import OK, PROBLEM

DESCRIPTION = """\
Every diagnosis a command with --session (or the app) concludes is kept in an
incident store: time, session, hosts and ranks, the culprit, the causes with
their confidence, the failure signature (the first failure line with numbers,
addresses, paths, hosts, ports and ranks normalised away), the versions, the
switch that fixed it, and the resolution you add. Secrets are redacted before
anything is stored."""
EPILOG = """\
The store is one SQLite file: $DISTDOCTOR_DB, else
$XDG_STATE_HOME/distdoctor/incidents.db (~/.local/state/... by default). It
keeps the newest 100,000 incidents; older ones are pruned. Saved sessions are
imported into a new store once. To share records between teams or clusters,
export and import JSON Lines (never put the SQLite file itself on NFS).

examples:
  distdoctor history                          the last 20 incidents
  distdoctor history --node node-17           incidents that involved node-17
  distdoctor history --nodes --days 30        which hosts were culprits, how often
  distdoctor history --cause nic-selection    incidents with that cause
  distdoctor history --signature 34d02b746036 the same failure, every time it happened
  distdoctor history --signature 42           the same failure as incident 42
  distdoctor history resolve 42 "drained node-17: Xid 79"
  distdoctor history export -o team-a.jsonl   every incident as JSON Lines
  distdoctor history import team-b.jsonl      merge another team's records

exit codes: 0 listed (an empty list too), 1 --nodes found a repeat offender (a
host culprit in 3 or more incidents in 30 days), 2 bad usage or an unreadable
store or file
"""
ACTIONS = ("list", "resolve", "export", "import")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("history", help=t("past incidents: seen before, repeat-offender nodes, what fixed it"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=ACTIONS, default="list", metavar="ACTION",
                        help=t("list (the default), resolve ID TEXT, export, or import FILE..."))
    parser.add_argument("values", nargs="*", metavar="ARG", help=t("resolve: the id and the text; import: files"))
    parser.add_argument("--db", metavar="PATH", help=t("the incident store (also $DISTDOCTOR_DB)"))
    parser.add_argument("--node", metavar="HOST", help=t("only incidents that involved this host"))
    parser.add_argument("--nodes", action="store_true", help=t("rank hosts by how often they were the culprit"))
    parser.add_argument("--cause", metavar="ID", help=t("only incidents with this cause"))
    parser.add_argument("--signature", metavar="SIG",
                        help=t("only incidents with this failure signature (or the signature of incident SIG)"))
    parser.add_argument("--days", type=int, metavar="N",
                        help=t("only the last N days (--nodes: default 30)"))
    parser.add_argument("--limit", type=int, default=20, metavar="N",
                        help=t("show at most N incidents (default 20; 0 for all)"))
    parser.add_argument("-o", "--output", metavar="FILE", help=t("export: write to FILE instead of stdout"))
    add_common(parser, session=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..record.history import open_store

    _check(args)
    with open_store(args.db) as store:
        if args.action == "resolve":
            return _resolve(store, args)
        if args.action == "export":
            return _export(store, args)
        if args.action == "import":
            return _import(store, args)
        if args.nodes:
            return _nodes(store, args)
        return _list(store, args)


def _check(args: argparse.Namespace) -> None:
    if args.limit < 0:
        raise UsageError(t("--limit must be 0 or more"))
    if args.days is not None and args.days < 1:
        raise UsageError(t("--days must be at least 1"))
    if args.action == "resolve" and (len(args.values) != 2 or not args.values[0].isdigit() or not args.values[1].strip()):
        raise UsageError(t("resolve takes an incident id and a text: distdoctor history resolve 42 \"drained node-17\""))
    if args.action == "import" and not args.values:
        raise UsageError(t("import takes one or more JSON Lines files (- for standard input)"))
    if args.action in ("list", "export") and args.values:
        raise UsageError(t("{action} takes no arguments (got {args})", action=args.action, args=" ".join(args.values)))
    if args.output and args.action != "export":
        raise UsageError(t("-o/--output goes with export"))


# --- list ----------------------------------------------------------------------------------------

def _list(store: Any, args: argparse.Namespace) -> int:
    signature = _signature(store, args.signature) if args.signature else None
    since = time.time() - args.days * 86400 if args.days else None
    rows = store.query(node=args.node, cause=args.cause, signature=signature, since=since,
                       limit=args.limit or None)
    if args.json:
        print_json([r.to_json() for r in rows])
        return OK
    if not rows:
        print(t("no incidents recorded in {path} that match", path=store.path))
        return OK
    for line in _table(rows, shutil.get_terminal_size((120, 24)).columns):
        print(line)
    if signature and rows[0].signature_text:
        print("\n" + t("signature {signature}: {text}", signature=rows[0].signature, text=rows[0].signature_text))
    print("\n" + t("{n} incident(s) from {path}", n=len(rows), path=store.path))
    return OK


def _signature(store: Any, value: str) -> str:
    """A signature id (or a prefix of 4 or more hex digits), or an incident's id: its signature."""
    if value.isdigit() and len(value) < 8:
        inc = store.get(int(value))
        if inc is None:
            raise UsageError(t("--signature {sig}: no incident {sig} (an incident id, or a signature's hex digits)",
                               sig=value))
        if not inc.signature:
            raise UsageError(t("incident {id} has no failure signature", id=value))
        return str(inc.signature)
    if len(value) < 4 or any(c not in "0123456789abcdef" for c in value.lower()):
        raise UsageError(t("--signature {sig}: a signature is 4 to 12 hex digits (see `distdoctor history`), "
                           "or an incident id", sig=value))
    return value.lower()


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _culprit(inc: Any) -> str:
    ranks = ",".join(inc.culprit_ranks)
    host = inc.culprit_host or ""
    return f"{ranks}@{host}" if ranks and host else (f"rank {ranks}" if ranks else host or "-")


def _causes(inc: Any) -> str:
    parts = [c["id"] + (f" {c['confidence']:.2f}" if isinstance(c.get("confidence"), (int, float)) else "")
             for c in inc.causes[:2]]
    return ", ".join(parts) or "-"


def _table(rows: list[Any], cols: int) -> list[str]:
    """ID, TIME, CULPRIT, CAUSES, SIGNATURE, RESOLUTION; the resolution takes what is left."""
    heads = (t("ID"), t("TIME"), t("CULPRIT"), t("CAUSES"), t("SIGNATURE"), t("RESOLUTION"))
    table = [heads] + [(str(r.id), _when(r.time), _culprit(r), _causes(r), r.signature or "-",
                        r.resolution or (t("fixed by {switch}", switch=r.fix_switch) if r.fix_switch else "-"))
                       for r in rows]
    widths = [max(i18n.cells(row[i]) for row in table) for i in range(5)]
    widths[2], widths[3] = min(widths[2], 28), min(widths[3], 44)
    room = max(cols - sum(widths) - 2 * 5, 12)
    out = []
    for row in table:
        cells = [_fit(row[i], widths[i]) for i in range(5)] + [_fit(row[5], room)]
        out.append("  ".join(i18n.pad(c, w) for c, w in zip(cells, widths + [0])).rstrip())
    return out


def _fit(text: str, width: int) -> str:
    return text if i18n.cells(text) <= width else i18n.clip(text, width, "…")


# --- nodes ---------------------------------------------------------------------------------------

def _nodes(store: Any, args: argparse.Namespace) -> int:
    """Culprit hosts over --days (at most --limit of them), and every repeat offender: a host
    culprit in REPEAT_COUNT incidents in REPEAT_DAYS, whatever --days and --limit show."""
    from ..record.history.memory import REPEAT_COUNT, REPEAT_DAYS, drain_commands

    days = args.days or REPEAT_DAYS
    now = time.time()
    rows = store.culprit_counts(now - days * 86400, limit=args.limit or None)
    recent = {r["host"]: r["incidents"] for r in store.culprit_counts(now - REPEAT_DAYS * 86400,
                                                                        at_least=REPEAT_COUNT, causes=False)}
    for row in rows:
        row["repeat_offender"] = row["host"] in recent
        row["commands"] = drain_commands(row["host"], recent[row["host"]]) if row["repeat_offender"] else []
    code = PROBLEM if recent else OK
    if args.json:
        print_json([{**r, "last": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["last"]))} for r in rows])
        return code
    if not rows:
        print(t("no incident named a culprit host in the last {days} days", days=days))
    heads = (t("HOST"), t("INCIDENTS"), t("LAST"), t("CAUSES"))
    table = [heads] + [(r["host"], str(r["incidents"]), _when(r["last"]),
                        ", ".join(f"{c} {n}" for c, n in list(r["causes"].items())[:3]) or "-") for r in rows]
    widths = [max(i18n.cells(row[i]) for row in table) for i in range(3)]
    for row in table if rows else []:
        print("  ".join(i18n.pad(c, w) for c, w in zip(row[:3], widths)) + "  " + row[3])
    for host, count in recent.items():
        print("\n" + t("repeat offender: {host} was the culprit in {n} incidents in {days} days; to take it out "
                       "(printed, not run):", host=host, n=count, days=REPEAT_DAYS))
        for command in drain_commands(host, count):
            print(f"  {command}")
    return code


# --- resolve, export, import ---------------------------------------------------------------------

def _resolve(store: Any, args: argparse.Namespace) -> int:
    incident_id, text = int(args.values[0]), args.values[1].strip()
    if not store.resolve(incident_id, text):
        raise UsageError(t("no incident {id} in {path} (see `distdoctor history`)", id=incident_id, path=store.path))
    if args.json:
        print_json(store.get(incident_id).to_json())
    else:
        print(t("incident {id} resolved: {text}", id=incident_id, text=store.get(incident_id).resolution))
    return OK


def _export(store: Any, args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        handle = open(args.output, "w", encoding="utf-8") if args.output else None  # noqa: SIM115
    except OSError as exc:
        raise UsageError(t("cannot write {path}: {why}", path=args.output, why=exc.strerror or exc)) from None
    n = 0
    try:
        for inc in store.iter_all():
            (handle or out).write(json.dumps(inc.to_export(), ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    finally:
        if handle:
            handle.close()
    if args.output:
        print(t("{n} incident(s) written to {path}", n=n, path=args.output), file=sys.stderr)
    return OK


def _import(store: Any, args: argparse.Namespace) -> int:
    from ..record.history.incident import Incident

    incidents = []
    for path in args.values:
        for number, line in _lines(path):
            try:
                incidents.append(Incident.from_export(json.loads(line)))
            except (ValueError, TypeError) as exc:  # JSONDecodeError is a ValueError
                raise UsageError(t("{path}:{line}: {why}", path=path, line=number,
                                   why=str(exc).splitlines()[0])) from None
    added, updated = store.import_incidents(incidents)
    if args.json:
        print_json({"read": len(incidents), "added": added, "updated": updated})
    else:
        print(t("{read} incident(s) read: {added} added, {updated} resolution(s) taken, the rest already here",
                read=len(incidents), added=added, updated=updated))
    return OK


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """The non-empty lines of a file (or of stdin for -), numbered from 1."""
    try:
        handle = sys.stdin if path == "-" else Path(path).open(encoding="utf-8")
        with handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, line
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise UsageError(t("cannot read {path}: {why}", path=path, why=why)) from None
