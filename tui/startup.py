"""Ctrl-C before the command line is ready for it: one line and exit 130, never a traceback.

Imported first by tui/cli.py when it runs as the `distdoctor` console script: the imports and
the parser take the first few hundred milliseconds, before main() can catch KeyboardInterrupt.
"""
from __future__ import annotations

import os
import signal
import sys


def interrupted(signum: int, frame: object) -> None:
    """SIGINT during start-up: the same line main() prints, then exit 130 at once."""
    text = "distdoctor: interrupted"
    i18n = sys.modules.get("distdoctor.knowledge.i18n")
    if i18n is not None:
        try:
            text = i18n.t(text)
        except Exception:  # half imported, or no language yet: the English line is right too
            text = "distdoctor: interrupted"
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    finally:
        os._exit(130)


def install() -> None:
    """Take SIGINT for the start-up, only in the console script and only from Python's default
    handler (a host program, a test runner or an ignored SIGINT keeps its own)."""
    if os.path.basename(sys.argv[0] or "") != "distdoctor":
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # not the main thread
        return


def ready() -> None:
    """main() is inside its try: from now on Ctrl-C is KeyboardInterrupt again."""
    try:
        if signal.getsignal(signal.SIGINT) is interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        return


install()
