"""`distdoctor fr` on real Flight Recorder dumps recorded from Gloo jobs (tests/fixtures/fr/)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from distdoctor.probes.flightrec import (
    DumpError,
    analyse,
    as_evidence,
    cross_check,
    read_and_analyse,
    read_dumps,
    to_json,
)
from distdoctor.probes.flightrec.reader import read_file
from distdoctor.tui.cli import main

FR = Path(__file__).resolve().parents[1] / "fixtures" / "fr"
# what each recorded job did (see tests/fixtures/fr/record.py and each case's LABEL):
# (first mismatch kind, its ranks, culprit ranks, culprit role, cause)
EXPECTED = {
    "asymmetric": ("op", ["0"], ["0"], "misconfigured", "asymmetric-collective"),
    "extra_collective": ("missing", ["1", "2"], ["0"], "misconfigured", "asymmetric-collective"),
    "crash": ("missing", ["2"], ["2"], "crashed", "rank-crash-deadlock"),
    "size": ("size", ["1"], ["1"], "misconfigured", "asymmetric-collective"),
    "dtype": ("dtype", ["1"], ["1"], "misconfigured", "asymmetric-collective"),
    "never_reaches": ("missing", ["2"], ["2"], "stuck", "collective-timeout"),
}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fr", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("fmt", ["json", "pickle"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_recorded_cases(case: str, fmt: str) -> None:
    kind, ranks, culprit, role, cause = EXPECTED[case]
    result = read_and_analyse([str(FR / case / fmt)])
    doc = to_json(result)
    (group,) = doc["groups"]
    assert group["pg"] == "0" and group["ranks"] == ["0", "1", "2"]
    assert group["first_mismatch"]["seq"] == 3
    assert group["first_mismatch"]["kind"] == kind
    assert group["first_mismatch"]["ranks"] == ranks
    assert doc["culprit"]["ranks"] == culprit and doc["culprit"]["role"] == role
    (item,) = as_evidence(result)
    assert item == {"source": "fr", "ranks": culprit, "role": role, "why": doc["culprit"]["why"],
                    "cause": cause}


def test_healthy_twin_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    result = read_and_analyse([str(FR / "healthy" / "pickle")])
    doc = to_json(result)
    assert doc == {"groups": [{"pg": "0", "ranks": ["0", "1", "2"],
                               "last_completed": {"0": 3, "1": 3, "2": 3}, "first_mismatch": None}],
                   "culprit": None}
    assert as_evidence(result) == []
    code, out, _ = cli(capsys, str(FR / "healthy" / "json"))
    assert code == 0 and "culprit: none" in out


def test_last_completed_per_rank() -> None:
    doc = to_json(read_and_analyse([str(FR / "size" / "json")]))
    # rank 1's all_reduce of 5 elements never completed; Gloo retired the others' with an error
    assert doc["groups"][0]["last_completed"] == {"0": 3, "1": 2, "2": 3}
    doc = to_json(read_and_analyse([str(FR / "crash" / "json")]))
    assert doc["groups"][0]["last_completed"] == {"0": 3, "1": 3, "2": None}


def test_json_shape_exact(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, str(FR / "never_reaches" / "pickle"), "--json")
    doc = json.loads(out)
    assert code == 1
    assert set(doc) == {"groups", "culprit"}
    assert set(doc["groups"][0]) == {"pg", "ranks", "last_completed", "first_mismatch"}
    assert set(doc["groups"][0]["first_mismatch"]) == {"seq", "kind", "ranks", "detail"}
    assert set(doc["culprit"]) == {"ranks", "role", "why"}
    assert "rank 2 stopped at broadcast #2" in doc["groups"][0]["first_mismatch"]["detail"]


def test_text_names_the_odd_rank_and_the_fr_trace_caveat(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, str(FR / "asymmetric" / "json"))
    assert code == 1
    assert "first disagreement: #3 (op): rank 0 called all_reduce; ranks 1, 2 called broadcast" in out
    assert "culprit: rank 0 (misconfigured)" in out
    assert "fr_trace compares every rank with whichever dump it reads first" in out
    assert "distdoctor stacks --job auto" in out
    code, out, _ = cli(capsys, str(FR / "extra_collective" / "json"))
    assert "fr_trace would report ranks 1, 2 as missing from all_reduce #3; distdoctor blames rank 0" in out


def test_both_formats_in_one_folder_prefers_pickle(capsys: pytest.CaptureFixture[str]) -> None:
    dumps, skipped = read_dumps([str(FR / "dtype")])
    assert sorted(dumps) == [0, 1, 2] and {d.fmt for d in dumps.values()} == {"pickle"}
    assert len(skipped) == 3
    assert any(e.frames for e in dumps[0].entries)  # the pickle keeps the Python stacks


def test_malicious_pickle_is_refused_without_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):  # what a hostile "dump" does: call os.system on load
            return (os.system, (f"touch {marker}",))

    d = tmp_path / "dumps"
    d.mkdir()
    shutil.copy(FR / "healthy" / "pickle" / "trace_rank_0", d / "trace_rank_0")
    (d / "trace_rank_1").write_bytes(pickle.dumps({"entries": [], "x": Evil()}))
    code, out, err = cli(capsys, str(d))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "trace_rank_1" in err and "refused to load" in err and "system" in err
    assert not marker.exists()


@pytest.mark.parametrize("content, why", [
    (b"\x80\x04\x95\x10\x00\x00", "unreadable pickle"),
    (b'{"entries": [', "unreadable JSON"),
    (b"[1, 2, 3]", None),  # not JSON object nor pickle: skipped, so no dumps at all
    (b'{"version": "2.10", "entries": 7}', "no 'entries' list"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, why: str | None) -> None:
    (tmp_path / "trace_rank_0").write_bytes(content)
    code, out, err = cli(capsys, str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert (why or "no Flight Recorder dumps") in err


def test_truncated_real_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = (FR / "size" / "pickle" / "trace_rank_1").read_bytes()
    (tmp_path / "trace_rank_1").write_bytes(data[: len(data) // 2])
    code, _, err = cli(capsys, str(tmp_path))
    assert code == 2 and "trace_rank_1: unreadable pickle dump" in err


def test_missing_empty_and_oversized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, str(tmp_path / "nope"))
    assert code == 2 and "no such file or folder" in err
    code, _, err = cli(capsys, str(tmp_path))
    assert code == 2 and "no Flight Recorder dumps" in err
    with pytest.raises(DumpError, match="more than the 100 a dump may have"):
        read_file(FR / "size" / "json" / "trace_rank_0.json", 0, max_bytes=100)


def test_unrelated_files_are_skipped(tmp_path: Path) -> None:
    for r in range(3):
        shutil.copy(FR / "never_reaches" / "json" / f"trace_rank_{r}.json", tmp_path)
    (tmp_path / "train.log.1").write_text("epoch 1 loss 0.3\n")
    (tmp_path / "LABEL").write_text("not a dump\n")
    result = read_and_analyse([str(tmp_path)])
    assert result.skipped == (f"{tmp_path / 'train.log.1'}: not JSON or pickle",)
    assert result.culprit is not None and result.culprit.ranks == (2,)


def test_two_dumps_of_one_format_for_a_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(FR / "size" / "json", tmp_path / "a")
    shutil.copytree(FR / "size" / "json", tmp_path / "b")
    code, _, err = cli(capsys, str(tmp_path))
    assert code == 2 and "two dumps for rank 0" in err


def _load_json_dumps(case: str) -> dict[int, dict]:
    return {r: json.loads((FR / case / "json" / f"trace_rank_{r}.json").read_text())
            for r in range(3) if (FR / case / "json" / f"trace_rank_{r}.json").exists()}


def _write(tmp_path: Path, docs: dict[int, dict]) -> Path:
    for r, doc in docs.items():
        (tmp_path / f"trace_rank_{r}.json").write_text(json.dumps(doc))
    return tmp_path


def test_wrapped_ring_buffer_is_not_a_mismatch(tmp_path: Path) -> None:
    # a ring buffer that forgot its oldest entry on one rank must not read as a missing rank
    docs = _load_json_dumps("healthy")
    docs[0]["entries"] = docs[0]["entries"][1:]
    result = read_and_analyse([str(_write(tmp_path, docs))])
    assert result.culprit is None and result.groups[0].first_mismatch is None


def test_named_groups_and_a_rank_that_never_joined(tmp_path: Path) -> None:
    # NCCL layout: pg_config keyed by name; a second group "1" that rank 2 belongs to but never used
    docs = _load_json_dumps("healthy")
    for r, doc in docs.items():
        doc["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"},
                            "1": {"name": "1", "desc": "tp", "ranks": "[1, 2]"}}
        if r == 1:
            extra = dict(doc["entries"][0], process_group=["1", "tp"], collective_seq_id=1, retired=False)
            doc["entries"].append(extra)
    result = read_and_analyse([str(_write(tmp_path, docs))])
    by_pg = {g.pg: g for g in result.groups}
    assert by_pg["0"].first_mismatch is None
    m = by_pg["1"].first_mismatch
    assert m is not None and (m.kind, m.ranks, m.seq) == ("missing", (2,), 1)
    assert by_pg["1"].never_joined == (2,)
    assert result.culprit is not None and result.culprit.ranks == (2,)
    assert result.culprit.role == "missing"


def test_cross_check_with_stacks() -> None:
    result = read_and_analyse([str(FR / "never_reaches" / "json")])
    agree = {"ranks": [{"rank": "2", "where": "save_checkpoint (ckpt.py:41)"},
                       {"rank": "0", "where": "all_reduce (train.py:88)"}],
             "odd": [{"rank": "2", "where": "save_checkpoint (ckpt.py:41)", "why": "x"}]}
    assert cross_check(result, agree) == ["stacks agree: rank 2 is in save_checkpoint (ckpt.py:41)"]
    disagree = {"ranks": [{"rank": "1", "where": "time.sleep (train.py:9)"}],
                "odd": [{"rank": "1", "where": "time.sleep (train.py:9)", "why": "x"}]}
    (line,) = cross_check(result, disagree)
    assert line.startswith("stacks disagree: they single out rank 1 while Flight Recorder points at rank 2")
    assert cross_check(read_and_analyse([str(FR / "healthy" / "json")]), agree) == []


def test_stacks_file_and_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stacks = tmp_path / "stacks.json"
    stacks.write_text(json.dumps({"ranks": [{"rank": "1", "where": "time.sleep (t.py:9)"}],
                                  "odd": [{"rank": "1", "where": "time.sleep (t.py:9)", "why": "x"}]}))
    code, out, _ = cli(capsys, str(FR / "never_reaches" / "json"), "--stacks", str(stacks),
                       "--session", "inc-fr")
    assert code == 1 and "note: stacks disagree" in out
    from distdoctor.tui.record.session import SessionStore

    (event,) = SessionStore().load("inc-fr")["events"]
    assert event["kind"] == "fr" and event["data"]["culprit"]["ranks"] == ["2"]
    assert event["data"]["evidence"][0]["cause"] == "collective-timeout"
    stacks.write_text("[]")
    code, _, err = cli(capsys, str(FR / "never_reaches" / "json"), "--stacks", str(stacks))
    assert code == 2 and "--stacks" in err


def test_analyse_takes_no_dumps_quietly() -> None:
    result = analyse({})
    assert result.groups == () and result.culprit is None and to_json(result) == {"groups": [], "culprit": None}


HYGIENE = """
import contextlib, io, json, sys
from distdoctor.tui.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "textual"))
print(json.dumps({"rc": rc, "heavy": heavy}))
"""


@pytest.mark.parametrize("argv", [
    ["fr", str(FR / "asymmetric" / "pickle"), "--json"],
    ["ras", "--input", str(FR.parent / "ras" / "text_dead.txt")],
    ["knobs", "--json"],
])
def test_commands_import_neither_torch_nor_textual(argv: list[str]) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", HYGIENE, *argv], capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["heavy"] == [] and report["rc"] in (0, 1), proc.stderr


WATCHDOG = ("[rank{r}]:[E1129 10:40:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, "
            "Timeout(ms)=600000) ran for 600100 milliseconds before timing out.")


def test_session_logs_are_cross_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a real `distdoctor logs` result in the session: rank 2 crashed first, ranks 0 and 1 timed out
    logs = tmp_path / "logs"
    logs.mkdir()
    for r in range(3):
        text = "[rank2]:torch.OutOfMemoryError: CUDA out of memory." if r == 2 else WATCHDOG.format(r=r)
        (logs / f"rank{r}.log").write_text(text + "\n")
    assert main(["logs", str(logs), "--session", "inc-logs", "--json"]) == 1
    capsys.readouterr()
    code, out, _ = cli(capsys, str(FR / "crash" / "json"), "--session", "inc-logs")
    assert code == 1 and "note: logs agree: rank 2 failed first" in out
    code, out, _ = cli(capsys, str(FR / "size" / "json"), "--session", "inc-logs")
    assert "note: logs disagree: they show rank 2 failing first" in out and "points at rank 1" in out
    (logs / "garbage.json").write_text("{")
    code, _, err = cli(capsys, str(FR / "size" / "json"), "--logs", str(logs / "garbage.json"))
    assert code == 2 and "--logs" in err


def test_world_group_without_member_list_still_names_a_missing_rank(tmp_path: Path) -> None:
    # torch 2.13 Gloo with a subgroup: ranks in the subgroup write pg_config {"": {"ranks": "[]"}};
    # with rank 0's dump missing the world group must still count rank 0
    docs = _load_json_dumps("crash")
    for doc in docs.values():
        doc["pg_config"] = {"": {"desc": "", "name": "", "ranks": "[]"}}
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "trace_rank_1.json").write_text(json.dumps(docs[1]))
    (tmp_path / "d" / "trace_rank_2.json").write_text(json.dumps(docs[0]))
    result = read_and_analyse([str(tmp_path / "d")])
    (group,) = result.groups
    assert group.ranks == (0, 1, 2) and group.no_dump == (0,)
    assert result.culprit is not None and (result.culprit.ranks, result.culprit.role) == ((0,), "crashed")


def test_dump_prefix_as_torch_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # TORCH_FR_DUMP_TEMP_FILE=/tmp/nccl_trace_rank_ writes /tmp/nccl_trace_rank_<rank>, next to
    # anything else in /tmp: the prefix itself selects the dumps
    for r in range(3):
        shutil.copy(FR / "never_reaches" / "pickle" / f"trace_rank_{r}", tmp_path / f"nccl_trace_rank_{r}")
    shutil.copy(FR / "size" / "pickle" / "trace_rank_0", tmp_path / "other_dump_0")
    code, out, _ = cli(capsys, str(tmp_path / "nccl_trace_rank_"), "--json")
    assert code == 1 and json.loads(out)["culprit"]["ranks"] == ["2"]
    code, _, err = cli(capsys, str(tmp_path / "no_such_prefix_"))
    assert code == 2 and "nor files starting with it" in err


def test_an_even_split_names_no_culprit_and_says_what_breaks_the_tie(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # two ranks of the recorded size mismatch: one each side, neither is the odd one out
    docs = {r: d for r, d in _load_json_dumps("size").items() if r in (0, 1)}
    for doc in docs.values():
        doc["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    sizes = {r: d["entries"][-1]["input_sizes"] for r, d in docs.items()}
    if sizes[0] == sizes[1]:  # make the two disagree on the last collective's size
        docs[1]["entries"][-1] = dict(docs[1]["entries"][-1], input_sizes=[[8]], output_sizes=[[8]])
    folder = _write(tmp_path, docs)
    result = read_and_analyse([str(folder)])
    assert result.culprit is not None and result.culprit.ranks == () and result.culprit.role == "undecided"
    assert "distdoctor stacks" in result.culprit.why and "third rank" in result.culprit.why
    assert main(["fr", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "culprit: not named:" in out and "rank 1 (misconfigured)" not in out
    # the silent twin: three ranks, two agree: the third is named
    three = read_and_analyse([str(FR / "size" / "json")])
    assert three.culprit is not None and len(three.culprit.ranks) == 1
