"""Helpers every subcommand shares: common flags, JSON output, knowledge and session plumbing."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError


def add_common(parser: argparse.ArgumentParser, *, session: bool = True) -> None:
    """--json, --session, --knowledge and --lang, the same on every command."""
    parser.add_argument("--json", action="store_true", help=t("print machine-readable JSON"))
    if session:
        parser.add_argument("--session", metavar="ID",
                            help=t("add the results to this session (see `distdoctor sessions`)"))
    parser.add_argument("--knowledge", metavar="DIR", default=argparse.SUPPRESS,
                        help=t("site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)"))
    # SUPPRESS: `distdoctor --lang zh CMD` keeps its value when the command's own is not given
    parser.add_argument("--lang", choices=("en", "zh"), default=argparse.SUPPRESS,
                        help=t("language of the text output (also $DISTDOCTOR_LANG, else the locale)"))


def wrap(text: str, width: int, first: str = "", rest: str = "", **options: Any) -> list[str]:
    """textwrap.wrap (break_on_hyphens off, `options` passed on) for text of ASCII only, so
    English output stays what it was; by display width otherwise (i18n.wrap: a CJK character
    takes two cells, a line may break between two of them)."""
    if text.isascii() and first.isascii() and rest.isascii():
        options.setdefault("break_on_hyphens", False)
        return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, **options)
    from distdoctor.knowledge import i18n

    return i18n.wrap(text, width, first, rest) if text.strip() else []


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def knowledge(args: argparse.Namespace):
    """Load the knowledge base with the user's overlay; a broken file is a UsageError."""
    from distdoctor.knowledge import KnowledgeError, load_knowledge
    from distdoctor.knowledge.loader import overlay_dir

    overlay = getattr(args, "knowledge", None)
    # the packaged tree is checked by the tests and `knowledge validate`; a command checks it
    # (networkx, ~0.2 s) only when an overlay may have changed it
    check_tree = overlay_dir(overlay)[0] is not None
    try:
        return load_knowledge(overlay, tree=check_tree)
    except KnowledgeError as exc:
        raise UsageError(t("knowledge: {error}", error=exc)) from None


def _say_waiting(session_id: str) -> None:
    print(t("distdoctor: waiting for session {session}: another distdoctor is writing it "
            "(the app, or a command still running)", session=session_id), file=sys.stderr, flush=True)


# Lines to print after the command's result (see record() and flush_notes()).
_NOTES: list[str] = []


def record(args: argparse.Namespace, kind: str, data: Any) -> None:
    """Add a command's result to the session named by --session, if any. A session that cannot
    be written (read-only folder, full disk, damaged file, bad id) never costs the result: the
    reason is kept and printed as one line after the result (flush_notes), and the exit code
    stays the analysis's."""
    if getattr(args, "session", None):
        from ..record.session import SessionError, SessionStore

        try:
            saved = SessionStore(on_wait=_say_waiting).append(args.session, kind, data)
        except SessionError as exc:
            _NOTES.append(t("distdoctor: the result was not saved to session {session}: {why}",
                            session=args.session, why=exc))
        except OSError as exc:  # the lock or the folder itself: same story, one line
            _NOTES.append(t("distdoctor: the result was not saved to session {session}: {why}",
                            session=args.session, why=exc.strerror or exc))
        else:  # a concluding result also goes to the incident history; it never raises
            from ..record.history import record_event

            record_event(args.session, kind, data, record=saved, on_error=_NOTES.append)


def flush_notes() -> None:
    """Print the lines record() kept, after the result (stdout first, so the order holds in a
    terminal and in a log that captures both streams)."""
    if not _NOTES:
        return
    notes, _NOTES[:] = list(_NOTES), []
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass  # a closed stdout must not hide the note
    for note in notes:
        try:
            print(note, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            return


@contextmanager
def still_waiting(what: str, every: float = 5.0) -> Iterator[None]:
    """A line on stderr every few seconds while something slow that reports nothing runs (pdsh
    answering for every host at once, a big log set), so a long wait never looks like a hang."""
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            print(t("... {what}: {seconds}s", what=what, seconds=f"{time.monotonic() - start:.0f}"),
                  file=sys.stderr, flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


def require_answer(python: str | None, facts: Mapping[str, Any], reason: str) -> None:
    """An explicit --python that never ran the versions snippet (a shell script, a hung wrapper,
    a binary that is not Python) is bad usage, not a finding about this node."""
    if python and facts.get("interpreter_started") is False:
        why = facts.get("interpreter_error") or reason
        raise UsageError(t("--python {python}: not a Python interpreter that answers ({why})",
                           python=python, why=why))
