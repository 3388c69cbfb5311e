"""Which screen shows which step of the method. Nothing here lists the steps: they are the tree's
(knowledge/data/tree.toml). A step's screen is the module `tui/app/screens/<step id>.py` (a
hyphen in the id is an underscore there) that names its class `SCREEN`; the class declares its
palette entries (`PALETTE`) and its next-action text (`next_action`). A step without such a
module, a site overlay's, gets GenericStepScreen: its prose and the tree's next step."""
from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .screens.base import StepScreen

PACKAGE = "distdoctor.tui.app.screens"


def screen_class(step_id: str) -> type[StepScreen]:
    """The step's screen class, imported when first asked for (the first screen does not pay
    for the others' DataTable, Log or probes)."""
    name = step_id.replace("-", "_")
    if name.isidentifier() and importlib.util.find_spec(f"{PACKAGE}.{name}") is not None:
        screen = getattr(importlib.import_module(f"{PACKAGE}.{name}"), "SCREEN", None)
        if screen is not None:
            return screen
    from .screens.base import GenericStepScreen

    return GenericStepScreen
