"""`distdoctor knowledge` on the packaged data and on a site overlay, through the real CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.tui.cli import main


def packaged_causes() -> int:
    """How many causes the packaged knowledge holds: counted, never written down, so adding a
    cause does not break these tests."""
    return len(load_knowledge(use_env=False).causes)


OVERLAY = Path(__file__).parents[1] / "fixtures" / "overlay"


def test_every_cause_has_texts_and_a_copyable_fix() -> None:
    kb = load_knowledge(use_env=False)
    for cause in kb.causes.values():
        assert cause.what and cause.why and cause.fix and cause.section, cause.id
        assert cause.fixes, f"{cause.id} has no copy-pasteable fix"
        assert all(f.text.strip() for f in cause.fixes), cause.id


def test_symptom_priors_follow_the_guide() -> None:
    kb = load_knowledge(use_env=False)
    hang = kb.symptoms["hang"].causes
    error = kb.symptoms["error"].causes
    top = lambda weights: sorted(weights, key=weights.get, reverse=True)[:3]  # noqa: E731
    assert set(top(hang)) & {"rank-crash-deadlock", "rank-env-mismatch", "mixed-launchers"}
    assert "version-mismatch" in top(error)
    assert {s.parent for s in kb.symptoms.values() if s.parent} == {"hang", "error"}


def test_overlay_overrides_and_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTDOCTOR_KNOWLEDGE", str(OVERLAY))
    kb = load_knowledge()
    assert kb.version == "site-2026.11"
    assert "8x RTX 4090" in kb.causes["p2p-unsupported"].title
    assert [s.id for s in kb.switches_in_order()][-1] == "site-algo-ring"
    assert len(kb.causes) == packaged_causes()  # the overlay replaces a cause, adds none


def test_validate_json_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "validate", str(OVERLAY), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and out["counts"]["causes"] == packaged_causes()
    assert any(f.endswith("site.toml") for f in out["files"])
    assert main(["knowledge", "show", "shm-insufficient"]) == 0
    text = capsys.readouterr().out
    for heading in ("What it is", "Why it happens", "Fix", "--shm-size=16g"):
        assert heading in text


def test_broken_overlay_is_one_line_with_file_and_key(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`validate` exists to find this: exit 1, the same with and without --json (it was 2 in text
    and 1 in JSON). To `show` and `list` a broken overlay is bad input: exit 2."""
    (tmp_path / "bad.toml").write_text('[[switch]]\nid = "x"\nenv = "A"\n')
    assert main(["knowledge", "validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"knowledge: invalid: {tmp_path / 'bad.toml'}: switch.x: ")
    assert "missing field" in out
    assert main(["knowledge", "validate", str(tmp_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and data["key"] == "switch.x" and data["file"].endswith("bad.toml")
    assert main(["knowledge", "--knowledge", str(tmp_path), "show", "p2p-unsupported", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("distdoctor: error: knowledge: ")


MALFORMED = {  # each once crashed the loader, or later `check`, with a traceback
    "meta-not-a-table": ("meta = 3\n", "meta: must be a table ([meta])"),
    "fix-not-a-table": ('[[cause]]\nid = "p2p-unsupported"\ntitle = "t"\nwhat = "w"\nwhy = "y"\n'
                        'fix = "f"\nsection = "s"\nfixes = [3]\n',
                        "cause.p2p-unsupported.fixes: each fix must be a table with a text string"),
    "fact-not-a-string": ('[[check]]\nid = "x"\nprobe = "shm"\nfact = 3\nop = "eq"\nvalue = 1\n'
                          'status = "fail"\ntitle = "t"\ndetail = "d"\ncause_ids = []\n',
                          "check.x.fact: must be a string, not int"),
    "nested-cause-ids": ('[[check]]\nid = "x"\nprobe = "shm"\nfact = "a"\nop = "eq"\nvalue = 1\n'
                         'status = "fail"\ntitle = "t"\ndetail = "d"\ncause_ids = [["a"]]\n',
                         "check.x.cause_ids: must be an array of strings"),
    "parent-a-list": ('[[symptom]]\nid = "x"\nkind = "hang"\ntitle = "t"\nquestion = "q"\n'
                      'parent = ["hang"]\ncauses = {}\n', "symptom.x.parent: must be a string, not list"),
    "order-a-string": ('[[switch]]\nid = "x"\nenv = "A"\nvalue = "1"\nbackend = "nccl"\n'
                       'order = "a"\nimplicates = []\nwhy = "w"\npermanent_fix = "p"\n',
                       "switch.x.order: must be an integer, not str"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_overlay_entries_are_findings_not_tracebacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    text, where_why = MALFORMED[name]
    (tmp_path / "site.toml").write_text(text)
    assert main(["knowledge", "validate", str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"knowledge: invalid: {tmp_path / 'site.toml'}: {where_why}\n"


@pytest.mark.parametrize("make, problem", [
    (lambda tmp: tmp / "missing", "no such directory"),
    (lambda tmp: tmp / "file.toml", "not a directory"),
])
@pytest.mark.parametrize("argv", [["validate"], ["validate", "--json"], ["list", "causes", "--json"],
                                  ["show", "p2p-unsupported"]])
def test_knowledge_env_that_is_no_folder_is_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        make, problem: str, argv: list[str]) -> None:
    (tmp_path / "file.toml").write_text("[meta]\n")
    overlay = make(tmp_path)
    monkeypatch.setenv("DISTDOCTOR_KNOWLEDGE", str(overlay))
    assert main(["knowledge", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"distdoctor: error: knowledge: {overlay}: {problem} "
                            "(set by $DISTDOCTOR_KNOWLEDGE)\n")


def test_validate_of_a_missing_folder_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "validate", "/no/such/overlay", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "distdoctor: error: knowledge: /no/such/overlay: no such directory\n"


def test_show_unknown_id_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "show", "no-such-thing"]) == 2
    assert "no-such-thing" in capsys.readouterr().err


@pytest.mark.parametrize("item_id, shown, hint", [
    ("P2P-UNSUPPORTED", "'P2P-UNSUPPORTED'", "did you mean p2p-unsupported"),
    ("shm_insufficient", "'shm_insufficient'", "did you mean shm-insufficient"),
    ("x" * 5000, "'" + "x" * 60 + "...'", ""),        # the whole id once filled the terminal
    ("shm\x1b[31m", "'shm\\x1b[31m'", ""),             # escaped, never sent to the terminal raw
    ("", "''", ""),
], ids=["upper-case", "underscore", "5000-characters", "escape-code", "empty"])
def test_show_odd_ids_is_one_short_line(capsys: pytest.CaptureFixture[str], item_id: str, shown: str,
                                        hint: str) -> None:
    assert main(["knowledge", "show", item_id, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and len(captured.err) < 300
    assert captured.err.startswith("distdoctor: error: no cause, check, switch, symptom, signature "
                                   f"or step with id {shown} (")
    assert hint in captured.err and "\x1b" not in captured.err


def _argparse_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors and --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [["show", "p2p-unsupported", "--knowledge", str(OVERLAY)],
                                  ["--knowledge", str(OVERLAY), "show", "p2p-unsupported"]])
def test_show_takes_knowledge_after_the_action(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Every other command takes --knowledge after its name; `knowledge show` said unrecognized."""
    code, out, err = _argparse_exit(["knowledge", *argv], capsys)
    assert (code, err) == (0, "") and "site: 8x RTX 4090 nodes" in out.splitlines()[0]


def test_list_and_validate_take_knowledge_after_the_action(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _argparse_exit(["knowledge", "list", "causes", "--json", "--knowledge", str(OVERLAY)], capsys)
    assert code == 0 and len(json.loads(out)) == packaged_causes()
    for argv in (["validate", "--knowledge", str(OVERLAY), "--json"], ["validate", str(OVERLAY), "--json"],
                 ["validate", str(OVERLAY), "--knowledge", f"{OVERLAY}/", "--json"]):  # the same folder
        code, out, _ = _argparse_exit(["knowledge", *argv], capsys)
        assert code == 0 and json.loads(out)["counts"]["causes"] == packaged_causes(), argv


def test_validate_of_two_different_overlays_is_usage_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _argparse_exit(["knowledge", "validate", str(OVERLAY), "--knowledge", str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    assert err == (f"distdoctor: error: validate {OVERLAY} and --knowledge {tmp_path} name two "
                   "overlays: give one\n")


@pytest.mark.parametrize("action, codes", [("validate", "1 an overlay file is invalid"),
                                           ("show", "2 no such id"), ("list", "0 listed")])
def test_action_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture[str], action: str,
                                                 codes: str) -> None:
    code, out, _ = _argparse_exit(["knowledge", action, "--help"], capsys)
    assert code == 0 and f"distdoctor knowledge {action} " in out.split("examples:")[1]
    assert "exit codes: 0 " in out and codes in out and "--knowledge DIR" in out
    if action == "show":
        assert "the id of a cause, check, switch, symptom, signature or" in " ".join(out.split())


def test_show_symptom_and_step_are_readable_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """They printed Python reprs ({'rank-crash-deadlock': 3.0, ...}, ['environment']) wrapped
    in the middle of an id."""
    kb = load_knowledge(use_env=False)
    assert main(["knowledge", "show", "hang"]) == 0
    lines = capsys.readouterr().out.splitlines()
    raises = lines[lines.index("raises") + 1:]
    for cause_id, weight in kb.symptoms["hang"].causes.items():
        assert any(line.split() == [cause_id, f"{weight:+}"] for line in raises), cause_id
    assert main(["knowledge", "show", "logs"]) == 0
    text = capsys.readouterr().out
    assert "next: " + ", ".join(kb.steps["logs"].next) in text.splitlines()
    for term in kb.steps["logs"].terms:
        assert any(line.startswith(f"  {term}: ") for line in text.splitlines()), term
    for shown in (lines, text.splitlines()):
        assert not any(mark in line for line in shown for mark in ("{", "}", "[", "]", "': ")), shown


@pytest.mark.parametrize("item_id, hint", [("bogus", ""), ("foo", ""), ("hnag", "did you mean hang? "),
                                           ("p2p-unsuported", "did you mean p2p-unsupported")])
def test_show_suggests_only_close_ids(capsys: pytest.CaptureFixture[str], item_id: str, hint: str) -> None:
    """"bogus" got "did you mean logs?"."""
    assert main(["knowledge", "show", item_id]) == 2
    err = capsys.readouterr().err
    assert ("did you mean" in err) == bool(hint) and hint in err
    assert err.endswith("every id: `distdoctor knowledge list "
                        "causes|symptoms|checks|switches|signatures|harmless|steps`)\n")
