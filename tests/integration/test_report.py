"""Reports: contents, conclusion, switches to remove, redaction and pseudonyms in md, html and json."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import distdoctor.probes.topology as topology
from distdoctor.knowledge import load_knowledge
from distdoctor.tui.record.report import build_report, render_html, render_json, render_markdown
from distdoctor.tui.record.session import SessionStore

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
SECRETS = [
    "hf_abcdefghijklmnopqrstuvwxyz123456", "abcdefghijklmnopqrstuvwxyz123456",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "plainsecretvalue42",
    "0123456789abcdef0123456789abcdef01234567", "eyJzdWIiOiIxMjM0In0", "Sup3rS3cretPw",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE", "hunter2hunter2",
]
REAL_NAMES = ["node-17", "node-18", "gpu-b-07", "alice", "bob", "10.1.2.3", "10.1.2.4", "10.9.8.7",
              "fe80::1:2:3:4", "2001:db8::42", "corp.example"]
DIAGNOSTIC = ["0000:07:00.0", "2.21.5+cuda12.4", "SeqNum=4521", "OpType=ALLREDUCE", "mlx5_0",
              "via P2P/IPC", "127.0.0.1"]

NCCL_LINE = "node-17:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>"
BEARER = ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcDEF123_-xyz pushing to "
          "https://bob:Sup3rS3cretPw@git.corp.example/x.git with ghp_abcdefghijklmnopqrstuvwxyz0123456789")


def planted(store: SessionStore, sid: str = "inc-1") -> dict[str, Any]:
    """A full session with secrets and real names planted in the places they turn up in life."""
    store.create(sid, host="node-17.corp.example")
    store.append(sid, "classify", {"symptom": "hang", "sub": "hang-init",
                                   "suspects": ["rank-env-mismatch", "p2p-unsupported"]})
    store.append(sid, "answer", {"question": "Which launcher?", "answer": "torchrun"})
    store.append(sid, "logs", {
        "causes": [
            {"id": "nic-selection", "score": 3.5, "evidence": [
                {"file": "/home/alice/logs/rank0.log", "line": 12, "text": NCCL_LINE},
                {"file": "rank1.log", "line": 7, "text": BEARER},
                {"file": "rank1.log", "line": 8, "text": "gpu-b-07:99:99 [1] NCCL INFO Bootstrap : "
                                                         "Using ib0:fe80::1:2:3:4%ib0<0> lo 127.0.0.1"}]},
            {"id": "collective-timeout", "score": 1.0, "evidence": [
                {"file": "rank1.log", "line": 9, "text": "[Rank 1] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=4521, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                 "Timeout(ms)=600000) busId 0000:07:00.0 NCCL version 2.21.5+cuda12.4"}]}],
        "first_failure": {"rank": 1, "file": "rank1.log", "line": 9, "text": "watchdog on node-18"},
        "files_read": 2, "bytes_read": 1234})
    store.append(sid, "check", {
        "host": "node-17", "duration_s": 0.4,
        "findings": [
            {"probe": "launch", "check": "master-unreachable", "status": "fail",
             "title": "MASTER_ADDR node-18 does not answer", "detail": "connect to 10.1.2.4:29500 refused",
             "cause_ids": ["master-addr-port"], "fix": "export MASTER_ADDR=<rank-0 host>"},
            {"probe": "shm", "check": "shm-small", "status": "warn", "title": "/dev/shm is 64 MB",
             "detail": "", "cause_ids": ["shm-insufficient"], "fix": "docker run --shm-size=16g"}],
        "facts": {
            "launch": {"MASTER_ADDR": "node-18", "MASTER_PORT": "29500", "USER": "alice",
                       "HOSTNAME": "node-17"},
            "switches": {"variables": {"NCCL_DEBUG_SUBSYS": {"value": "INIT,NET",
                                                             "source": "/etc/nccl.conf"},
                                       "NCCL_P2P_LEVEL": {"value": "NVL", "source": "env"}},
                         "env": {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0",
                                 "NCCL_SOCKET_IFNAME": "eth0", "TORCH_CPP_LOG_LEVEL": "WARNING",
                                 "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456",
                                 "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                                 "MY_API_KEY": "plainsecretvalue42",
                                 "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567"},
                         "conf_lines": ["db_password=hunter2hunter2"]},
            "network": {"interfaces": [{"name": "eth0", "addr": "10.1.2.3"},
                                       {"name": "ib0", "addr": "2001:db8::42"}],
                        "peers": ["10.9.8.7"]}}})
    store.append(sid, "topo", {"source": "nvml", "gpus": [{"index": 0, "bus_id": "0000:07:00.0"},
                                                          {"index": 1, "bus_id": "0000:08:00.0"}],
                               "nics": [], "p2p": "none", "nvlink": False,
                               "pairs": [{"a": 0, "b": 1, "link": "PHB", "p2p": "NS"}],
                               "advice": [{"text": "set NCCL_P2P_DISABLE=1", "env": "NCCL_P2P_DISABLE=1"}]})
    log = store.directory.parent / "runs" / "output.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"node-17:1:1 [0] NCCL INFO line {i}\n" for i in range(500))
                   + "node-17:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    # the shapes of `repro --json` and `bisect --json` (probes/repro: ReproResult, BisectResult)
    store.append(sid, "repro", {"outcome": "hang", "duration_s": 60.2,
                                "exit_codes": {"launcher": -9, "ranks": {"0": -9, "1": -9}},
                                "causes": [{"id": "p2p-unsupported", "score": 0.8}], "log": str(log),
                                "run_dir": str(log.parent), "nproc": 2, "stuck_at": "all_reduce",
                                "first_error": "", "env_added": {"NCCL_DEBUG": "INFO"},
                                "command": ["python", "-m", "torch.distributed.run", "x.py"]})
    store.append(sid, "bisect", {
        "backend": "nccl", "baseline": {"outcome": "hang", "duration_s": 60, "log": str(log)},
        "runs": [{"switch": "ib-disable", "env": "NCCL_IB_DISABLE=1", "outcome": "hang",
                  "duration_s": 60, "causes": [], "log": str(log)},
                 {"switch": "p2p-disable", "env": "NCCL_P2P_DISABLE=1", "outcome": "pass",
                  "duration_s": 5.1, "causes": [], "log": str(log)}],
        "verdict": {"switch": "p2p-disable", "env": "NCCL_P2P_DISABLE=1", "cause": "p2p-unsupported",
                    "causes": ["p2p-unsupported"], "cause_title": "GPUs have no usable P2P path",
                    "why": "P2P off", "permanent_fix": "fix ACS, then remove NCCL_P2P_DISABLE",
                    "reminder": "remove NCCL_P2P_DISABLE once fixed"},
        "baseline_passed": False, "stopped": False})
    return store.load(sid)


@pytest.fixture(scope="module")
def kb():
    return load_knowledge()


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture()
def store(state: Path) -> SessionStore:
    return SessionStore(state / "distdoctor" / "sessions")


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([str(DISTDOCTOR), *args], capture_output=True, text=True, env=env, timeout=60)


def test_report_holds_every_part_in_order(store: SessionStore, kb) -> None:
    report = build_report(planted(store), kb)
    assert report["versions"] == {"distdoctor": version("distdoctor"), "knowledge": kb.version}
    assert report["symptom"]["kind"] == "hang" and report["symptom"]["title"] == kb.symptoms["hang-init"].title
    assert [s["kind"] for s in report["steps"]] == ["classify", "answer", "logs", "check", "topo",
                                                    "repro", "bisect"]
    assert report["steps"][6]["summary"].endswith("NCCL_P2P_DISABLE=1 -> p2p-unsupported")
    assert [f["status"] for f in report["findings"]] == ["fail", "warn"]
    assert {e["cause"] for e in report["evidence"]} == {"nic-selection", "collective-timeout"}
    assert {"group": "launch", "name": "MASTER_PORT", "value": "29500"} in report["environment"]
    assert {"group": "switches", "name": "variables.NCCL_DEBUG_SUBSYS",
            "value": "INIT,NET (from /etc/nccl.conf)"} in report["environment"]
    assert report["topology"]["summary"] == {"source": "nvml", "p2p": "none", "nvlink": False}
    assert ["outcome", "hang"] in report["repro"]["summary"]
    assert ["causes", "p2p-unsupported (0.8)"] in report["repro"]["summary"]
    tail = report["repro"]["log_tail"].splitlines()  # read from the log file the repro left
    assert len(tail) == 40 and tail[-1].endswith("via P2P/IPC") and tail[0].endswith("line 461")
    runs = report["bisect"]["tables"][0]
    assert runs["columns"] == ["switch", "outcome", "duration_s", "causes"]
    assert runs["rows"][1][:2] == ["NCCL_P2P_DISABLE=1", "pass"]
    assert ["verdict", "passes with NCCL_P2P_DISABLE=1: GPUs have no usable P2P path"] in \
        report["bisect"]["summary"]


def test_combined_conclusion_ranks_the_bisection_first(store: SessionStore, kb) -> None:
    report = build_report(planted(store), kb)
    causes = report["conclusion"]["causes"]
    assert report["conclusion"]["source"] == "combined" and report["conclusion"]["note"] == ""
    assert causes[0]["id"] == "p2p-unsupported"
    assert any(w.startswith("bisect:") for w in causes[0]["why"])
    ids = [c["id"] for c in causes]
    assert ids.index("master-addr-port") < ids.index("shm-insufficient")  # fail outranks warn
    assert ids.index("nic-selection") < ids.index("collective-timeout")  # log scores carry over
    fixes = report["fixes"]
    assert fixes[0]["title"] == "From the bisection"
    assert fixes[0]["fix"] == "fix ACS, then remove NCCL_P2P_DISABLE"  # the verdict's own words
    p2p = next(f for f in fixes if f["cause"] == "p2p-unsupported" and f["title"] != "From the bisection")
    assert [x["text"] for x in p2p["fixes"]] == [f.text for f in kb.causes["p2p-unsupported"].fixes]


def test_only_warnings_make_a_weak_conclusion(store: SessionStore, kb) -> None:
    store.append("w", "classify", {"symptom": "hang", "suspects": ["rank-env-mismatch"]})
    store.append("w", "check", {"findings": [{"status": "warn", "title": "debug logging is on",
                                              "cause_ids": ["collective-timeout"]}]})
    report = build_report(store.load("w"), kb)
    ids = [c["id"] for c in report["conclusion"]["causes"]]
    # the warning adds to the hang prior of collective-timeout; the other hang suspects stay priors
    assert ids[0] == "collective-timeout" and "rank-env-mismatch" in ids
    assert report["conclusion"]["note"].startswith("Weak evidence")
    assert "> Weak evidence" in render_markdown(report)


def test_conclusion_event_wins(store: SessionStore, kb) -> None:
    planted(store)
    store.append("inc-1", "conclusion", {"causes": [{"id": "ib-rdma-failure", "score": 0.9,
                                                     "why": "operator judgement"}]})
    report = build_report(store.load("inc-1"), kb)
    assert report["conclusion"]["source"] == "conclusion"
    assert [c["id"] for c in report["conclusion"]["causes"]] == ["ib-rdma-failure"]
    assert report["conclusion"]["causes"][0]["why"] == ["operator judgement"]


def test_switches_to_remove(store: SessionStore, kb) -> None:
    report = build_report(planted(store), kb)
    found = {s["name"]: s for s in report["switches_to_remove"]}
    # NCCL_DEBUG=INFO from the environment, the subsystem list from an nccl.conf line, the winner
    # of the bisection; not NCCL_IB_HCA (not a debugging switch), not TORCH_CPP_LOG_LEVEL=WARNING
    # (its default), not NCCL_SOCKET_IFNAME set in the job (there it is the fix, not a test)
    assert set(found) == {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_P2P_DISABLE"}
    assert found["NCCL_DEBUG"]["value"] == "INFO"
    assert found["NCCL_DEBUG_SUBSYS"]["where"] == "/etc/nccl.conf"  # delete the line there
    assert found["NCCL_P2P_DISABLE"]["where"].startswith("bisection verdict")
    assert "remove" in found["NCCL_P2P_DISABLE"]["why"]
    store.append("inc-1", "bisect", {"runs": [], "verdict": {"switch": "nccl-socket-ifname",
                                                             "env": "NCCL_SOCKET_IFNAME=eth1"}})
    report = build_report(store.load("inc-1"), kb)
    found = {s["name"]: s for s in report["switches_to_remove"]}
    assert found["NCCL_SOCKET_IFNAME"]["value"] == "eth1"
    assert kb.switches["nccl-socket-ifname"].permanent_fix in found["NCCL_SOCKET_IFNAME"]["why"]
    assert report["conclusion"]["causes"][0]["id"] == "nic-selection"  # from the switch's implicates


def test_report_has_no_planted_secret(store: SessionStore, state: Path, kb) -> None:
    report = build_report(planted(store), kb)
    cli = run_cli("report", "--format", "json", state=state)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["redacted"] is True
    for fmt, text in [("md", render_markdown(report)), ("html", render_html(report)),
                      ("json", render_json(report)), ("cli json", cli.stdout)]:
        for secret in SECRETS:
            assert secret not in text, (fmt, secret)
        for kept in DIAGNOSTIC + ["node-17", "MASTER_ADDR", "[redacted]"]:
            assert kept in text, (fmt, kept)


def test_no_redact_keeps_secrets_and_warns(store: SessionStore, state: Path, tmp_path: Path) -> None:
    planted(store)
    target = tmp_path / "raw.md"
    out = run_cli("report", "--no-redact", "-o", str(target), state=state)
    assert out.returncode == 0 and "warning: redaction is off" in out.stderr
    text = target.read_text()
    assert "hf_abcdefghijklmnopqrstuvwxyz123456" in text and "Sup3rS3cretPw" in text
    assert "WARNING: redaction was turned off" in text
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # secrets inside: owner only


def test_pseudonymized_report_has_no_real_name(store: SessionStore, state: Path, tmp_path: Path,
                                               kb) -> None:
    planted(store)
    target = tmp_path / "incident.md"
    out = run_cli("report", "--pseudonymize", "-o", str(target), state=state)
    assert out.returncode == 0, out.stderr
    mapping_path = store.pseudonyms_path("inc-1")
    assert stat.S_IMODE(mapping_path.stat().st_mode) == 0o600
    mapping = json.loads(mapping_path.read_text())
    # the same mapping file again, in process: a second report reuses the tokens
    report = build_report(store.load("inc-1"), kb, pseudonymize=True, mapping_path=mapping_path)
    assert json.loads(mapping_path.read_text()) == mapping
    outputs = {"md": target.read_text(), "html": render_html(report), "json": render_json(report)}
    for fmt, text in outputs.items():
        for real in REAL_NAMES + SECRETS:
            assert real not in text, (fmt, real)
        assert "pseudonyms.json" not in text
        for kept in DIAGNOSTIC:
            assert kept in text, (fmt, kept)
    host = mapping["host"]["node-17"]
    assert mapping["host"]["node-17.corp.example"] == host
    # the same host is the same token in the session field, the NCCL line, the facts and the log
    assert report["session"]["host"] == host
    assert f"| host | {host} |" in outputs["md"]
    assert report["evidence"][0]["text"].startswith(f"{host}:1234:1234 [0] NCCL INFO")
    assert f"{host}:1234:1234 [0] NCCL INFO" in outputs["md"]
    assert {"group": "launch", "name": "HOSTNAME", "value": host} in report["environment"]
    ip = mapping["ip"]["10.1.2.3"]
    assert report["evidence"][0]["text"].endswith(f"[0]eth0:{ip}<0>")
    assert f'"addr":"{ip}"' in next(r["value"] for r in report["environment"] if r["name"] == "interfaces")
    assert report["evidence"][0]["file"] == f"/home/{mapping['user']['alice']}/logs/rank0.log"


def test_html_is_self_contained_and_escaped(store: SessionStore, kb, monkeypatch) -> None:
    planted(store)
    store.append("inc-1", "answer", {"question": "pasted", "answer": "<script>alert(1)</script>"})

    def fake_svg(facts: dict) -> str:
        return ('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="steal()">'
                f'<text>{len(facts["gpus"])} GPUs</text><image href="https://cdn.example/x.png"/>'
                '<script>fetch("http://x")</script><use href="#gpu0"/></svg>')

    monkeypatch.setattr(topology, "to_svg", fake_svg, raising=False)
    html = render_html(build_report(store.load("inc-1"), kb))
    assert "<svg" in html and "2 GPUs" in html and 'href="#gpu0"' in html
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:|//)""", html)
    for banned in ("<script", "<link", "onload=", "@import", "<iframe"):
        assert banned not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html


