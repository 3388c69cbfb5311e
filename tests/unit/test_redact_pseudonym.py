"""`report --pseudonymize` (issue 25, item 11): AWS host names, the values of NCCL_HOSTID and
SLURM_JOB_NODELIST and /home/<user>/ paths from the logs never reach the report; with a state
folder it cannot write, the report is still printed and stderr says the mapping was not kept."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from boundkit import RAW_CONTROL

from distdoctor.tui.cli import main
from distdoctor.tui.record.pseudonym import Pseudonymizer

REAL = ["ip-172-31-5-9", "ip-172-31-5-9.ec2.internal", "gpu-box-7a", "trn[001-004]", "trn003", "login7",
        "alice", "bob.smith", "172.31.5.9"]


def record() -> dict[str, Any]:
    lines = ["ip-172-31-5-9:4242:4242 [0] NCCL INFO Bootstrap : Using ens5:172.31.5.9<0>",
             'File "/home/alice/train.py", line 12, in <module>',
             "loading /home/bob.smith/data/shard-0 (cached),/home/alice/x",
             "rendezvous at ip-172-31-5-9.ec2.internal:29500 failed"]
    return {"schema": 1, "id": "inc-names", "created": 0, "updated": 0,
            "host": "ip-172-31-5-9.ec2.internal", "symptom": None, "answers": {}, "events": [
                {"kind": "logs", "time": 0, "data": {"files_read": 1, "causes": [
                    {"id": "nic-selection", "score": 3, "evidence": [
                        {"file": "/home/alice/logs/rank0.log", "line": i, "text": line}
                        for i, line in enumerate(lines, 1)]}]}},
                {"kind": "check", "time": 0, "data": {"host": "ip-172-31-5-9.ec2.internal", "findings": [],
                                                        "facts": {"switches": {"env": {
                                                            "NCCL_HOSTID": "gpu-box-7a",
                                                            "SLURM_JOB_NODELIST": "trn[001-004],login7"},
                                                            "rows": [{"name": "NCCL_HOSTID",
                                                                      "value": "gpu-box-7a"}]}}}}]}


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state" / "distdoctor" / "sessions"
    folder.mkdir(parents=True)
    (folder / "inc-names.json").write_text(json.dumps(record()))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return folder


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_real_names_never_reach_the_report(state: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["report", "inc-names", "--pseudonymize", "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    for real in REAL:
        assert real not in out, (fmt, real)
    assert "host-" in out and "mapping kept" in err
    assert not RAW_CONTROL.search(out)


def test_a_state_folder_it_cannot_write_still_prints_the_report(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(self: Pseudonymizer, path: Path) -> None:
        raise PermissionError(13, "Read-only file system", str(path))

    monkeypatch.setattr(Pseudonymizer, "_save", refuse)
    code = main(["report", "inc-names", "--pseudonymize", "--format", "md"])
    out, err = capsys.readouterr()
    assert code == 0 and "host-" in out
    assert "not kept" in err and len(err.strip().splitlines()) == 1
    assert not (state / "inc-names.pseudonyms.json").exists()


def test_names_in_a_structure_deeper_than_the_walk_are_learnt() -> None:
    value: Any = {"text": "ssh to node-42 failed for /home/carol/x"}
    for _ in range(300):
        value = [value]
    names = Pseudonymizer()
    names.learn({"host": "node-17", "deep": value})
    out = json.dumps(names.apply_all({"deep": value}))
    assert "node-42" not in out and "carol" not in out
