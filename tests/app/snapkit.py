"""What the app's snapshot tests share: a snapshot of a step's body (the `snap_body` fixture,
tests/app/conftest.py), and opening a step by its key.

Most snapshots are about one step's page, not about the frame around it: the step list on the
left and the title ("3/6 Check the environment") list every step of the tree, so before this
every snapshot changed when a step was added (19 SVGs for one step). `snap_body` takes the same
picture with the step list and the title left blank, their room kept (Textual's `visibility:
hidden`): the page is laid out exactly as the user sees it, at the same width. The frame has its
own snapshots (the first screen, in English and Chinese, and the Conclusion with every step
marked), which do change, rightly, when the tree does.
"""
from __future__ import annotations

from typing import Any


def hide_frame(app: Any) -> None:
    """Blank the step list and the header of every screen on the stack (their room is kept)."""
    from textual.widgets import Header

    from distdoctor.tui.app.widgets import StepNav

    for screen in app.screen_stack:
        for widget in (*screen.query(StepNav), *screen.query(Header)):
            widget.styles.visibility = "hidden"


async def open_step(pilot: Any, step_id: str) -> None:
    """Press the digit of `step_id` as the tree places it (what the user presses to open it)."""
    await pilot.press(str(pilot.app.order.index(step_id) + 1))


async def walk_to(pilot: Any, step_id: str) -> None:
    """Press n until `step_id` is open (the steps the tree places before it are passed through)."""
    for _ in pilot.app.order:
        if pilot.app.current_step == step_id:
            return
        await pilot.press("n")
    assert pilot.app.current_step == step_id, f"n never reached {step_id}"
