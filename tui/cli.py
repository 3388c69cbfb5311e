"""The `distdoctor` command line: the app with no arguments, headless subcommands otherwise."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import UsageError

# Each subcommand lives in distdoctor.tui.commands.<module> with register(subparsers);
# modules are imported only to build the parser, and none of them imports textual or torch.
COMMANDS = ("check", "logs", "stacks", "fr", "ras", "knobs", "lint", "topo", "repro", "drill", "collect", "fleet",
            "report", "sessions", "knowledge")

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

exit codes: 0 nothing wrong (or not available here), 1 a problem was found, 2 bad usage or
unreadable input (the rule: distdoctor/tui/commands/exitcodes.py).
"""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2, never a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "distdoctor: error:" for every command, like UsageError; the help pointer names the command
        self.exit(2, f"distdoctor: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports a subcommand's unknown flags from the top parser; send the user to
        # the help of the (sub)command that was typed instead, where the right flags are listed
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            _innermost(self, parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _get_value(self, action, arg_string):  # type: ignore[override]
        # `--python ""` or `-o "$UNSET"` is a slip, never a choice: refuse it rather than quietly
        # fall back to a default (or to stdout)
        if arg_string == "" and action.option_strings:
            self.error(f"{'/'.join(action.option_strings)}: empty value")
        return super()._get_value(action, arg_string)


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the deepest subcommand named in `args` (fleet compare, knowledge show)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _innermost(chosen, args)
    return parser




def build_parser(with_commands: bool = True, only: str | None = None) -> Parser:
    parser = Parser(prog="distdoctor", description="From a hung or failing multi-GPU PyTorch job "
                    "to its root cause.", epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--learn", action="store_true", help="app: explain every step and term")
    parser.add_argument("--resume", nargs="?", const="last", metavar="ID",
                        help="app: reopen a session (the last one by default)")
    parser.add_argument("--knowledge", metavar="DIR",
                        help="site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)")
    parser.add_argument("--drill", metavar="NAME",
                        help="app: practise on a drill, a job with one real fault (distdoctor drill list)")
    parser.add_argument("--lang", choices=("en", "zh"),
                        help="language of the text output and the app (also $DISTDOCTOR_LANG, "
                             "else LC_ALL/LC_MESSAGES/LANG: zh_* is Chinese)")
    if not with_commands:
        parser.set_defaults(command=None)
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in (only,) if only in COMMANDS else COMMANDS:
        importlib.import_module(f"distdoctor.tui.commands.{name}").register(sub)
    return parser


def _wants_command(argv: Sequence[str]) -> bool:
    """Whether the full parser (every command module) is needed; the app's start skips it.
    Any word that is not the value of --resume/--knowledge is a command (or a typo of one)."""
    takes_value = {"--resume", "--knowledge", "--drill", "--lang"}
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help"):
            return True
        if not arg.startswith("-") and (i == 0 or argv[i - 1] not in takes_value):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Building every command's parser costs ~60 ms; the app's first screen should not pay it.
    # `distdoctor stacks ...` during an incident: build only the named command's parser, not
    # every command's (their imports cost ~100 ms; stacks aims at the speed of a bare py-spy loop)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(with_commands=_wants_command(argv), only=only)
    args = parser.parse_args(argv)
    if args.lang or "distdoctor.knowledge.i18n" in sys.modules:  # no import cost without --lang
        from distdoctor.knowledge import i18n

        i18n.set_lang(args.lang)  # every command and the app read it through i18n.resolve()
    if args.version:
        from importlib.metadata import version
        print(f"distdoctor {version('distdoctor')}")
        return 0
    try:
        if args.command is None:
            from .app.run import run_app
            return run_app(args)
        try:
            return int(args.func(args) or 0)
        finally:
            from .commands.common import flush_notes
            flush_notes()  # e.g. "not saved to session ...": after the result, whatever happened
    except UsageError as exc:
        print(f"distdoctor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("distdoctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    # Run the package's own module, not this __main__ copy, so UsageError is one class.
    from distdoctor.tui.cli import main as _main

    sys.exit(_main())
