"""`distdoctor sessions`: the saved sessions, newest first, with what each one holds."""
from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from .common import add_common, print_json

EPILOG = """\
Sessions live under $XDG_STATE_HOME/distdoctor/sessions (~/.local/state/... by default).
Every headless command adds its result to one with --session ID.

examples:
  distdoctor sessions                       list them
  distdoctor sessions --json                the same as JSON
  distdoctor --resume                       reopen the last one in the app
  distdoctor --resume 20261130-101500-ab12  reopen that one
  distdoctor report 20261130-101500-ab12 --format html -o incident.html

exit codes: 0 always (an empty list is not an error), 2 bad usage.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sessions", help="list saved sessions (id, time, host, symptom, steps done)",
        description="List saved sessions, newest first: id, created, updated, host, symptom "
                    "and the steps done.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser, session=False)
    parser.set_defaults(func=run)


def _when(stamp: Any) -> str:
    try:
        return datetime.fromtimestamp(float(stamp)).astimezone().isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def run(args: argparse.Namespace) -> int:
    from ..session import SessionStore

    store = SessionStore()
    store.remove_stale_tmp()  # half-written files of writers killed more than an hour ago
    rows = store.summaries()
    for row in rows:
        row["created"], row["updated"] = _when(row["created"]), _when(row["updated"])
    if args.json:
        print_json({"directory": str(store.directory), "sessions": rows})
        return 0
    if not rows:
        print(f"no sessions yet in {store.directory}: run `distdoctor` or a command with --session ID")
        return 0
    table = [("ID", "UPDATED", "HOST", "SYMPTOM", "STEPS")]
    table += [(str(r["id"]), r["updated"].replace("T", " ")[:19], str(r["host"] or ""),
               str(r["symptom"] or "-"), f"{r['events']}: {', '.join(r['steps'])}" if r["steps"] else "0")
              for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    print(f"\n{len(rows)} session(s) in {store.directory}; open one with `distdoctor --resume ID`")
    return 0
