"""The `distdoctor` command line: the app with no arguments, headless subcommands otherwise."""
from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean

from . import startup  # installed by tui/__init__.py; main() hands Ctrl-C back (startup.ready)

# At exit, after every other exit handler (registered first, run last): the interpreter's final
# collections would walk every object the command made (the knowledge base, the modules) to find
# no garbage worth the time, ~10 ms of a `distdoctor logs` or `stacks`. Frozen objects are skipped;
# the rest is freed as usual (files and connections are closed by the code that opened them).
atexit.register(gc.freeze)

# Each subcommand lives in distdoctor.tui.commands.<module> with register(subparsers);
# modules are imported only to build the parser, and none of them imports textual or torch.
COMMANDS = ("check", "logs", "stacks", "fr", "ras", "knobs", "lint", "topo", "repro", "drill", "collect", "fleet",
            "report", "sessions", "history", "knowledge", "run", "watch")
# commands registered by another command's module: the name typed -> the module
REGISTERED_BY = {"bisect": "repro"}
GLOBAL_VALUES = frozenset({"--resume", "--knowledge", "--drill", "--lang"})  # global options taking a value

EPILOG = """\
The method: classify the symptom -> logs -> environment check -> minimal repro ->
one-switch bisection -> conclusion. Run with no command to be walked through it.

examples:
  distdoctor                         open the guided app (--learn explains every step)
  distdoctor check                   what is wrong with this node for distributed training
  distdoctor logs ./job-logs/ --symptom hang
  distdoctor topo                    GPU topology, P2P support and what to set
  distdoctor repro --nproc 2         run a minimal all-reduce job for real
  distdoctor bisect                  then one switch at a time until it passes
  distdoctor report --format html -o incident.html

exit codes: 0 nothing wrong (or not available here), 1 a problem was found, 2 bad usage or
unreadable input (the rule: distdoctor/tui/commands/exitcodes.py).
"""


@contextmanager
def argparse_words() -> Iterator[None]:
    """argparse's own words ("usage: ", "options", "the following arguments are required: %s")
    in the output's language while a Parser is built, parses or formats its help. argparse
    looks them up through gettext (its module globals `_` and `ngettext`); they are pointed at
    the catalogue for the time of the call only, and only for a language other than English,
    so English help stays byte-identical and nothing outside distdoctor's parsers is touched."""
    lang = i18n.resolve()
    if lang == "en":
        yield
        return
    saved = argparse._, argparse.ngettext  # type: ignore[attr-defined]
    argparse._ = lambda message: t(message, lang)  # type: ignore[attr-defined]
    argparse.ngettext = lambda one, many, n: t(one if n == 1 else many, lang)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]


