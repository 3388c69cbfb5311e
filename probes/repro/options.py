"""What a repro run takes (ReproOptions) and the checks made before anything is launched."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from ..runner import Runner, SubprocessRunner

BACKENDS = ("nccl", "gloo", "auto")
MAX_TIMEOUT_S = 7 * 24 * 3600  # the script's own timedelta and int() need a finite, sane number
CPU_RANKS_PER_CORE = 4  # gloo ranks are whole torch processes (~300 MB each); more only thrash
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
# How long the target interpreter gets to answer (import torch, look at CUDA) before anything
# runs: the run's --timeout, but never under CHECK_MIN_S (a cold torch import on a network
# filesystem takes tens of seconds, and a short --timeout is meant for the collectives) and never
# over CHECK_MAX_S (an interpreter that cannot import torch in a minute will not run the repro).
CHECK_MIN_S = 20.0
CHECK_MAX_S = 60.0

# Asked of the target interpreter in a subprocess (its argument: the requested backend):
# distdoctor never imports torch itself. The interpreter imports torch (seconds on a cold cache)
# only when the answer depends on CUDA: for nccl, or auto with a CUDA or ROCm build of torch.
# Otherwise torch's presence is found without importing it and its version read from its own
# version.py; Gloo is taken as built in (every Linux and macOS build has it), and a torch that
# is there but does not import is reported by the run itself, which imports it.
_PROBE_CODE = (
    "import importlib.util, json, os, sys\n"
    "spec = importlib.util.find_spec('torch')\n"
    "if spec is None:\n"
    "    raise ModuleNotFoundError(\"No module named 'torch'\")\n"
    "about = {}\n"
    "try:\n"
    "    path = os.path.join(list(spec.submodule_search_locations)[0], 'version.py')\n"
    "    with open(path, encoding='utf-8') as fh:\n"
    "        exec(compile(fh.read(), path, 'exec'), about)\n"
    "    version = str(about['__version__'])\n"
    "except Exception:\n"
    "    version = ''\n"
    "gpu_build = bool(about.get('cuda') or about.get('hip'))\n"
    "if version and not (sys.argv[1] == 'nccl' or (sys.argv[1] == 'auto' and gpu_build)):\n"
    "    print(json.dumps({'torch': version, 'cuda': False, 'gpus': 0, 'nccl': False, 'gloo': True}))\n"
    "    sys.exit()\n"
    "import torch, torch.distributed as d\n"
    "cuda = bool(torch.cuda.is_available())\n"
    "print(json.dumps({'torch': torch.__version__, 'cuda': cuda,"
    " 'gpus': torch.cuda.device_count() if cuda else 0,"
    " 'nccl': bool(d.is_available() and d.is_nccl_available()),"
    " 'gloo': bool(d.is_available() and d.is_gloo_available())}))\n"
)


class ReproInputError(InputError, ValueError):
    """Bad input for a repro or a bisection; the message is one line for the user."""


@dataclass(frozen=True)
class ReproOptions:
    """One minimal job: `nproc` ranks on this node, run by the target `python`'s torchrun.

    `env` holds the user's K=V additions (`--env`); they apply on top of `base_env`
    (None: this process's environment), so a broken job environment can be reproduced."""

    nproc: int = 2
    nnodes: int = 1
    backend: str = "auto"
    python: str = ""  # "" = default_python()
    timeout: float = 60.0
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    run_dir: Path | None = None
    base_env: Mapping[str, str] | None = None
    torch: str = ""  # the target torch's version when known (check_python): picks the env names it reads

    def target_python(self) -> str:
        return self.python or default_python()


@dataclass(frozen=True)
class PythonInfo:
    """What the target interpreter's torch offers. `cuda`, `gpus` and `nccl` are asked of torch
    only when the backend depends on them (_PROBE_CODE); otherwise they are False and 0."""

    python: str
    torch: str
    cuda: bool
    gpus: int
    nccl: bool
    gloo: bool

    def backend_for(self, requested: str) -> str:
        """The backend the script will pick: `auto` means nccl when CUDA is available."""
        if requested == "auto":
            return "nccl" if self.cuda else "gloo"
        return requested


def default_python() -> str:
    """The job's interpreter is most likely the `python3` on PATH (an activated env)."""
    return shutil.which("python3") or shutil.which("python") or sys.executable


def parse_env(items: list[str] | None) -> dict[str, str]:
    """`K=V` strings to a dict; a malformed one is a ReproInputError."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not ENV_NAME_RE.match(name):
            raise ReproInputError(t("--env {item}: expected NAME=VALUE (e.g. --env NCCL_P2P_DISABLE=1)", item=repr(item)))
        out[name] = value
    return out


def validate(opts: ReproOptions) -> None:
    """Reject options that cannot describe a run on this node."""
    if opts.nproc < 1:
        raise ReproInputError(t("--nproc {nproc}: need at least 1 process (2 is the minimal repro)", nproc=opts.nproc))
    if opts.nnodes != 1:
        raise ReproInputError(t("--nnodes {nnodes}: only 1 runs here; the output prints the commands to run the same script by hand on two nodes", nnodes=opts.nnodes))
    if opts.backend not in BACKENDS:
        raise ReproInputError(t("--backend {backend}: one of {known}", backend=repr(opts.backend), known=', '.join(BACKENDS)))
    if not opts.timeout > 0:
        raise ReproInputError(t("--timeout {timeout}: must be more than 0 seconds", timeout=format(opts.timeout, "g")))
    if not opts.timeout <= MAX_TIMEOUT_S:  # also catches inf
        raise ReproInputError(t("--timeout {timeout}: at most {most} seconds (a week); a repro that needs longer is a hang",
                                timeout=format(opts.timeout, "g"), most=MAX_TIMEOUT_S))
    for name in opts.env:
        if not ENV_NAME_RE.match(name):
            raise ReproInputError(t("--env {name}: not a valid variable name", name=repr(name)))
        if name in LAUNCH_VARS:
            raise ReproInputError(t("--env {name}: torchrun sets it for every rank (the repro picks a free port on this node), so it would be ignored", name=name))


def max_cpu_ranks() -> int:
    """How many gloo (CPU) ranks a repro may start on this node."""
    return max(8, CPU_RANKS_PER_CORE * (os.cpu_count() or 1))


def resolve_python(python: str) -> str:
    """An executable path for `python` (a path or a name on PATH), or a ReproInputError."""
    found = shutil.which(python) if os.sep not in python else python
    if not found or not Path(found).is_file():
        raise ReproInputError(t("--python {python}: no such interpreter", python=python))
    if not os.access(found, os.X_OK):
        raise ReproInputError(t("--python {python}: not executable", python=python))
    return os.path.abspath(found)  # runs start in their own folder: a relative path would break


def check_timeout(opts: ReproOptions) -> float:
    """Seconds the target interpreter gets to answer check_python (see CHECK_MIN_S)."""
    return min(CHECK_MAX_S, max(CHECK_MIN_S, opts.timeout))


def check_python(opts: ReproOptions, *, runner: Runner | None = None,
                 timeout: float | None = None) -> PythonInfo:
    """Ask the target interpreter for torch, CUDA and backend support; ReproInputError when it
    cannot run the repro with the requested backend. `timeout` (default: check_timeout) bounds
    the question; the runner kills the interpreter's whole process group when it passes."""
    validate(opts)
    python = resolve_python(opts.target_python())
    timeout = check_timeout(opts) if timeout is None else timeout
    result = (runner or SubprocessRunner())([python, "-c", _PROBE_CODE, opts.backend], timeout=timeout)
    if result.error:
        if result.returncode is None and "timed out after" in result.error:
            raise ReproInputError(t("--python {python}: did not answer within {timeout}s (not a Python interpreter that answers?)",
                                    python=opts.target_python(), timeout=format(timeout, "g")))
        # The runner names the command first; the message names it already.
        raise ReproInputError(t("--python {python}: {detail}", python=python, detail=result.error.removeprefix(python + ': ')))
    if result.returncode != 0:
        if not result.stderr.strip() and not result.stdout.strip():
            raise ReproInputError(t("--python {python}: exited with code {returncode} and printed nothing: not a Python interpreter? (point --python at the failing job's python)", python=python, returncode=result.returncode))
        last = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        if "No module named" in last and "torch" in last:
            raise ReproInputError(t("--python {python}: torch is not installed there (point --python at the failing job's interpreter)", python=python))
        raise ReproInputError(t("--python {python}: cannot import torch: {last}", python=python, last=last))
    try:
        facts = json.loads(result.stdout.strip().splitlines()[-1])
        info = PythonInfo(python, str(facts["torch"]), bool(facts["cuda"]), int(facts["gpus"]),
                          bool(facts["nccl"]), bool(facts["gloo"]))
    except (IndexError, ValueError, KeyError, TypeError):
        raise ReproInputError(t("--python {python}: unexpected answer {answer}", python=python,
                                answer=repr(result.stdout[-200:]))) from None
    backend = info.backend_for(opts.backend)
    if backend == "nccl":
        if not (info.cuda and info.nccl):
            raise ReproInputError(t("--backend nccl: torch {torch} at {python} has no CUDA/NCCL (use --backend gloo)", torch=info.torch, python=python))
        if opts.nproc > info.gpus:
            raise ReproInputError(t("--nproc {nproc}: nccl needs one GPU per process and this node has {gpus}", nproc=opts.nproc, gpus=info.gpus))
    elif not info.gloo:
        raise ReproInputError(t("--backend gloo: torch {torch} at {python} was built without Gloo", torch=info.torch, python=python))
    elif opts.nproc > max_cpu_ranks():
        raise ReproInputError(t("--nproc {nproc}: a CPU (gloo) repro runs at most {most} ranks on this node ({cores} cores); the minimal repro needs 2",
                                nproc=opts.nproc, most=max_cpu_ranks(), cores=os.cpu_count()))
    return info
