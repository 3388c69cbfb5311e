"""The Logs step's other sources of evidence beside log files: every rank's stack taken now
(py-spy), Flight Recorder dumps found in a loaded folder, the switches that make evidence exist
for this stack, and the launcher the loaded logs reveal."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text

from .. import launchers
from ..lang import t

# `job.launcher` of a log analysis -> the launcher whose logging lines to show
LOG_LAUNCHERS = {"torchrun": "torchrun", "slurm": "slurm", "mpirun": "mpirun", "mp.spawn": "python"}


# torchrun --log-dir / --redirects: <log dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log
TORCHRUN_LAYOUT = re.compile(r"(?:^|/)attempt_\d+/\d+/(?:stdout|stderr|error)\.(?:log|json)$")


def launcher_from_logs(job: Mapping[str, Any], files: Iterable[str] = ()) -> launchers.Launcher | None:
    """The launcher the loaded logs reveal (torchrun's banner, Slurm's lines, torchrun's
    attempt_N/<rank>/ folders), or None."""
    lid = LOG_LAUNCHERS.get(str(job.get("launcher") or ""))
    backend = t(", {backend} backend", backend=job["backend"]) if job.get("backend") else ""
    if lid is None:
        if not any(TORCHRUN_LAYOUT.search(str(f)) for f in files):
            return None
        return launchers.Launcher("torchrun", launchers.NAMES["torchrun"],
                                  t("the logs are in torchrun's attempt_N/<rank>/ folders (--log-dir){backend}",
                                    backend=backend), launchers.logging_lines("torchrun"))
    return launchers.Launcher(lid, launchers.NAMES[lid], t("seen in the loaded logs{backend}", backend=backend),
                              launchers.logging_lines(lid))


def stacks_now(ctx: Any) -> tuple[dict[str, Any] | None, str]:
    """Every rank of the one job on this node, dumped with py-spy: (stacks document, '') or
    (None, why not) in one line with what to run instead."""
    from distdoctor.probes import stacks

    try:
        jobs = stacks.find_jobs(ctx)
    except OSError as exc:
        return None, t("cannot list this node's processes: {error}", error=exc)
    if not jobs:
        return None, t("No training job runs on this node. On the job's nodes: "
                       "distdoctor fleet stacks --via srun (or ssh, pdsh, kubectl)")
    if len(jobs) > 1:
        return None, t("{n} jobs run on this node: pick one with "
                       "distdoctor stacks --job ID (distdoctor stacks --job auto lists them)", n=len(jobs))
    job = jobs[0]
    try:
        # expected() is a method: the ranks WORLD_SIZE says should run here
        return stacks.take(job.ranks, expected=job.expected()), ""
    except stacks.NoPySpy as exc:
        return None, str(exc)


def stacks_text(doc: Mapping[str, Any]) -> str:
    """Where the ranks are: the groups, then the odd ranks out."""
    lines = [t("{n} rank(s) in {where}: rank {ranks}", n=len(g.get("ranks") or []), where=g.get("where"),
               ranks=", ".join(map(str, g.get("ranks") or [])))
             for g in (doc.get("groups") or [])[:6]]
    lines += [t("odd: rank {rank} in {where} ({why})", rank=o.get("rank"), where=o.get("where"), why=o.get("why"))
              for o in doc.get("odd") or []]
    return t("Stacks now:") + "\n" + "\n".join(lines or [t("no rank could be dumped")])


def flight_recorder(paths: list[str]) -> dict[str, Any] | None:
    """Flight Recorder dumps under the loaded folders, compared across ranks (None if none)."""
    from distdoctor.probes.flightrec import DumpError, as_evidence, read_and_analyse, to_json

    try:
        result = read_and_analyse(paths)
    except DumpError:
        return None  # no dump here (or none readable): the log files are the evidence
    if not result.dumps:
        return None
    return {**to_json(result), "paths": paths, "evidence": as_evidence(result)}


def _knob_lines(versions: Mapping[str, Any]) -> list[Any]:
    from distdoctor.probes.knobs import knob_lines

    return knob_lines(versions.get("torch"), versions.get("nccl"))


def knobs_copy(versions: Mapping[str, Any]) -> str:
    """The lines alone, to paste into the job script."""
    return "\n".join(line.line for line in _knob_lines(versions))


def knobs_text(versions: Mapping[str, Any]) -> Text:
    """The environment lines that turn on every source of evidence this stack has."""
    text = Text(t("Turn on every source of evidence this stack has (k: back to the logging lines):") + "\n",
                style="dim")
    for line in _knob_lines(versions):
        text.append(f"{line.line}\n")
        text.append(f"  # {line.what} ({line.applies})\n", style="dim")
    return text
