"""The Bisect step: the baseline, then each switch of switches.toml alone, on this node."""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual import work

from ..lang import t
from ..messages import RunFinished, RunLine, RunRow
from .repro import RunScreen, result_row
from .repro_words import short_switch


class BisectScreen(RunScreen):
    """Baseline, then each switch alone, in the knowledge base's order; stops at the first pass."""

    kind, what = "bisect", "bisection"
    PALETTE = (("run", "Run the bisection", "Baseline, then one switch at a time"),)

    def plan_lines(self, lines: list[str]) -> list[str]:
        # each switch in one line: what it turns off is learn mode's (l), the Run key stays in sight
        return lines if self.dd.learn else [short_switch(line) for line in lines]

    @work(thread=True, exclusive=True, exit_on_error=False, group="bisect", description="bisection")
    def execute(self, opts: Any, cancel: threading.Event) -> None:
        from distdoctor.probes.repro import check_python, run_bisect

        def on_run(label: str, result: Any) -> None:
            self.post_message(RunRow(result_row(label, result.to_dict())))

        try:
            info = check_python(opts)
            backend = info.backend_for(opts.backend)
            self.post_message(RunLine(f"distdoctor: torch {info.torch} at {info.python}, backend {backend}"))
            result = run_bisect(replace(opts, python=info.python, torch=info.torch), self.dd.kb, on_run=on_run,
                                cancel=cancel, backend=backend,
                                on_line=lambda label, line: self.post_message(RunLine(f"[{label}] {line}")))
        except (OSError, ValueError) as exc:  # ReproInputError: no torch, no GPU for nccl...
            self.post_message(RunFinished(self.kind, None, str(exc)))
            return
        self.post_message(RunFinished(self.kind, result.to_dict()))

    def rows(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        rows = [result_row("baseline", result.get("baseline") or {})]
        for run in result.get("runs") or []:
            rows.append({"label": run.get("env", "?"), "outcome": run.get("outcome", "?"),
                         "duration_s": run.get("duration_s", 0),
                         "detail": ", ".join(run.get("causes") or []), "log": run.get("log") or ""})
        return rows

    def summary(self, result: dict[str, Any]) -> Text:
        text = Text()
        verdict = result.get("verdict")
        if isinstance(verdict, dict):
            text.append(t("Verdict: "), style="bold")
            cause = self.dd.kb.causes.get(str(verdict.get("cause")))
            text.append(t("passes only with {env}: {cause}", env=verdict.get("env"),
                          cause=(cause.title if cause and self.dd.lang != "en" else None)
                          or verdict.get("cause_title") or verdict.get("cause")))
            if verdict.get("reminder"):
                text.append(f"\n{verdict['reminder']}")
        elif result.get("baseline_passed"):
            text.append(t("Baseline PASS: "), style="bold")
            text.append(t("this node's local setup works; suspect the network between nodes or the job's code."))
        elif result.get("stopped"):
            text.append(t("STOPPED before a verdict."), style="bold")
        else:
            text.append(t("No single switch made it pass: "), style="bold")
            text.append(t("the cause is not one of these transports; read the logs of each run."))
        return text


SCREEN = BisectScreen  # the step this module shows (tui/app/steps.py)
