"""Live mechanisms the capture reads beyond "who is where": every rank waiting in init for a
world size the launcher did not start (the `world_size` init_process_group was called with, from
py-spy's --locals, against the launcher's WORLD_SIZE), and a launcher's workers that start
workers of their own (mp.spawn under torchrun), from the process tree and the children's stacks.
Each finding is an evidence item for the one diagnosis."""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psutil

from distdoctor.knowledge.i18n import t

from ..runner import Runner, SubprocessRunner
from ..stacks.frames import parse_json_dump

SPAWN_FILE = "torch/multiprocessing/spawn.py"


def _locals_of(pid: int, pyspy: str, function: str, runner: Runner, timeout: float) -> dict[str, str] | None:
    """The locals (name -> repr) of `function`'s frame in the main thread, via py-spy --locals."""
    res = runner([pyspy, "dump", "--pid", str(pid), "--locals", "--json"], timeout=timeout)
    if not res.ok:
        return None
    try:
        threads = json.loads(res.stdout)
    except ValueError:
        return None
    for thread in threads if isinstance(threads, list) else []:
        for frame in thread.get("frames") or []:
            if frame.get("name") == function:
                return {str(v.get("name")): str(v.get("repr")) for v in frame.get("locals") or []
                        if isinstance(v, dict)}
    return None


def world_size_mismatch(stacks_doc: dict[str, Any], ranks: Sequence[Any], pyspy: str, *,
                        runner: Runner | None = None, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Every dumped rank inside init_process_group, asking a world_size other than the
    launcher's WORLD_SIZE: the job waits for ranks that were never started."""
    dumped = [r for r in stacks_doc.get("ranks") or [] if r.get("frames")]
    if not dumped or not all(any(f.get("name") == "init_process_group" for f in r["frames"]) for r in dumped):
        return []
    pid = next((r["pid"] for r in dumped if r.get("pid")), None)
    if pid is None:
        return []
    found = _locals_of(int(pid), pyspy, "init_process_group", runner or SubprocessRunner(), timeout)
    asked = (found or {}).get("world_size", "")
    sizes = {r.world_size for r in ranks if r.world_size}
    if not asked.lstrip("-").isdigit() or len(sizes) != 1:
        return []
    launched = sizes.pop()
    if int(asked) in (-1, launched):  # -1: from the environment, which is the launcher's
        return []
    return [{"source": "stacks", "ranks": [], "role": "misconfigured", "cause": "rank-env-mismatch",
             "why": t("every rank waits in init_process_group for world_size={asked}, but the launcher "
                      "started {launched} (WORLD_SIZE={launched}, {here} here)", asked=asked, launched=launched,
                      here=len(ranks))}]


def spawned_workers(ranks: Sequence[Any], pyspy: str, *, runner: Runner | None = None,
                    timeout: float = 20.0) -> list[dict[str, Any]]:
    """Ranks of a launcher that started processes running torch.multiprocessing.spawn's entry
    (mp.spawn under torchrun): two launchers for one job, ranks numbered twice."""
    runner = runner or SubprocessRunner()
    spawning: dict[str, int] = {}
    for r in ranks:
        try:
            kids = [k for k in psutil.Process(r.pid).children()
                    if "spawn_main" in " ".join(k.cmdline()) or "forkserver" in " ".join(k.cmdline())]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for kid in kids[:2]:  # one that runs mp.spawn's _wrap is enough; a DataLoader worker does not
            res = runner([pyspy, "dump", "--pid", str(kid.pid), "--json"], timeout=timeout)
            try:
                threads = parse_json_dump(res.stdout) if res.ok else []
            except ValueError:
                threads = []
            if any(str(f.get("file", "")).endswith(SPAWN_FILE) for th in threads for f in th.frames):
                spawning[r.rank] = len(kids)
                break
    if not spawning:
        return []
    ranks_out = sorted(spawning, key=lambda x: (not x.isdigit(), int(x) if x.isdigit() else 0))
    first = ranks_out[0]
    return [{"source": "stacks", "ranks": ranks_out, "role": "misconfigured", "cause": "mixed-launchers",
             "why": t("rank {rank}, a worker the launcher started, started {n} processes of its own with "
                      "mp.spawn: two launchers for one job, each numbering the ranks", rank=first,
                      n=spawning[first])}]


def different_collectives(stacks_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every dumped rank waiting in a collective, not all in the same one (or the same one from
    different lines), and no odd rank to blame: a collective only some ranks call, met by
    another. The stacks' culprit rule stays silent on an even split; the mismatch itself is the
    evidence."""
    from ..stacks.classify import classify

    dumped = [r for r in stacks_doc.get("ranks") or [] if r.get("frames")]
    if len(dumped) < 2 or stacks_doc.get("culprit"):
        return []
    places = {r["rank"]: classify(r["frames"]) for r in dumped}
    if not all(p.waiting for p in places.values()) or len({p.where for p in places.values()}) < 2:
        return []
    where = "; ".join(t("rank {rank} in {where}", rank=rank, where=p.where) for rank, p in places.items())
    return [{"source": "stacks", "ranks": [], "role": "misconfigured", "cause": "asymmetric-collective",
             "why": t("the ranks wait in different collectives ({where}): a collective only some ranks call",
                      where=where)}]
