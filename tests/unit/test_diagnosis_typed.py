"""Diagnosis.from_dict is the exact inverse of to_dict (issue 23 item 4): every diagnosis the eval
sets produce survives to_dict -> JSON -> from_dict -> to_dict unchanged, and a diagnosis saved by an
older version (keys missing, keys unknown) or by hand (a field of the wrong kind) is read back or
refused with an input error, never a traceback."""
from __future__ import annotations

import json

import eval_diagnosis  # tests/bench, on the path by tests/conftest.py
import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.diagnosis import Diagnosis, DiagnosisError, ranked_from_dict
from distdoctor.knowledge.errors import InputError


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(use_env=False)


def _diagnoses(kb) -> list[tuple[str, Diagnosis, dict]]:
    """Every case of the eval sets through the path `distdoctor logs` takes (eval_diagnosis.judge's)."""
    from distdoctor.knowledge.logs import analyse
    from distdoctor.tui.commands.logs import conclude

    out = []
    for name, root in eval_diagnosis.SETS.items():
        for case in eval_diagnosis.cases(root):
            symptom = json.loads((case / "label.json").read_text()).get("symptom")
            data, d = conclude(analyse(eval_diagnosis.inputs(case), kb, symptom=symptom).to_dict(), kb, symptom)
            out.append((f"{name}/{case.name}", d, data))
    return out


def test_every_eval_diagnosis_round_trips(kb) -> None:
    seen = _diagnoses(kb)
    assert len(seen) >= 100  # the packaged sets alone hold more; fewer means the sets were not found
    levels = set()
    for name, d, data in seen:
        saved = json.loads(json.dumps(d.to_dict()))  # as a session or `--json` holds it on disk
        back = Diagnosis.from_dict(saved)
        assert back.to_dict() == d.to_dict(), name
        assert back == d, name  # every field, and the derived ones with them
        assert (back.cause, back.confident, back.exit_code) == (d.cause, d.confident, d.exit_code), name
        assert Diagnosis.from_dict(data["verdict"]) == d, name  # the `logs --json` verdict is the same dict
        levels.add(d.confidence)
    assert levels == {"confirmed", "likely", "unknown"}  # the sets exercise every level


def test_a_diagnosis_with_keys_missing_takes_the_defaults() -> None:
    """A session saved before `stage`, `hardening`, `left_out` and `seen_before` existed, with a
    cause saved before `strong` and `against`, and a key no version wrote."""
    old = {"confidence": "likely", "culprit": {"ranks": ["1"], "role": "crashed", "why": "x"},
           "summary": "rank 1 crashed", "cause": "cuda-oom",
           "causes": [{"id": "cuda-oom", "score": 1.0, "reasons": ["logs: 1 line"], "basis": "evidence"}],
           "next_action": {"kind": "fix", "text": "smaller batch", "command": ""}, "collect": [],
           "recurrence": "will-recur", "ranks": {"1": {"status": "crashed"}}, "failed": True,
           "from_the_future": {"anything": 1}}
    d = Diagnosis.from_dict(old)
    assert d.stage is None and d.hardening == () and d.left_out == () and d.seen_before == ()
    assert d.causes[0].strong is False and d.causes[0].against == ()
    assert d.cause == "cuda-oom" and d.exit_code == 1
    want = {k: v for k, v in old.items() if k != "from_the_future"}
    got = d.to_dict()
    assert {k: got[k] for k in want} == {**want, "causes": [dict(old["causes"][0], strong=False, against=[])]}
    # the log analysis's own verdict (LogReport.verdict()) states no confidence: none is made up
    raw = Diagnosis.from_dict({"culprit": None, "summary": "", "failed": False, "causes": [{"id": "x", "basis": "prior"}],
                               "culprit_rule": None})
    assert raw.confidence == "" and raw.cause is None and raw.causes[0].score == 0.0 and raw.ranks == {}
    assert Diagnosis.from_dict({}) == Diagnosis(confidence="", culprit=None, summary="", causes=(), next_action={},
                                                collect=(), recurrence=None, ranks={})


@pytest.mark.parametrize("bad", [
    None, [], "confirmed",
    {"confidence": 1}, {"culprit": ["1"]}, {"causes": {"id": "x"}}, {"causes": ["cuda-oom"]},
    {"causes": [{"score": 1.0}]}, {"causes": [{"id": "x", "score": "high"}]}, {"causes": [{"id": "x", "score": True}]},
    {"causes": [{"id": "x", "reasons": "one"}]}, {"collect": "distdoctor stacks"}, {"collect": [1]},
    {"ranks": []}, {"ranks": {"0": "crashed"}}, {"failed": "yes"}, {"stage": 3}, {"seen_before": [1]},
    {"next_action": "fix it"}, {"recurrence": ["will-recur"]},
])
def test_a_field_of_the_wrong_kind_is_an_input_error(bad) -> None:
    with pytest.raises(DiagnosisError) as caught:
        Diagnosis.from_dict(bad)
    assert isinstance(caught.value, InputError) and str(caught.value)


def test_ranked_round_trips() -> None:
    from distdoctor.knowledge.verdict import Ranked

    r = Ranked(id="cuda-oom", score=0.5, reasons=("a", "b"), basis="facts", strong=True, against=("c",))
    assert ranked_from_dict(json.loads(json.dumps(r.to_dict()))) == r
