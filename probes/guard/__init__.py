"""The guide's remedies as code a training script imports: `preflight()` right after (or instead of)
`init_process_group`, `crash_guard()` around the training loop, `hardened_env()` for the job
script. Importing this package is cheap: torch is imported only inside the functions that need it."""
from __future__ import annotations

from typing import Any

__all__ = ["PreflightError", "crash_guard", "debug_server", "hardened_env", "preflight"]


def __getattr__(name: str) -> Any:
    # each helper lives in its own module, loaded on first use
    if name == "crash_guard":
        from .crash import crash_guard
        return crash_guard
    if name in ("preflight", "PreflightError"):
        from . import startup
        return getattr(startup, name)
    if name == "debug_server":
        from .debug import debug_server
        return debug_server
    if name == "hardened_env":
        from .env import hardened_env
        return hardened_env
    raise AttributeError(f"module 'distdoctor.guard' has no attribute {name!r}")
