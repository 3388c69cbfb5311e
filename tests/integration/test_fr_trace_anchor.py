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

FR = Path(__file__).resolve().parents[1] / "fixtures" / "fr"
sys.path.insert(0, str(FR))
from frtrace_layout import to_layout  # noqa: E402

CASES = ["healthy", "asymmetric", "extra_collective", "crash", "size", "dtype", "never_reaches"]
pytestmark = pytest.mark.slow


def entry(record_id: int, seq: int, name: str, sizes: list, state: str = "completed",
          dtype: str = "float32", pg: tuple = ("0", "default_pg")) -> dict:
    """An entry as torch's own fr_trace tests build it (create_one_entry in
    test/distributed/flight_recorder/test_fr_analysis.py): NCCL names, string SeqNums and dtypes."""
    return {"profiling_name": f"nccl:{name}", "state": state, "process_group": pg,
            "input_sizes": sizes, "output_sizes": sizes, "input_dtypes": dtype, "output_dtypes": dtype,
            "collective_seq_id": str(seq), "p2p_seq_id": "0", "time_created_ns": 0, "frames": [],
            "record_id": record_id, "is_p2p": False}


def layout_case(folder: Path, odd: dict) -> None:
    """Three ranks, each two completed all_reduces then a third collective that `odd` changes
    for rank 1 (or drops); pg_config keyed by name as in fr_trace's tests and NCCL dumps."""
    import pickle

    folder.mkdir()
    for rank in range(3):
        entries = [entry(0, 1, "all_reduce", [[4, 4]]), entry(1, 2, "all_reduce", [[4, 4]])]
        third = dict(name="all_reduce", sizes=[[4, 4]], state="scheduled")
        if rank == 1:
            third.update(odd)
        if not third.pop("drop", False):
            entries.append(entry(2, 3, **third))
        doc = {"entries": entries, "version": "2.10", "pg_status": {},
               "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}}}
        (folder / f"trace_rank_{rank}").write_bytes(pickle.dumps(doc))


LAYOUT = {"layout_ok": {}, "layout_op": {"name": "broadcast"}, "layout_size": {"sizes": [[5, 5]]},
          "layout_dtype": {"dtype": "float16"}, "layout_missing": {"drop": True}}


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
    for name, odd in LAYOUT.items():
        layout_case(top / name, odd)
        dirs.append(top / name)
    raw = [FR / "asymmetric" / "pickle"]
    found = fr_trace(dirs + raw)
    answers = {**{case: found[str(top / case)] for case in CASES}, "raw": found[str(raw[0])]}
    answers.update({name: {**found[str(top / name)], "dir": top / name} for name in LAYOUT})
    return answers


@pytest.mark.parametrize("case", CASES + list(LAYOUT))
def test_agrees_with_fr_trace(answers: dict[str, dict], case: str) -> None:
    theirs = answers[case]
    assert theirs["error"] is None, theirs["log"]
    # recorded cases: the raw Gloo dumps, not the rewritten ones; layout cases: the same files
    ours = read_and_analyse([str(theirs.get("dir") or FR / case / "json")])
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
    if case in LAYOUT:
        assert set(m.ranks) == {1} and ours.culprit is not None and ours.culprit.ranks == (1,)
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
