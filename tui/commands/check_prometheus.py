"""`check --prometheus FILE`: the findings as metrics in node_exporter's textfile-collector
format, written atomically (a temporary file in the same folder, then renamed), so a
collector never reads half a file and a cluster's monitoring can alert on them."""
from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from distdoctor.knowledge import atomicfile
from distdoctor.knowledge.i18n import t

from ..errors import UsageError

SEVERITY = {"ok": 0, "warn": 1, "fail": 2}


def _label(value: Any) -> str:
    """A label value escaped as the exposition format requires (backslash, quote, newline)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**pairs: Any) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in pairs.items()) + "}"


def _family(name: str, help_text: str, samples: Iterable[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    lines += [f"{name}{labels} {value:g}" for labels, value in samples]
    return lines


def metrics(data: Mapping[str, Any], now: float | None = None) -> str:
    """The exposition text of a `check` result (its --json dict)."""
    findings = [f for f in data.get("findings", ()) if isinstance(f, Mapping)]
    probes = data.get("probes", {})
    host = data.get("host", "")
    judged = [f for f in findings if f.get("status") in SEVERITY]
    problems = [f for f in judged if f.get("status") in ("warn", "fail")]
    causes: dict[str, int] = {}
    for f in problems:
        for cause in f.get("cause_ids") or ():
            causes[cause] = causes.get(cause, 0) + 1
    out: list[str] = []
    out += _family("distdoctor_check_status",
                   "Result of each check: 0 ok, 1 warn, 2 fail.",
                   ((_labels(host=host, probe=f.get("probe", ""), check=f.get("check", "")),
                     SEVERITY[f["status"]]) for f in judged))
    out += _family("distdoctor_check_problem",
                   "1 for each check that found a problem, with its severity and the causes it supports.",
                   ((_labels(host=host, probe=f.get("probe", ""), check=f.get("check", ""),
                             severity=f["status"], causes=",".join(f.get("cause_ids") or ())), 1)
                    for f in problems))
    out += _family("distdoctor_cause_findings",
                   "How many warn or fail findings support each cause.",
                   ((_labels(host=host, cause=c), n) for c, n in sorted(causes.items())))
    out += _family("distdoctor_probe_up",
                   "1 when the probe could run, 0 when it was unavailable or failed.",
                   ((_labels(host=host, probe=name), 1 if p.get("status") in ("ok", "warn", "fail") else 0)
                    for name, p in sorted(probes.items())))
    out += _family("distdoctor_check_failed", "Number of failed checks.",
                   [(_labels(host=host), sum(f["status"] == "fail" for f in judged))])
    out += _family("distdoctor_check_warnings", "Number of checks with a warning.",
                   [(_labels(host=host), sum(f["status"] == "warn" for f in judged))])
    out += _family("distdoctor_check_last_run_timestamp_seconds", "When distdoctor check ran (Unix time).",
                   [(_labels(host=host), round(time.time() if now is None else now, 3))])
    return "\n".join(out) + "\n"


def check_target(path: str) -> None:
    """UsageError unless FILE can be written: its folder exists and FILE is no folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(t("--prometheus {path}: no such folder {folder}", path=path, folder=folder))
    if os.path.isdir(path):
        raise UsageError(t("--prometheus {path}: is a folder; give a file name such as {path}/distdoctor.prom",
                           path=path))


def write_atomic(path: str, text: str) -> None:
    """Replace FILE with `text` in one rename: node_exporter reads either the old or the new
    file, never a partial one. The temporary file does not end in .prom, so it is never read."""
    check_target(path)
    try:
        atomicfile.write_atomic(path, text, mode=0o644, durable=True)
    except OSError as exc:
        raise UsageError(t("--prometheus {path}: cannot write there ({why})", path=path,
                           why=exc.strerror or exc)) from None


def write_metrics(path: str, data: Mapping[str, Any]) -> None:
    write_atomic(path, metrics(data))
