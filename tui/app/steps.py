"""Which screen shows which step of the method. Nothing here lists the steps: they are the tree's
(knowledge/data/tree.toml). A step's screen is the module `tui/app/screens/<step id>.py` (a
hyphen in the id is an underscore there) that names its class `SCREEN`; the class declares its
palette entries (`PALETTE`) and its next-action text (`next_action`). A step without such a
module, a site overlay's, gets GenericStepScreen: its prose and the tree's next step."""
from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .screens.base import StepScreen

PACKAGE = "distdoctor.tui.app.screens"


@cache
def screen_module(step_id: str) -> str | None:
    """The module that shows the step, or None for the generic screen: found and its source
    read for its `SCREEN = ` line, not imported (the sidebar asks for every step at start-up)."""
    base = step_id.replace("-", "_")
    spec = importlib.util.find_spec(f"{PACKAGE}.{base}") if base.isidentifier() else None
    try:
        source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    except OSError:
        return None
    return spec.name if spec and "\nSCREEN = " in source else None


def screen_class(step_id: str) -> type[StepScreen]:
    """The step's screen class, imported when first asked for (the first screen does not pay
    for the others' DataTable, Log or probes)."""
    module = screen_module(step_id)
    screen = getattr(importlib.import_module(module), "SCREEN", None) if module else None
    if screen is not None:
        return screen
    from .screens.base import GenericStepScreen

    return GenericStepScreen
