"""The one conclusion engine: log causes weigh by their basis, live-hang evidence ranks causes and
names the culprit when the logs do not, and a disagreement between sources is said."""
from __future__ import annotations

from distdoctor.knowledge.verdict import culprit, rank_causes

FR = {"source": "fr", "ranks": ["3"], "role": "stuck", "why": "rank 3 never joined all_reduce #12",
      "cause": "collective-timeout"}


def test_log_causes_keep_the_log_analysis_order_and_priors_come_from_the_symptom() -> None:
    # the log analysis weighs a set-up fact against a failure line itself (a rank-0-only phase
    # while the others time out outranks their timeouts); the merge keeps its order and drops
    # its priors, which the symptom gives. Only evidence makes an answer (test_diagnosis.py).
    ranked = rank_causes(log_causes=[{"id": "mixed-launchers", "score": 9.0, "basis": "facts"},
                                     {"id": "cuda-oom", "score": 5.0, "basis": "evidence"},
                                     {"id": "p2p-unsupported", "score": 0.5, "basis": "prior"}])
    assert [r.id for r in ranked] == ["mixed-launchers", "cuda-oom"]
    assert ranked[0].basis == "facts" and not ranked[0].strong
    assert ranked[1].basis == "evidence" and ranked[1].strong


def test_ties_keep_the_log_analysis_order() -> None:
    ranked = rank_causes(log_causes=[{"id": "rank0-overload", "score": 1.0, "basis": "facts"},
                                     {"id": "rank-crash-deadlock", "score": 1.0, "basis": "evidence"}])
    assert [r.id for r in ranked] == ["rank0-overload", "rank-crash-deadlock"]


def test_live_hang_evidence_ranks_its_cause_and_names_the_culprit_when_logs_do_not() -> None:
    ranked = rank_causes(suspects=[{"id": "rank-crash-deadlock", "weight": 3.0, "why": "Hang 3"}], extra=[FR])
    assert ranked[0].id == "collective-timeout" and ranked[0].basis == "evidence"
    assert culprit({"verdict": {"culprit": None}}, [FR]) == {"ranks": ["3"], "role": "stuck",
                                                           "why": "fr: rank 3 never joined all_reduce #12"}


def test_the_logs_culprit_stays_and_a_disagreeing_source_is_noted() -> None:
    logs = {"verdict": {"culprit": {"ranks": ["1"], "role": "crashed", "why": "rank 1 raised"}}}
    found = culprit(logs, [FR])
    assert found["ranks"] == ["1"] and "fr points at rank 3" in found["why"]
    assert culprit(logs, [dict(FR, ranks=["1"])])["why"] == "rank 1 raised"
