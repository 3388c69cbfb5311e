"""`distdoctor check` in a fresh interpreter imports neither torch nor textual."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

# Runs the real CLI entry point, then reports what ended up in sys.modules. The versions probe
# still asks torch about itself, but in its own subprocess: that never shows up here.
WRAPPER = """
import contextlib, io, json, sys
from distdoctor.tui.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "textual"))
print(json.dumps({"rc": rc, "heavy": heavy, "output": out.getvalue()}))
"""


@pytest.mark.parametrize("argv", [["check", "--json"], ["check"]])
def test_check_imports_neither_torch_nor_textual(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["heavy"] == []
    assert report["rc"] in (0, 1)
    if "--json" in argv:
        data = json.loads(report["output"])
        # the torch question was really asked, of the subprocess (no torch on 3.10: no 2.13 wheel)
        assert data["facts"]["versions"]["torch"]["present"] is (importlib.util.find_spec("torch") is not None)
    else:
        assert "distdoctor check on" in report["output"]
