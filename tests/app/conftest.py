"""The snapshot tests' fixture `snap_body`: a step's page without the frame (tests/app/snapkit.py)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from snapkit import hide_frame


@pytest.fixture
def snap_body(snap_compare: Callable[..., bool]) -> Callable[..., bool]:
    """`snap_compare` for a step's page: the frame (step list, title) left blank."""

    def compare(app: Any, *, run_before: Callable[[Any], Awaitable[None]] | None = None,
                press: list[str] | tuple[str, ...] = (), **kwargs: Any) -> bool:
        async def before(pilot: Any) -> None:
            if run_before is not None:
                await run_before(pilot)
            if press:
                await pilot.press(*press)
            hide_frame(pilot.app)
            await pilot.pause()

        return snap_compare(app, run_before=before, **kwargs)

    return compare
