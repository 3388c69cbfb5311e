"""`fleet compare` compares every version fact: Python, glibc, kernel, torch (version, git hash,
CUDA), the NCCL loaded and the NCCL files present, driver and CUDA driver; the README's table of
what must agree and what may differ matches the code."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from fleet_gen import NODE_FACTS, base_snapshot, write_fleet

from distdoctor.probes.fleet import compare, load_snapshots
from distdoctor.probes.fleet.compare import LABELS
from distdoctor.probes.fleet.schema import MAY_DIFFER, SUMMARY_FIELDS
from distdoctor.tui.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def base() -> dict:
    facts = copy.deepcopy(NODE_FACTS)
    facts["versions"]["torch"]["git"] = "cf30153c4c131c8164ee7798e5022d810682e2cb"
    facts["versions"]["nccl_builds_text"] = "nvidia-nccl-cu12 2.27.3 (pip)"
    return base_snapshot(facts)


def test_every_version_fact_is_in_the_summary(base: dict) -> None:
    summary = base["summary"]
    assert summary["python"] == "3.11.9" and summary["glibc"] == "2.35"
    assert summary["kernel"] == "5.15.0-105-generic"
    assert summary["torch"] == "2.13.0+cu128" and summary["torch_cuda"] == "12.8"
    assert summary["torch_git"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert summary["nccl"] == "2.27.3" and summary["nccl_files"] == "nvidia-nccl-cu12 2.27.3 (pip)"
    assert summary["driver"] == "550.54.15" and summary["cuda_driver"] == "12.4"


@pytest.mark.parametrize("field, value", [("python", "3.10.12"), ("torch_git", "0123abcd"),
                                          ("torch", "2.12.0+cu128"), ("nccl", "2.21.5")])
def test_a_node_on_another_build_is_an_outlier(tmp_path: Path, base: dict, field: str, value: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_fleet(tmp_path, 4, plants={2: {field: value}}, base=base)
    records, _ = load_snapshots([tmp_path])
    result = compare(records)
    assert [(o["node"], o["field"], o["value"]) for o in result["outliers"]] == [("node-02", field, value)]
    assert main(["fleet", "compare", str(tmp_path)]) == 1
    assert f"node-02: {LABELS[field]} {value}, 3 others" in capsys.readouterr().out


@pytest.mark.parametrize("field, value", [("kernel", "6.1.0-18-amd64"), ("glibc", "2.36"),
                                          ("nccl_files", "nvidia-nccl-cu12 2.27.3 (pip); /usr/lib/libnccl.so.2 2.18.1 (system)")])
def test_fields_that_may_differ_are_shown_not_outliers(tmp_path: Path, base: dict, field: str, value: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    write_fleet(tmp_path, 4, plants={1: {field: value}}, base=base)
    records, _ = load_snapshots([tmp_path])
    result = compare(records)
    assert result["outliers"] == [] and field not in result["agreed"]
    assert [d["field"] for d in result["may_differ"]] == [field]
    assert main(["fleet", "compare", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"may differ: {LABELS[field]}: " in out and f"{value} on 1" in out


def test_an_older_snapshot_without_the_new_fields_still_compares(tmp_path: Path, base: dict) -> None:
    old = copy.deepcopy(base)
    for field in ("python", "torch_git", "glibc", "kernel", "nccl_files"):
        del old["summary"][field]
    write_fleet(tmp_path, 3, base=old)
    records, skipped = load_snapshots([tmp_path])
    assert skipped == [] and len(records) == 3
    assert compare(records)["outliers"] == []


def test_the_readme_table_lists_every_field_and_what_may_differ() -> None:
    text = README.read_text()
    table = text[text.index("`fleet compare` compares these fields"):]
    rows = re.findall(r"^\| ([^|]+?) \| [^|]+ \| ([^|]+) \|$", table, re.M)
    shown = {name.strip(): rule.strip() for name, rule in rows if name.strip() != "field"}
    for field in SUMMARY_FIELDS:
        name = next(n for n in shown if LABELS[field] in n.split(", ") or LABELS[field] == n)
        assert shown[name].startswith("may differ") == (field in MAY_DIFFER), field


def test_json_has_the_may_differ_list(tmp_path: Path, base: dict, capsys: pytest.CaptureFixture[str]) -> None:
    write_fleet(tmp_path, 3, plants={0: {"kernel": "6.8.0"}}, base=base)
    assert main(["fleet", "compare", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["may_differ"][0]["field"] == "kernel" and doc["agreed"]["python"] == "3.11.9"
