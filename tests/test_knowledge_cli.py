"""`distdoctor knowledge` on the packaged data and on a site overlay, through the real CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.tui.cli import main

OVERLAY = Path(__file__).parent / "fixtures" / "overlay"


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
    assert len(kb.causes) == 16


def test_validate_json_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "validate", str(OVERLAY), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and out["counts"]["causes"] == 16
    assert any(f.endswith("site.toml") for f in out["files"])
    assert main(["knowledge", "show", "shm-insufficient"]) == 0
    text = capsys.readouterr().out
    for heading in ("What it is", "Why it happens", "Fix", "--shm-size=16g"):
        assert heading in text


def test_broken_overlay_is_one_line_with_file_and_key(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.toml").write_text('[[switch]]\nid = "x"\nenv = "A"\n')
    assert main(["knowledge", "validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "bad.toml" in err and "switch.x" in err and "missing field" in err


def test_show_unknown_id_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "show", "no-such-thing"]) == 2
    assert "no-such-thing" in capsys.readouterr().err
