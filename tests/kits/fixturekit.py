"""Where the test data lives: the project's own fixtures, and ../shared/fixtures (third-party
material read in place, absent on a user's machine: tests that need it skip)."""
from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = TESTS.parent.parent / "shared" / "fixtures"
HERE_FIXTURES = TESTS / "fixtures"


def shared_fixtures(sub: str) -> Path:
    """A folder of ../shared/fixtures, or skip the test when it is absent (as on a user's machine)."""
    path = SHARED_FIXTURES / sub
    if not path.is_dir():
        pytest.skip(f"shared fixtures not present: {path}")
    return path
