"""A run of one command builds only that command's parser (tui/cli.py _only_command), with the
global options before it or not: every command's and subcommand's --help, in English and in
Chinese, is the text the parser of every command gives, as `distdoctor --help` builds it."""
from __future__ import annotations

import argparse
import contextlib
import io
import sys

import pytest

from distdoctor.knowledge import i18n
from distdoctor.tui import cli


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as ended:
        cli.main(argv)
    assert ended.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_commands_help_is_the_same_built_alone(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    i18n.set_lang(lang)
    try:
        every = _subparsers(cli.build_parser())
        expected = {(name,): p.format_help() for name, p in every.items()}
        expected.update({(name, s): sp.format_help() for name, p in every.items()
                         for s, sp in _subparsers(p).items()})
    finally:
        i18n.set_lang(None)
    assert {n for n, *_ in expected} >= set(cli.COMMANDS) | set(cli.REGISTERED_BY)
    real, built = cli.build_parser, []

    def spy(*args: object, **kwargs: object) -> argparse.ArgumentParser:
        built.append(kwargs.get("only"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli, "build_parser", spy)
    for words, text in expected.items():
        for argv in (["--lang", lang, *words, "--help"], ["--knowledge", "/no/such/dir", "--lang", lang, *words, "--help"]):
            built.clear()
            assert _help(argv, monkeypatch) == text, argv
            assert built == [words[0]], argv  # only the command's own module was asked for


@pytest.mark.parametrize(("argv", "only"), [
    (["logs", "x"], "logs"), (["--lang", "zh", "logs", "x"], "logs"), (["--knowledge", "logs", "x"], None),
    (["--lang=zh", "stacks"], "stacks"), (["bisect"], "bisect"), (["-h", "logs"], None), (["lgos"], None),
    (["--learn"], None), ([], None), (["--resume", "check"], None)])
def test_the_command_a_run_names(argv: list[str], only: str | None) -> None:
    assert cli._only_command(argv) == only


def test_the_top_help_still_lists_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(["--help"], monkeypatch)
    for name in (*cli.COMMANDS, *cli.REGISTERED_BY):
        assert f"\n    {name} " in text or f"\n    {name}\n" in text, name
    assert sys.modules.get("distdoctor.tui.commands.watch") is not None
