"""Text rendering for `repro` and `bisect`: live progress on stderr, then the results."""
from __future__ import annotations

import shlex
import shutil
import sys
import threading
import time
from typing import IO, Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t
from distdoctor.probes.repro import ReproResult, parse_steps
from distdoctor.probes.repro.judge import ERROR_RE, FAIL_RE

from .common import wrap

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

    def __enter__(self) -> Live:
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
        self.say(t("{label}: started", label=label))

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
            head = f"  [{time.monotonic() - self.start:6.1f}s] "
            # long plan lines are prose: wrapped under their first word, never past the width
            lines = wrap(text, max(_width() - len(head), 30), break_long_words=False) or [""]
            self._write(head + ("\n" + " " * len(head)).join(lines) + "\n")

    def _write(self, text: str) -> None:
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[K")
            self.stream.write(text)
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                ranks = " ".join(f"{r}={s}" for r, s in sorted(self.ranks.items())) or t("starting")
                status = "  " + t("{label} running {seconds}s  ranks: {ranks}", label=self.label,
                                  seconds=f"{time.monotonic() - self.start:5.1f}", ranks=ranks)
                # \r redraws one screen row only: a status that wraps would leave its head behind
                cols = shutil.get_terminal_size((80, 24)).columns - 1
                status = i18n.clip(status, max(cols, 3))
                self.stream.write(f"\r\x1b[K{status}")
                self.stream.flush()


def _width() -> int:
    """$COLUMNS, else the terminal's width, else 120 for a pipe."""
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def _prose(text: str, cols: int) -> list[str]:
    """`label: text` wrapped under its label, two spaces in."""
    label, sep, _ = text.partition(": ")
    if not sep:
        label, sep, _ = text.partition("：")
    hang = i18n.cells(label) + 4  # under the text after "label: " (or "标签：")
    return wrap(text, cols, "  ", " " * hang, break_long_words=False)


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if i18n.cells(text) <= limit else i18n.clip(text, max(limit, 4))


def _causes(result: ReproResult, kb: Any, cols: int) -> list[str]:
    lines = []
    for cause in result.causes[:3]:
        title = kb.causes[cause["id"]].title if kb is not None and cause["id"] in kb.causes else ""
        lines += _prose(t("cause: {cause} (score {score}){title}", cause=cause["id"], score=f"{cause['score']:g}",
                          title=t(": ") + title if title else ""), cols)
        for ev in cause.get("evidence", [])[:2]:
            where = "    " + t("line {n}: ", n=ev.get("line"))
            lines.append(where + _clip(ev.get("text", ""), cols - i18n.cells(where)))
    return lines


def _under_next() -> str:
    """The indent that puts a line under the command after "  next: " (display cells)."""
    return " " * i18n.cells("  " + t("next: {command}", command=""))


def _rank_pad(nproc: int) -> int:
    return max(6, 2 * len(str(max(nproc - 1, 0))) + 3)


def _rank_rows(result: ReproResult) -> list[str]:
    """One row per run of consecutive ranks in the same state: 64 ranks that all passed are
    one line, and the odd rank stands out."""
    codes = result.exit_codes.get("ranks", {})
    rows: list[tuple[int, int, str, str]] = []
    for rank in range(result.nproc):
        state = (result.progress.get(rank, "(none)"), str(codes.get(str(rank), "-")))
        if rows and rows[-1][1] == rank - 1 and rows[-1][2:] == state:
            rows[-1] = (rows[-1][0], rank, *state)
        else:
            rows.append((rank, rank, *state))
    names = [str(a) if a == b else f"{a}-{b}" for a, b, _, _ in rows]
    pad = _rank_pad(result.nproc)
    return [f"  {name:<{pad}}{i18n.pad(t(step) if step == '(none)' else step, 12)}{code}"
            for name, (_, _, step, code) in zip(names, rows)]


def render_repro(result: ReproResult, kb: Any, script_text: str,
                 bisect_cmd: str = "distdoctor bisect") -> str:
    out = [t("repro: {outcome} after {seconds}s ({n} ranks)", outcome=t(result.outcome.upper()),
             seconds=f"{result.duration_s:.1f}", n=result.nproc),
           "", f"  {'rank':<{_rank_pad(result.nproc)}}{i18n.pad(t('last step'), 12)}{t('exit code')}"]
    out.extend(_rank_rows(result))
    out.append("")
    if result.outcome == "pass" and result.stuck_at == "exit":
        out.append("  " + t("every rank finished; the processes were still exiting at the timeout "
                            "and were killed"))
    elif result.stuck_at:
        out.append("  " + t("stopped at: {step} (the first step not every rank finished)", step=result.stuck_at))
    cols = _width()
    if result.first_error:
        # the one line that says what broke: wrapped, never cut
        out += _prose(t("first error: {error}", error=" ".join(str(result.first_error).split())), cols)
    out.extend(_causes(result, kb, cols))
    if result.outcome == "hang":
        out.append("  " + t("hang: no result within the timeout; the run's processes were killed"))
    if not result.clean:
        out.append("  " + t("WARNING: left behind: pids {pids}, port {port} {state}", pids=result.survivors,
                            port=result.port, state=t("free") if result.port_free else t("still bound")))
    out.append("  " + t("log: {path}", path=result.log))
    if result.outcome != "pass":
        out.append("  " + t("next: {command}", command=f"distdoctor logs {shlex.quote(result.log)}"))
        out.append(f"{_under_next()}{bisect_cmd}   # {t('the same job, one switch at a time')}")
    if script_text:  # --show-script
        out += ["", t("script ({path}):", path=result.script), "", script_text.rstrip()]
    else:
        out.append("  " + t("script: {path} (--show-script prints it)", path=result.script))
    out += ["", t("run it by hand on two nodes:"), result.manual]
    return "\n".join(out)


def render_bisect(data: dict[str, Any], kb: Any) -> str:
    base = data["baseline"]
    rows = [(t("baseline"), base["outcome"], base["duration_s"])]
    rows += [(r["env"], r["outcome"], r["duration_s"]) for r in data["runs"]]
    skipped = t("skipped")
    width = max(i18n.cells(r[0]) for r in rows) + 2
    out_w = max(9, *(i18n.cells(t(w)) + 1 for w in ("outcome", skipped, *(r[1] for r in rows))))
    out = [t("bisect: backend {backend}, {n} run(s), one switch at a time", backend=data["backend"], n=len(rows)),
           "", f"  {i18n.pad(t('switch'), width)}{i18n.pad(t('outcome'), out_w)}{t('duration')}"]
    out += [f"  {i18n.pad(name, width)}{i18n.pad(t(outcome), out_w)}{duration:.1f}s"
            for name, outcome, duration in rows]
    out += [f"  {i18n.pad(s['env'], width)}{i18n.pad(skipped, out_w)}({s['reason']})"
            for s in data.get("skipped", [])]
    out.append("")
    verdict = data.get("passing_switch") or data.get("verdict")
    if verdict:
        cols = _width()
        out += [t("verdict: {env} alone turns the failing baseline into a pass.", env=verdict["env"])]
        out += _prose(t("cause: {cause}", cause=verdict["cause"])
                      + (t(": ") + verdict["cause_title"] if verdict["cause_title"] else ""), cols)
        out += _prose(t("why: {why}", why=verdict["why"]), cols)
        out += _prose(t("permanent fix: {fix}", fix=verdict["permanent_fix"]), cols)
        name, _, value = str(verdict["env"]).partition("=")
        out += ["  " + t("to confirm in the job meanwhile:"),
                f"    export {shlex.quote(name)}={shlex.quote(value)}"]
        out += _prose(t("remember: {reminder}", reminder=verdict["reminder"]), cols)
    elif data["baseline_passed"]:
        out += [t("verdict: the baseline passes: the minimal job works on this node."),
                "  " + t("that rules out: {what}", what=t(", ").join(data.get("rules_out", []))),
                "  " + t("so look at: {what}", what=t(", ").join(data.get("points_at", []))),
                "  " + t("next: run the same script on two nodes (distdoctor repro prints the commands),"),
                _under_next() + t("then the job's own code: {command}", command="distdoctor logs ./job-logs/")]
    elif data.get("stopped"):
        out.append(t("verdict: none: stopped before the end."))
    else:
        out += [t("verdict: no single switch turned the baseline into a pass."),
                "  " + t("the baseline's log: {path}", path=base["log"]),
                "  " + t("next: {command}", command=f"distdoctor logs {shlex.quote(base['log'])}"),
                _under_next() + "distdoctor check"]
    out.append(t("runs kept in: {path}", path=data["run_dir"]))
    return "\n".join(out)
