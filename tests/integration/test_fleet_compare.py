"""fleet compare: planted outliers are found exactly; bad files are named and left out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_gen import GIB, base_snapshot, node_name, write_fleet

from distdoctor.probes.fleet import compare, load_snapshots, outlier_line, validate_snapshot
from distdoctor.tui.cli import main
from distdoctor.tui.record.session import SessionStore

PLANTS = {
    17: {"driver": "535.104.05"},
    30: {"nccl": "2.21.5"},
    41: {"switches": {"NCCL_IB_DISABLE": "1"}},
    50: {"shm_bytes": 64 << 20},
    5: {"gpu_count": 7, "gpu_model": "NVIDIA H100 80GB HBM3"},
    9: {"torch": "2.12.1+cu126", "torch_cuda": "12.6"},
}
EXPECTED = {
    (node_name(17), "driver", "535.104.05"),
    (node_name(30), "nccl", "2.21.5"),
    (node_name(41), "switch:NCCL_IB_DISABLE", "1"),
    (node_name(50), "shm_bytes", 64 << 20),
    (node_name(5), "gpu_count", 7),
    (node_name(9), "torch", "2.12.1+cu126"),
    (node_name(9), "torch_cuda", "12.6"),
}


@pytest.fixture(scope="module")
def base() -> dict:
    return base_snapshot()


def test_generated_base_is_a_valid_snapshot(base: dict) -> None:
    assert validate_snapshot(base) == []
    assert base["summary"]["driver"] == "550.54.15"
    assert base["summary"]["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert base["summary"]["gpu_count"] == 8
    assert base["summary"]["switches"] == {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "=ens1"}


def test_planted_outliers_are_found_exactly(tmp_path: Path, base: dict) -> None:
    write_fleet(tmp_path, 64, PLANTS, base)
    records, skipped = load_snapshots([tmp_path])
    assert skipped == []
    result = compare(records)
    assert result["nodes"] == 64
    found = {(o["node"], o["field"], o["value"]) for o in result["outliers"]}
    assert found == EXPECTED
    by = {(o["node"], o["field"]): o for o in result["outliers"]}
    driver = by[(node_name(17), "driver")]
    assert (driver["majority"], driver["count"]) == ("550.54.15", 63)
    assert outlier_line(driver) == "node-17: driver 535.104.05, 63 others 550.54.15"
    switch = by[(node_name(41), "switch:NCCL_IB_DISABLE")]
    assert switch["majority"] is None
    assert outlier_line(switch) == "node-41: NCCL_IB_DISABLE 1, 63 others unset"
    assert outlier_line(by[(node_name(50), "shm_bytes")]) == \
        "node-50: /dev/shm 64.0 MiB, 63 others 64.0 GiB"
    # names, addresses and time differ on every node and are not compared
    assert result["agreed"]["cuda_driver"] == "12.4"
    assert result["agreed"]["switch:NCCL_SOCKET_IFNAME"] == "=ens1"
    assert {d["field"] for d in result["disagreements"]} == {f for _, f, _ in EXPECTED}
    # one group for the majority, one per planted node
    assert [g["count"] for g in result["groups"]] == [58, 1, 1, 1, 1, 1, 1]
    assert result["groups"][0]["values"]["driver"] == "550.54.15"


def test_full_documents_compare_like_loaded_records(tmp_path: Path, base: dict) -> None:
    paths = write_fleet(tmp_path, 6, {2: {"driver": "535.104.05"}}, base)
    docs = [json.loads(p.read_text()) for p in paths]
    records, _ = load_snapshots(paths)
    from_docs, from_records = compare(docs), compare(records)
    assert from_docs["outliers"] == from_records["outliers"]
    assert from_docs["outliers"][0]["node"] == node_name(2)


def test_a_uniform_fleet_has_no_outliers(tmp_path: Path, base: dict) -> None:
    write_fleet(tmp_path, 10, None, base)
    result = compare(load_snapshots([tmp_path])[0])
    assert result["outliers"] == [] and result["disagreements"] == []
    assert len(result["groups"]) == 1 and result["groups"][0]["count"] == 10


def test_duplicate_hosts_are_told_apart(tmp_path: Path, base: dict) -> None:
    paths = write_fleet(tmp_path, 3, {2: {"driver": "535.104.05"}}, base)
    paths[2].write_text(paths[2].read_text().replace('"node-02"', '"node-00"'))
    result = compare(load_snapshots([tmp_path])[0])
    assert result["nodes"] == 3
    assert [o["node"] for o in result["outliers"]] == [f"node-00 ({paths[2]})"]


def test_a_file_given_twice_is_read_once(tmp_path: Path, base: dict) -> None:
    """`compare DIR DIR/node-02.json` counted node-02 twice: two of four nodes on the old driver
    made node-02 a majority-of-two and invented outliers."""
    fleet = tmp_path / "fleet"
    paths = write_fleet(fleet, 3, {2: {"driver": "535.104.05"}}, base)
    (tmp_path / "link.json").symlink_to(paths[0])
    records, skipped = load_snapshots([fleet, paths[2], tmp_path / "link.json", fleet / "." / "node-01.json"])
    assert skipped == []
    assert [r["file"] for r in records] == [str(p) for p in paths]  # the first occurrence is kept
    result = compare(records)
    assert result["nodes"] == 3
    assert [(o["node"], o["field"]) for o in result["outliers"]] == [(node_name(2), "driver")]


def _bad_files(directory: Path, base: dict) -> dict[str, str]:
    """Bad snapshot files by name -> a word their skip reason must contain."""
    good = json.dumps(base, indent=1)
    (directory / "truncated.json").write_text(good[: len(good) // 2])
    (directory / "foreign.json").write_text(json.dumps({"host": "x", "findings": []}))
    newer = dict(base, schema="distdoctor.snapshot/2")
    (directory / "newer.json").write_text(json.dumps(newer))
    (directory / "other-tool.json").write_text(json.dumps({"schema": "sos.report/1"}))
    (directory / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    (directory / "empty.json").write_text("")
    broken = json.loads(good)
    broken["summary"]["gpu_count"] = "eight"
    (directory / "invalid.json").write_text(json.dumps(broken))
    return {"truncated.json": "truncated", "foreign.json": "foreign", "newer.json": "newer schema",
            "other-tool.json": "foreign", "binary.json": "not JSON", "empty.json": "empty",
            "invalid.json": "gpu_count"}


def test_a_file_cut_anywhere_reads_as_truncated(base: dict) -> None:
    from distdoctor.probes.fleet.load import parse_record

    good = json.dumps(base, indent=1).encode()
    for cut in range(1, len(good) - 1, 5):
        record, reason = parse_record(good[:cut], "n.json")
        assert record is None and reason.startswith("truncated"), (cut, reason)
    assert parse_record(good + b"}", "n.json")[1].startswith("not valid JSON")


def test_bad_files_are_skipped_by_name_and_the_rest_compared(tmp_path: Path, base: dict) -> None:
    write_fleet(tmp_path, 8, {3: {"driver": "535.104.05"}}, base)
    expected = _bad_files(tmp_path, base)
    (tmp_path / "notes.txt").write_text("not a snapshot and not *.json: not read")
    records, skipped = load_snapshots([tmp_path, tmp_path / "missing.json"])
    assert len(records) == 8
    reasons = {Path(s["file"]).name: s["reason"] for s in skipped}
    assert set(reasons) == set(expected) | {"missing.json"}
    for name, word in expected.items():
        assert word in reasons[name], (name, reasons[name])
    assert "upgrade" in reasons["newer.json"]
    result = compare(records, skipped)
    assert [(o["node"], o["field"]) for o in result["outliers"]] == [(node_name(3), "driver")]
    assert len(result["skipped"]) == len(expected) + 1


def test_cli_exit_codes_and_json(tmp_path: Path, base: dict, capsys: pytest.CaptureFixture) -> None:
    write_fleet(tmp_path / "same", 4, None, base)
    assert main(["fleet", "compare", str(tmp_path / "same")]) == 0
    assert "every node agrees" in capsys.readouterr().out

    write_fleet(tmp_path / "odd", 4, {2: {"driver": "535.104.05"}}, base)
    assert main(["fleet", "compare", str(tmp_path / "odd"), "--json", "--session", "inc-1"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"] == 4 and data["skipped"] == []
    assert data["outliers"] == [{"node": node_name(2), "field": "driver", "value": "535.104.05",
                                 "majority": "550.54.15", "count": 3, "tie": False}]
    event = SessionStore().load("inc-1")["events"][-1]
    assert event["kind"] == "fleet" and event["data"]["outliers"] == data["outliers"]

    assert main(["fleet", "compare", str(tmp_path / "odd")]) == 1
    text = capsys.readouterr().out
    assert "node-02: driver 535.104.05, 3 others 550.54.15" in text
    assert "ssh -- node-02 distdoctor check" in text


def test_cli_nothing_readable_is_exit_2_with_one_line(tmp_path: Path, base: dict,
                                                      capsys: pytest.CaptureFixture) -> None:
    _bad_files(tmp_path, base)
    assert main(["fleet", "compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("distdoctor: error: no readable snapshots")
    assert any("truncated.json" in line for line in err)


def test_real_cli_subprocess(tmp_path: Path, base: dict) -> None:
    write_fleet(tmp_path, 5, {0: {"switches": {"NCCL_P2P_DISABLE": "1"}}}, base)
    (tmp_path / "cut.json").write_text('{"schema": "distdoctor.snapshot/1", "host": "x"')
    proc = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "fleet", "compare",
                           str(tmp_path), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert [(o["node"], o["field"]) for o in data["outliers"]] == \
        [(node_name(0), "switch:NCCL_P2P_DISABLE")]
    assert [Path(s["file"]).name for s in data["skipped"]] == ["cut.json"]
    assert "Traceback" not in proc.stderr
    code = ("import sys; from distdoctor.tui.cli import main; rc = main(sys.argv[1:]); "
            "print(rc, 'textual' in sys.modules, 'torch' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, "fleet", "compare", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.stderr.splitlines()[-1] == "1 False False"


def test_unknown_values_are_compared_too(tmp_path: Path) -> None:
    # a node whose driver cannot be read (no GPU visible) is an outlier, not silently equal
    facts = {k: dict(v) for k, v in __import__("fleet_gen").NODE_FACTS.items()}
    gpu = base_snapshot(facts)
    facts["versions"] = {k: v for k, v in facts["versions"].items() if k != "driver"}
    facts["topology"] = {"source": "none"}
    blind = base_snapshot(facts)
    docs = [dict(gpu, host=f"n{i}") for i in range(3)] + [dict(blind, host="n3")]
    result = compare(docs)
    fields = {o["field"]: o for o in result["outliers"] if o["node"] == "n3"}
    assert set(fields) == {"driver", "cuda_driver", "gpu_model", "gpu_count"}
    assert outlier_line(fields["driver"]) == "n3: driver unknown, 3 others 550.54.15"
    assert blind["summary"]["shm_bytes"] == 64 * GIB


def test_head_only_reading_agrees_with_whole_file_parsing(tmp_path: Path, base: dict) -> None:
    """Files collect writes are read by their head and trailer; any other layout is parsed
    whole. Both must give the same records."""
    big = json.loads(json.dumps(base))
    big["probes"]["network"]["facts"]["padding"] = ["x" * 100] * 200  # past the head
    many = json.loads(json.dumps(base))
    many["summary"]["switches"] = {f"NCCL_X{i}": str(i) for i in range(600)}  # summary past it
    docs = {"big": big, "many": many, "plain": base}
    for name, doc in docs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc, indent=1))
        (tmp_path / f"{name}-sorted.json").write_text(json.dumps(doc, sort_keys=True))
        (tmp_path / f"{name}-noend.json").write_text(
            json.dumps({k: v for k, v in doc.items() if k != "end"}))
    records, skipped = load_snapshots([tmp_path])
    assert skipped == []
    fields = {Path(r["file"]).name: r["fields"] for r in records}
    for name, doc in docs.items():
        for variant in ("", "-sorted", "-noend"):
            assert fields[f"{name}{variant}.json"] == doc["summary"], (name, variant)
    # equal summaries read by the head are parsed once and shared
    assert fields["big.json"] is fields["plain.json"]


def test_fifos_huge_numbers_and_deep_nesting_are_skipped_not_fatal(tmp_path: Path,
                                                                   base: dict) -> None:
    write_fleet(tmp_path, 3, {1: {"driver": "535.104.05"}}, base)
    os.mkfifo(tmp_path / "pipe.json")  # no writer: opening it for reading would block
    os.mkfifo(tmp_path / "given-fifo")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    text = json.dumps(base).replace(str(base["summary"]["shm_bytes"]), "1" + "0" * 5000, 1)
    (tmp_path / "bigint.json").write_text(text)  # past Python's int digit limit: ValueError
    (tmp_path / "deep.json").write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    records, skipped = load_snapshots([tmp_path, tmp_path / "given-fifo", "/dev/zero"])
    reasons = {Path(s["file"]).name: s["reason"] for s in skipped}
    assert len(records) == 3
    assert reasons["pipe.json"] == reasons["given-fifo"] == reasons["zero"] == "not a regular file"
    assert reasons["dangling.json"] == "no such file or folder"
    assert "number out of range" in reasons["bigint.json"] and "nested deeper" in reasons["deep.json"]
    assert [o["node"] for o in compare(records, skipped)["outliers"]] == [node_name(1)]


def test_text_escapes_control_characters_and_wraps_to_80_columns(tmp_path: Path,
                                                                 base: dict) -> None:
    from distdoctor.tui.commands.fleet_text import render_compare

    write_fleet(tmp_path, 4, {2: {"driver": "535.104.05"}}, base)
    odd = json.loads((tmp_path / "node-03.json").read_text())
    odd["host"] = "evil\x1b[2J\nnext: rm -rf /"
    odd["summary"]["torch"] = "2.0\x1b]0;title\x07"
    (tmp_path / "node-03.json").write_text(json.dumps(odd))
    records, skipped = load_snapshots([tmp_path])
    text = render_compare(compare(records, skipped), cols=80)
    assert "\x1b" not in text and "\x07" not in text
    assert not any(line.startswith("next: rm") for line in text.splitlines())
    assert "evil\\nnext: rm -rf /" in text
    for line in text.splitlines():
        assert len(line) <= 80 or line.lstrip().startswith(("ssh ", "distdoctor ")), line
    agree = next(i for i, line in enumerate(text.splitlines()) if line.startswith("agree: "))
    assert text.splitlines()[agree + 1].startswith("       ")  # wrapped under its label


def test_a_two_node_split_is_a_tie_not_a_majority(tmp_path: Path, base: dict) -> None:
    write_fleet(tmp_path, 2, {1: {"driver": "535.104.05"}}, base)
    result = compare(load_snapshots([str(tmp_path)])[0])
    [outlier] = result["outliers"]
    assert outlier["tie"] and result["disagreements"][0]["tie"]
    assert ", 1 other " in outlier_line(outlier)
    assert outlier_line(outlier).endswith(" (an even split: neither side is the odd one out)")
    write_fleet(tmp_path, 3, {1: {"driver": "535.104.05"}}, base)  # 2 against 1: a majority
    [outlier] = compare(load_snapshots([str(tmp_path)])[0])["outliers"]
    assert not outlier["tie"] and outlier_line(outlier).endswith("2 others 550.54.15")


def test_an_even_split_names_no_odd_node_and_says_what_breaks_the_tie(tmp_path: Path, base: dict) -> None:
    from distdoctor.tui.commands.fleet_text import render_compare

    write_fleet(tmp_path, 2, {1: {"driver": "535.104.05"}}, base)
    text = render_compare(compare(load_snapshots([str(tmp_path)])[0]), cols=120)
    assert "no node is the odd one out" in text and "fleet collect" in text
    assert "rebuild the odd nodes" not in text
    assert text.count("distdoctor check") == 2  # each side is checked, neither is singled out
