"""Why there is no Flight Recorder dump: the reason for this torch version, from the job's
environment, its backend, the dump folder and how its ranks ended. Each reason is
{"id", "why", "fix"} (ids are stable: fr-buffer-off, fr-name-not-read, fr-dump-on-timeout-off,
fr-async-not-3, fr-folder-missing, fr-folder-not-writable, fr-killed-before-dump, fr-gloo-no-dump)."""
from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping
from typing import Any

from distdoctor.knowledge.i18n import t

from ..knobs import vtuple

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
NEW_NAMES_SINCE = (2, 9)  # TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_TEMP_FILE
FR_SINCE = (2, 5)  # TORCH_NCCL_TRACE_BUFFER_SIZE and the dump on timeout
_OFF = ("0", "false", "no", "off", "")


def _buffer(env: Mapping[str, str], version: tuple[int, ...] | None) -> tuple[str | None, str | None]:
    """(the buffer-size variable this torch reads that is set, its value)."""
    names = ["TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"] if version is None or \
        version >= NEW_NAMES_SINCE else ["TORCH_NCCL_TRACE_BUFFER_SIZE"]
    for name in names:
        if name in env:
            return name, env[name]
    return None, None


def prefix_of(env: Mapping[str, str], version: tuple[int, ...] | None) -> str:
    """Where this torch writes its dumps: <prefix><rank>."""
    names = ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] if version is None or \
        version >= NEW_NAMES_SINCE else ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    return next((env[n] for n in names if env.get(n)), DEFAULT_PREFIX)


def why_no_dump(torch_version: str | None, env: Mapping[str, str], *, has_nccl: bool | None = None,
                exit_codes: Iterable[int | None] = ()) -> list[dict[str, str]]:
    """Every reason this job left no Flight Recorder dump, most basic first ([] when none is seen)."""
    version = vtuple(torch_version)
    out: list[dict[str, str]] = []

    def add(rid: str, why: str, fix: str) -> None:
        out.append({"id": rid, "why": why, "fix": fix})

    if version is not None and version < FR_SINCE:
        add("fr-buffer-off", t("torch {version} has no Flight Recorder dump on timeout (it needs 2.5 or later)",
                               version=torch_version), t("upgrade torch to 2.5 or later"))
        return out
    if has_nccl is False:
        add("fr-gloo-no-dump", t("this torch has no NCCL: the dump on timeout is NCCL's watchdog's, a Gloo job "
                                 "never writes one"),
            t("read the Flight Recorder live: distdoctor.guard.debug_server() in the job, then distdoctor fr "
              "http://HOST:25999"))
    name, value = _buffer(env, version)
    if name is None:
        if version is not None and version < NEW_NAMES_SINCE and "TORCH_FR_BUFFER_SIZE" in env:
            add("fr-name-not-read", t("TORCH_FR_BUFFER_SIZE is set but torch {version} reads only "
                                      "TORCH_NCCL_TRACE_BUFFER_SIZE", version=torch_version),
                "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000")
        else:
            add("fr-buffer-off", t("no Flight Recorder buffer size is set (older releases keep none by default)"),
                "export TORCH_FR_BUFFER_SIZE=2000" if version is None or version >= NEW_NAMES_SINCE
                else "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000")
    elif value.strip() in ("0", ""):
        add("fr-buffer-off", t("{name}={value}: the buffer is off", name=name, value=value.strip() or '""'),
            f"export {name}=2000")
    if version is not None and version < NEW_NAMES_SINCE and "TORCH_FR_DUMP_TEMP_FILE" in env \
            and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in env:
        add("fr-name-not-read", t("TORCH_FR_DUMP_TEMP_FILE is set but torch {version} reads only "
                                  "TORCH_NCCL_DEBUG_INFO_TEMP_FILE: the dumps went to {default}",
                                  version=torch_version, default=DEFAULT_PREFIX),
            f"export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={env['TORCH_FR_DUMP_TEMP_FILE']}")
    if has_nccl is not False:
        dump = env.get("TORCH_NCCL_DUMP_ON_TIMEOUT")
        if dump is not None and dump.strip().lower() in _OFF:
            add("fr-dump-on-timeout-off", t("TORCH_NCCL_DUMP_ON_TIMEOUT={value}: the watchdog does not dump on "
                                            "a timeout", value=dump), "export TORCH_NCCL_DUMP_ON_TIMEOUT=1")
        handling = env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")
        if handling is not None and handling.strip() != "3":
            add("fr-async-not-3", t("TORCH_NCCL_ASYNC_ERROR_HANDLING={value}: the dump needs 3 (tear down "
                                    "without abort)", value=handling), "export TORCH_NCCL_ASYNC_ERROR_HANDLING=3")
    folder = os.path.dirname(prefix_of(env, version)) or "."
    if not os.path.isdir(folder):
        add("fr-folder-missing", t("the dump folder {folder} does not exist: the dump could not be written",
                                   folder=folder), f"mkdir -p {folder}")
    elif not os.access(folder, os.W_OK):
        add("fr-folder-not-writable", t("the dump folder {folder} is not writable by this user", folder=folder),
            t("point {name} at a folder the job can write", name="TORCH_FR_DUMP_TEMP_FILE"))
    if any(code == -signal.SIGKILL for code in exit_codes):
        add("fr-killed-before-dump", t("a rank was killed with SIGKILL before it could dump: the scheduler's "
                                       "grace period (Slurm KillWait, Kubernetes terminationGracePeriodSeconds) "
                                       "ended it first"),
            t("give the job a longer grace period than the dump takes, or lower the collective timeout"))
    return out


def reasons_text(reasons: list[dict[str, Any]]) -> list[str]:
    """One line per reason: why, then the fix."""
    return [t("no Flight Recorder dump: {why} (fix: {fix})", why=r["why"], fix=r["fix"]) for r in reasons]
