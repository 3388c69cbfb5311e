"""The one diagnosis (knowledge/diagnosis.py): the reference incidents confirmed with their
culprit, "not enough evidence" as an answer (exit 0, what to collect), nothing that contradicts
the culprit, causes that cannot apply to a Gloo job on CPU left out with the reason, advisory
checks never evidence, restart advice, and the same verdict in English and Chinese."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distdoctor.knowledge import i18n, load_knowledge
from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose, symptom_priors
from distdoctor.knowledge.logs import analyse, analyse_text
from distdoctor.tui.cli import main

KB = load_knowledge(use_env=False)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "recorded"


def _logs(case: str, console: bool) -> list[str]:
    logs = RECORDED / case / "logs"
    return [str(logs)] if console else [str(logs / "torchrun_logs")]


def _diagnose(paths: list[str], symptom: str | None):
    return diagnose(KB, IncidentEvidence(symptom=symptom, logs=analyse(paths, KB, symptom=symptom).to_dict()))


@pytest.mark.parametrize("console", [False, True], ids=["rank-folders", "with-console"])
def test_reference_crash_is_confirmed_with_rank_1_and_nothing_contradicts_it(console: bool) -> None:
    d = _diagnose(_logs("incident-crash", console), "error")
    assert d.confidence == "confirmed" and d.exit_code == 1
    assert d.culprit["ranks"] == ["1"] and d.culprit["role"] == "crashed"
    assert d.cause == "rank-crash-deadlock" and d.next_action["kind"] == "fix"
    assert d.ranks["1"]["status"] == "crashed" and d.ranks["0"]["status"] == "lost-peer"
    # "no crashed rank in sight" cannot stand beside a crashed culprit: left out, or argued against
    for r in d.causes:
        if r.id == "collective-timeout":
            assert r.basis != "evidence" and any("premise" in a for a in r.against)
    assert d.recurrence == "will-recur"


@pytest.mark.parametrize("console", [False, True], ids=["rank-folders", "with-console"])
def test_reference_hang_names_rank_1_stuck(console: bool) -> None:
    d = _diagnose(_logs("incident-hang", console), "hang")
    assert d.confidence == "confirmed"
    assert d.culprit["ranks"] == ["1"] and d.culprit["role"] == "stuck"
    assert d.ranks["1"]["status"] == "stuck" and d.ranks["0"]["status"] == "timed-out"
    assert all(r.id != "rank-crash-deadlock" or r.basis != "evidence" for r in d.causes)


def test_a_gloo_job_on_cpu_leaves_out_gpu_and_nccl_causes_with_the_reason() -> None:
    d = _diagnose(_logs("incident-crash", True), "error")
    left = {x["id"]: x["why"] for x in d.left_out}
    assert {"cuda-oom", "p2p-unsupported", "ib-rdma-failure"} <= set(left)
    assert "Gloo" in left["cuda-oom"]
    assert not {"cuda-oom", "p2p-unsupported", "ib-rdma-failure"} & {r.id for r in d.causes}


def test_a_failure_line_of_its_own_keeps_a_gpu_cause_on_a_gloo_job() -> None:
    text = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.15 GiB of which 1.2 GiB is free.\n")
    rep = analyse_text(text, KB, symptom="error").to_dict()
    rep["facts"] = dict(rep.get("facts") or {}, job={"backend": "gloo"})
    d = diagnose(KB, IncidentEvidence(symptom="error", logs=rep))
    assert d.causes[0].id == "cuda-oom" and "cuda-oom" not in {x["id"] for x in d.left_out}


# one rank's watchdog line, written from ProcessGroupNCCL's format: a timeout fits many causes
BARE_TIMEOUT = ("[rank3]:[E1205 04:35:53.584483882 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=3348, OpType=BROADCAST, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=1800000) ran for 1800081 milliseconds before timing out.\n")


def test_a_bare_timeout_is_not_enough_evidence_and_says_what_to_collect(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "rank3.log"
    log.write_text(BARE_TIMEOUT)
    assert main(["logs", str(log), "--symptom", "hang", "--json"]) == 0  # unknown is no answer: exit 0
    v = json.loads(capsys.readouterr().out)["verdict"]
    assert v["confidence"] == "unknown" and v["cause"] is None and v["failed"] is True
    assert v["next_action"]["kind"] == "collect"
    assert "export NCCL_DEBUG=INFO" in v["collect"]
    assert any(c.startswith("distdoctor stacks") for c in v["collect"])
    assert any("rank 0, 1, 2" in c for c in v["collect"])  # the logs not given
    assert main(["logs", str(log), "--symptom", "hang"]) == 0
    out = capsys.readouterr().out
    assert out.index("Verdict (unknown)") < out.index("Where to look first")
    assert "Next action:" not in out and "Collect next" in out


def test_the_silent_twin_a_timeout_whose_waiters_name_the_stuck_rank_is_an_answer() -> None:
    d = _diagnose(_logs("incident-hang", False), "hang")
    assert d.confident and d.culprit["ranks"] == ["1"]


def test_an_advisory_check_is_never_evidence() -> None:
    advice = {"probe": "switches", "check": "no-explicit-timeouts", "status": "warn",
              "title": "advice: no timeout hardening is set", "cause_ids": ["collective-timeout"]}
    fail = {"probe": "shm", "check": "shm-too-small", "status": "fail", "title": "/dev/shm is 64 MB",
            "cause_ids": ["shm-insufficient"]}
    d = diagnose(KB, IncidentEvidence(findings=[advice]))
    assert "collective-timeout" not in {r.id for r in d.causes} and d.hardening
    assert d.confidence == "unknown"
    d = diagnose(KB, IncidentEvidence(findings=[advice, fail]))
    assert d.causes[0].id == "shm-insufficient" and "collective-timeout" not in {r.id for r in d.causes}


def test_a_crash_killed_from_outside_may_pass_on_a_rerun() -> None:
    base = analyse(_logs("incident-crash", False), KB, symptom="error").to_dict()
    base["timeline"]["1"]["end"]["kind"] = "killed"
    d = diagnose(KB, IncidentEvidence(symptom="error", logs=base))
    assert d.recurrence == "may-pass"


def test_healthy_runs_are_never_an_answer() -> None:
    healthy = [p for p in sorted((FIXTURES / "healthy").iterdir()) if (p / "logs").is_dir()]
    healthy += [p for p in sorted((FIXTURES / "fresh" / "healthy").iterdir()) if (p / "logs").is_dir()]
    assert healthy
    for case in healthy:
        d = _diagnose([str(case / "logs")], None)
        assert not d.confident and d.exit_code == 0, case.name


def test_symptom_priors_are_one_formula_sub_symptom_first_parent_halved() -> None:
    sub = next(s for s in KB.symptoms.values() if s.parent)
    priors = symptom_priors(KB, sub.id)
    assert max(priors.values()) == 1.0
    top_sub = max(sub.causes.values())
    for cid, w in sub.causes.items():
        assert priors[cid] >= w / top_sub - 1e-9 or w == 0


def test_english_and_chinese_give_the_same_diagnosis() -> None:
    def fields(lang: str) -> dict:
        i18n.set_lang(lang)
        try:
            kb = load_knowledge(use_env=False, lang=lang)
            rep = analyse(_logs("incident-crash", True), kb, symptom="error").to_dict()
            d = diagnose(kb, IncidentEvidence(symptom="error", logs=rep))
        finally:
            i18n.set_lang(None)
        return {"confidence": d.confidence, "cause": d.cause, "culprit": d.culprit["ranks"],
                "role": d.culprit["role"], "causes": [(r.id, r.basis, r.strong) for r in d.causes],
                "ranks": {r: v["status"] for r, v in d.ranks.items()}, "recurrence": d.recurrence,
                "left_out": [x["id"] for x in d.left_out]}

    assert fields("en") == fields("zh")


# rank 1 dies on a CUDA error (CUDA's error string, torchrun's [rankN]: prefix, a glog-stamped
# line before it); rank 0 is left waiting (Gloo's lost peer)
DYING = ("[rank1]:I1202 10:14:03.120000 4021 train.py:88] step 412\n"
         "[rank1]: RuntimeError: CUDA error: unspecified launch failure\n")
WAITING = ("[rank0]:I1202 10:14:03.100000 4020 train.py:88] step 412\n"
           "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
           "[10.1.0.2]:29500\n")
XID = {"cause": "gpu-hardware-fault", "what": "Xid 79 (GPU has fallen off the bus) on 0000:3b:00.0",
       "host": "node-17"}


def _hardware_case(tmp_path: Path, at: str):
    (tmp_path / "rank0.log").write_text(WAITING)
    (tmp_path / "rank1.log").write_text(DYING)
    rep = analyse([str(tmp_path)], KB, symptom="error").to_dict()
    return diagnose(KB, IncidentEvidence(symptom="error", logs=rep, hardware=[dict(XID, time=at)]))


def test_a_rank_that_died_as_its_gpu_fell_off_the_bus_is_a_hardware_fault(tmp_path: Path) -> None:
    d = _hardware_case(tmp_path, "2026-12-02T10:14:05")
    assert d.causes[0].id == "gpu-hardware-fault" and d.confident
    assert d.recurrence == "exclude-node" and d.culprit["ranks"] == ["1"] and d.culprit["host"] == "node-17"


def test_silent_twin_an_xid_an_hour_before_says_nothing_about_this_death(tmp_path: Path) -> None:
    d = _hardware_case(tmp_path, "2026-12-02T09:14:05")
    assert d.causes[0].id != "gpu-hardware-fault" or not d.causes[0].strong
    assert d.recurrence != "exclude-node"


def test_a_session_s_check_gives_its_hardware_xids_with_their_times() -> None:
    from distdoctor.tui.record.diagnosis_feed import hardware_events

    check = {"host": "node-17", "facts": {"kernel": {"xids": [
        {"code": 79, "bus": "0000:3b:00.0", "category": "hardware", "name": "GPU has fallen off the bus",
         "count": 2, "first": "Wed Dec  2 10:14:05 2026", "last": "Wed Dec  2 10:20:00 2026",
         "time": "2026-12-02T10:14:05"},
        {"code": 13, "bus": "0000:3b:00.0", "category": "application", "name": "Graphics Engine Exception",
         "count": 1, "first": "", "last": "", "time": None}]}}}
    events = hardware_events(check)
    assert [e["time"] for e in events] == ["2026-12-02T10:14:05", "2026-12-02T10:20:00"]
    assert all(e["cause"] == "gpu-hardware-fault" and e["host"] == "node-17" for e in events)
    assert hardware_events({"facts": {}}) == [] and hardware_events(None) == []


def test_a_damaged_record_is_diagnosed_never_raised() -> None:
    """Session events may come from older versions or be written by hand: every field of the log
    result the wrong kind, a seeded family of them, gives a diagnosis, never an exception."""
    import random

    rng = random.Random(7)
    junk = [None, 1, "x", [], {}, [1], {"a": 1}, {"kind": 5}, ["1"], {"ranks": "12", "role": 3}]
    for _ in range(500):
        logs = {k: rng.choice(junk) for k in ("timeline", "causes", "verdict", "first_failure", "facts", "symptom")}
        if rng.random() < 0.5:
            logs["timeline"] = {"0": {k: rng.choice(junk) for k in ("end", "last_ts", "files", "hosts", "step")},
                                "1": rng.choice(junk)}
        if rng.random() < 0.5:
            logs["verdict"] = {"culprit": rng.choice([*junk, {"ranks": ["0"], "role": "crashed"}]),
                               "failed": rng.choice(junk)}
        if rng.random() < 0.5:
            logs["causes"] = [{"id": rng.choice(["rank-crash-deadlock", "x", None, 3]),
                               **{k: rng.choice(junk) for k in ("score", "basis", "evidence", "weight", "reasons")}}]
        d = diagnose(KB, IncidentEvidence(symptom=rng.choice([None, "hang", "x"]), logs=logs, live=[rng.choice(junk)],
                                          hardware=[{"cause": "gpu-hardware-fault", "time": rng.choice(junk)}]))
        assert d.confidence in ("confirmed", "likely", "unknown") and isinstance(d.to_dict(), dict)


def test_the_culprit_is_placed_on_the_node_the_evidence_gives_and_only_one() -> None:
    """A live capture that places the stuck rank on one node names that node beside the culprit
    (the saved session re-diagnoses from it); two nodes claiming it name none."""
    stuck = {"source": "stacks", "cause": "collective-timeout", "ranks": ["1"], "role": "stuck",
             "why": "rank 1 is in time.sleep, the others in allreduce"}
    one = diagnose(KB, IncidentEvidence(symptom="hang", live=(dict(stuck, host="node-b"),)))
    assert one.culprit["ranks"] == ["1"] and one.culprit["host"] == "node-b"
    two = diagnose(KB, IncidentEvidence(symptom="hang", live=(dict(stuck, host="node-b"), dict(stuck, host="node-c"))))
    assert two.culprit["ranks"] == ["1"] and not two.culprit.get("host")
