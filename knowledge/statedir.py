"""Where distdoctor keeps what it writes: $XDG_STATE_HOME/distdoctor (~/.local/state by default)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def state_dir(*parts: str, env: Mapping[str, str] | None = None) -> Path:
    """distdoctor's state folder (sessions/, runs/, drills.json, incidents.db live here), joined
    with `parts`; nothing is created. `env` defaults to os.environ (tests pass their own)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base, "distdoctor", *parts)
