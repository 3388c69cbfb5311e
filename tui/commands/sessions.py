"""`distdoctor sessions`: the saved sessions, newest first, with what each one holds."""
from __future__ import annotations

import argparse
import shutil
import textwrap
from datetime import datetime
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, print_json

EPILOG = """\
Sessions live under $XDG_STATE_HOME/distdoctor/sessions (~/.local/state/...
by default). Every headless command adds its result to one with --session ID.
Unreadable session files are listed with the reason and left alone.

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
        "sessions", help=t("list saved sessions (id, time, host, symptom, steps done)"),
        description=t("List saved sessions, newest first: id, updated, host, symptom and the\n"
                    "steps done."),
        epilog=t(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser, session=False)
    parser.set_defaults(func=run)


def _when(stamp: Any) -> str:
    try:
        return datetime.fromtimestamp(float(stamp)).astimezone().isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def run(args: argparse.Namespace) -> int:
    from ..record.session import SessionError, SessionStore

    store = SessionStore()
    try:
        rows = store.summaries()
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    store.remove_stale_tmp()  # half-written files of writers killed more than an hour ago
    for row in rows:
        row["created"], row["updated"] = _when(row["created"]), _when(row["updated"])
    skipped = [{"file": name, "reason": why} for name, why in store.skipped]
    if args.json:
        print_json({"directory": str(store.directory), "sessions": rows, "skipped": skipped})
        return 0
    if not rows:
        print(f"no sessions yet in {store.directory}: run `distdoctor` or a command with --session ID")
        _print_skipped(skipped)
        return 0
    for line in _table(rows, shutil.get_terminal_size((120, 24)).columns):
        print(line)
    _print_skipped(skipped)
    print(f"\n{len(rows)} session(s) in {store.directory}")
    print("open one with `distdoctor --resume ID`, report it with `distdoctor report ID`")
    return 0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _table(rows: list[dict[str, Any]], cols: int) -> list[str]:
    """ID, UPDATED, HOST, SYMPTOM and STEPS; when the steps do not fit the width they go on a
    line of their own under each session, so no row wraps in the terminal."""
    ids = [str(r["id"]) for r in rows]
    hosts = [str(r["host"] or "") for r in rows]
    symptoms = [str(r["symptom"] or "-") for r in rows]
    # host and symptom share what the id and the time leave; neither takes more than it needs
    room = cols - max(len("ID"), *map(len, ids)) - 16 - 6
    host_w = min(max(len("HOST"), *map(len, hosts)), max(8, room * 2 // 5))
    sym_w = max(8, min(max(len("SYMPTOM"), *map(len, symptoms)), room - host_w))
    table = [("ID", "UPDATED", "HOST", "SYMPTOM")]
    # to the minute: the seconds only push the steps off the screen
    table += [(i, r["updated"].replace("T", " ")[:16], _clip(h, host_w), _clip(sy, sym_w))
              for i, r, h, sy in zip(ids, rows, hosts, symptoms)]
    # the steps with a result ("answer" events are choices along the way), then how many events
    steps = ["STEPS"] + [f"{', '.join(k for k in r['steps'] if k != 'answer') or '-'} "
                         f"({r['events']} event{'s' * (r['events'] != 1)})" for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lead = [("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row))) for row in table]
    if all(len(a) + 2 + len(b) <= cols for a, b in zip(lead, steps)):
        return [f"{a}  {b}" for a, b in zip(lead, steps)]
    out = [lead[0].rstrip()]
    for line, step in zip(lead[1:], steps[1:]):
        out.append(line.rstrip())
        out.extend(textwrap.wrap(f"steps {step}", max(cols - 4, 20), initial_indent="    ",
                                 subsequent_indent="      "))
    return out


def _print_skipped(skipped: list[dict[str, str]]) -> None:
    if skipped:
        print(f"\nskipped {len(skipped)} unreadable file(s):")
        for s in skipped:
            print(f"  {s['file']}: {s['reason']}")
