"""Launch probe: the rank variables, which launcher set them, and whether they agree."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .base import OK, ProbeContext, ProbeResult, unavailable
from .procenv import EnvUnreadable, env_source, target_env

NAME = "launch"
NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
         "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
         "NVIDIA_VISIBLE_DEVICES", "PMI_RANK", "PMI_SIZE")
PREFIXES = ("TORCHELASTIC_", "SLURM_", "OMPI_COMM_WORLD_")
# The variables init_process_group(init_method="env://") needs on every rank.
ENV_INIT = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Rank numbers (0 or more) and sizes (1 or more): torch reads them with int() and fails or
# misnumbers on anything else.
RANK_NUMBERS = {"RANK": 0, "LOCAL_RANK": 0, "GROUP_RANK": 0, "WORLD_SIZE": 1, "LOCAL_WORLD_SIZE": 1}


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def _at_least(value: str, least: int) -> bool:
    """Whether int(value), as torch reads it, works and is at least `least`."""
    try:
        return int(value) >= least
    except ValueError:
        return False


def launcher(env: Mapping[str, str]) -> str:
    """torchrun, slurm, openmpi, mpich, manual (rank variables by hand) or none."""
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun"
    if "OMPI_COMM_WORLD_RANK" in env:
        return "openmpi"
    if "PMI_RANK" in env:
        return "mpich"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "slurm"
    if any(name in env for name in ENV_INIT):
        return "manual"
    return "none"


def scheduler_tasks(env: Mapping[str, str]) -> tuple[int | None, str]:
    """How many tasks the scheduler/MPI started in this job step, and which variable says so."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        value = _int(env, name)
        if value is not None:
            return value, name
    return None, ""


def scheduler_rank(env: Mapping[str, str]) -> tuple[int | None, str]:
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        value = _int(env, name)
        if value is not None:
            return value, name
    return None, ""


def tasks_per_node(env: Mapping[str, str]) -> int | None:
    value = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    if value is None:
        text = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
        head = text.split("(")[0].split(",")[0]  # "4(x2),3" -> 4
        value = int(head) if head.isdigit() else None
    return value


def visible_gpus(env: Mapping[str, str]) -> int | None:
    """How many devices CUDA_VISIBLE_DEVICES lets a rank see; None when it is unset."""
    text = env.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    items = [t for t in text.split(",") if t.strip()]
    # CUDA stops at the first invalid entry; -1 hides every device.
    count = 0
    for item in items:
        if item.strip().startswith("-"):
            break
        count += 1
    return count


def _port_number(text: str) -> int | str:
    """MASTER_PORT as a number when it is decimal digits, else the text as given (which lies in no
    port range, so the range check in checks.toml finds it invalid)."""
    try:
        return int(text) if text.isdigit() else text
    except ValueError:  # '²' is a digit to isdigit() but not to int()
        return text


def consistency(env: Mapping[str, str], kind: str) -> dict[str, Any]:
    """The numbers the checks compare (the comparisons live in checks.toml); a fact is absent
    when its inputs are."""
    facts: dict[str, Any] = {}
    world, rank = _int(env, "WORLD_SIZE"), _int(env, "RANK")
    local_world, local_rank = _int(env, "LOCAL_WORLD_SIZE"), _int(env, "LOCAL_RANK")
    # The booleans below repeat what the checks compare, for the readers of the facts (snapshots,
    # tests); the checks judge the numbers.
    if world is not None and rank is not None:
        facts["rank_out_of_range"] = not 0 <= rank < world
    if local_world is not None and local_rank is not None:
        facts["local_rank_out_of_range"] = not 0 <= local_rank < local_world
    tasks, tasks_var = scheduler_tasks(env)
    if tasks is not None and world is not None:
        facts["scheduler_tasks"], facts["scheduler_tasks_var"] = tasks, tasks_var
        # Under torchrun each scheduler task is one agent that starts LOCAL_WORLD_SIZE workers.
        expected = tasks * (local_world or 1) if kind == "torchrun" else tasks
        facts["expected_world_size"] = expected
        facts["world_size_vs_scheduler"] = world != expected
    srank, srank_var = scheduler_rank(env)
    if srank is not None and rank is not None and kind != "torchrun":
        facts["scheduler_rank"], facts["scheduler_rank_var"] = srank, srank_var
    per_node = tasks_per_node(env)
    if kind == "torchrun" and per_node is not None:
        # torchrun inside an srun/mpirun step that starts several tasks per node: every task's
        # agent starts its own workers, so ranks are numbered twice.
        facts["tasks_per_node"] = per_node
    visible = visible_gpus(env)
    if visible is not None:
        facts["visible_gpus"] = visible
        if local_world is not None:
            # One GPU per rank, or every rank sees all local GPUs: both work; anything between
            # makes ranks share a GPU or index past the end.
            facts["visible_gpus_short"] = visible == 0 or 1 < visible < local_world
    malformed = [f"{name}={env[name]!r}" for name, least in RANK_NUMBERS.items()
                 if name in env and not _at_least(env[name], least)]
    if malformed:
        facts["malformed"] = True
        facts["malformed_text"] = ", ".join(malformed)
    # an empty value (MASTER_ADDR=) is as good as none
    missing = [name for name in ENV_INIT if not env.get(name, "").strip()]
    if kind != "none" and len(missing) < len(ENV_INIT):
        facts["missing"] = missing
        facts["incomplete"] = bool(missing) and kind in ("manual", "torchrun")
    port = env.get("MASTER_PORT")
    if port is not None:
        facts["master_port_number"] = _port_number(port)
    return facts


def probe_launch(ctx: ProbeContext) -> ProbeResult:
    """Rank variables from ctx.env, or from /proc/PID/environ when ctx.pid is set."""
    try:
        env = target_env(ctx)
    except EnvUnreadable as exc:
        return unavailable(NAME, str(exc))
    variables = {k: v for k, v in sorted(env.items())
                 if k in NAMES or k.startswith(PREFIXES)}
    kind = launcher(env)
    facts: dict[str, Any] = {
        "source": env_source(ctx),
        "launcher": kind,
        "in_job": kind != "none",
        "variables": variables,
        "world_size": _int(env, "WORLD_SIZE"),
        "rank": _int(env, "RANK"),
        "local_rank": _int(env, "LOCAL_RANK"),
        "local_world_size": _int(env, "LOCAL_WORLD_SIZE"),
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
    }
    facts.update(consistency(env, kind))
    facts["missing_text"] = ", ".join(facts.get("missing", []))
    return ProbeResult(NAME, OK, MappingProxyType(facts))
