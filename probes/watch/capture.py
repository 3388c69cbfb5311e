"""The evidence taken the moment a hang is confirmed or a rank dies, while it still exists:
every rank's Python and native stacks, the Flight Recorder dumps, NCCL RAS, the per-rank logs
and, where there is a GPU, nvidia-smi and the kernel log. Each part is written to the evidence
folder; a part that cannot be had says why instead."""
from __future__ import annotations

import glob
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..base import ProbeContext
from ..runner import Runner, SubprocessRunner

NATIVE_TIMEOUT_S = 20.0
GPU_TIMEOUT_S = 15.0


def write_part(path: Path, data: Any) -> str:
    """Write one part of the evidence; its path, or "" when it could not be written (the folder
    removed under the watcher, a shared file system gone): the capture goes on without it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, default=str) if not isinstance(data, str) else data,
                        encoding="utf-8")
    except OSError:
        return ""
    return str(path)


def take_stacks(ranks: Sequence[Any], evidence: Path, *, expected: Sequence[str] = (),
                timeout: float, native: bool = True, ctx: ProbeContext | None = None,
                notes: list[str]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """Every rank's Python stacks (analysed, the `stacks --json` document) and, after them,
    the native ones; (document or None, {"stacks": path, "native_stacks": path})."""
    from .. import stacks

    paths: dict[str, str] = {}
    try:
        doc = stacks.take(list(ranks), expected=expected, timeout=timeout, ctx=ctx,
                          rerun="distdoctor watch")
    except stacks.NoPySpy as exc:
        notes.append(t("stacks: {why}", why=exc))
        return None, paths
    doc["evidence"] = stacks.as_evidence(doc)
    paths["stacks"] = write_part(evidence / "stacks.json", doc)
    if native:
        alive = [r for r in ranks if r.rank in {x["rank"] for x in doc["ranks"] if x["frames"]}]
        try:
            dumped = stacks.dump_all(alive, stacks.hostname(), native=True,
                                     timeout=min(timeout, NATIVE_TIMEOUT_S), ctx=ctx, rerun="distdoctor watch")
            paths["native_stacks"] = write_part(evidence / "stacks-native.json", dumped)
        except stacks.NoPySpy as exc:
            notes.append(t("native stacks: {why}", why=exc))
    return doc, paths


def flight_recorder(fr_dir: str | None, evidence: Path, notes: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The dumps the ranks wrote under `fr_dir` (their own dump on timeout), read and compared."""
    if not fr_dir or not os.path.isdir(fr_dir) or not os.listdir(fr_dir):
        return None, None
    from ..flightrec import DumpError, as_evidence, read_and_analyse, to_json

    try:
        result = read_and_analyse([fr_dir])
    except DumpError as exc:
        notes.append(t("Flight Recorder: {why}", why=exc))
        return None, fr_dir
    if not result.dumps:
        return None, fr_dir
    doc = {**to_json(result), "evidence": as_evidence(result)}
    write_part(evidence / "fr.json", doc)
    return doc, fr_dir


def gpu_state(evidence: Path, runner: Runner | None, notes: list[str]) -> dict[str, str]:
    """nvidia-smi's full query and the kernel log's tail, where there is an NVIDIA driver."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    runner = runner or SubprocessRunner()
    out: dict[str, str] = {}
    for name, argv in (("nvidia_smi", [exe, "-q"]), ("kernel_log", ["dmesg", "--ctime"])):
        res = runner(argv, timeout=GPU_TIMEOUT_S)
        if res.ok:
            text = res.stdout if name == "nvidia_smi" else "\n".join(res.stdout.splitlines()[-500:])
            out[name] = write_part(evidence / f"{name.replace('_', '-')}.txt", text)
        else:
            notes.append(t("{what}: {why}", what=argv[0], why=res.error or res.stderr.strip()[:200]))
    return out


def log_files(folders: Sequence[str]) -> list[str]:
    """Every file under the per-rank log folders and the given log paths."""
    out: list[str] = []
    for item in folders:
        if os.path.isdir(item):
            out.extend(p for p in glob.glob(os.path.join(item, "**", "*"), recursive=True) if os.path.isfile(p))
        elif os.path.isfile(item):
            out.append(item)
    return sorted(set(out))


def from_debug_server(url: str | None, evidence: Path, *, timeout: float, need_stacks: bool,
                      expected: Sequence[str], notes: list[str], explicit: bool) -> dict[str, Any]:
    """Stacks (when py-spy could not take them) and the live Flight Recorder from the job's
    debug server; {} when it does not answer (a note only when the user named it)."""
    from .. import debugserver

    if not url:
        return {}
    out: dict[str, Any] = {}
    try:
        if need_stacks:
            from .. import stacks

            doc = stacks.analyse(debugserver.stacks(url, timeout), expected)
            doc["evidence"] = stacks.as_evidence(doc)
            doc["source"] = "debug-server"
            out["stacks"] = doc
            out["stacks_path"] = write_part(evidence / "stacks.json", doc)
        paths = debugserver.flight_recorder(url, evidence / "fr-live", timeout)
        if paths:
            out["fr_dir"] = str(evidence / "fr-live")
    except debugserver.DebugServerError as exc:
        if explicit:
            notes.append(t("debug server: {why}", why=exc))
    return out