def test_topology_falls_back_to_text_then_to_nothing(store: SessionStore, kb, monkeypatch) -> None:
    planted(store)
    record = store.load("inc-1")
    def broken(*args, **kwargs):
        raise RuntimeError("drawing bug")

    # a drawing bug loses the picture, not the report (an ImportError of distdoctor's own
    # modules is a broken install and is raised: issue 11)
    monkeypatch.setattr(topology, "to_svg", broken)
    monkeypatch.setattr(topology, "draw_text", lambda facts, width=80: "GPU0 ==PHB== GPU1")
    report = build_report(record, kb)
    assert report["topology"]["text"] == "GPU0 ==PHB== GPU1"
    assert "<pre>GPU0 ==PHB== GPU1</pre>" in render_html(report)
    assert "GPU0 ==PHB== GPU1" in render_markdown(report)
    monkeypatch.setattr(topology, "draw_text", broken)
    report = build_report(record, kb)
    assert report["topology"]["text"] is None
    html = render_html(report)
    assert "topology picture failed: RuntimeError: drawing bug" in html and "<svg" not in html
    assert "p2p: **none**" in render_markdown(report)


def test_defensive_against_odd_event_shapes(store: SessionStore, kb) -> None:
    store.create("odd")
    for kind, data in [("classify", None), ("logs", ["not", "a", "dict"]), ("check", {"findings": "x",
                       "facts": {"p": "flat"}}), ("bisect", {"verdict": None, "runs": "x"}),
                       ("repro", {}), ("topo", {"advice": "x"}), ("mystery", {"a": 1}),
                       ("logs", {"causes": [{"id": "cuda-oom", "evidence": [{"text": "```\nboom"}]}]})]:
        store.append("odd", kind, data)
    record = store.load("odd")
    record["events"].append("garbage")
    report = build_report(record, kb)
    assert report["conclusion"]["causes"][0]["id"] == "cuda-oom"
    md = render_markdown(report)
    assert "````" in md  # the fence outgrows the backticks inside the evidence
    for text in (md, render_html(report), render_json(report)):
        assert "Conclusion" in text or '"conclusion"' in text
    empty = build_report({"id": "x", "events": []}, kb)
    assert empty["conclusion"] == {"source": "none", "causes": [], "note": ""}
    assert empty["symptom"] is None
    assert "Not classified" in render_markdown(empty)


