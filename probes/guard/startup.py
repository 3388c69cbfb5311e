"""preflight(): the guide's startup self-check. One line per rank (host, rank, local rank, world
size, device), one all_gather to check that ranks are unique and complete and local ranks match
devices, then a barrier; every step under a deadline, failing with the guide's explanation."""
from __future__ import annotations

import datetime
import json
import os
import re
import socket
import sys
from collections import Counter
from typing import Any

INFO_BYTES = 512
EXPLAIN = ("GUIDE cause rank-env-mismatch: WORLD_SIZE/RANK/LOCAL_RANK must match the processes really "
           "started (nnodes x nproc-per-node = WORLD_SIZE, each RANK once); take them from one launcher "
           "(torchrun) instead of setting them by hand")


class PreflightError(RuntimeError):
    """The ranks disagree, or not all of them arrived in time; the message says which and why."""


def _timedelta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def _init(dist: Any, timeout: float, backend: str | None) -> None:
    """init_process_group from the environment, with the deadline, and failures explained."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:
        raise PreflightError(f"preflight: {', '.join(missing)} not set: start the job with torchrun "
                             "(or call init_process_group yourself before preflight)")
    rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    if backend is None:
        torch = sys.modules["torch"]
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    try:
        dist.init_process_group(backend, timeout=_timedelta(timeout))
    except Exception as exc:  # torch raises several store/network error classes here
        text = str(exc)
        joined = re.search(r"(\d+)/(\d+) clients joined", text)
        if "EADDRINUSE" in text or "address already in use" in text.lower():
            why = (f"rank {rank}: MASTER_PORT at {where} is already taken: another process of this job "
                   f"also claims RANK={rank} (a duplicate rank), or another service holds the port "
                   f"(GUIDE master-addr-port: pick a free port)")
        elif joined:
            why = (f"rank {rank}: only {joined.group(1)} of WORLD_SIZE={world} processes reached the store "
                   f"at {where} within {timeout:g}s: fewer processes were started than WORLD_SIZE says, "
                   f"or some got the wrong MASTER_ADDR/PORT")
        elif re.search(r"timed? ?out|timeout", text, re.I):
            why = (f"rank {rank}: not all WORLD_SIZE={world} ranks joined within {timeout:g}s (the store at "
                   f"{where} answered, a peer never did): too few processes started, or a duplicate rank")
        else:
            why = f"rank {rank}: init_process_group failed: {type(exc).__name__}: {text.splitlines()[0][:200]}"
        raise PreflightError(f"preflight: {why}. {EXPLAIN}") from exc


def _my_info(dist: Any, torch: Any) -> dict[str, Any]:
    backend = str(dist.get_backend())
    device = "cpu"
    if "nccl" in backend and torch.cuda.is_available():
        device = f"cuda:{torch.cuda.current_device()}"
    return {"host": socket.gethostname(), "rank": dist.get_rank(), "env_rank": os.environ.get("RANK"),
            "local_rank": os.environ.get("LOCAL_RANK"), "world_size": dist.get_world_size(),
            "device": device, "pid": os.getpid(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _gather(dist: Any, torch: Any, info: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """All-gather the rank details on CPU over Gloo: on an NCCL job a side Gloo group, so that two
    ranks on one GPU (the very fault to report) cannot break the exchange that reports it."""
    group = None
    if str(dist.get_backend()) != "gloo":
        group = dist.new_group(backend="gloo", timeout=_timedelta(timeout))
    raw = json.dumps(info).encode()[:INFO_BYTES]
    mine = torch.zeros(INFO_BYTES, dtype=torch.uint8)
    mine[:len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
    every = [torch.zeros_like(mine) for _ in range(info["world_size"])]
    work = dist.all_gather(every, mine, group=group, async_op=True)
    try:
        work.wait(timeout=_timedelta(timeout))
    except Exception as exc:
        raise PreflightError(f"preflight: rank {info['rank']}: the all_gather of rank details did not "
                             f"complete within {timeout:g}s ({type(exc).__name__}): a rank is missing, "
                             f"stuck or died. {EXPLAIN}") from exc
    return [json.loads(bytes(t.tolist()).rstrip(b"\0").decode()) for t in every]


def problems(table: list[dict[str, Any]], world_size: int) -> list[str]:
    """What disagrees in the gathered rank table (pure: unit-tested without processes)."""
    out = []
    ranks = Counter(r["rank"] for r in table)
    if sorted(ranks) != list(range(world_size)) or any(n > 1 for n in ranks.values()):
        out.append(f"process-group ranks {sorted(ranks.elements())} are not 0..{world_size - 1} once each")
    for r in table:
        if r.get("env_rank") not in (None, str(r["rank"])):
            out.append(f"{r['host']} pid {r['pid']}: RANK={r['env_rank']} but the process group made it "
                       f"rank {r['rank']}")
    per_host = Counter((r["host"], r.get("local_rank")) for r in table if r.get("local_rank") is not None)
    for (host, local), n in sorted(per_host.items()):
        if n > 1:
            pids = [str(r["pid"]) for r in table if r["host"] == host and r.get("local_rank") == local]
            out.append(f"{host}: LOCAL_RANK={local} is claimed by {n} processes (pids {', '.join(pids)}): "
                       f"duplicate local rank, they share one device")
    devices = Counter((r["host"], r["device"]) for r in table if r["device"] != "cpu")
    out += [f"{host}: {dev} is used by {n} ranks" for (host, dev), n in sorted(devices.items()) if n > 1]
    for r in table:
        if r["device"].startswith("cuda:") and r.get("local_rank") is not None and not r.get("visible"):
            if r["device"] != f"cuda:{r['local_rank']}":
                out.append(f"{r['host']} rank {r['rank']}: LOCAL_RANK={r['local_rank']} but uses {r['device']} "
                           f"(call torch.cuda.set_device(LOCAL_RANK) before init)")
    return out


def preflight(timeout: float = 60.0, *, backend: str | None = None, quiet: bool = False) -> list[dict[str, Any]]:
    """Run the startup self-check; returns the table of every rank. Call it right after
    init_process_group, or instead of it (it then initialises from torchrun's environment with
    `timeout`). Raises PreflightError, the same on every rank that gets that far, within `timeout`."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        _init(dist, timeout, backend)
    info = _my_info(dist, torch)
    if not quiet:
        print(f"[distdoctor.guard] preflight: host={info['host']} rank={info['rank']} "
              f"local_rank={info['local_rank']} world_size={info['world_size']} device={info['device']} "
              f"pid={info['pid']}", flush=True)
    table = _gather(dist, torch, info, timeout)
    found = problems(table, info["world_size"])
    if found:
        raise PreflightError(f"preflight: rank {info['rank']}: " + "; ".join(found) + f". {EXPLAIN}")
    if "gloo" in str(dist.get_backend()):
        dist.monitored_barrier(timeout=_timedelta(timeout))
    else:
        work = dist.barrier(async_op=True)
        work.wait(timeout=_timedelta(timeout))
    return table
