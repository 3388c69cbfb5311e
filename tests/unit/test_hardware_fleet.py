"""`collect --root` over recorded nodes and `fleet compare` over the snapshots: the node with a
hardware fault is the odd one, even when it is not in the minority (issue 26)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixturekit import shared_fixtures

from distdoctor.probes.fleet import compare, load_snapshots
from distdoctor.tui.cli import main

HERE = Path(__file__).parents[1] / "fixtures" / "hardware"


def fleet(tmp_path: Path, trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> Path:
    """Copies of the recorded trees named as nodes, and a snapshot of each in snaps/."""
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for name, tree in trees.items():
        shutil.copytree(tree, tmp_path / "nodes" / name)
        assert main(["collect", "--root", str(tmp_path / "nodes" / name), "-o", str(snaps / f"{name}.json")]) == 0
    capsys.readouterr()
    return snaps


def test_the_faulty_node_is_the_odd_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    healthy, faulty = HERE / "gpu-idle-gen1" / "root", HERE / "gpu-link-x8-busy" / "root"
    snaps = fleet(tmp_path, {"gpu01": healthy, "gpu02": healthy, "gpu03": faulty, "gpu04": healthy}, capsys)
    doc = json.loads((snaps / "gpu03.json").read_text())
    assert doc["host"] == "gpu03" and doc["summary"]["driver"] == "550.54.15"
    assert doc["probes"]["versions"]["reason"] == "not read from a recorded node (--root)"
    assert main(["fleet", "compare", str(snaps), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert [(o["node"], o["field"]) for o in result["outliers"]] == [("gpu03", "hardware")]
    (dis,) = result["disagreements"]
    assert dis["majority"] == "none" and dis["cause_id"] == "gpu-hardware-fault"
    assert "gpu-pcie-width-degraded" in result["outliers"][0]["value"]


def test_a_faulty_majority_is_still_faulty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    healthy, faulty = HERE / "kernel-application-xids" / "root", HERE / "kernel-xid79-off-bus" / "root"
    snaps = fleet(tmp_path, {"a": faulty, "b": faulty, "c": healthy}, capsys)
    records, skipped = load_snapshots([snaps])
    result = compare(records, skipped)
    assert sorted(o["node"] for o in result["outliers"]) == ["a", "b"]
    assert result["disagreements"][0]["tie"] is False


def test_healthy_fleet_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = HERE / "pcie-acs-off" / "root"
    snaps = fleet(tmp_path, {"n1": tree, "n2": tree}, capsys)
    assert main(["fleet", "compare", str(snaps), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["agreed"]["hardware"] == "none"


def test_public_capture_in_a_fleet_of_its_healed_twins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The public A10 capture with a row remap pending, among three copies where the remap has
    been applied (Pending: No): the capture is read in place, the twins are made in tmp_path."""
    case = shared_fixtures("hardware") / "05-remapped-rows-pending-a10-nvsmi" / "root"
    text = (case / "sos_commands/nvidia/nvidia-smi_-q").read_text()
    healed = tmp_path / "healed"
    (healed / "sos_commands/nvidia").mkdir(parents=True)
    (healed / "sos_commands/nvidia/nvidia-smi_-q").write_text(
        text.replace("Pending                           : Yes", "Pending                           : No"))
    snaps = fleet(tmp_path, {"a10-1": healed, "a10-2": case, "a10-3": healed, "a10-4": healed}, capsys)
    assert main(["fleet", "compare", str(snaps), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert [(o["node"], o["value"]) for o in result["outliers"]] == [
        ("a10-2", "gpu-row-remap-pending (gpu-hardware-fault)")]


@pytest.mark.parametrize("where", ["own", "public"])
def test_compare_recorded_folders_names_exactly_the_faulty_nodes(where: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`fleet compare --recorded DIR` over a folder of recorded nodes (no snapshot files): the
    nodes with a fault are the hardware outliers, the healthy ones are not."""
    base = HERE if where == "own" else shared_fixtures("hardware")
    cases = sorted(p for p in base.iterdir() if (p / "label.json").is_file())
    faulty = sorted(p.name for p in cases if json.loads((p / "label.json").read_text())["expect_cause"])
    assert main(["fleet", "compare", "--recorded", str(base), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["nodes"] == len(cases) and result["skipped"] == []
    named = sorted(o["node"] for o in result["outliers"] if o["field"] == "hardware")
    assert named == faulty
    for outlier in (o for o in result["outliers"] if o["field"] == "hardware"):
        cause = json.loads((base / outlier["node"] / "label.json").read_text())["expect_cause"]
        assert outlier["value"].endswith(f"({cause})"), outlier


def test_compare_recorded_says_what_is_not_a_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["fleet", "compare", "--recorded", str(tmp_path / "empty")]) == 2
    assert "no recorded node here" in capsys.readouterr().err


def test_a_snapshot_from_before_the_hardware_field_is_no_outlier(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    tree = HERE / "pcie-acs-off" / "root"
    snaps = fleet(tmp_path, {"n1": tree, "n2": tree, "old": tree}, capsys)
    doc = json.loads((snaps / "old.json").read_text())
    del doc["summary"]["hardware"]  # as an older distdoctor wrote it
    (snaps / "old.json").write_text(json.dumps(doc))
    records, skipped = load_snapshots([snaps])
    result = compare(records, skipped)
    assert skipped == [] and result["outliers"] == [] and result["agreed"]["hardware"] == "none"
