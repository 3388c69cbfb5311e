"""Bad input to the command line, in real subprocesses: one line on stderr, exit 2, never a
traceback and never a hang (no terminal for the app, closed stdin, empty and unbounded values,
unknown flags)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.tui.cli import build_parser
from distdoctor.tui.record.session import SessionStore

DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]
NO_TERMINAL = ("distdoctor: error: the guided app needs a terminal (stdin and stdout); for scripts "
               "use a command, e.g. distdoctor check --json (see distdoctor --help)\n")


def run(*argv: str, stdin: int | None = subprocess.DEVNULL, closed_stdin: bool = False
        ) -> subprocess.CompletedProcess[str]:
    """The real CLI; `closed_stdin` starts it with fd 0 closed, as `<&-` in a shell does."""
    cmd = ["sh", "-c", 'exec "$@" <&-', "sh", *DISTDOCTOR, *argv] if closed_stdin else [*DISTDOCTOR, *argv]
    res = subprocess.run(cmd, stdin=None if closed_stdin else stdin, capture_output=True, text=True,
                         timeout=120, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    return res


@pytest.mark.parametrize("argv", [[], ["--learn"], ["--resume", "s1"]], ids=["app", "learn", "resume"])
def test_app_without_a_terminal_refuses_at_once(argv: list[str]) -> None:
    """stdin /dev/null and stdout a pipe: the app once wrote escape codes forever."""
    SessionStore().create("s1")  # --resume s1 must get past the session to the terminal check
    res = run(*argv)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", NO_TERMINAL)


def test_app_needs_stdout_a_terminal_too() -> None:
    parent, child = os.openpty()
    try:
        res = run(stdin=child)  # stdin is a terminal, stdout a pipe (`distdoctor | less`)
    finally:
        os.close(child)
        os.close(parent)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", NO_TERMINAL)


def test_app_with_stdin_closed() -> None:
    res = run(closed_stdin=True)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", NO_TERMINAL)


@pytest.mark.parametrize("argv", [["logs", "-"], ["topo", "--input", "-"]])
def test_dash_with_stdin_closed_is_a_usage_error(argv: list[str]) -> None:
    res = run(*argv, closed_stdin=True)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "distdoctor: error: - reads standard input, which is closed here\n"


@pytest.mark.parametrize("argv, flag, command", [
    (["check", "--python", ""], "--python", "check"),
    (["check", "--python="], "--python", "check"),
    (["collect", "-o", ""], "-o/--output", "collect"),  # it wrote the snapshot to stdout
    (["report", "s1", "-o", ""], "-o/--output", "report"),
    (["logs", "x.log", "--symptom", ""], "--symptom", "logs"),
    (["fleet", "collect", "--via", "local", "-o", ""], "-o/--output", "fleet collect"),
])
def test_empty_option_value_is_a_usage_error(argv: list[str], flag: str, command: str) -> None:
    res = run(*argv)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"distdoctor: error: {flag}: empty value (see distdoctor {command} --help)\n"


@pytest.mark.parametrize("argv, command", [
    (["check", "--jsn"], "check"),
    (["fleet", "compare", "a.json", "--x"], "fleet compare"),
    (["knowledge", "show", "hang", "--bogus"], "knowledge show"),
    (["fleet", "--x"], "fleet"),
    (["--bogus"], ""),
])
def test_unknown_flag_points_at_the_help_of_the_command_typed(argv: list[str], command: str) -> None:
    res = run(*argv)
    assert (res.returncode, res.stdout) == (2, "")
    prog = f"distdoctor {command}".rstrip()
    assert res.stderr == f"distdoctor: error: unrecognized arguments: {argv[-1]} (see {prog} --help)\n"


@pytest.mark.parametrize("flag, value, message", [
    ("--timeout", "1e12", "at most 604800 seconds (a week): '1e12'"),  # each host once failed
    ("--timeout", "1e308", "at most 604800 seconds (a week): '1e308'"),  # with an OverflowError
    ("--timeout", "604800.5", "at most 604800 seconds (a week): '604800.5'"),
    ("--concurrency", "1025", "at most 1024 hosts at once: '1025'"),
])
def test_fleet_collect_bounds(tmp_path: Path, flag: str, value: str, message: str) -> None:
    out = tmp_path / "fleet"
    res = run("fleet", "collect", "--via", "local", "-o", str(out), flag, value)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (f"distdoctor: error: argument {flag}: {message} "
                          "(see distdoctor fleet collect --help)\n")
    assert not out.exists()  # refused before anything ran


def test_fleet_collect_bounds_are_inclusive() -> None:
    args = build_parser().parse_args(["fleet", "collect", "--via", "local", "-o", "d",
                                      "--timeout", "604800", "--concurrency", "1024"])
    assert (args.timeout, args.concurrency) == (604800.0, 1024)
