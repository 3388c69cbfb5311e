"""What every probe takes (a context) and returns (a frozen result)."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from distdoctor.knowledge.frozen import Frozen, frozen

from .runner import Runner, SubprocessRunner

OK, WARN, FAIL, UNAVAILABLE, ERROR = "ok", "warn", "fail", "unavailable", "error"


@frozen
class ProbeContext(Frozen):
    """Everything a probe may read: commands through `runner`, files under `root`."""

    runner: Runner = field(default_factory=SubprocessRunner)
    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType(dict(os.environ)))
    python: str = sys.executable
    pid: int | None = None
    home: Path = field(default_factory=Path.home)
    timeout: float = 5.0  # per command

    def path(self, absolute: str) -> Path:
        """Map an absolute path like /proc/meminfo under the injected root."""
        return self.root / absolute.lstrip("/")

    def read_text(self, absolute: str, limit: int = 1 << 20) -> str | None:
        """Read a small text file under root; None when it is absent or unreadable."""
        try:
            with open(self.path(absolute), "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return None


@frozen
class ProbeResult(Frozen):
    """Facts a probe gathered. `reason` says why it could not run when status is unavailable/error."""

    name: str
    status: str
    facts: Mapping[str, Any]
    reason: str = ""
    raw: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "facts": dict(self.facts),
                "reason": self.reason, "duration_s": round(self.duration_s, 4)}


Probe = Callable[[ProbeContext], ProbeResult]


def unavailable(name: str, reason: str, **facts: Any) -> ProbeResult:
    return ProbeResult(name, UNAVAILABLE, MappingProxyType(facts), reason=reason)
