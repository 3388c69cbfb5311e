"""The `distdoctor` command line: the app with no arguments, headless subcommands otherwise."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

# Each subcommand lives in distdoctor.tui.commands.<module> with register(subparsers);
# modules are imported only to build the parser, and none of them imports textual or torch.
COMMANDS = ("check", "logs", "topo", "repro", "collect", "fleet", "report", "sessions", "knowledge")

EPILOG = """\
The method: classify the symptom -> logs -> environment check -> minimal repro ->
one-switch bisection -> conclusion. Run with no command to be walked through it.

examples:
  distdoctor                         open the guided app (--learn explains every step)
  distdoctor check                   what is wrong with this node for distributed training
  distdoctor logs ./job-logs/ --symptom hang
  distdoctor topo                    GPU topology, P2P verdict and what to set
  distdoctor repro --nproc 2         run a minimal all-reduce job for real
  distdoctor bisect                  then one switch at a time until it passes
  distdoctor report --format html -o incident.html

exit codes: 0 nothing failed, 1 a problem was found, 2 bad usage or unreadable input.
"""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2, never a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "distdoctor: error:" for every command, like UsageError; the help pointer names the command
        self.exit(2, f"distdoctor: error: {message} (see {self.prog} --help)\n")


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def build_parser() -> Parser:
    parser = Parser(prog="distdoctor", description="From a hung or failing multi-GPU PyTorch job "
                    "to its root cause.", epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--learn", action="store_true", help="app: explain every step and term")
    parser.add_argument("--resume", nargs="?", const="last", metavar="ID",
                        help="app: reopen a session (the last one by default)")
    parser.add_argument("--knowledge", metavar="DIR",
                        help="site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"distdoctor.tui.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from importlib.metadata import version
        print(f"distdoctor {version('distdoctor')}")
        return 0
    try:
        if args.command is None:
            from .app_main import run_app
            return run_app(args)
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"distdoctor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("distdoctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
