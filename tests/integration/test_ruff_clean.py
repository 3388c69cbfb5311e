"""The source passes ruff with the project's rules ([tool.ruff] in pyproject.toml, which says why
each rule set is on): CI runs this with the rest of the tests."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_tree_is_clean_under_ruff() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it comes with the test extra)")
    proc = subprocess.run([ruff, "check", "--no-cache", str(REPO)], capture_output=True, text=True, timeout=300,
                          cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
