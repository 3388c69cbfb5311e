"""Which screen shows which step of the method: the app builds them, the help screen lists their keys."""
from __future__ import annotations

import importlib
from typing import Any

from textual.screen import Screen

STEP_SCREENS: dict[str, tuple[str, str]] = {
    "classify": ("classify", "ClassifyScreen"),
    "logs": ("logs", "LogsScreen"),
    "environment": ("environment", "EnvironmentScreen"),
    "repro": ("repro", "ReproScreen"),
    "bisect": ("repro", "BisectScreen"),
    "conclusion": ("conclusion", "ConclusionScreen"),
}


def screen_class(step_id: str) -> type[Screen[Any]]:
    module, name = STEP_SCREENS.get(step_id, ("base", "GenericStepScreen"))
    return getattr(importlib.import_module(f"distdoctor.tui.app.screens.{module}"), name)
