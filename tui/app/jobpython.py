"""The failing job's Python interpreter for the whole session (issue 24 item 2): given once, or
found (a rank still running on this node, the torch paths in the logs), and used by Environment,
Repro and Bisect (probes/repro/interpreter.py finds it)."""
from __future__ import annotations

from typing import Any


class JobPython:
    """Mixed into the App: reads and keeps the job's python in the session (`self.flow`)."""

    def job_python(self) -> str:
        """The failing job's python as this session knows it (given, found, or the one a recorded
        repro or bisection ran), else "": Environment, Repro and Bisect all use it."""
        python = self.flow.answers.get("python") or getattr(self, "_job_python", "")
        if python:
            return str(python)
        for kind in ("repro", "bisect"):
            event = self.flow.events.get(kind) or {}
            command = event.get("command") or (event.get("baseline") or {}).get("command") or []
            if command and isinstance(command[0], str):
                return command[0]
        return ""

    def set_job_python(self, python: str, how: str = "", keep: bool = False) -> None:
        """Remember the job's python for the session (once: every step that runs it reads it);
        `keep` saves it in the session record too (once a run has used it)."""
        self._job_python = python
        if keep and python and python != self.flow.answers.get("python"):
            self.record("answer", {"step": self.current_step, "question": "python", "answer": python,
                                   "how": how})

    def find_job_python(self) -> Any:
        """A `Found` (python, how) from a running job or the logs' tracebacks, or None. Blocking:
        call it from a worker thread."""
        from distdoctor.probes.repro.interpreter import find_job_python

        return find_job_python(self.ctx, self.flow.log_paths)

    def probe_context(self, python: str = "") -> Any:
        """The probe context with the job's python, so `check`'s versions are the job's."""
        from dataclasses import replace

        python = python or self.job_python()
        return replace(self.ctx, python=python) if python else self.ctx
