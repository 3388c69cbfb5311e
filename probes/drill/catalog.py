"""The drills: one real fault per failure class the guide teaches, and what proves each one.

A drill is data: the blocks of the job it replaces, the arguments, variables and launcher it
runs with, the cause and culprit rank a learner must find, and a pattern that must appear in
its logs when the fault really happened (a drill whose fault did not show is reported as such,
never passed off as a recording).
"""
from __future__ import annotations

from dataclasses import dataclass, field

TIMEOUT_S = 15  # the job's process-group timeout: hangs turn into errors quickly


@dataclass(frozen=True)
class Drill:
    name: str
    cause: str  # the stable cause id a learner must find
    culprit: str | None  # the rank a learner must name (None: no single rank is to blame)
    symptom: str  # what an engineer on call sees first: hang or error
    summary: str  # one line for `drill list`
    how: str  # what is injected, for the label and the reveal
    proof: str  # regex: a log line that shows the fault happened
    blocks: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    launcher: str = "torchrun"  # torchrun | manual (shell background jobs, env:// variables)
    nproc: int = 2
    hold_port: bool = False  # something else listens on MASTER_PORT before the launch
    extra_world: int = 0  # WORLD_SIZE is this much larger than the processes started
    setup: bool = False  # a first run leaves checkpoints behind (resume-skew)


_CRASH = '''\
def load_batch(batch, rank, global_step):
    """Host-side part of the input pipeline: decode this batch's records."""
    x, y, idx = batch
    if rank == 1 and global_step == 9:  # drill: rank 1's shard holds a corrupt record
        raise ValueError(f"Corrupted record in shard-{rank:05d}.bin at offset {global_step * 16384}: "
                         f"expected 32 features, got 31")
    return x, y, idx
'''

_SILENT = '''\
def load_batch(batch, rank, global_step):
    """Host-side part of the input pipeline (decode / augment)."""
    if rank == 1 and global_step == 9:  # drill: a library's exit hook ends rank 1 without a word
        os._exit(0)
    return batch
'''

_STRAGGLER = '''\
def load_batch(batch, rank, global_step):
    """Host-side part of the input pipeline (decode / augment)."""
    if rank == 1 and global_step == 6:  # drill: rank 1's read stalls on a slow network filesystem
        time.sleep(4 * 15)
    return batch
'''

_ASYMMETRIC = '''\
def after_epoch(model, rank, world, epoch):
    if rank == 0:  # drill: only the main process reports validation, and averages it over ranks
        stats = torch.tensor([evaluate(model.module), 1.0])
        dist.all_reduce(stats)
        print(f"[rank{rank}] epoch {epoch} val_loss {stats[0].item() / stats[1].item():.4f}", flush=True)
'''

_UNEVEN = '''\
def make_loader(ds, rank, world, args):
    """Pre-sharded data: each rank reads its own shard file, sizes as the writer left them."""
    sizes = [len(ds) // world] * world
    sizes[1] += 4 * args.batch_size  # drill: shard 1 came out 4 batches larger than the others
    start = sum(sizes[:rank]) % len(ds)
    shard = Subset(ds, [(start + i) % len(ds) for i in range(sizes[rank])])
    print(f"[rank{rank}] reading shard-{rank:05d}.bin: {len(shard)} records", flush=True)
    return DataLoader(shard, batch_size=args.batch_size, shuffle=True), None
'''

_RANK0_EVAL = '''\
def after_epoch(model, rank, world, epoch):
    if rank == 0:  # drill: rank 0 alone evaluates on the full validation set, longer than the timeout
        t0 = time.time()
        print(f"[rank{rank}] epoch {epoch}: evaluating on 1536 samples", flush=True)
        val = evaluate(model.module, samples=1536, read_latency=1.0)
        print(f"[rank{rank}] epoch {epoch} val_loss {val:.4f} ({time.time() - t0:.1f}s)", flush=True)
'''

_SAME_DATA = '''\
def make_loader(ds, rank, world, args):
    # drill: no DistributedSampler; every rank shuffles the full dataset with the same seed
    return DataLoader(ds, batch_size=args.batch_size, shuffle=True), None
'''

_RESUME = '''\
def restore(model, opt, rank, args):
    """(global_step) of this rank's newest checkpoint, on its node-local scratch."""
    if not args.resume:
        return 0
    # drill: every rank picks the newest checkpoint it can see itself; rank 1's newest is missing
    mine = sorted(d for d in os.listdir(args.ckpt_dir)
                  if os.path.exists(os.path.join(args.ckpt_dir, d, f"rank{rank}.pt")))
    if not mine:
        return 0
    path = os.path.join(args.ckpt_dir, mine[-1], f"rank{rank}.pt")
    state = torch.load(path, map_location="cpu")
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    print(f"[rank{rank}] resumed from {path} (global_step {state['global_step']})", flush=True)
    return state["global_step"]


def save(model, opt, rank, global_step, args):
    """Every rank writes its own state to node-local scratch."""
    folder = os.path.join(args.ckpt_dir, f"step{global_step:06d}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"rank{rank}.pt")
    torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(),
                "global_step": global_step}, path)
    print(f"[rank{rank}] saved {path} (global_step {global_step})", flush=True)
    dist.barrier()
'''

