"""The ranks of the training jobs on this node: torchrun/launch agents' children, processes with
RANK/LOCAL_RANK in /proc/PID/environ, Slurm step tasks; grouped into jobs."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # names every node of the job knows it by (MASTER_ADDR:PORT, the rendezvous run id, the Slurm
    # step), so `fleet stacks --job` can pick it on every node; the agent's pid is only local
    aliases: list[str] = field(default_factory=list)

    def matches(self, wanted: str) -> bool:
        return wanted == self.id or wanted in self.aliases

    def describe(self) -> str:
        cmd = self.ranks[0].cmdline if self.ranks else ""
        pids = ",".join(str(r.pid) for r in self.ranks[:8]) + ("..." if len(self.ranks) > 8 else "")
        also = [a for a in self.aliases if a != self.id]
        return (f"--job {self.id}: {self.how}"
                + (f" (also --job {' or '.join(also)})" if also else "")
                + f", {len(self.ranks)} rank(s), pids {pids}" + (f": {cmd[:100]}" if cmd else ""))

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


def _is_python(cmdline: list[str]) -> bool:
    exe = os.path.basename(cmdline[0]) if cmdline else ""
    return exe.startswith(("python", "pypy"))


class _Table:
    """Every process's parent and command line, read once from /proc under ctx.root: walking the
    tree through psutil costs a read per step (and its import), and this runs during an incident."""

    def __init__(self, ctx: ProbeContext) -> None:
        self.ppid: dict[int, int] = {}
        self.cmd: dict[int, list[str]] = {}
        try:
            names = os.listdir(ctx.path("/proc"))
        except OSError:
            names = []
        for name in names:
            if not name.isdigit():
                continue
            stat = ctx.read_text(f"/proc/{name}/stat", 4096)
            if not stat:
                continue  # gone since the listing
            fields = stat.rpartition(")")[2].split()
            pid = int(name)
            self.ppid[pid] = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
            raw = ctx.read_text(f"/proc/{name}/cmdline", 1 << 16) or ""
            self.cmd[pid] = [part for part in raw.split("\0") if part]
        self.kids: dict[int, list[int]] = {}
        for pid, parent in self.ppid.items():
            self.kids.setdefault(parent, []).append(pid)

    def ancestors(self, pid: int) -> list[int]:
        out, seen = [], {pid}
        while (pid := self.ppid.get(pid, 0)) and pid not in seen:
            out.append(pid)
            seen.add(pid)
        return out

    def children(self, pid: int) -> list[int]:
        return self.kids.get(pid, [])


def find_jobs(ctx: ProbeContext | None = None, scope: Mapping[str, str] | None = None) -> list[Job]:
    """Every job with ranks on this node. `scope`: distdoctor's own environment; inside a Slurm
    job (SLURM_JOB_ID set, as under `srun --overlap`) only that job's processes are considered."""
    ctx = ctx or ProbeContext()
    scope = scope if scope is not None else os.environ
    table = _Table(ctx)
    mine = {os.getpid(), *table.ancestors(os.getpid())}
    envs: dict[int, dict[str, str]] = {}
    errors: dict[int, str] = {}
    agents = {pid for pid, cmd in table.cmd.items() if pid not in mine and is_launcher(cmd)}
    under_agent = {c for a in agents for c in table.children(a)}
    for pid in table.ppid:
        # py-spy reads Python processes only: other environments are not worth a read
        if pid in mine or not (_is_python(table.cmd.get(pid, [])) or pid in under_agent):
            continue
        try:
            envs[pid] = read_environ(ctx, pid)
        except EnvUnreadable as exc:
            errors[pid] = str(exc)
    slurm_job = scope.get("SLURM_JOB_ID")
    if slurm_job:
        envs = {pid: env for pid, env in envs.items() if env.get("SLURM_JOB_ID") == slurm_job}
    ranked = {pid for pid, env in envs.items() if "RANK" in env or "LOCAL_RANK" in env}
    # a launcher's child is a rank even when its environment cannot be read (another user's job)
    for agent in agents:
        ranked.update(c for c in table.children(agent)
                      if c in envs or (c in errors and not slurm_job))
    ranked -= agents
    # a rank's own children (DataLoader workers, compile workers) inherit RANK: not ranks
    ranked = {pid for pid in ranked if not ranked.intersection(table.ancestors(pid))}
    slurm = {pid for pid, env in envs.items() if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env
             and pid not in ranked and pid not in agents and _is_python(table.cmd.get(pid, []))
             and not (ranked | agents).intersection(table.ancestors(pid))
             and not ranked.intersection(table.children(pid))}
    jobs: dict[str, Job] = {}
    for pid in sorted(ranked | slurm):
        env = envs.get(pid, {})
        job_id, how = _job_of(table.ancestors(pid), env, agents, pid)
        job = jobs.setdefault(job_id, Job(job_id, how, aliases=_aliases(env)))
        job.ranks.append(rank_of(pid, env, " ".join(table.cmd.get(pid, [])), errors.get(pid, "")))
    for job in jobs.values():
        job.ranks.sort(key=lambda r: (int(r.rank) if r.rank.isdigit() else 1 << 30, r.pid))
    return sorted(jobs.values(), key=lambda j: j.id)


def _aliases(env: Mapping[str, str]) -> list[str]:
    out = []
    if env.get("MASTER_PORT"):
        out.append(f"{env.get('MASTER_ADDR', '')}:{env['MASTER_PORT']}")
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":  # torchrun's default rdzv id names nothing
        out.append(env["TORCHELASTIC_RUN_ID"])
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        out.append(f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}")
    return out


def _job_of(ancestors: list[int], env: Mapping[str, str], agents: set[int],
            pid: int) -> tuple[str, str]:
    agent = next((a for a in ancestors if a in agents), None)
    if agent is not None:
        return str(agent), f"torchrun agent {agent}"
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        step = f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
        return step, f"Slurm step {step}"
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return env["TORCHELASTIC_RUN_ID"], f"elastic run {env['TORCHELASTIC_RUN_ID']}"
    if env.get("MASTER_PORT"):
        addr = f"{env.get('MASTER_ADDR', '')}:{env['MASTER_PORT']}"
        return addr, f"MASTER_ADDR:PORT {addr}"
    if ancestors and ancestors[0] > 1:  # ranks started by one parent (mp.spawn, a shell loop)
        return f"children-of-{ancestors[0]}", f"children of process {ancestors[0]}"
    return str(pid), f"process {pid}"


def ranks_for_pids(pids: Iterable[int], ctx: ProbeContext | None = None) -> list[RankProc]:
    """--pid PID...: each as a rank, numbered from its environment when readable."""
    ctx = ctx or ProbeContext()
    out = []
    for pid in pids:
        try:
            env, error = read_environ(ctx, pid), ""
        except EnvUnreadable as exc:
            env, error = {}, str(exc)
        cmd = " ".join(p for p in (ctx.read_text(f"/proc/{pid}/cmdline", 1 << 16) or "").split("\0") if p)
        out.append(rank_of(pid, env, cmd, error))
    return out


def hostname() -> str:
    return os.uname().nodename
