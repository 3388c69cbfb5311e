"""torch's own analyser is the anchor: on every recorded case distdoctor agrees with fr_trace on the
missing ranks and the mismatch; on the raw Gloo dumps fr_trace fails and distdoctor does not.
Also records one case afresh, so the fixtures' recipe keeps working with the installed torch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.probes.flightrec import read_and_analyse

FR = Path(__file__).resolve().parent / "fixtures" / "fr"
sys.path.insert(0, str(FR))
from frtrace_layout import to_layout  # noqa: E402

CASES = ["healthy", "asymmetric", "extra_collective", "crash", "size", "dtype", "never_reaches"]
pytestmark = pytest.mark.slow


def fr_trace(dirs: list[Path]) -> dict[str, dict]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, str(FR / "frtrace_layout.py"), "run", *map(str, dirs)],
                         capture_output=True, text=True, timeout=240, env=env, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    top = tmp_path_factory.mktemp("frtrace")
    dirs = []
    for case in CASES:
        to_layout(FR / case / "json", top / case)
        dirs.append(top / case)
    raw = [FR / "asymmetric" / "pickle"]
    found = fr_trace(dirs + raw)
    return {**{case: found[str(top / case)] for case in CASES}, "raw": found[str(raw[0])]}


@pytest.mark.parametrize("case", CASES)
def test_agrees_with_fr_trace(answers: dict[str, dict], case: str) -> None:
    theirs = answers[case]
    assert theirs["error"] is None, theirs["log"]
    ours = read_and_analyse([str(FR / case / "json")])  # the raw Gloo dumps, not the rewritten ones
    (group,) = ours.groups
    m = group.first_mismatch
    if theirs["finding"] is None:
        assert m is None and ours.culprit is None
        return
    assert m is not None
    finding = theirs["finding"]
    assert m.kind == finding["kind"]
    if finding["seq"] is not None:  # with a dump missing, fr_trace cannot place it at a SeqNum
        assert m.seq == finding["seq"]
    members = set(group.ranks)
    if m.kind == "missing":
        assert set(m.ranks) == set(finding["ranks"])
    else:
        # fr_trace blames whoever differs from the dump it read first; the split is the same
        assert set(finding["ranks"]) in (set(m.ranks), members - set(m.ranks))


def test_fr_trace_fails_on_raw_gloo_dumps_that_distdoctor_reads(answers: dict[str, dict]) -> None:
    assert answers["raw"]["error"] is not None and answers["raw"]["error"].startswith("KeyError: ('0', ")
    assert read_and_analyse([str(FR / "asymmetric" / "pickle")]).culprit is not None


def test_recording_recipe_still_works(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, str(FR / "record.py"), "--out", str(tmp_path), "never_reaches"],
                         capture_output=True, text=True, timeout=240, env=env, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    result = read_and_analyse([str(tmp_path / "never_reaches" / "pickle")])
    assert result.culprit is not None
    assert (result.culprit.ranks, result.culprit.role) == ((2,), "stuck")