_SPAWN_IMPORTS = "import torch.multiprocessing as mp\n"
_SPAWN = '''\
def worker(local_rank, world):
    # drill: the script starts its own workers, although torchrun already started this process
    os.environ["RANK"] = str(local_rank)
    os.environ["WORLD_SIZE"] = str(world)
    os.environ["LOCAL_RANK"] = str(local_rank)
    main()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
'''

DRILLS: dict[str, Drill] = {d.name: d for d in (
    Drill("crash", "rank-crash-deadlock", "1", "error",
          "one rank raises mid-training while the others are in all_reduce",
          "rank 1 raises ValueError (a corrupt record) at global step 9 while rank 0 waits in "
          "the gradient all-reduce; torchrun tears the job down",
          r"ValueError: Corrupted record", {"batch": _CRASH}),
    Drill("silent-exit", "rank-crash-deadlock", "1", "error",
          "one rank calls os._exit(0): no traceback, no error",
          "rank 1 calls os._exit(0) before global step 10 (no traceback, exit code 0); rank 0 "
          "fails in its next all-reduce and torchrun names rank 0",
          r"Connection closed by peer|Connection reset by peer|Timed out waiting",
          {"batch": _SILENT}),
    Drill("straggler", "collective-timeout", "1", "hang",
          "one rank stalls past the process-group timeout",
          f"rank 1 sleeps 60 s before global step 7 (a stalled read, no crash); the other "
          f"ranks time out in the all-reduce after the {TIMEOUT_S} s process-group timeout",
          r"Timed out waiting \d+ms", {"batch": _STRAGGLER}, nproc=3),
    Drill("asymmetric", "asymmetric-collective", None, "error",
          "a collective inside `if rank == 0:`",
          "after epoch 0, only rank 0 runs evaluate() and all_reduces its metric; rank 1's next "
          "collective is a DDP gradient bucket, so the ranks pair different collectives",
          r"(?i)mismatch|Timed out waiting|Connection closed by peer|Connection reset by peer",
          {"epoch_end": _ASYMMETRIC}),
    Drill("uneven-data", "asymmetric-collective", "1", "error",
          "one rank gets more batches than the others",
          "pre-sharded data without a sampler: shard 1 has 4 batches more than the others, so "
          "the other ranks finish their epoch and exit while rank 1 still all-reduces",
          r"Connection closed by peer|Connection reset by peer|Timed out waiting",
          {"data": _UNEVEN}, args=("--epochs", "1"), nproc=3),
    Drill("rank0-eval", "rank0-overload", "0", "hang",
          "rank 0 alone evaluates, longer than the timeout",
          f"after epoch 0 rank 0 alone evaluates for about 24 s (slow validation reads) while "
          f"rank 1 waits in the next all-reduce past the {TIMEOUT_S} s process-group timeout",
          r"Timed out waiting \d+ms", {"epoch_end": _RANK0_EVAL}),
    Drill("port-in-use", "master-addr-port", None, "error",
          "MASTER_PORT is already held by another listener",
          "another service already listens on the --master-port torchrun is given",
          r"EADDRINUSE|[Aa]ddress already in use", hold_port=True),
    Drill("world-size", "rank-env-mismatch", None, "hang",
          "WORLD_SIZE larger than the processes started",
          "a manual env:// launch exports WORLD_SIZE one larger than the processes it starts; "
          "init_process_group waits for a rank that never comes",
          r"(?i)waiting for clients|timed out", launcher="manual", extra_world=1),
    Drill("spawn-in-torchrun", "mixed-launchers", None, "error",
          "the script calls mp.spawn under torchrun",
          "torchrun starts 2 processes and each mp.spawn()s 2 more with its own RANK 0..1: two "
          "rank numberings on one store, every rank twice; one rank 0 and one rank 1 pair up "
          "and train, the other two wait (or fail, by a race)",
          r"(?i)timed out|duplicate|Connection|Error",
          {"imports": _SPAWN_IMPORTS, "launch": _SPAWN}),
    Drill("wrong-nic", "nic-selection", None, "error",
          "GLOO_SOCKET_IFNAME names no interface",
          "GLOO_SOCKET_IFNAME=ib0 exported (copied from a cluster job script); there is no "
          "such interface here",
          r"ib0", env={"GLOO_SOCKET_IFNAME": "ib0"}),
    Drill("same-data", "data-sharding-seed", None, "error",
          "no DistributedSampler, the same seed on every rank",
          "the DataLoader has no DistributedSampler and every rank seeds the same shuffle, so "
          "every rank trains on the same batches (the job finishes normally)",
          r"first sample ids", {"data": _SAME_DATA}),
    Drill("resume-skew", "checkpoint-state-divergence", "1", "error",
          "ranks resume from different steps",
          "a first run checkpoints per rank to node-local scratch at steps 8 and 16; rank 1's "
          "step-16 file is lost, so on resume rank 0 starts at step 16 and rank 1 at step 8, "
          "and rank 1 is still all-reducing when rank 0 finishes",
          r"resumed from \S+ \(global_step 8\)", {"resume": _RESUME},
          args=("--epochs", "10", "--max-steps", "24", "--save-every", "8", "--resume"),
          setup=True),
)}

# The healthy twin: the same job, no fault (for comparison and for the healthy fixtures).
HEALTHY = Drill("healthy", "", None, "", "the same job without a fault", "no fault injected",
                r"training complete")


def get(name: str) -> Drill | None:
    return HEALTHY if name == "healthy" else DRILLS.get(name)
