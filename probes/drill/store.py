"""Which drills this learner has passed: $XDG_STATE_HOME/distdoctor/drills.json.

Written by the app when a drill is scored, read by `distdoctor drill list`. A missing or
unreadable file means nothing passed yet (never an error: it is a convenience, not a record;
the score itself lives in the session and its report)."""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge.atomicfile import write_atomic
from distdoctor.knowledge.statedir import state_dir


def path(env: Mapping[str, str] | None = None) -> Path:
    """The file of passed drills."""
    return state_dir("drills.json", env=env)


def _load() -> dict[str, Any]:
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def passed() -> dict[str, dict[str, Any]]:
    """drill name -> its best passing attempt ({"score", "at", "session"})."""
    got = _load().get("passed")
    return {k: v for k, v in got.items() if isinstance(v, dict)} if isinstance(got, dict) else {}


def save_attempt(name: str, score: int, passed_it: bool, session: str = "") -> None:
    """Keep the best passing score per drill; a failed attempt changes nothing here."""
    if not passed_it:
        return
    data = _load()
    best = data.setdefault("passed", {}) if isinstance(data.get("passed"), dict) else {}
    data["passed"] = best
    old = best.get(name)
    if isinstance(old, dict) and isinstance(old.get("score"), int) and old["score"] >= score:
        return
    best[name] = {"score": score, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "session": session}
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps(data, indent=1))
