"""Every command against the one exit-code rule (tui/commands/exitcodes.py): its success, problem
and bad-usage forms where each is cheap to produce on a machine without a GPU.

Each row runs the real command line in-process (`main(argv)`) on recorded inputs; forms that need
a GPU, a hung job or a full repro run are left to their own tests (test_bisect.py, test_repro.py,
test_stacks_real.py) and listed in NOT_HERE so the table says what it leaves out.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.tui.cli import main
from distdoctor.tui.commands.exitcodes import OK, PROBLEM, USAGE

HERE = Path(__file__).resolve().parents[1] / "fixtures"
TOPO = HERE / "topology"
RECORDED = HERE / "recorded"

NOT_HERE = {
    ("repro", OK): "a real two-rank Gloo job (test_repro.py); --help here",
    ("repro", PROBLEM): "a real failing job (test_repro.py)",
    ("bisect", PROBLEM): "a baseline plus switch runs (test_bisect.py)",
    ("stacks", OK): "a live job to dump (test_stacks_real.py)",
    ("stacks", PROBLEM): "a live hung job (test_stacks_real.py)",
    ("drill", OK): "a real drill run (test_drill.py)",
    ("watch", OK): "a real job watched to its end (test_watch_real.py)",
}


def _files(tmp: Path) -> dict[str, str]:
    """Inputs made on the spot: two bare tracebacks, a syntax error, a broken overlay, snapshots."""
    from fleet_gen import write_fleet

    (tmp / "tb").mkdir()
    (tmp / "tb" / "a.log").write_text('Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
                                      "ValueError: bad value\n")
    (tmp / "tb" / "b.log").write_text('Traceback (most recent call last):\n  File "b.py", line 3, in <module>\n'
                                      "KeyError: 'x'\n")
    (tmp / "syntax.py").write_text("def f(:\n")
    (tmp / "bad-overlay").mkdir()
    (tmp / "bad-overlay" / "bad.toml").write_text('[[causes]]\nid = "x"\n')
    (tmp / "garbage.txt").write_bytes(b"\x00\xff\xfe not anything")
    write_fleet(tmp / "same", 3)
    write_fleet(tmp / "odd", 3, plants={1: {"python": "3.10.12"}})
    return {"tmp": str(tmp)}


# (command, form, argv, expected); {tmp} is this test's folder
TABLE: list[tuple[str, str, list[str], int]] = [
    ("check", "ok", ["check", "--only", "launch"], OK),
    ("check", "problem", ["check", "--only", "launch", "@WORLD_SIZE=2", "@RANK=5"], PROBLEM),
    ("check", "usage", ["check", "--only", "nosuch"], USAGE),
    ("logs", "ok", ["logs", str(HERE / "healthy" / "mp-allreduced-losses")], OK),
    ("logs", "problem", ["logs", str(RECORDED / "incident-crash" / "logs")], PROBLEM),
    # two processes raised, no rank named and nobody seen waiting: not enough evidence for any
    # cause, which is no answer (exit 0) though the verdict says a failure was seen
    ("logs", "unknown: two bare tracebacks", ["logs", "{tmp}/tb/a.log", "{tmp}/tb/b.log"], OK),
    ("logs", "usage", ["logs", "{tmp}/no-such-dir"], USAGE),
    ("stacks", "usage", ["stacks", "--pid", "999999999"], USAGE),
    ("fr", "ok", ["fr", str(HERE / "fr" / "healthy")], OK),
    ("fr", "problem", ["fr", str(HERE / "fr" / "crash")], PROBLEM),
    ("fr", "usage", ["fr", "{tmp}/no-such-dir"], USAGE),
    ("ras", "ok", ["ras", "--input", str(HERE / "ras" / "json_healthy.json")], OK),
    ("ras", "problem", ["ras", "--input", str(HERE / "ras" / "text_dead.txt")], PROBLEM),
    ("ras", "unavailable is ok", ["ras", "@PATH={tmp}"], OK),
    ("ras", "usage", ["ras", "--input", "{tmp}/garbage.txt"], USAGE),
    ("knobs", "ok", ["knobs"], OK),
    ("knobs", "usage", ["knobs", "--python", "{tmp}/no-python"], USAGE),
    ("lint", "ok", ["lint", str(HERE / "lint" / "dd101_ok.py")], OK),
    ("lint", "problem", ["lint", str(HERE / "lint" / "dd101_fire.py")], PROBLEM),
    ("lint", "usage", ["lint", "{tmp}/syntax.py"], USAGE),
    ("topo", "ok", ["topo", "--input", str(TOPO / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt")], OK),
    ("topo", "problem", ["topo", "--input", str(TOPO / "topo-m-and-p2p-r-4gpu-2socket.txt")], PROBLEM),
    ("topo", "usage", ["topo", "--input", "{tmp}/garbage.txt"], USAGE),
    ("repro", "ok: --help (a real run is test_repro.py's)", ["repro", "--help"], OK),
    ("repro", "usage", ["repro", "--nproc", "0"], USAGE),
    ("bisect", "ok: --help", ["bisect", "--help"], OK),
    ("stacks", "ok: --help", ["stacks", "--help"], OK),
    ("bisect", "usage", ["bisect", "--switch", "nosuch"], USAGE),
    ("drill", "ok: list", ["drill", "list"], OK),
    ("drill", "usage", ["drill", "run", "nosuch"], USAGE),
    ("collect", "ok", ["collect", "-o", "{tmp}/snap.json"], OK),
    ("collect", "usage", ["collect", "--python", "{tmp}/no-python"], USAGE),
    ("fleet", "ok: compare", ["fleet", "compare", "{tmp}/same"], OK),
    ("fleet", "problem: compare", ["fleet", "compare", "{tmp}/odd"], PROBLEM),
    ("fleet", "usage: compare", ["fleet", "compare", "{tmp}/garbage.txt"], USAGE),
    ("fleet", "usage: collect", ["fleet", "collect"], USAGE),
    ("report", "ok", ["report", "s1", "-o", "{tmp}/r.md"], OK),
    ("report", "usage", ["report", "no-such-session"], USAGE),
    ("sessions", "ok", ["sessions"], OK),
    ("sessions", "usage", ["sessions", "--no-such-flag"], USAGE),
    ("run", "ok: a job that finishes", ["run", "--", sys.executable, "-c", "pass"], OK),
    ("run", "problem: a job that fails", ["run", "--", sys.executable, "-c", "import sys; sys.exit(3)"], PROBLEM),
    ("run", "usage: no launch line", ["run"], USAGE),
    ("watch", "usage: no such process", ["watch", "--pid", "999999999"], USAGE),
    ("history", "ok", ["history", "--db", "{tmp}/incidents.db"], OK),
    ("history", "usage", ["history", "resolve", "x", "text", "--db", "{tmp}/incidents.db"], USAGE),
    ("history", "usage: a corrupt store", ["history", "--db", "{tmp}/garbage.txt"], USAGE),
    ("knowledge", "ok", ["knowledge", "validate", str(HERE / "overlay")], OK),
    ("knowledge", "problem", ["knowledge", "validate", "{tmp}/bad-overlay"], PROBLEM),
    ("knowledge", "usage", ["knowledge", "show", "no-such-id"], USAGE),
]


def _run(argv: list[str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    args = []
    for arg in argv:
        arg = arg.replace("{tmp}", str(tmp))
        if arg.startswith("@"):  # an environment variable for this row
            name, _, value = arg[1:].partition("=")
            monkeypatch.setenv(name, value)
        else:
            args.append(arg)
    try:
        return main(args)
    except SystemExit as exc:  # argparse's own exit (bad flags)
        return int(exc.code or 0)


@pytest.mark.parametrize("command, form, argv, expected", TABLE, ids=[f"{c}-{f}" for c, f, _, _ in TABLE])
def test_exit_code(command: str, form: str, argv: list[str], expected: int, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # fleet_gen
    _files(tmp_path)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    if command == "report":  # a session to report on
        assert main(["logs", str(RECORDED / "incident-crash" / "logs"), "--session", "s1"]) == PROBLEM
        capsys.readouterr()
    code = _run(argv, tmp_path, monkeypatch)
    out, err = capsys.readouterr()
    assert code == expected, f"{' '.join(argv)}: exit {code}, expected {expected}\n{out[-800:]}\n{err[-800:]}"
    if expected == USAGE:  # one error line (after any "skipped" notes), never a traceback
        lines = err.strip().splitlines()
        assert sum(line.startswith("distdoctor: error:") for line in lines) == 1, err
        assert "Traceback" not in err and lines[-1].startswith("distdoctor: error:"), err


def test_every_command_is_in_the_table() -> None:
    from distdoctor.tui.cli import COMMANDS

    covered = {c for c, _, _, _ in TABLE}
    assert set(COMMANDS) <= covered, set(COMMANDS) - covered
    for command in COMMANDS:  # every command has a bad-usage row, and success where it is cheap
        forms = {expected for c, _, _, expected in TABLE if c == command}
        assert USAGE in forms
        assert OK in forms or (command, OK) in NOT_HERE, command


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has a GPU")
def test_unavailable_topology_is_not_bad_usage(tmp_path: Path) -> None:
    """A real process on this driverless machine: one `unavailable:` line, exit 0."""
    exe = Path(sys.executable).with_name("distdoctor")
    proc = subprocess.run([str(exe), "topo"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == OK and proc.stdout.startswith("unavailable: ")
