"""The ranks of the training jobs on this node: torchrun/launch agents' children, processes with
RANK/LOCAL_RANK in /proc/PID/environ, Slurm step tasks; grouped into jobs."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import psutil

from ..base import ProbeContext
from ..procenv import EnvUnreadable, read_environ

_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


@dataclass
class RankProc:
    """One rank's process. `rank` is RANK (else SLURM_PROCID, else LOCAL_RANK, else `pid:N`)."""

    pid: int
    rank: str
    local_rank: str = ""
    world_size: int | None = None
    local_world_size: int | None = None
    cmdline: str = ""
    env_error: str = ""


@dataclass
class Job:
    """Ranks launched together: one agent's children, one Slurm step, or one MASTER_ADDR:PORT."""

    id: str
    how: str
    ranks: list[RankProc] = field(default_factory=list)

    def describe(self) -> str:
        cmd = self.ranks[0].cmdline if self.ranks else ""
        pids = ",".join(str(r.pid) for r in self.ranks[:8]) + ("..." if len(self.ranks) > 8 else "")
        return (f"--job {self.id}: {self.how}, {len(self.ranks)} rank(s), pids {pids}"
                + (f": {cmd[:100]}" if cmd else ""))

    def expected(self) -> list[str]:
        """Ranks that should run here: 0..WORLD_SIZE-1 when every rank is on this node."""
        sizes = {(r.world_size, r.local_world_size) for r in self.ranks}
        if len(sizes) != 1:
            return []
        world, local = sizes.pop()
        if world and world == local and all(r.rank.isdigit() for r in self.ranks):
            return [str(i) for i in range(world)]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "how": self.how, "pids": [r.pid for r in self.ranks],
                "ranks": [r.rank for r in self.ranks]}


def is_launcher(cmdline: list[str]) -> bool:
    """torchrun, `python -m torch.distributed.run|launch` (not a wrapper such as `timeout` whose
    arguments name one)."""
    if not cmdline:
        return False
    exe = os.path.basename(cmdline[0])
    if exe == "torchrun":
        return True
    if not exe.startswith("python"):
        return False
    args = iter(cmdline[1:])
    for arg in args:  # the script or -m module python runs: the first argument that is neither
        if arg == "-m":
            return next(args, "") in _LAUNCHERS
        if not arg.startswith("-"):
            return os.path.basename(arg) == "torchrun"
    return False


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def rank_of(pid: int, env: Mapping[str, str], cmdline: str = "", env_error: str = "") -> RankProc:
    rank = env.get("RANK") or env.get("SLURM_PROCID") or env.get("LOCAL_RANK") or f"pid:{pid}"
    return RankProc(pid, rank.strip(), env.get("LOCAL_RANK", ""),
                    _int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS")),
                    _int(env.get("LOCAL_WORLD_SIZE") or env.get("SLURM_NTASKS_PER_NODE")),
                    cmdline, env_error)


def _is_python(proc: psutil.Process) -> bool:
    try:
        names = [proc.name()] + [os.path.basename(p) for p in proc.cmdline()[:1]]
    except (psutil.Error, OSError):
        return False
    return any(n.startswith("python") or n.startswith("pypy") for n in names)


def _cmd(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.Error, OSError):
        return []


def find_jobs(ctx: ProbeContext | None = None, scope: Mapping[str, str] | None = None) -> list[Job]:
    """Every job with ranks on this node. `scope`: distdoctor's own environment; inside a Slurm
    job (SLURM_JOB_ID set, as under `srun --overlap`) only that job's processes are considered."""
    ctx = ctx or ProbeContext()
    scope = scope if scope is not None else os.environ
    mine = {os.getpid()} | {p.pid for p in _ancestors(os.getpid())}
    envs: dict[int, dict[str, str]] = {}
    errors: dict[int, str] = {}
    procs: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in mine:
            continue
        procs[proc.pid] = proc
        try:
            envs[proc.pid] = read_environ(ctx, proc.pid)
        except EnvUnreadable as exc:
            errors[proc.pid] = str(exc)
    slurm_job = scope.get("SLURM_JOB_ID")
    if slurm_job:
        envs = {pid: env for pid, env in envs.items() if env.get("SLURM_JOB_ID") == slurm_job}
    ranked = {pid for pid, env in envs.items() if "RANK" in env or "LOCAL_RANK" in env}
    agents = {pid for pid, proc in procs.items() if is_launcher(_cmd(proc))}
    # a launcher's child is a rank even when its environment cannot be read (another user's job)
    for agent in agents:
        for child in _children(procs[agent]):
            if child.pid in envs or child.pid in errors:
                ranked.add(child.pid)
    ranked -= agents
    # a rank's own children (DataLoader workers, compile workers) inherit RANK: not ranks
    ranked = {pid for pid in ranked if not any(a.pid in ranked for a in _ancestors(pid))}
    slurm = {pid for pid, env in envs.items() if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env
             and pid not in ranked and pid not in agents and _is_python(procs[pid])
             and not any(a.pid in ranked | agents for a in _ancestors(pid))
             and not any(c.pid in ranked for c in _children(procs[pid]))}
    jobs: dict[str, Job] = {}
    for pid in sorted(ranked | slurm):
        env = envs.get(pid, {})
        job_id, how = _job_of(pid, env, agents)
        job = jobs.setdefault(job_id, Job(job_id, how))
        job.ranks.append(rank_of(pid, env, " ".join(_cmd(procs[pid])), errors.get(pid, "")))
    for job in jobs.values():
        job.ranks.sort(key=lambda r: (int(r.rank) if r.rank.isdigit() else 1 << 30, r.pid))
    return sorted(jobs.values(), key=lambda j: j.id)


def _job_of(pid: int, env: Mapping[str, str], agents: set[int]) -> tuple[str, str]:
    agent = next((a.pid for a in _ancestors(pid) if a.pid in agents), None)
    if agent is not None:
        return str(agent), f"torchrun agent {agent}"
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        step = f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
        return step, f"Slurm step {step}"
    if env.get("TORCHELASTIC_RUN_ID"):
        return env["TORCHELASTIC_RUN_ID"], f"elastic run {env['TORCHELASTIC_RUN_ID']}"
    if env.get("MASTER_PORT"):
        addr = f"{env.get('MASTER_ADDR', '')}:{env['MASTER_PORT']}"
        return addr, f"MASTER_ADDR:PORT {addr}"
    return str(pid), f"process {pid}"


def _ancestors(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).parents()
    except psutil.Error:
        return []


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children()
    except psutil.Error:
        return []


def ranks_for_pids(pids: Iterable[int], ctx: ProbeContext | None = None) -> list[RankProc]:
    """--pid PID...: each as a rank, numbered from its environment when readable."""
    ctx = ctx or ProbeContext()
    out = []
    for pid in pids:
        try:
            env, error = read_environ(ctx, pid), ""
        except EnvUnreadable as exc:
            env, error = {}, str(exc)
        cmd = ""
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            pass  # gone or hidden: the dump says so
        out.append(rank_of(pid, env, cmd, error))
    return out


def hostname() -> str:
    return socket.gethostname()
