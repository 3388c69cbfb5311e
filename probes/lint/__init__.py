"""Static checks of training scripts for the patterns that hang or silently corrupt distributed
training (`distdoctor lint`): standard-library `ast` only, the code is never imported or run."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from . import check_ckpt, check_data, check_setup, check_sync
from .model import Script
from .rules import Finding, Rule, rules

__all__ = ["Finding", "LintResult", "Rule", "as_evidence", "lint_paths", "lint_source", "rules"]

CHECKS: tuple[Callable[[Script], list[Finding]], ...] = (
    check_sync.collective_in_rank_branch, check_sync.collective_after_rank_exit,
    check_sync.collective_over_uneven_data, check_setup.spawn_under_torchrun,
    check_setup.init_without_timeout, check_data.dataloader_without_sampler,
    check_data.accelerate_unprepared, check_data.lightning_sampler_off, check_data.seeds,
    check_ckpt.rank0_save_read, check_ckpt.rank0_load_no_broadcast, check_ckpt.per_rank_resume,
    check_sync.rank0_heavy_work, check_setup.exits)
MAX_BYTES = 16 << 20
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", ".git", ".venv", "venv", ".tox"}


@dataclass
class LintResult:
    """Findings over every file read, and one line per input that could not be read."""

    files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"files": self.files, "findings": [f.to_dict() for f in self.findings]}
        if self.errors:
            data["errors"] = self.errors
        return data


def lint_source(text: str, path: str = "<string>") -> list[Finding]:
    """Every finding in one file's source: the hang rules (DD1xx) first, each group by place.
    Raises SyntaxError as `ast.parse` does."""
    script = Script.parse(path, text)
    seen: set[tuple[str, int, int]] = set()
    out: list[Finding] = []
    for check in CHECKS:
        for f in check(script):
            if (f.rule, f.line, f.col) not in seen:
                seen.add((f.rule, f.line, f.col))
                out.append(f)
    return sorted(out, key=lambda f: (hang_last(f), f.line, f.col, f.rule))


def hang_last(finding: Finding) -> int:
    """0 for a rule that hangs the job (DD1xx: a collective some ranks never reach, uneven
    data...), 1 for the rest: what stops a job comes before what slows or skews it."""
    return 0 if finding.rule.startswith("DD1") else 1


def python_files(paths: Iterable[str]) -> tuple[list[Path], list[str]]:
    """Files named on the command line (any name) and *.py under folders, recursively; errors
    for paths that do not exist or hold no Python."""
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                found.extend(Path(root) / n for n in sorted(names) if n.endswith(".py"))
            if not found:
                errors.append(t("{raw}: no *.py files in this folder", raw=raw))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():  # a FIFO or a device would block or never end
            errors.append(t("{raw}: not a regular file", raw=raw))
        else:
            errors.append(t("{raw}: no such file or folder", raw=raw))
    return files, errors


def lint_paths(paths: Iterable[str]) -> LintResult:
    """Lint files and folders; unreadable files (binary, not UTF-8, syntax errors) become one
    error line each and the rest are still linted."""
    files, errors = python_files(paths)
    result = LintResult(errors=errors)
    for path in files:
        try:
            if path.stat().st_size > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES >> 20} MiB: not a training script")
            text = path.read_bytes().decode("utf-8")
            if "\x00" in text:
                raise ValueError("binary file")
            found = lint_source(text, str(path))
        except SyntaxError as exc:
            result.errors.append(t("{path}:{line}: not valid Python ({error})", path=path, line=exc.lineno or 0,
                                      error=exc.msg))
            continue
        except (UnicodeDecodeError, ValueError) as exc:
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            result.errors.append(t("{path}: cannot lint ({reason})", path=path, reason=reason))
            continue
        except OSError as exc:
            result.errors.append(t("{path}: cannot read ({why})", path=path, why=exc.strerror or exc))
            continue
        except RecursionError:
            result.errors.append(t("{path}: cannot lint (nested too deeply for the parser)", path=path))
            continue
        result.files.append(str(path))
        result.findings.extend(found)
    result.findings.sort(key=hang_last)  # stable: files and lines keep their order in each group
    return result


def as_evidence(findings: Iterable[Finding | dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings as evidence for the verdict engine: the script is misconfigured, on no rank in particular."""
    out = []
    for f in findings:
        d = f.to_dict() if isinstance(f, Finding) else f
        out.append({"source": "lint", "ranks": [], "role": "misconfigured",
                    "why": f"{d['rule']} at {os.path.basename(d['file'])}:{d['line']}: {d['message']}",
                    "cause": d["cause_id"], "file": d["file"], "line": d["line"]})
    return out
