"""NCCL RAS: the text and JSON parsers on outputs written in NCCL's documented format
(tests/fixtures/ras/), the probe against a stand-in `ncclras` on PATH, and `distdoctor ras`."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from distdoctor.probes.base import ProbeContext
from distdoctor.probes.ras import UNAVAILABLE, as_evidence, parse, parse_json, probe_ras, problems
from distdoctor.tui.cli import main

RAS = Path(__file__).resolve().parents[1] / "fixtures" / "ras"


def facts_of(name: str) -> dict:
    return parse((RAS / name).read_text())


@pytest.mark.parametrize("name", ["text_healthy.txt", "json_healthy.json"])
def test_healthy_twins_are_silent(name: str) -> None:
    facts = facts_of(name)
    assert not problems(facts) and as_evidence(facts) == []
    assert facts["communicators"]


def test_text_dead_process_is_named_by_rank() -> None:
    facts = facts_of("text_dead.txt")
    assert facts["nccl_version"] == "2.26.2" and facts["format"] == "text"
    assert facts["dead"] == [{"rank": "5", "pid": 41235, "host": "gpu-node-2", "gpu": "1",
                              "comm": "7f3a91c2d4e5b6a8"}]
    assert facts["unresponsive"] == [] and facts["timeouts"] == 1
    assert facts["communicators"][0]["errors"] == ["INCOMPLETE"]
    (item,) = as_evidence(facts)
    assert (item["source"], item["ranks"], item["role"], item["cause"]) == \
        ("ras", ["5"], "crashed", "rank-crash-deadlock")


def test_text_count_mismatch() -> None:
    facts = facts_of("text_mismatch.txt")
    (m,) = facts["mismatches"]
    assert (m["op"], m["odd"], m["majority"], m["behind"]) == ("AllReduce", ["3"], "1042", True)
    (item,) = as_evidence(facts)
    assert (item["ranks"], item["role"], item["cause"]) == (["3"], "stuck", "collective-timeout")


def test_json_dead_and_mismatch() -> None:
    facts = facts_of("json_dead_mismatch.json")
    assert facts["format"] == "json" and facts["nccl_version"] == "2.28.9"
    assert [d["rank"] for d in facts["dead"]] == ["3"]
    (m,) = facts["mismatches"]
    assert (m["op"], m["odd"], m["majority"], m["behind"]) == ("AllReduce", ["1"], "1042", True)
    roles = {(tuple(i["ranks"]), i["role"], i["cause"]) for i in as_evidence(facts)}
    assert roles == {(("3",), "crashed", "rank-crash-deadlock"), (("1",), "stuck", "collective-timeout")}


def test_text_outliers_ahead_and_grouped_ranks() -> None:
    # the formats of client_support.cc: a group line followed by its ranks, and one rank ahead
    text = (RAS / "text_mismatch.txt").read_text().replace(
        "  7 ranks have launched up to operation 1042\n"
        "  Rank 3 has launched up to operation 1041 -- GPU 3 managed by process 40117 on node gpu-node-1\n",
        "  6 ranks have launched up to operation 1041\n"
        "  2 ranks have launched up to operation 1042\n"
        "  Rank 0 -- GPU 0 managed by process 40114 on node gpu-node-1\n"
        "  Rank 4 -- GPU 0 managed by process 41232 on node gpu-node-2\n")
    (m,) = parse(text)["mismatches"]
    assert (m["odd"], m["majority"], m["behind"]) == (["0", "4"], "1041", False)
    (item,) = as_evidence(parse(text))
    assert (item["role"], item["cause"]) == ("misconfigured", "asymmetric-collective")


def test_json_unresponsive_and_async_error() -> None:
    doc = json.loads((RAS / "json_dead_mismatch.json").read_text())
    comm = doc["communicators"][0]
    comm["missing_ranks"][0]["status"]["considered_dead"] = False
    comm["ranks"][1]["collective_counts"]["AllReduce"] = 1042
    comm["ranks"][2]["status"]["async_error"] = 6  # ncclRemoteError
    facts = parse_json(json.dumps(doc))
    assert facts["dead"] == [] and [u["rank"] for u in facts["unresponsive"]] == ["3"]
    assert facts["mismatches"] == [] and facts["errors"][0]["rank"] == "2"
    kinds = {(tuple(i["ranks"]), i["role"]) for i in as_evidence(facts)}
    assert kinds == {(("3",), "stuck"), (("2",), None)}


@pytest.mark.parametrize("text", ['{"nope": 1}', "{broken"])
def test_bad_json_raises(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json(text)


def fake_ncclras(folder: Path, version: str, output: Path | None, *, code: int = 0, sleep: float = 0) -> Path:
    """A stand-in for NCCL's client (no NCCL job here): prints a recorded answer, logs its argv."""
    folder.mkdir(exist_ok=True)
    exe = folder / "ncclras"
    exe.write_text(f"""#!{sys.executable}
import sys, time
open({str(folder / 'argv.log')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')
if sys.argv[1:] == ['--version']:
    sys.stderr.write('NCCL RAS client version {version}\\n'); sys.exit(0)
time.sleep({sleep})
if {code}:
    sys.stderr.write('Connecting to 127.0.0.1:28028: Connection refused\\nFailed to connect to the NCCL RAS service!\\n')
    sys.exit({code})
sys.stdout.write(open({str(output)!r}, encoding='utf-8').read())
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def ctx_with(folder: Path) -> ProbeContext:
    return ProbeContext(env={"PATH": str(folder)}, timeout=30)


def test_probe_asks_json_from_2_28_7(tmp_path: Path) -> None:
    fake_ncclras(tmp_path / "bin", "2.28.9", RAS / "json_dead_mismatch.json")
    result = probe_ras(ctx_with(tmp_path / "bin"), timeout_s=3)
    assert result.status == "fail" and result.facts["format"] == "json"
    assert result.facts["client_version"] == "2.28.9"
    assert (tmp_path / "bin" / "argv.log").read_text().splitlines()[-1] == "-t 3 -f json"


def test_probe_asks_text_before_2_28_7(tmp_path: Path) -> None:
    fake_ncclras(tmp_path / "bin", "2.26.2", RAS / "text_dead.txt")
    result = probe_ras(ctx_with(tmp_path / "bin"), host="10.0.0.7", port=28029)
    assert result.status == "fail" and result.facts["format"] == "text"
    assert (tmp_path / "bin" / "argv.log").read_text().splitlines()[-1] == "-t 5 -h 10.0.0.7 -p 28029"


def test_probe_without_ncclras_or_job(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = probe_ras(ctx_with(tmp_path / "empty"))
    assert result.status == "unavailable" and result.reason == UNAVAILABLE
    fake_ncclras(tmp_path / "bin", "2.26.2", None, code=1)
    result = probe_ras(ctx_with(tmp_path / "bin"))
    assert result.status == "unavailable" and "Failed to connect to the NCCL RAS service" in result.reason


def test_probe_that_hangs_is_killed(tmp_path: Path) -> None:
    fake_ncclras(tmp_path / "bin", "2.26.2", RAS / "text_dead.txt", sleep=60)
    result = probe_ras(ctx_with(tmp_path / "bin"), limit_s=2)
    assert result.status == "unavailable" and "timed out" in result.reason


def test_cli_input_and_unavailable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["ras", "--input", str(RAS / "text_mismatch.txt")]) == 1
    out = capsys.readouterr().out
    assert "rank 3 at 1041" in out and "distdoctor stacks" in out
    assert main(["ras", "--input", str(RAS / "json_healthy.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "ok" and doc["evidence"] == []
    (tmp_path / "bin.dat").write_bytes(b"\x00\xff\xfe")
    assert main(["ras", "--input", str(tmp_path / "bin.dat")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["ras"]) == 0  # could not look: not bad usage
    assert capsys.readouterr().out == f"unavailable: {UNAVAILABLE}\n"
    assert UNAVAILABLE.startswith("ncclras not on PATH (NCCL 2.24+")
    assert os.environ["PATH"] == str(tmp_path)
