"""`distdoctor sessions`: the saved sessions, newest first, with what each one holds."""
from __future__ import annotations

import argparse
import shutil
from datetime import datetime
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean

from .common import add_common, print_json, wrap

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
    from ..record.session import SessionStore

    store = SessionStore()
    rows = store.summaries()
    store.remove_stale_tmp()  # half-written files of writers killed more than an hour ago
    for row in rows:
        row["created"], row["updated"] = _when(row["created"]), _when(row["updated"])
    skipped = [{"file": name, "reason": why} for name, why in store.skipped]
    if args.json:
        print_json({"directory": str(store.directory), "sessions": rows, "skipped": skipped})
        return 0
    if not rows:
        print(t("no sessions yet in {folder}: run `distdoctor` or a command with --session ID", folder=store.directory))
        _print_skipped(skipped)
        return 0
    for line in _table(rows, shutil.get_terminal_size((120, 24)).columns):
        print(line)
    _print_skipped(skipped)
    print("\n" + t("{n} session(s) in {folder}", n=len(rows), folder=store.directory))
    print(t("open one with `distdoctor --resume ID`, report it with `distdoctor report ID`"))
    return 0


def _clip(text: str, limit: int) -> str:
    return text if i18n.cells(text) <= limit else i18n.clip(text, limit, "…")


def _table(rows: list[dict[str, Any]], cols: int) -> list[str]:
    """ID, UPDATED, HOST, SYMPTOM and STEPS; when the steps do not fit the width they go on a
    line of their own under each session, so no row wraps in the terminal. Widths are display
    cells (a CJK heading or symptom takes two a character)."""
    cells = i18n.cells
    # every field comes from a file anyone may have written: no control code reaches the terminal
    ids = [clean(r["id"], 200) for r in rows]
    hosts = [clean(r["host"] or "", 200) for r in rows]
    symptoms = [clean(r["symptom"] or "-", 200) for r in rows]
    heads = (t("ID"), t("UPDATED"), t("HOST"), t("SYMPTOM"))
    # host and symptom share what the id and the time leave; neither takes more than it needs
    room = cols - max(cells(heads[0]), *map(cells, ids)) - 16 - 6
    host_w = min(max(cells(heads[2]), *map(cells, hosts)), max(8, room * 2 // 5))
    sym_w = max(8, min(max(cells(heads[3]), *map(cells, symptoms)), room - host_w))
    table = [heads]
    # to the minute: the seconds only push the steps off the screen
    table += [(i, clean(r["updated"]).replace("T", " ")[:16], _clip(h, host_w), _clip(sy, sym_w))
              for i, r, h, sy in zip(ids, rows, hosts, symptoms)]
    # the steps with a result ("answer" events are choices along the way), then how many events
    steps = [t("STEPS")] + [t("{steps} ({n} event)" if r["events"] == 1 else "{steps} ({n} events)",
                              steps=", ".join(clean(k, 40) for k in r["steps"] if k != "answer") or "-",
                              n=clean(r["events"], 20))
                            for r in rows]
    widths = [max(cells(row[i]) for row in table) for i in range(4)]
    lead = [("  ".join(i18n.pad(cell, widths[i]) for i, cell in enumerate(row))) for row in table]
    if all(cells(a) + 2 + cells(b) <= cols for a, b in zip(lead, steps)):
        return [f"{a}  {b}" for a, b in zip(lead, steps)]
    out = [lead[0].rstrip()]
    for line, step in zip(lead[1:], steps[1:]):
        out.append(line.rstrip())
        out.extend(wrap(t("steps {steps}", steps=step), max(cols - 4, 20), "    ", "      ",
                        break_on_hyphens=True))
    return out


def _print_skipped(skipped: list[dict[str, str]]) -> None:
    if skipped:
        print("\n" + t("skipped {n} unreadable file(s):", n=len(skipped)))
        for s in skipped:
            print(f"  {clean(s['file'], 300)}: {clean(s['reason'], 300)}")
