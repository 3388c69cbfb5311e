"""The incident store's default file lies beside the sessions folder (what the session module's
state_dir gave before store.py stopped importing it), and $DISTDOCTOR_DB overrides it."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.tui.record import session
from distdoctor.tui.record.history.store import default_path


def test_beside_the_sessions_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DISTDOCTOR_DB", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_path() == session.state_dir().parent / "incidents.db" == tmp_path / "distdoctor" / "incidents.db"
    monkeypatch.setenv("DISTDOCTOR_DB", str(tmp_path / "elsewhere.db"))
    assert default_path() == tmp_path / "elsewhere.db"
