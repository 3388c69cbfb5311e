"""The job's own launch line, unchanged but for evidence: which launcher it is, a per-rank log
folder for torchrun when it has none, and the evidence switches (probes/knobs.py) for the job's
torch and NCCL, none of which changes what the job computes."""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..knobs import FR_DIR, knob_lines
from ..runner import Runner, SubprocessRunner

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
LOG_DIR_OPTIONS = ("--log-dir", "--log_dir")
VERSIONS_TIMEOUT_S = 15.0

# The job's torch and NCCL, read from package metadata and torch/version.py, never by importing
# torch (seconds on a loaded node, before the job may start).
VERSIONS_SNIPPET = r"""
import json, os
from importlib import metadata, util
out = {"torch": None, "cuda": None, "hip": None, "nccl": None}
try:
    out["torch"] = metadata.version("torch")
except metadata.PackageNotFoundError:
    pass
spec = util.find_spec("torch")
if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        scope = {}
        exec(compile(open(path).read(), path, "exec"), scope)
        out["cuda"], out["hip"] = scope.get("cuda"), scope.get("hip")
    except (OSError, SyntaxError, ImportError):
        pass
for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
    try:
        out["nccl"] = metadata.version(name)
        break
    except metadata.PackageNotFoundError:
        continue
print(json.dumps(out))
"""


@dataclass
class LaunchPlan:
    """What `distdoctor run` starts: the argv (the job's, plus torchrun's log options when it had
    none), the environment lines it adds, and where the per-rank logs and dumps go."""

    argv: list[str]
    launcher: str  # torchrun | srun | accelerate | deepspeed | python | other
    env_added: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)  # switches the job already set, left alone
    log_dir: str | None = None  # torchrun's per-rank log folder
    fr_dir: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    python: str | None = None
    why_no_knobs: str = ""  # why the evidence switches were left off


def launcher_of(argv: Sequence[str]) -> tuple[str, int]:
    """(kind, index after the launcher's own name) for a launch line: `torchrun ...`,
    `python -m torch.distributed.run ...`, `srun`, `accelerate launch`, `deepspeed`, `python x.py`."""
    if not argv:
        return "other", 0
    exe = os.path.basename(argv[0])
    if exe == "torchrun":
        return "torchrun", 1
    if exe.startswith("python"):
        if len(argv) > 2 and argv[1] == "-m" and argv[2] in TORCHRUN_MODULES:
            return "torchrun", 3
        return "python", 1
    if exe in ("srun", "accelerate", "deepspeed"):
        return exe, 1
    return "other", 1


def option_value(argv: Sequence[str], *names: str) -> str | None:
    """The value a launch line gives one of the options `names` (`--opt V` or `--opt=V`); None
    when it gives none."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def has_log_dir(argv: Sequence[str]) -> str | None:
    """The --log-dir a torchrun line already gives (None when it gives none)."""
    return option_value(argv, *LOG_DIR_OPTIONS)


def job_python(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The interpreter the job runs: the launch line's python, or the one in torchrun's
    (accelerate's, deepspeed's) shebang."""
    if not argv:
        return None
    exe = argv[0]
    path = exe if os.sep in exe else shutil.which(exe, path=env.get("PATH"))
    if not path:
        return None
    if os.path.basename(path).startswith("python"):
        return path
    try:
        with open(path, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and os.path.basename(parts[0]) == "env" and len(parts) > 1:
            return shutil.which(parts[1], path=env.get("PATH"))
        return parts[0] if parts else None
    return None


def job_versions(python: str | None, runner: Runner | None = None,
                 timeout: float = VERSIONS_TIMEOUT_S) -> tuple[dict[str, Any], str]:
    """({"torch", "cuda", "hip", "nccl"}, "") from the job's interpreter, or ({}, why not)."""
    if not python:
        return {}, t("the job's interpreter is not known from its launch line (give --python)")
    res = (runner or SubprocessRunner())([python, "-I", "-c", VERSIONS_SNIPPET], timeout=timeout)
    if not res.ok:
        return {}, res.error or (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
    try:
        found = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}, t("the job's interpreter gave no answer")
    return found if isinstance(found, dict) else {}, ""


def evidence_env(env: Mapping[str, str], versions: Mapping[str, Any],
                 fr_dir: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the lines to add, the lines the job already sets and keeps) for this torch and NCCL:
    Flight Recorder buffer and dump on timeout (dumps under `fr_dir`), async error handling,
    RAS, and NCCL warnings. NCCL_DEBUG is WARN (INFO floods the logs during a long job); the
    debug modes that add collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL) are left off."""
    has_nccl = bool(versions.get("cuda") or versions.get("hip")) if versions.get("torch") else None
    added: dict[str, str] = {}
    for knob in knob_lines(versions.get("torch"), versions.get("nccl"), has_nccl=has_nccl):
        if knob.kind != "env" or knob.source not in ("flight-recorder", "error-handling", "ras"):
            continue
        name, _, value = knob.line.partition("=")
        added.setdefault(name, value.replace(FR_DIR, fr_dir))
    if has_nccl:
        added["NCCL_DEBUG"] = "WARN"
    kept = {k: env[k] for k in added if k in env}
    return {k: v for k, v in added.items() if k not in env}, kept


def plan_launch(argv: Sequence[str], env: Mapping[str, str], evidence_dir: Path, *,
                knobs: bool = True, runner: Runner | None = None,
                python: str | None = None) -> LaunchPlan:
    """The launch line to run and the environment to add, for `distdoctor run -- argv`."""
    kind, after = launcher_of(argv)
    plan = LaunchPlan(list(argv), kind)
    if kind == "torchrun":
        given = has_log_dir(argv)
        if given:
            plan.log_dir = given
        else:
            plan.log_dir = str(evidence_dir / "rank-logs")
            # one stdout and stderr file per rank, still echoed to the console (--tee)
            plan.argv = (list(argv[:after]) + ["--log-dir", plan.log_dir, "--redirects", "3", "--tee", "3"]
                         + list(argv[after:]))
    plan.python = python or job_python(argv, env)
    if knobs:
        plan.versions, plan.why_no_knobs = job_versions(plan.python, runner)
        if not plan.versions.get("torch"):
            # which names this torch reads is unknown: set none rather than every alternative
            plan.why_no_knobs = plan.why_no_knobs or t("no torch in the job's interpreter")
            plan.fr_dir = None
            return plan
        plan.fr_dir = str(evidence_dir / "fr")
        plan.env_added, plan.kept = evidence_env(env, plan.versions, plan.fr_dir)
        if not any("DUMP_TEMP_FILE" in k or "DEBUG_INFO_TEMP_FILE" in k for k in plan.env_added):
            plan.fr_dir = None
    return plan
