"""Text rendering for `repro` and `bisect`: live progress on stderr, then the results."""
from __future__ import annotations

import shlex
import sys
import threading
import time
from typing import IO, Any

from distdoctor.probes.repro import ReproResult, parse_steps
from distdoctor.probes.repro.judge import ERROR_RE, FAIL_RE

TICK_S = 0.5
MAX_ERROR_LINES = 5


class Live:
    """Shows each DISTDOCTOR_STEP marker and the first error lines as they happen, with a
    running timer on a terminal. Thread-safe: lines arrive from the run's reader thread."""

    def __init__(self, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.label = ""
        self.start = time.monotonic()
        self.ranks: dict[int, str] = {}
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> "Live":
        if self.tty:
            self._ticker = threading.Thread(target=self._tick, daemon=True, name="repro-timer")
            self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(1.0)
        self._write("")

    def begin(self, label: str) -> None:
        with self._lock:
            # one clock for the whole command: a bisection's total time is what the user waits
            self.label, self.ranks, self.errors = label, {}, 0
        self.say(f"{label}: started")

    def line(self, text: str, label: str | None = None) -> None:
        if label is not None and label != self.label:
            self.begin(label)
        for step, rank in parse_steps(text):
            with self._lock:
                self.ranks[rank] = step
            self.say(f"{self.label}: rank {rank} {step}")
        if (FAIL_RE.search(text) or ERROR_RE.search(text)) and self.errors < MAX_ERROR_LINES:
            self.errors += 1
            self.say(f"{self.label}: {text.strip()[:160]}")

    def say(self, text: str) -> None:
        if self.enabled:
            self._write(f"  [{time.monotonic() - self.start:6.1f}s] {text}\n")

    def _write(self, text: str) -> None:
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[K")
            self.stream.write(text)
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                ranks = " ".join(f"{r}={s}" for r, s in sorted(self.ranks.items())) or "starting"
                self.stream.write(f"\r\x1b[K  {self.label} running {time.monotonic() - self.start:5.1f}s"
                                  f"  ranks: {ranks}")
                self.stream.flush()


def _causes(result: ReproResult, kb: Any) -> list[str]:
    lines = []
    for cause in result.causes[:3]:
        title = kb.causes[cause["id"]].title if cause["id"] in kb.causes else ""
        lines.append(f"  cause: {cause['id']} (score {cause['score']:g}){': ' + title if title else ''}")
        for ev in cause.get("evidence", [])[:2]:
            lines.append(f"    line {ev.get('line')}: {str(ev.get('text', ''))[:140]}")
    return lines


def render_repro(result: ReproResult, kb: Any, script_text: str) -> str:
    out = [f"repro: {result.outcome.upper()} after {result.duration_s:.1f}s ({result.nproc} ranks)",
           "", f"  {'rank':<6}{'last step':<12}exit code"]
    codes = result.exit_codes.get("ranks", {})
    for rank in range(result.nproc):
        code = codes.get(str(rank), "-")
        out.append(f"  {rank:<6}{result.progress.get(rank, '(none)'):<12}{code}")
    out.append("")
    if result.stuck_at:
        out.append(f"  stopped at: {result.stuck_at} (the first step not every rank finished)")
    if result.first_error:
        out.append(f"  first error: {result.first_error}")
    out.extend(_causes(result, kb))
    if result.outcome == "hang":
        out.append(f"  hang: no result within the timeout; the run's processes were killed")
    if not result.clean:
        out.append(f"  WARNING: left behind: pids {result.survivors}, port {result.port} "
                   f"{'free' if result.port_free else 'still bound'}")
    out.append(f"  log: {result.log}")
    if result.outcome != "pass":
        out.append(f"  next: distdoctor logs {shlex.quote(result.log)}")
        out.append("        distdoctor bisect   (same options: one switch at a time)")
    out += ["", f"script ({result.script}):", "", script_text.rstrip(), "",
            "run it by hand on two nodes:", result.manual]
    return "\n".join(out)


def render_bisect(data: dict[str, Any], kb: Any) -> str:
    base = data["baseline"]
    rows = [("baseline", base["outcome"], base["duration_s"])]
    rows += [(r["env"], r["outcome"], r["duration_s"]) for r in data["runs"]]
    width = max(len(r[0]) for r in rows) + 2
    out = [f"bisect: backend {data['backend']}, {len(rows)} run(s), one switch at a time", "",
           f"  {'switch':<{width}}{'outcome':<9}duration"]
    out += [f"  {name:<{width}}{outcome:<9}{duration:.1f}s" for name, outcome, duration in rows]
    out += [f"  {s['env']:<{width}}skipped  ({s['reason']})" for s in data.get("skipped", [])]
    out.append("")
    verdict = data.get("verdict")
    if verdict:
        out += [f"verdict: {verdict['env']} alone turns the failing baseline into a pass.",
                f"  cause: {verdict['cause']}{': ' + verdict['cause_title'] if verdict['cause_title'] else ''}",
                f"  why: {verdict['why']}",
                f"  permanent fix: {verdict['permanent_fix']}",
                f"  to confirm in the job meanwhile: export {verdict['env']}",
                f"  remember: {verdict['reminder']}"]
    elif data["baseline_passed"]:
        out += ["verdict: the baseline passes: the minimal job works on this node.",
                "  that rules out: " + ", ".join(data.get("rules_out", [])),
                "  so look at: " + ", ".join(data.get("points_at", [])),
                "  next: run the same script on two nodes (distdoctor repro prints the commands),",
                "        then the job's own code: distdoctor logs ./job-logs/"]
    elif data.get("stopped"):
        out.append("verdict: none: stopped before the end.")
    else:
        out += ["verdict: no single switch turned the baseline into a pass.",
                f"  the baseline's log: {base['log']}",
                f"  next: distdoctor logs {shlex.quote(base['log'])}",
                "        distdoctor check"]
    out.append(f"runs kept in: {data['run_dir']}")
    return "\n".join(out)
