"""Starts the Textual app; textual is imported only here, after the command line is parsed."""
from __future__ import annotations

import argparse
import sys

NO_TERMINAL = ("the guided app needs a terminal (stdin and stdout); for scripts use a command, "
               "e.g. distdoctor check --json (see distdoctor --help)")


def run_app(args: argparse.Namespace) -> int:
    """Build the app from the parsed arguments (--learn, --resume, --knowledge), run it, and
    return its exit code. A session that cannot be reopened, or no terminal to run in, is a
    usage error (exit 2)."""
    from distdoctor.knowledge import KnowledgeError, load_knowledge
    from distdoctor.knowledge.i18n import t
    from distdoctor.knowledge.loader import overlay_dir

    from ..errors import UsageError
    from ..record.session import SessionError, SessionStore

    # the one resolver (--knowledge, else $DISTDOCTOR_KNOWLEDGE); "" for none: the app's check
    # of the knowledge base after its first paint is then of the packaged data
    overlay = overlay_dir(getattr(args, "knowledge", None))[0] or ""
    try:
        # Everything but the tree check (networkx) and compiling the log patterns (only the
        # logs step uses them) now; the app runs the full check after its first paint.
        kb = load_knowledge(overlay or None, tree=False, patterns=False)
    except KnowledgeError as exc:
        raise UsageError(t("knowledge: {error}", error=exc)) from None
    if getattr(args, "drill", None):
        return _run_drill_app(args.drill, kb)
    from .app import make_app

    try:
        app = make_app(kb, None, SessionStore(), learn=bool(getattr(args, "learn", False)),
                       resume=getattr(args, "resume", None), check_knowledge=overlay,
                       overlay=overlay or None)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    # Checked after the session is opened, so `--resume nope` still says what is wrong with it;
    # without a terminal Textual would write escape codes forever, waiting for keys that never come.
    if not all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout)):
        raise UsageError(t(NO_TERMINAL))
    app.run()
    _say_where_the_session_is(app)
    return app.return_code or 0


def _say_where_the_session_is(app: object) -> None:
    """After quitting: the session's id and the two commands that use it, or that nothing was
    recorded (there is then nothing to resume)."""
    from distdoctor.knowledge.i18n import t

    flow = getattr(app, "flow", None)
    if flow is None or getattr(app, "return_code", 0) not in (0, None):
        return
    sid = flow.session_id
    if not flow.events:
        print(t("distdoctor: nothing was recorded in session {id}: there is nothing to reopen.", id=sid))
        return
    print(t("distdoctor: session {id} saved. Reopen it: distdoctor --resume {id}; "
            "the incident report: distdoctor report {id} -o report.md", id=sid))


def _run_drill_app(name: str, kb: object) -> int:
    """`distdoctor --drill NAME`: the drill screen alone (tui/app/screens/drill.py)."""
    from distdoctor.knowledge.i18n import t
    from distdoctor.probes.drill import DRILLS

    from ..errors import UsageError
    from ..record.session import SessionStore

    if name not in DRILLS:
        raise UsageError(t("--drill {name}: unknown drill (one of: {drills})", name=name,
                           drills=", ".join(DRILLS)))
    if not all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout)):
        raise UsageError(t(NO_TERMINAL))
    from .screens.drill import DrillApp

    app = DrillApp(name, kb, SessionStore())
    app.run()
    return app.return_code or 0
