"""The log analysis's structural rules (knowledge/data/rules.toml), conformance like sos's plugin
tests: every rule's example fires it and its silent twin does not, every id the code passes is
declared and every declared id is passed, and `knowledge show DL101` documents one."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from distdoctor.knowledge import KnowledgeError, load_knowledge
from distdoctor.knowledge.logs import LogReport, analyse_text
from distdoctor.tui.cli import main

KB = load_knowledge(use_env=False)
RULE_IDS = sorted(KB.rules)
ACTIVE = sorted(i for i, r in KB.rules.items() if not r.retired)  # a retired id stays, unused
LOGS = Path(__file__).resolve().parents[2] / "knowledge" / "logs"
SOURCES = ("score.py", "setup_rules.py", "culprit.py")
# the two Scores.add calls that are not structural rules: the signature loop and the symptom's shift
NOT_RULES = {"_signatures", "_shift"}


def fired(report: LogReport) -> set[str]:
    """Every rule id the analysis reports: the causes' rules and the culprit rule."""
    ids = {r for c in report.causes for r in c.rules}
    return ids | ({report.culprit_rule} if report.culprit_rule else set())


def test_rule_table_ids_causes_and_texts() -> None:
    assert len(RULE_IDS) >= 30
    names = [r.name for r in KB.rules.values()]
    assert len(set(names)) == len(names)
    for rule_id, rule in KB.rules.items():
        assert re.fullmatch(r"DL[1-9]\d\d", rule_id)
        assert rule.cause in KB.causes, f"{rule_id}: {rule.cause} is not a cause id"
        assert not rule.symptom or rule.symptom in KB.symptoms, rule_id
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule.name), rule_id
        for text in (rule.mechanism, rule.evidence, rule.silent):
            assert text.strip() and "  " not in text, rule_id  # prose is one paragraph
        assert rule.example.endswith("\n") and rule.silent_example.endswith("\n"), rule_id
        assert rule.example != rule.silent_example, rule_id


@pytest.mark.parametrize("rule_id", ACTIVE)
def test_fires_on_its_example_and_not_on_its_silent_twin(rule_id: str) -> None:
    rule = KB.rules[rule_id]
    report = analyse_text(rule.example, KB, name="example.log", symptom=rule.symptom or None)
    assert rule_id in fired(report), [(c.id, c.rules) for c in report.causes]
    if rule_id.startswith("DL9"):  # a culprit rule: it names the culprit
        assert report.culprit is not None and report.culprit_rule == rule_id
        assert "rule" not in report.culprit  # the id travels beside the dict, not inside it
    else:  # a scoring rule: its cause carries the id
        assert rule_id in next(c.rules for c in report.causes if c.id == rule.cause)
    twin = analyse_text(rule.silent_example, KB, name="example.log", symptom=rule.symptom or None)
    assert rule_id not in fired(twin), [(c.id, c.rules) for c in twin.causes]


def _code_ids() -> dict[str, set[str]]:
    """File -> every `DLnnn` string constant in it (rule= arguments, the fact rules' table, the
    culprit dicts)."""
    out: dict[str, set[str]] = {}
    for path in sorted(LOGS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and re.fullmatch(r"DL\d{3}", n.value)}
        if found:
            out[path.name] = found
    return out


def test_every_id_in_the_code_is_declared_and_every_declared_id_is_used() -> None:
    per_file = _code_ids()
    assert set(per_file) == set(SOURCES)
    used = set().union(*per_file.values())
    assert used - set(ACTIVE) == set(), "ids the code passes but rules.toml lacks (or retired)"
    assert set(ACTIVE) - used == set(), "ids rules.toml declares but no code passes"
    # the culprit rules are the DL9xx ones, and only culprit.py names them
    assert per_file["culprit.py"] == {i for i in ACTIVE if i.startswith("DL9")}


def test_every_structural_score_passes_its_rule_id() -> None:
    """A new `s.add(...)` without `rule=` would be a rule nobody documented."""
    for name in ("score.py", "setup_rules.py"):
        tree = ast.parse((LOGS / name).read_text(encoding="utf-8"))
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and call.func.attr == "add" and isinstance(call.func.value, ast.Name) \
                        and call.func.value.id == "s":
                    has = any(k.arg == "rule" for k in call.keywords)
                    assert has != (fn.name in NOT_RULES), f"{name}:{call.lineno} in {fn.name}"


