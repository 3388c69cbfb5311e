"""Report sections for the minimal repro and the bisection (`repro --json`, `bisect --json`)."""
from __future__ import annotations

import os
import stat
from typing import Any

from .report_tables import cell, tabulate

LOG_TAIL_LINES = 40
LOG_TAIL_BYTES = 64 * 1024
RUN_LOG_NAME = "output.log"  # probes.repro.run.LOG_NAME: the only file name a run's log has
# Run details that only matter on the machine that ran them (or are shown elsewhere).
_SKIP = frozenset({"log", "run_dir", "script", "env_added", "manual_commands", "port", "log_file"})


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def log_tail(value: Any) -> str:
    """The last lines of a run's output: `value` is the output itself or the path of its log file
    (repro --json gives the path; the file is read here when it is still on this machine)."""
    text = value if isinstance(value, str) else ""
    if text and "\n" not in text and len(text) < 4096 and os.path.isabs(text):
        return _read_tail(text)
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def _read_tail(path: str) -> str:
    """The tail of a run's log file. A session file can be edited or come from elsewhere, so
    only a regular file named like a run's log is read (never /dev/zero, a FIFO or another
    file of this machine), and at most LOG_TAIL_BYTES of it."""
    if os.path.basename(path) != RUN_LOG_NAME:
        return f"(log {path}: not a distdoctor run log ({RUN_LOG_NAME}); not read)"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"(log {path} is not readable here: {exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return f"(log {path}: not a regular file; not read)"
        data = os.pread(fd, LOG_TAIL_BYTES, max(0, st.st_size - LOG_TAIL_BYTES))
    except OSError as exc:
        return f"(log {path} is not readable here: {exc.strerror or exc})"
    finally:
        os.close(fd)
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:])


def _causes(value: Any) -> str:
    out = []
    for item in _l(value):
        if isinstance(item, dict):
            score = f" ({item['score']})" if item.get("score") is not None else ""
            out.append(f"{item.get('id')}{score}")
        else:
            out.append(str(item))
    return ", ".join(out)


def readable(key: str, value: Any) -> str:
    """A run's structured fields as a person reads them, not JSON: exit codes and progress per
    rank, what the cleanup left."""
    if key == "exit_codes" and isinstance(value, dict):
        ranks = _d(value.get("ranks"))
        parts = [f"launcher {value['launcher']}"] if value.get("launcher") is not None else []
        parts += [f"rank {r}: {c}" for r, c in ranks.items()]
        return "; ".join(parts) or cell(value)
    if key == "progress" and isinstance(value, dict):
        return ", ".join(f"rank {r}: {step}" for r, step in value.items())
    if key == "cleanup" and isinstance(value, dict):
        left = _l(value.get("survivors"))
        return (f"left behind: pids {', '.join(map(str, left))}" if left else "no process left") + \
            ("; port free" if value.get("port_free") else "; port still bound" if "port_free" in value else "")
    return cell(value)


def _run_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = [["outcome", cell(data.get("outcome"))], ["duration_s", cell(data.get("duration_s"))]]
    for key in ("nproc", "exit_codes", "stuck_at", "first_error", "progress", "cleanup"):
        if data.get(key) not in (None, "", {}, []):
            rows.append([key, readable(key, data[key])])
    if data.get("causes"):
        rows.append(["causes", _causes(data["causes"])])
    if isinstance(data.get("command"), list):
        rows.append(["command", " ".join(map(str, data["command"]))])
    return rows


def repro_section(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """{"summary", "tables", "log_tail"} for a repro result; unknown shapes are tabulated whole."""
    if data is None:
        return None
    if "outcome" not in data:
        out = tabulate({k: v for k, v in data.items() if k not in _SKIP})
    else:
        known = {"outcome", "duration_s", "nproc", "exit_codes", "stuck_at", "first_error",
                 "progress", "cleanup", "causes", "command"}
        extra = tabulate({k: v for k, v in data.items() if k not in known | _SKIP})
        out = {"summary": _run_rows(data) + extra["summary"], "tables": extra["tables"]}
    out["log_tail"] = str(data.get("log") or "")  # report._trim turned a log path into its tail
    return out


def bisect_section(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """{"summary", "tables"} for a bisection: baseline, one row per switch run, the verdict."""
    if data is None:
        return None
    if "runs" not in data and "baseline" not in data:
        return tabulate(data)
    summary: list[list[str]] = []
    if data.get("backend"):
        summary.append(["backend", cell(data["backend"])])
    base = _d(data.get("baseline"))
    summary += [[f"baseline {k}", v] for k, v in _run_rows(base) if k != "command"] if base else []
    verdict = _d(data.get("verdict"))
    if verdict:
        summary.append(["verdict", f"passes with {verdict.get('env') or verdict.get('switch')}: "
                                   f"{verdict.get('cause_title') or verdict.get('cause') or ''}"])
        for key in ("why", "permanent_fix", "reminder"):
            if verdict.get(key):
                summary.append([key.replace("_", " "), cell(verdict[key], 1000)])
    elif base:
        summary.append(["verdict", "the baseline passed: nothing to bisect on this node"
                        if data.get("baseline_passed") else "no single switch turned the failure into a pass"])
    for key in ("rules_out", "points_at"):
        if data.get(key):
            summary.append([key.replace("_", " "), ", ".join(map(str, _l(data[key])))])
    if data.get("stopped"):
        summary.append(["stopped", "the bisection was stopped before every switch ran"])
    rows = [[cell(_d(r).get("env") or _d(r).get("switch")), cell(_d(r).get("outcome")),
             cell(_d(r).get("duration_s")), _causes(_d(r).get("causes"))] for r in _l(data.get("runs"))]
    tables = [{"title": "runs, one switch each", "columns": ["switch", "outcome", "duration_s", "causes"],
               "rows": rows, "more": 0}] if rows else []
    return {"summary": summary, "tables": tables}
