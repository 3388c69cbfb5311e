"""Shared fixtures: keep the developer's host (state dir, overlay, env) out of unit tests."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
HERE_FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_fixtures(sub: str) -> Path:
    """A folder of ../shared/fixtures, or skip the test when it is absent (as on a user's machine)."""
    path = SHARED_FIXTURES / sub
    if not path.is_dir():
        pytest.skip(f"shared fixtures not present: {path}")
    return path


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("DISTDOCTOR_KNOWLEDGE", raising=False)
    # English output is what the tests compare, whatever the developer's locale (zh_CN would
    # switch it to Chinese: knowledge/i18n.py); tests/test_i18n.py chooses its language itself
    monkeypatch.setenv("DISTDOCTOR_LANG", "en")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DISTDOCTOR_GPU_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="needs a GPU: set DISTDOCTOR_GPU_TESTS=1 on a GPU node")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
