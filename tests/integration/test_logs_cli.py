"""`distdoctor logs` in a real subprocess: --json shape, text sections, exit codes, sessions."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]
WATCHDOG = ("[rank{r}]:[E1129 10:40:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600100 milliseconds before timing out.")
OOM = "[rank{r}]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([*DISTDOCTOR, "logs", *args], input=stdin.decode() if stdin else None,
                         capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    return res


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    for r in range(4):
        lines = [f"node0:{900 + r}:{900 + r} [{r}] NCCL INFO NCCL version 2.21.5+cuda12.4",
                 OOM.format(r=r) if r == 2 else WATCHDOG.format(r=r)]
        (d / f"rank{r}.log").write_text("\n".join(lines) + "\n")
    return d


def test_json_shape(job: Path) -> None:
    res = run(str(job), "--json")
    assert res.returncode == 1, res.stderr
    data = json.loads(res.stdout)
    assert set(data) >= {"causes", "first_failure", "ranks", "facts", "files_read", "bytes_read", "skipped"}
    assert data["files_read"] == 4 and data["bytes_read"] == sum(p.stat().st_size for p in job.iterdir())
    # the causes come in the diagnosis's order: the OOM on rank 2's own failure line explains the
    # crash, so it comes before the deadlock the crash left behind (a consequence never outranks
    # its explanation)
    assert [c["id"] for c in data["causes"][:2]] == ["cuda-oom", "rank-crash-deadlock"]
    assert data["verdict"]["confidence"] in ("confirmed", "likely") and data["verdict"]["cause"] == "cuda-oom"
    assert all(set(e) >= {"file", "line", "text"} for c in data["causes"] for e in c["evidence"])
    assert data["first_failure"] == {"rank": "2", "file": str(job / "rank2.log"), "line": 2,
                                     "text": OOM.format(r=2)}
    assert data["ranks"]["2"]["status"] == "crashed"
    assert data["ranks"]["0"]["last_collective"] == {"seq": 88, "op": "ALLREDUCE", "pg": "0"}
    assert data["facts"]["values"]["nccl_version"] == {"2.21.5": "0-3"}
    assert data["skipped"] == []


def test_text_output_has_every_section(job: Path) -> None:
    res = run(str(job), "--top", "2")
    assert res.returncode == 1
    out = res.stdout
    assert " 1. cuda-oom" in out and " 2. rank-crash-deadlock" in out and not re.search(r"^ 3\. ", out, re.M)
    assert "Culprit: rank 2 (crashed)" in out
    assert f"{job / 'rank2.log'}:2:" in out
    assert "First failure: rank 2" in out
    assert "Ranks (how each rank's own lines end" in out and "SeqNum 88 ALLREDUCE" in out
    assert "Next action:" in out


def test_nothing_found_exits_0(tmp_path: Path) -> None:
    (tmp_path / "ok.log").write_text("[rank0]: step 1 loss 2.0\n")
    res = run(str(tmp_path / "ok.log"))
    assert res.returncode == 0 and "No known failure signature" in res.stdout


def test_nothing_readable_exits_2(tmp_path: Path) -> None:
    (tmp_path / "core").write_bytes(b"\x00" * 100)
    for args in ([str(tmp_path / "missing.log")], [str(tmp_path / "core")]):
        res = run(*args)
        assert res.returncode == 2
        assert res.stderr.startswith("distdoctor: error: nothing readable") and res.stderr.count("\n") == 1


def test_disagreeing_facts_are_shown(tmp_path: Path) -> None:
    for r, v in enumerate(["2.21.5", "2.21.5", "2.18.1"]):
        (tmp_path / f"rank{r}.log").write_text(f"h{r}:1{r}:1{r} [0] NCCL INFO NCCL version {v}+cuda12.4\n")
    res = run(str(tmp_path))
    assert res.returncode == 1
    assert "Facts that differ across ranks:" in res.stdout and "2.18.1 on rank 2" in res.stdout
    assert " 1. version-mismatch" in res.stdout


def test_partial_input_still_reports_what_was_skipped(job: Path, tmp_path: Path) -> None:
    res = run(str(job), str(tmp_path / "missing.log"), "--json")
    assert res.returncode == 1
    assert json.loads(res.stdout)["skipped"][0]["path"].endswith("missing.log")


@pytest.mark.parametrize("args,msg", [(["--symptom", "sideways"], "unknown symptom"), (["--top", "0"], "--top")])
def test_bad_usage_exits_2(job: Path, args: list[str], msg: str) -> None:
    res = run(str(job), *args)
    assert res.returncode == 2 and msg in res.stderr


def test_symptom_changes_the_ranking(tmp_path: Path) -> None:
    (tmp_path / "r.log").write_text("[3] include/alloc.h:58 NCCL WARN Cuda failure 'out of memory'\n")
    hang = json.loads(run(str(tmp_path), "--json", "--symptom", "hang").stdout)
    err = json.loads(run(str(tmp_path), "--json", "--symptom", "error-oom").stdout)
    # the symptom's priors shift the log scores; the order shown is the diagnosis's, where the OOM
    # that explains the crash comes first either way (test_logs_trust_rules.py)
    def ratio(data: dict) -> float:
        score = {c["id"]: c["score"] for c in data["causes"]}
        return score["rank-crash-deadlock"] / score["cuda-oom"]

    assert ratio(hang) > ratio(err)
    assert hang["causes"][0]["id"] == err["causes"][0]["id"] == "cuda-oom"


def test_session_records_the_result(job: Path) -> None:
    res = run(str(job), "--session", "inc-7", "--json")
    assert res.returncode == 1
    from distdoctor.tui.record.session import SessionStore

    events = SessionStore().load("inc-7")["events"]
    assert [e["kind"] for e in events] == ["logs"]
    assert events[0]["data"] == json.loads(res.stdout)


def test_help_has_examples() -> None:
    res = run("--help")
    assert res.returncode == 0 and "examples:" in res.stdout and "distdoctor logs -" in res.stdout


def test_cli_imports_neither_textual_nor_torch(job: Path) -> None:
    code = ("import sys, io, contextlib\nfrom distdoctor.tui.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['logs', {str(job)!r}])\n"
            "print(sorted(m for m in ('textual', 'torch') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert res.stdout.strip() == "[]", res.stderr


def test_text_fits_80_columns_and_drops_escape_codes(tmp_path: Path) -> None:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.logs import analyse
    from distdoctor.tui.commands.logs_text import render

    kb = load_knowledge(use_env=False)
    job = tmp_path / "j"
    job.mkdir()
    # a coloured log line, and a watchdog line that names the op but not its SeqNum
    (job / "rank0.log").write_text(
        "\x1b[31m[rank0]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
        "(GPU 0; 79.35 GiB total capacity; 77.08 GiB already allocated)\x1b[0m\n")
    (job / "rank1.log").write_text("[Rank 1] Watchdog caught collective operation timeout:\n"
                                   "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=600000)\n")
    data = analyse([str(job)], kb).to_dict()
    text = render(data, kb, cols=80)
    assert "\x1b" not in text and "SeqNum None" not in text
    for line in text.splitlines():
        # only a location may pass the width: a path is never cut, it is pasted into an editor
        assert len(line) <= 80 or line.strip().endswith(":") or line.startswith("First failure"), line
    loc = f"{job / 'rank0.log'}:1:"
    assert any(line.strip() == loc or line.strip().startswith(loc + " ") for line in text.splitlines())
    # a multi-line fix snippet keeps every line under the same indent
    kb_fix = next(c for c in kb.causes.values() if c.fixes and "\n" in c.fixes[0].text)
    data["causes"] = [{"id": kb_fix.id, "score": 1, "evidence": []}]
    snippet = kb_fix.fixes[0].text.splitlines()
    lines = render(data, kb, cols=80).splitlines()
    start = lines.index(f"    {snippet[0]}")
    assert lines[start + 1] == f"    {snippet[1]}"


def test_a_healthy_log_with_only_context_lines_is_not_a_failure(tmp_path: Path) -> None:
    # torchrun prints this banner in every job: alone it once made `logs` exit 1, "cause found"
    banner = ("Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
              "to avoid your system being overloaded, please further tune the variable.\n")
    healthy = tmp_path / "healthy.log"
    healthy.write_text(banner + "[rank0]: Loading checkpoint from /ckpt/step-400\n"
                       "[rank0]: step 401 loss 1.25\n[rank1]: step 401 loss 1.25\n")
    res = run(str(healthy))
    assert res.returncode == 0, res.stdout
    assert "No known failure signature" in res.stdout
    assert "Most likely causes" not in res.stdout
    data = json.loads(run(str(healthy), "--json").stdout)
    assert data["causes"] == [] and data["verdict"]["failed"] is False
    # told it hangs, the same lines give leads: what the symptom points at, never evidence
    data = json.loads(run(str(healthy), "--json", "--symptom", "hang").stdout)
    assert data["causes"] and all(c["lead"] and c["basis"] != "evidence" for c in data["causes"])
    assert "mixed-launchers" not in [c["id"] for c in data["causes"] if c["basis"] != "prior"]
    assert run(str(healthy), "--symptom", "hang").returncode == 0
    failing = tmp_path / "failing.log"
    failing.write_text(banner + OOM.format(r=1) + "\n")
    res = run(str(failing), "--json")
    assert res.returncode == 1
    leads = {c["id"]: c["lead"] for c in json.loads(res.stdout)["causes"]}
    # the banner is not a second launcher, failure or not
    assert leads["cuda-oom"] is False and "mixed-launchers" not in leads
