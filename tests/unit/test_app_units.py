"""The app's pure parts: ranking, the session state, launcher detection, path completion, order."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.tree import main_path
from distdoctor.tui.app import launchers
from distdoctor.tui.app.app import method_order
from distdoctor.tui.app.nextaction import next_action
from distdoctor.tui.app.widgets import PathSuggester, status_text
from distdoctor.tui.record.ranking import rank_causes, rank_session
from distdoctor.tui.record.state import Flow, suspects


@pytest.fixture(scope="module")
def kb():
    return load_knowledge()


def test_symptom_suspects_add_the_sub_symptom_to_its_parent(kb) -> None:
    rows = suspects(kb, "hang-init")
    first = rows[0]
    assert first["id"] == "rank-env-mismatch"
    assert first["weight"] == kb.symptoms["hang-init"].causes["rank-env-mismatch"] + \
        kb.symptoms["hang"].causes["rank-env-mismatch"]
    assert first["why"] == "Hang at process-group init 3 + Hang 2.5"
    assert [r["weight"] for r in rows] == sorted((r["weight"] for r in rows), reverse=True)
    assert suspects(kb, None) == [] and suspects(kb, "no-such-symptom") == []


def test_ranking_weighs_each_source_by_its_own_maximum() -> None:
    ranked = rank_causes(
        suspects=[{"id": "a", "weight": 6.0, "why": "Hang 6"}, {"id": "b", "weight": 3.0, "why": "Hang 3"}],
        log_causes=[{"id": "b", "score": 40.0, "evidence": [{}, {}]}, {"id": "c", "score": 10.0}],
        findings=[{"check": "shm-small", "status": "fail", "cause_ids": ["c"]},
                  {"check": "ok-one", "status": "ok", "cause_ids": ["a"]}])
    scores = {r.id: r.score for r in ranked}
    assert scores == {"b": 0.5 + 2.0, "c": 0.5 + 1.5, "a": 1.0}  # logs 2x, fail 1.5x, prior 1x
    assert [r.id for r in ranked] == ["b", "c", "a"]
    b = ranked[0]
    assert b.reasons == ("logs (evidence): score 40, 2 evidence lines", "symptom: Hang 3")
    assert all("ok-one" not in " ".join(r.reasons) for r in ranked)  # OK findings are not evidence


def test_a_bisection_verdict_outweighs_everything_and_a_passing_repro_weakens() -> None:
    ranked = rank_causes(suspects=[{"id": "a", "weight": 1, "why": "x"}],
                         log_causes=[{"id": "a", "score": 5}],
                         findings=[{"check": "k", "status": "fail", "cause_ids": ["a"]}],
                         bisect={"p2p": "the job passes only with NCCL_P2P_DISABLE=1"},
                         ruled_out={"a": "the minimal repro passes on this node"})
    assert [r.id for r in ranked] == ["p2p", "a"]
    assert ranked[0].score == 3.0 and ranked[1].score == pytest.approx((1 + 2 + 1.5) / 2)
    assert ranked[1].reasons[-1] == "weakened: the minimal repro passes on this node"
    assert rank_causes() == []


def test_flow_replays_events_from_the_app_and_from_commands(kb) -> None:
    record = {"id": "s1", "events": [
        {"kind": "answer", "data": {"question": "kind", "answer": "error"}},
        {"kind": "classify", "data": {"symptom": "error", "sub": "error-oom", "kind": "error"}},
        {"kind": "check", "data": {"findings": [{"status": "fail", "cause_ids": ["shm-insufficient"],
                                                 "check": "shm"}], "partial": False}},
        {"kind": "logs", "data": {"paths": ["/var/log/job"], "causes": [{"id": "cuda-oom", "score": 3}]}},
        {"kind": "bogus"}, "not an event",
    ]}
    flow = Flow.from_record(record)
    assert (flow.kind, flow.symptom, flow.log_paths) == ("error", "error-oom", ["/var/log/job"])
    order = method_order(kb)
    assert [s for s in order if flow.done(s)] == ["classify", "logs", "environment"]
    assert flow.first_undone(order) == order[order.index("environment") + 1]  # what the tree places next
    ranked = rank_session(kb, flow)
    assert ranked[0].id == "cuda-oom"  # prior 3 + 1.5 and the log evidence
    # a different answer to the first question clears the sub-symptom chosen under the old one
    flow.apply("answer", {"question": "kind", "answer": "hang"})
    assert (flow.kind, flow.symptom) == ("hang", None)


def test_method_order_is_the_trees_main_path(kb) -> None:
    assert method_order(kb) == main_path(kb)


@pytest.mark.parametrize("env, launcher, last", [
    ({"TORCHELASTIC_RUN_ID": "x", "SLURM_JOB_ID": "9"}, "torchrun", "torchrun --nproc-per-node=... train.py"),
    ({"SLURM_JOB_ID": "9"}, "slurm", "srun --export=ALL ... python train.py"),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, "mpirun",
     "mpirun -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_DEBUG_FILE -x TORCH_DISTRIBUTED_DEBUG "
     "-x TORCH_CPP_LOG_LEVEL ... python train.py"),
    ({}, "python", "python train.py"),
])
def test_launcher_detection_and_logging_lines(env, launcher, last) -> None:
    found = launchers.for_env(env)
    assert found.id == launcher
    assert found.lines[-1] == last
    text = found.text
    for name, value in launchers.switches():
        assert f"{name}={value}" in text
    assert "NCCL_DEBUG_FILE=./nccl-logs/nccl.%h.%p.log" in text


def test_path_suggester_completes_files_and_folders(tmp_path: Path) -> None:
    (tmp_path / "logs-a").mkdir()
    (tmp_path / "logs-b.txt").write_text("x")
    (tmp_path / ".hidden").write_text("x")
    suggest = PathSuggester()

    def ask(value: str) -> str | None:
        return asyncio.run(suggest.get_suggestion(value))

    assert ask(f"{tmp_path}/lo") == f"{tmp_path}/logs-a/"
    assert ask(f"{tmp_path}/logs-b") == f"{tmp_path}/logs-b.txt"
    assert ask(f"{tmp_path}/") == f"{tmp_path}/logs-a/"  # hidden files only when asked for
    assert ask(f"{tmp_path}/.h") == f"{tmp_path}/.hidden"
    assert ask(f"{tmp_path}/zz") is None and ask(f"{tmp_path}/nope/x") is None and ask("") is None


def test_next_action_follows_the_tree_and_the_evidence(kb) -> None:
    order = method_order(kb)
    flow = Flow("s")
    assert next_action(kb, flow, "classify", order).startswith("Say what you see")
    flow.apply("classify", {"symptom": "hang", "sub": "hang-init", "kind": "hang"})
    assert next_action(kb, flow, "classify", order) == (
        "First suspect: Rank variables disagree with the processes really started. "
        f"Next: n for '{kb.steps['logs'].title}'.")
    flow.apply("check", {"findings": [{"status": "warn", "title": "T1"}, {"status": "fail", "title": "T2"}]})
    assert next_action(kb, flow, "environment", order).startswith("1 FAIL, 1 WARN; first: T2.")
    assert next_action(kb, flow, "repro", order, running="Running: x stops it.") == "Running: x stops it."


def test_status_is_a_word_first() -> None:
    for status, word in (("ok", "OK"), ("warn", "WARN"), ("fail", "FAIL"), ("unavailable", "N/A"),
                         ("error", "ERROR"), ("pass", "PASS"), ("hang", "HANG")):
        assert status_text(status).plain == word
