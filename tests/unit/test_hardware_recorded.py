"""`check --root` over recorded nodes (issue 26): each faulty node names its cause, healthy
trees flag nothing. Cases: the project's own (tests/fixtures/hardware, written from the
documented formats, a firing example and a healthy twin per probe) and the public captures in
../shared/fixtures/hardware (read in place, skipped when absent)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixturekit import SHARED_FIXTURES, shared_fixtures

from distdoctor.tui.cli import main

HERE = Path(__file__).parents[1] / "fixtures" / "hardware"
OWN = sorted(p.name for p in HERE.iterdir() if (p / "label.json").is_file())
SHARED = sorted(p.name for p in (SHARED_FIXTURES / "hardware").glob("*")
                if (p / "label.json").is_file()) if (SHARED_FIXTURES / "hardware").is_dir() else []


def check_root(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, dict]:
    rc = main(["check", "--root", str(root), "--json", *extra])
    out, err = capsys.readouterr()
    assert out, err
    return rc, json.loads(out)


def problems(data: dict) -> dict[str, dict]:
    return {f["check"]: f for f in data["findings"] if f["status"] in ("warn", "fail")}


def judge(case: Path, rc: int, data: dict) -> None:
    label = json.loads((case / "label.json").read_text())
    found = problems(data)
    cause = label["expect_cause"]
    if cause is None:
        assert found == {}, f"{case.name}: a healthy node was flagged: {list(found)}"
        assert rc == 0
        return
    named = {c for f in found.values() for c in f["cause_ids"]}
    assert cause in named, f"{case.name}: {cause} not named (found {list(found)})"
    assert rc == (1 if any(f["status"] == "fail" for f in found.values()) else 0)
    if "expect_checks" in label:
        assert sorted(found) == sorted(label["expect_checks"])


@pytest.mark.parametrize("name", OWN)
def test_own_recorded_nodes(capsys: pytest.CaptureFixture[str], name: str) -> None:
    rc, data = check_root(capsys, HERE / name / "root")
    assert data["host"] == name and data["root"] == str((HERE / name / "root").resolve())
    assert set(data["probes"]) == {"kernel", "gpu_health", "pcie", "infiniband", "limits"}
    judge(HERE / name, rc, data)


@pytest.mark.parametrize("name", SHARED or ["(absent)"])
def test_public_recorded_nodes(capsys: pytest.CaptureFixture[str], name: str) -> None:
    case = shared_fixtures("hardware") / name
    if not (case / "label.json").is_file():
        pytest.skip(f"no case {name}")
    rc, data = check_root(capsys, case / "root")
    judge(case, rc, data)


def test_public_traps_stay_silent_for_the_right_reason(capsys: pytest.CaptureFixture[str]) -> None:
    base = shared_fixtures("hardware")
    _, hgx = check_root(capsys, base / "17-healthy-h100-hgx-lspci-acs-mgmt-ports" / "root")
    pcie = hgx["facts"]["pcie"]
    # ACS redirect on the NVSwitch management ports is seen, and kept off the GPUs' path
    assert len(pcie["acs_redirect_elsewhere"]) == 4 and pcie["acs_redirect_gpu_path"] == []
    assert pcie["gpus"] and pcie["gpu_link_width_degraded"] == []
    _, idle = check_root(capsys, base / "18-healthy-rtx4090x8-idle-pcie-gen1" / "root")
    gpus = idle["facts"]["gpu_health"]["gpus"]
    assert len(gpus) == 8 and {g["pcie_gen_current"] for g in gpus} == {1} and all(g["idle"] for g in gpus)
    _, a100 = check_root(capsys, base / "16-healthy-a100x8-rhel-nvswitch" / "root")
    assert a100["facts"]["kernel"]["aer_uncorrected"] == [] and a100["facts"]["gpu_health"]["gpu_count"] == 8
    _, xid = check_root(capsys, base / "08-xid119-gsp-timeout-h100" / "root")
    assert [(x["code"], x["bus"]) for x in xid["facts"]["kernel"]["xids"]] == [(119, "0000:9b:00.0")]


def test_root_runs_nothing_and_only_its_probes(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    rc, data = check_root(capsys, HERE / "kernel-xid79-off-bus" / "root")
    assert rc == 1 and "versions" not in data["probes"]
    rc, data = check_root(capsys, HERE / "kernel-xid79-off-bus" / "root", "--only", "kernel")
    assert list(data["probes"]) == ["kernel"]


@pytest.mark.parametrize("bad, why", [("no-such-dir", "no such folder"), ("file", "not a folder")])
def test_root_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: str, why: str) -> None:
    (tmp_path / "file").write_text("x")
    assert main(["check", "--root", str(tmp_path / bad)]) == 2
    assert why in capsys.readouterr().err
    assert main(["check", "--root", str(tmp_path), "--pid", str(os.getpid())]) == 2


def test_findings_are_evidence_for_the_diagnosis(capsys: pytest.CaptureFixture[str]) -> None:
    """The hardware findings are ordinary check findings: diagnose() ranks their cause first,
    and a node with application Xids only gives it nothing."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose

    kb = load_knowledge(use_env=False)
    _, faulty = check_root(capsys, HERE / "kernel-xid79-off-bus" / "root")
    ranked = diagnose(kb, IncidentEvidence(symptom="error-worker-raised", findings=faulty["findings"])).to_dict()
    assert ranked["causes"][0]["id"] == "gpu-hardware-fault"
    _, app = check_root(capsys, HERE / "kernel-application-xids" / "root")
    ranked = diagnose(kb, IncidentEvidence(findings=app["findings"])).to_dict()
    assert "gpu-hardware-fault" not in [c["id"] for c in ranked["causes"]]
