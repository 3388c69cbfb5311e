"""Shared fixtures: keep the developer's host (state dir, overlay, env) out of unit tests.

The tests are sorted by layer: unit/ (no process spawned, no app: the fast inner loop), app/ (the
Textual app under Pilot, and its SVG snapshots), integration/ (real processes, sockets, torch jobs);
kits/ holds what they share and bench/ the benchmarks and the diagnosis figures. The kits, and
the test modules a benchmark or another test reuses, are importable from every folder.
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS / d) for d in ("kits", "bench", "unit", "integration", "app") if str(TESTS / d) not in sys.path]
from fixturekit import HERE_FIXTURES, SHARED_FIXTURES, shared_fixtures  # noqa: E402,F401  (re-exported)

from distdoctor.knowledge import i18n  # noqa: E402

# test modules that load the knowledge base at import (collection) write its start-up cache: into a
# folder of this run, never the developer's state folder; each test then gets its own (below)
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="distdoctor-tests-state-")


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("DISTDOCTOR_KNOWLEDGE", raising=False)
    # English output is what the tests compare, whatever the developer's locale (zh_CN would
    # switch it to Chinese: knowledge/i18n.py); tests/unit/test_i18n.py chooses its language itself
    monkeypatch.setenv("DISTDOCTOR_LANG", "en")
    # the text commands wrap to $COLUMNS, else the terminal's width, else 120 for a pipe
    # (tui/commands/logs_text.py): a width exported by the developer's shell, or the 80 that
    # pytest-xdist's workers set, would rewrap what the tests compare; a test that wants a width sets it
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    # `--lang zh` given to main() in this process (and the app's language switch) stays the
    # process's language until the next main(): a later test in the same process (another
    # order, another pytest-xdist worker) read every text in Chinese
    i18n.set_lang(None)
    yield
    i18n.set_lang(None)


def pytest_configure(config: pytest.Config) -> None:
    # under pytest -n (README, CI), workers are handed tests one at a time in collection order
    # (below: the slow ones first) instead of a first chunk of a quarter of their share each, which
    # gave one worker most of the slow tests while the others ran out of work
    if getattr(config.option, "maxschedchunk", "absent") is None:
        config.option.maxschedchunk = 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the tests marked slow (real multi-rank jobs, most of them waiting out a stall or a timeout)
    # go first, in their order: pytest-xdist hands tests out in this order, so the long ones start
    # at once and the short ones fill the gaps, instead of one long test starting last
    items.sort(key=lambda item: "slow" not in item.keywords)
    if os.environ.get("DISTDOCTOR_GPU_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="needs a GPU: set DISTDOCTOR_GPU_TESTS=1 on a GPU node")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
