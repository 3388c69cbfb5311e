"""Which launcher started the job, and the exact lines that turn distributed logging on for it."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from .lang import t

# Logging switches of GUIDE.md section 1 step 2, from the knob table (probes/knobs.toml: the
# nccl-logs and torch-debug knobs); NCCL expands %h to the host and %p to the pid, so every rank
# writes its own file into one folder that the Logs step can then load.
LOG_DIR = "./nccl-logs"


@functools.cache
def switches() -> tuple[tuple[str, str], ...]:
    """(name, value) of every logging switch, read once when a screen first shows them."""
    from distdoctor.probes.knobs import log_switches
    return log_switches(LOG_DIR)


# Checked in order: torchrun inside a Slurm allocation is still launched by torchrun.
MARKERS: tuple[tuple[str, str], ...] = (
    ("TORCHELASTIC_RUN_ID", "torchrun"),
    ("OMPI_COMM_WORLD_SIZE", "mpirun"),
    ("PMI_RANK", "mpirun"),
    ("SLURM_JOB_ID", "slurm"),
)
NAMES = {"torchrun": "torchrun", "mpirun": "mpirun (Open MPI / MPICH)", "slurm": "Slurm (srun)",
         "python": "plain python"}


@dataclass(frozen=True)
class Launcher:
    """The detected launcher, the variable that gave it away, and the lines to copy."""

    id: str
    name: str
    evidence: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def detect(env: Mapping[str, str]) -> tuple[str, str]:
    """(launcher id, why) from the environment the job (or this shell) runs in."""
    for var, launcher in MARKERS:
        if env.get(var):
            return launcher, t("{var} is set", var=var)
    return "python", t("no launcher variable ({names}) is set",
                       names="TORCHELASTIC_RUN_ID, SLURM_JOB_ID, OMPI_COMM_WORLD_SIZE")


def logging_lines(launcher: str) -> tuple[str, ...]:
    """Copy-pasteable lines for that launcher; the job command itself stays the user's own."""
    pairs = [f"{k}={v}" for k, v in switches()]
    mkdir = f"mkdir -p {LOG_DIR}"
    if launcher == "mpirun":
        # mpirun does not forward the environment to remote ranks unless told with -x
        return (mkdir, *(f"export {p}" for p in pairs),
                "mpirun " + " ".join(f"-x {k}" for k, _ in switches()) + " ... python train.py")
    if launcher == "slurm":
        return (mkdir, *(f"export {p}" for p in pairs),
                "srun --export=ALL ... python train.py")
    if launcher == "torchrun":
        return (mkdir, *(f"export {p}" for p in pairs),
                "torchrun --nproc-per-node=... train.py")
    # one variable per line so the block still reads (and pastes) in a narrow terminal
    return (mkdir, *(f"{p} \\" for p in pairs), "python train.py")


def for_env(env: Mapping[str, str]) -> Launcher:
    launcher, why = detect(env)
    return Launcher(launcher, NAMES[launcher], why, logging_lines(launcher))


def switches_to_remove() -> list[str]:
    """The logging switches the Logs step asked for: debugging only, never for production."""
    return [k for k, _ in switches()]