class _CellLines:
    """Help wrapped by display width (a CJK character takes two cells: i18n.wrap); text of
    ASCII only takes argparse's own path, unchanged."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        # argparse makes a formatter at every add_argument only to check a metavar, and with no
        # width HelpFormatter asks shutil for the terminal's: ~2 ms of every command that prints
        # no help (shutil imports zlib, bz2 and lzma). It is asked in format_help, as HelpFormatter does.
        super().__init__(prog, indent_increment, max_help_position, 0 if width is None else width)  # type: ignore[call-arg]
        self._asked = (max_help_position, width)

    def _split_lines(self, text: str, width: int) -> list[str]:
        if text.isascii():
            return super()._split_lines(text, width)  # type: ignore[misc]
        return i18n.wrap(" ".join(text.split()), width)

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None) -> str:
        real = argparse._("usage: ") if prefix is None else prefix  # type: ignore[attr-defined]
        if real.isascii():
            return super()._format_usage(usage, actions, groups, prefix)  # type: ignore[misc]
        # argparse aligns the usage's continuation lines under len(prefix): give it a stand-in
        # as wide as the prefix's cells, then put the prefix back
        stand_in = "\0" * i18n.cells(real)
        return super()._format_usage(usage, actions, groups, stand_in).replace(stand_in, real, 1)  # type: ignore[misc]

    def format_help(self) -> str:
        max_help_position, width = self._asked
        if width is None:  # HelpFormatter.__init__'s default width, found now (see __init__)
            import shutil

            self._width = shutil.get_terminal_size().columns - 2
            self._max_help_position = min(max_help_position, max(self._width - 20, self._indent_increment * 2))
        # argparse ends a section's heading with an ASCII colon ("options:"); a heading in
        # Chinese takes the full-width one (a heading is the only unindented line ending so)
        text = super().format_help()  # type: ignore[misc]
        return text if text.isascii() else re.sub(r"(?m)^([^\x00-\x7f\s][^\n]*):$", r"\1：", text)


class _CellFill:
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.isascii():
            return super()._fill_text(text, width, indent)  # type: ignore[misc]
        return "\n".join(i18n.wrap(" ".join(text.split()), width, indent, indent))


class CellsHelpFormatter(_CellFill, _CellLines, argparse.HelpFormatter):
    """argparse.HelpFormatter, by display width."""


class CellsRawFormatter(_CellLines, argparse.RawDescriptionHelpFormatter):
    """argparse.RawDescriptionHelpFormatter (descriptions and epilogs as written), by display
    width for the help of each option."""


_CELLS = {argparse.HelpFormatter: CellsHelpFormatter,
          argparse.RawDescriptionHelpFormatter: CellsRawFormatter}


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2, never a usage dump; its own words and
    its wrapping in the output's language (argparse_words, CellsHelpFormatter)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = kwargs.get("formatter_class", argparse.HelpFormatter)
        kwargs["formatter_class"] = _CELLS.get(cls, cls)
        with argparse_words():  # "positional arguments", "options", -h's help
            super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        # "distdoctor: error:" for every command, like UsageError; the help pointer names the command
        self.exit(2, t("distdoctor: error: {error} (see {prog} --help)", error=message,
                       prog=self.prog) + "\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        with argparse_words():  # its errors, and -h's help
            return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        with argparse_words():
            return super().format_usage()

    def format_help(self) -> str:
        with argparse_words():
            return super().format_help()

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports a subcommand's unknown flags from the top parser; send the user to
        # the help of the (sub)command that was typed instead, where the right flags are listed
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            _innermost(self, parsed).error(t("unrecognized arguments: {args}", args=" ".join(extras)))
        return parsed

    def _get_value(self, action, arg_string):  # type: ignore[override]
        # `--python ""` or `-o "$UNSET"` is a slip, never a choice: refuse it rather than quietly
        # fall back to a default (or to stdout)
        if arg_string == "" and action.option_strings:
            self.error(t("{option}: empty value", option="/".join(action.option_strings)))
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
    parser = Parser(prog="distdoctor", description=t("From a hung or failing multi-GPU PyTorch job "
                    "to its root cause."), epilog=t(EPILOG),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help=t("print the version and exit"))
    parser.add_argument("--learn", action="store_true", help=t("app: explain every step and term"))
    parser.add_argument("--resume", nargs="?", const="last", metavar="ID",
                        help=t("app: reopen a session (the last one by default)"))
    parser.add_argument("--knowledge", metavar="DIR",
                        help=t("site overlay of knowledge files (also $DISTDOCTOR_KNOWLEDGE)"))
    parser.add_argument("--drill", metavar="NAME",
                        help=t("app: practise on a drill, a job with one real fault (distdoctor drill list)"))
    parser.add_argument("--lang", choices=("en", "zh"),
                        help=t("language of the text output and the app (also $DISTDOCTOR_LANG, "
                               "else LC_ALL/LC_MESSAGES/LANG: zh_* is Chinese)"))
    if not with_commands:
        parser.set_defaults(command=None)
        return parser
    # prog: what argparse would find by formatting the usage of the top parser's positionals
    # (it has none), which would ask for the terminal's width (_CellLines.__init__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser, prog=parser.prog)
    only = REGISTERED_BY.get(only or "", only)
    for name in (only,) if only in COMMANDS else COMMANDS:
        importlib.import_module(f"distdoctor.tui.commands.{name}").register(sub)
    return parser


def _first_word(argv: Sequence[str]) -> tuple[int, str] | None:
    """(index, word) of the first word of `argv` that is not an option or a global option's
    value (`--knowledge DIR logs ...` -> logs): the command (or a typo of one), or -h/--help
    when that comes first."""
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help"):
            return i, arg
        if not arg.startswith("-") and (i == 0 or argv[i - 1] not in GLOBAL_VALUES):
            return i, arg
    return None


def _wants_command(argv: Sequence[str]) -> bool:
    """Whether the full parser (every command module) is needed; the app's start skips it.
    Any word that is not the value of --resume/--knowledge is a command (or a typo of one)."""
    return _first_word(argv) is not None


def _only_command(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, when it names one, after the global options or without them:
    only its module is imported and only its parser built (every command's imports cost ~100 ms;
    `distdoctor stacks` during an incident aims at the speed of a bare py-spy loop). None
    (every command) for no command, a typo of one or -h/--help before it: the top help lists
    them all."""
    found = _first_word(argv)
    if found is None:
        return None
    word = found[1]
    return word if word in COMMANDS or word in REGISTERED_BY else None


def _lang_in(argv: Sequence[str]) -> str | None:
    """The value of --lang in `argv` (`--lang zh`, `--lang=zh`), found before any parser is
    built: argparse takes help texts when the parser is built, so the language must be known
    then. A value that is not a language is left to argparse to refuse."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        value = arg.partition("=")[2] if arg.startswith("--lang=") else (
            argv[i + 1] if arg == "--lang" and i + 1 < len(argv) else None)
        if value in i18n.LANGS:
            found = value  # the last one wins, as argparse does
    return found


def main(argv: Sequence[str] | None = None) -> int:
    try:
        startup.ready()
        return _main(argv)
    except KeyboardInterrupt:  # while the parser is built: one line, as during a command
        print(t("distdoctor: interrupted"), file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    i18n.set_lang(_lang_in(argv))  # every command and the app read it through i18n.resolve()
    # Building every command's parser costs ~60 ms; the app's first screen should not pay it,
    # nor a run of one command (_only_command)
    parser = build_parser(with_commands=_wants_command(argv), only=_only_command(argv))
    args = parser.parse_args(argv)
    i18n.set_lang(getattr(args, "lang", None))  # what argparse made of it (a command's own --lang)
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
    except InputError as exc:  # UsageError and every probe's bad-input error: the one mapping
        # one line, whatever a file name in it holds (the one sanitiser: knowledge/printable.py)
        print(t("distdoctor: error: {error}", error=clean(str(exc), 4000)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(t("distdoctor: interrupted"), file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    # Run the package's own module, not this __main__ copy, so UsageError is one class.
    from distdoctor.tui.cli import main as _main

    sys.exit(_main())
