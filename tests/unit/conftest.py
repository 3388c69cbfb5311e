"""Unit tests spawn no process: a test here that starts one belongs in tests/integration/."""
from __future__ import annotations

import subprocess

import pytest


@pytest.fixture(autouse=True)
def _no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a unit test started a process: move its file to tests/integration/")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