def test_every_culprit_dict_names_its_rule() -> None:
    tree = ast.parse((LOGS / "culprit.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if "role" in keys:
                assert "rule" in keys, f"culprit.py:{node.lineno}"


def test_json_carries_the_rules_beside_the_old_keys() -> None:
    rule = KB.rules["DL102"]
    data = analyse_text(rule.example, KB, symptom=rule.symptom).to_dict()
    crash = next(c for c in data["causes"] if c["id"] == "rank-crash-deadlock")
    assert set(crash) == {"id", "score", "basis", "evidence", "reasons", "against", "lead", "weight", "rules"}
    assert crash["rules"] == ["DL101", "DL102"]
    assert data["verdict"]["culprit_rule"] == "DL901" and "rule" not in data["verdict"]["culprit"]
    prior = next(c for c in data["causes"] if c["basis"] == "prior")
    assert prior["rules"] == []  # the symptom's shift is no rule


HEADINGS = ["What it encodes", "Evidence it needs", "When it stays silent", "Example", "Silent twin"]


def test_knowledge_show_a_rule_has_fixed_headings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "show", "DL401", "--lang", "en"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "DL401  (rule)  seqnums-differ"
    assert "Cause: asymmetric-collective" in lines
    assert [ln for ln in lines if ln in HEADINGS] == HEADINGS
    # the example is printed verbatim, one log line per line, never wrapped
    first = KB.rules["DL401"].example.splitlines()[0]
    assert "  " + first in lines
    assert main(["knowledge", "show", "DL401", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "rule" and data["cause"] == "asymmetric-collective" and data["example"].startswith("[rank0]")


def test_knowledge_show_a_rule_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--lang", "zh", "knowledge", "show", "DL101"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "DL101  (日志规则)  rank-failed-on-its-own"
    for heading in ("它编码的机制", "它需要的证据", "何时保持沉默", "示例", "沉默的孪生示例"):
        assert heading in lines


def test_knowledge_list_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "list", "rules", "--lang", "en"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(RULE_IDS) and out[0].split() == ["DL101", "rank-failed-on-its-own"]
    assert main(["knowledge", "list", "rules", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == RULE_IDS


def _rule_entry(rule_id: str, cause: str = "rank-crash-deadlock", name: str = "site-rule") -> str:
    return (f'[[rule]]\nid = "{rule_id}"\nname = "{name}"\ncause = "{cause}"\nmechanism = "m"\n'
            'evidence = "e"\nsilent = "s"\nexample = "a\\n"\nsilent_example = "b\\n"\n')


def test_an_overlay_may_reword_a_rule_but_not_add_one(tmp_path: Path) -> None:
    (tmp_path / "site.toml").write_text(_rule_entry("DL101", name="rank-failed-on-its-own"))
    assert load_knowledge(tmp_path, use_env=False).rules["DL101"].mechanism == "m"
    assert not KB.rules["DL101"].retired
    (tmp_path / "site.toml").write_text(_rule_entry("DL199"))
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(tmp_path, use_env=False)
    assert err.value.key == "rule.DL199" and "not add one" in err.value.reason


@pytest.mark.parametrize("text, key, reason", [
    (_rule_entry("DL101", cause="no-such-cause", name="rank-failed-on-its-own"), "rule.DL101.cause",
     "unknown cause id"),
    (_rule_entry("dl101"), "rule[0].id", "DL and three digits"),
    (_rule_entry("DL101", name="rank-failed-on-its-own") + _rule_entry("DL101", name="rank-failed-on-its-own"),
     "rule[1].id", "given twice"),
    (_rule_entry("DL101", name="seqnums-differ"), "rule.", "also the name of"),
    (_rule_entry("DL101", name="rank-failed-on-its-own") + 'retired = "no"\n', "rule.DL101.retired",
     "true or false"),
])
def test_broken_rules_are_one_line_errors(tmp_path: Path, text: str, key: str, reason: str) -> None:
    (tmp_path / "site.toml").write_text(text)
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(tmp_path, use_env=False)
    assert err.value.key.startswith(key) and reason in err.value.reason
