"""The one conclusion engine: log causes weigh by their basis, live-hang evidence ranks causes and
names the culprit when the logs do not, and a disagreement between sources is said."""
from __future__ import annotations

from distdoctor.knowledge.verdict import culprit, rank_causes

FR = {"source": "fr", "ranks": ["3"], "role": "stuck", "why": "rank 3 never joined all_reduce #12",
      "cause": "collective-timeout"}


def test_a_lead_never_outweighs_evidence() -> None:
    ranked = rank_causes(log_causes=[{"id": "mixed-launchers", "score": 9.0, "basis": "facts"},
                                     {"id": "cuda-oom", "score": 5.0, "basis": "evidence"},
                                     {"id": "p2p-unsupported", "score": 0.5, "basis": "prior"}])
    assert [r.id for r in ranked] == ["cuda-oom", "mixed-launchers"]  # priors come from the symptom only
    assert ranked[0].basis == "evidence" and ranked[1].basis == "facts"


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