def test_cli_errors_and_format_from_suffix(store: SessionStore, state: Path, tmp_path: Path) -> None:
    none_yet = run_cli("report", state=state)
    assert none_yet.returncode == 2 and none_yet.stderr.count("\n") == 1
    assert none_yet.stderr.startswith("distdoctor: error: no sessions yet")
    planted(store)
    missing = run_cli("report", "nope", state=state)
    assert missing.returncode == 2 and missing.stderr == \
        "distdoctor: error: no session 'nope' (see `distdoctor sessions`)\n"
    target = tmp_path / "incident.html"
    ok = run_cli("report", "inc-1", "-o", str(target), state=state)
    assert ok.returncode == 0 and target.read_text().startswith("<!DOCTYPE html>")
    unwritable = run_cli("report", "-o", str(tmp_path / "no" / "dir" / "x.md"), state=state)
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr


def test_report_command_imports_neither_textual_nor_torch() -> None:
    code = ("import sys; from distdoctor.tui.cli import build_parser; build_parser(); "
            "import distdoctor.tui.record.report, distdoctor.tui.commands.report, distdoctor.tui.record.pseudonym; "
            "print(sorted(m for m in ('textual', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


LEAKS_FOUND = {  # secrets that once went through redaction, planted in a real `logs` run
    "HF_TOKEN=hf_QaLeakAbCdEfGhIjKlMnOpQrSt0123": "QaLeakAbCdEf",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJxYSI6MX0.c2lnbmF0dXJlUWFMZWFr": "c2lnbmF0dXJl",
    "git clone https://carol:QaPassw0rdLeak@git.internal/r.git": "QaPassw0rdLeak",
    "aws s3 cp x s3://b/ with AKIAQALEAKQALEAK1234": "AKIAQALEAKQALEAK1234",
    "notify https://hooks.slack.com/services/T0000/B0000/QaSlackHookLeak99": "QaSlackHookLeak99",
    "Cookie: sessionid=QaCookieLeak77; csrftoken=abc": "QaCookieLeak77",
    "cache at redis://:QaRedisLeak55@10.20.30.40:6379/0": "QaRedisLeak55",
    "npm token npm_QaNpmLeakabcdefghijklmnopqrstuvwxyz01": "QaNpmLeak",
}


def test_real_logs_and_check_events_leak_nothing(state: Path, store: SessionStore,
                                                  tmp_path: Path) -> None:
    import socket

    import psutil

    log = tmp_path / "rank0.log"
    log.write_text("".join(f"[rank0]: {line}\n" for line in LEAKS_FOUND)
                   + "[rank0]: torch.OutOfMemoryError: CUDA out of memory. "
                     "HF_TOKEN=hf_QaLeakAbCdEfGhIjKlMnOpQrSt0123 Cookie: id=QaCookieLeak77\n")
    assert run_cli("logs", str(log), "--session", "real", state=state).returncode == 1
    assert run_cli("check", "--session", "real", state=state).returncode in (0, 1)
    check = store.load("real")["events"][-1]["data"]
    # secret-looking environment values as a probe may record them
    check["facts"]["launch"]["variables"] = {
        "SLACK_WEBHOOK": "https://hooks.slack.com/services/T1/B1/QaSlackHookLeak99",
        "HF_HUB_TOKEN": "hf_QaLeakAbCdEfGhIjKlMnOpQrSt0123", "DB_PASSWORD": "QaPassw0rdLeak",
        "REDIS_URL": "redis://:QaRedisLeak55@cache:6379"}
    check["facts"]["versions"]["torch"] = {"version": "2.13.0", "git": "cf30153c4c131c8164ee7798e5022d810682e2cb"}
    store.append("real", "check", check)
    texts = {fmt: run_cli("report", "real", "--format", fmt, state=state) for fmt in ("md", "html", "json")}
    for fmt, out in texts.items():
        assert out.returncode == 0, out.stderr
        for secret in LEAKS_FOUND.values():
            assert secret not in out.stdout, (fmt, secret)
        # a commit named by its key is not a secret: the torch build stays identifiable
        assert "cf30153c4c131c8164ee7798e5022d810682e2cb" in out.stdout, fmt
    host = socket.gethostname()
    addrs = {a.address.split("%")[0] for nics in psutil.net_if_addrs().values() for a in nics
             if a.family in (socket.AF_INET, socket.AF_INET6)}
    addrs = {a for a in addrs if not a.startswith(("127.", "::1", "fe80"))}
    for fmt in ("md", "html", "json"):
        out = run_cli("report", "real", "--format", fmt, "--pseudonymize", state=state).stdout
        if host.lower() not in ("localhost", "host", "node"):
            assert not re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", out), (fmt, host)
        for addr in addrs:
            assert addr not in out, (fmt, addr)


def test_repro_log_paths_are_read_only_when_they_are_run_logs(store: SessionStore, kb,
                                                             tmp_path: Path) -> None:
    # a session file can be edited or come from elsewhere: /dev/zero once hung the report, a FIFO
    # blocked it, and any other path put that file's tail into the report
    os.mkfifo(tmp_path / "output.log")
    (tmp_path / "secret.txt").write_text("root:x:0:0:private\n")
    store.create("paths")
    tails = {}
    for name, path in [("zero", "/dev/zero"), ("fifo", str(tmp_path / "output.log")),
                       ("other", str(tmp_path / "secret.txt"))]:
        store.append("paths", "repro", {"outcome": "error", "log": path})
        tails[name] = build_report(store.load("paths"), kb)["repro"]["log_tail"]
    assert tails["zero"].endswith("not a distdoctor run log (output.log); not read)")
    assert tails["fifo"].endswith("not a regular file; not read)")
    assert "private" not in tails["other"] and "not read" in tails["other"]


def test_unredacted_report_over_an_existing_file_is_owner_only(store: SessionStore, state: Path,
                                                               tmp_path: Path) -> None:
    planted(store)
    target = tmp_path / "old.md"
    target.write_text("old")
    target.chmod(0o644)  # O_CREAT's mode does not apply to a file that is already there
    assert run_cli("report", "--no-redact", "-o", str(target), state=state).returncode == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_markdown_fixes_are_blocks_to_copy_not_escaped_table_cells(store: SessionStore, kb) -> None:
    md = render_markdown(build_report(planted(store), kb))
    findings = md[md.index("## Findings"):md.index("## Log evidence")]
    # in a table cell the fix read `export MASTER_ADDR=\<rank-0 host\>` and wrapped anywhere
    assert "  ```sh\n  export MASTER_ADDR=<rank-0 host>\n  ```" in findings
    assert "- **FAIL** MASTER\\_ADDR" not in findings and "- **FAIL** MASTER_ADDR node-18" in findings
    assert findings.index("**FAIL**") < findings.index("**WARN**")


def test_a_report_cannot_be_written_over_a_session(store: SessionStore, state: Path) -> None:
    planted(store)
    before = store.path("inc-1").read_bytes()
    out = run_cli("report", "inc-1", "-o", str(store.path("inc-1")), state=state)
    assert out.returncode == 2 and "that is the sessions folder" in out.stderr
    assert store.path("inc-1").read_bytes() == before
