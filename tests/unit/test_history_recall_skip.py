"""`distdoctor logs` looks past incidents up only when there can be some (issue 25 item 16): with no
incident store and no saved session, nothing is opened or created; a saved session that the
store's first open would import is still found."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distdoctor.tui.commands.logs import remember
from distdoctor.tui.record import history

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


def _diagnosis(name: str) -> dict[str, Any]:
    """`distdoctor logs --json`'s dict for a recorded set."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.logs import analyse

    return json.loads(json.dumps(analyse([str(RECORDED / name / "logs")], load_knowledge(None)).to_dict()))


@pytest.fixture(scope="module")
def crash() -> str:
    return json.dumps(_diagnosis("01-drill-crash"))


def test_no_store_and_no_session_is_nothing_to_recall(crash: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTDOCTOR_DB", raising=False)
    assert not history.anything_to_recall()
    data = json.loads(crash)
    assert data["verdict"]["failed"]
    remember(data, None)
    assert data["verdict"]["seen_before"] == [] and data["verdict"]["repeat_offender"] is None
    assert not history.default_path().exists()  # a lookup creates no store


def test_a_session_the_first_open_imports_is_recalled(crash: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from distdoctor.tui.record.session import SessionStore

    monkeypatch.delenv("DISTDOCTOR_DB", raising=False)
    SessionStore().append("old-1", "logs", json.loads(crash))
    assert history.anything_to_recall() and not history.default_path().exists()
    data = json.loads(crash)
    remember(data, None)
    (seen,) = data["verdict"]["seen_before"]
    assert seen["why"].startswith("same failure signature")
    assert history.default_path().is_file()


def test_a_store_of_its_own_is_something_to_recall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "elsewhere.db"
    monkeypatch.setenv("DISTDOCTOR_DB", str(db))
    assert not history.anything_to_recall()
    history.IncidentStore.open(db).close()
    assert history.anything_to_recall()
