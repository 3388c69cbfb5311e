"""The drill job's train.py: a small DDP regression job on Gloo, written with one fault in it.

The job is written in named blocks (`# >>> name` ... `# <<< name`); a drill replaces one or two
blocks with its faulty version, so the train.py a learner (or a recording) gets reads like an
ordinary script with one real bug in it, not like a switchboard of simulated failures.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

TEMPLATE = '''\
"""Toy regression job: three linear layers on synthetic data, DistributedDataParallel on Gloo."""
import argparse
import datetime
import os
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # CPU image without numpy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset
# >>> imports
# <<< imports


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=384)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--timeout", type=int, default=15, help="process-group timeout (s)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--ckpt-dir", default="ckpt")
    p.add_argument("--save-every", type=int, default=0, help="checkpoint every N steps (0: never)")
    p.add_argument("--resume", action="store_true")
    return p.parse_args()


class MLP(nn.Module):
    def __init__(self, dim=32, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_dataset(n, dim=32):
    """Synthetic regression records, the same on every rank (as if read from shared storage)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = x @ w / dim ** 0.5 + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y, torch.arange(n))


# >>> data
def make_loader(ds, rank, world, args):
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    return DataLoader(ds, batch_size=args.batch_size, sampler=sampler), sampler
# <<< data


# >>> batch
def load_batch(batch, rank, global_step):
    """Host-side part of the input pipeline (decode / augment)."""
    return batch
# <<< batch


def evaluate(model, samples=256, read_latency=0.0):
    ds = make_dataset(samples)
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, samples, 64):
            if read_latency:
                time.sleep(read_latency)  # validation shards come from slower storage
            x, y, _ = ds[i:i + 64]
            total += F.mse_loss(model(x), y, reduction="sum").item()
    model.train()
    return total / samples


# >>> epoch_end
def after_epoch(model, rank, world, epoch):
    return
# <<< epoch_end


# >>> resume
def restore(model, opt, rank, args):
    """(global_step) of the newest checkpoint, 0 when starting fresh."""
    if not args.resume:
        return 0
    path = os.path.join(args.ckpt_dir, "last.pt")
    if not os.path.exists(path):
        return 0
    state = torch.load(path, map_location="cpu")
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    print(f"[rank{rank}] resumed from {path} (global_step {state['global_step']})", flush=True)
    return state["global_step"]


def save(model, opt, rank, global_step, args):
    if rank == 0:
        os.makedirs(args.ckpt_dir, exist_ok=True)
        path = os.path.join(args.ckpt_dir, "last.pt")
        torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(),
                    "global_step": global_step}, path)
        print(f"[rank{rank}] saved {path} (global_step {global_step})", flush=True)
    dist.barrier()
# <<< resume


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"[rank{rank}] rank={rank} local_rank={os.environ.get('LOCAL_RANK')} "
          f"world_size={world} backend={dist.get_backend()} pid={os.getpid()}", flush=True)
    torch.manual_seed(0)
    model = DDP(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    global_step = restore(model, opt, rank, args)
    loader, sampler = make_loader(make_dataset(args.samples), rank, world, args)
    print(f"[rank{rank}] {len(loader.dataset)} samples, {len(loader)} batches/epoch", flush=True)
    done = False
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        t0 = time.time()
        for step, batch in enumerate(loader):
            x, y, idx = load_batch(batch, rank, global_step)
            if step == 0:
                print(f"[rank{rank}] epoch {epoch}: first sample ids {idx[:4].tolist()}", flush=True)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            global_step += 1
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            avg /= world
            print(f"[rank{rank}] epoch {epoch} step {step + 1}/{len(loader)} global_step {global_step} "
                  f"loss {loss.item():.4f} avg_loss {avg.item():.4f}", flush=True)
            if args.save_every and global_step % args.save_every == 0:
                save(model, opt, rank, global_step, args)
            if args.max_steps and global_step >= args.max_steps:
                done = True
                break
        print(f"[rank{rank}] epoch {epoch} done in {time.time() - t0:.1f}s", flush=True)
        after_epoch(model, rank, world, epoch)
        if done:
            break
    print(f"[rank{rank}] training complete (global_step {global_step})", flush=True)
    dist.destroy_process_group()


# >>> launch
if __name__ == "__main__":
    main()
# <<< launch
'''

_BLOCK = re.compile(r"^# >>> (\w+)\n(.*?)^# <<< \1\n", re.S | re.M)


def blocks() -> list[str]:
    """The names of the blocks a drill may replace."""
    return [m.group(1) for m in _BLOCK.finditer(TEMPLATE)]


def render(replace: Mapping[str, str]) -> str:
    """train.py with the named blocks replaced (markers dropped); unknown names are an error,
    so a typo in a drill can never silently leave the job healthy."""
    unknown = set(replace) - set(blocks())
    if unknown:
        raise KeyError(f"no such block in the drill job: {', '.join(sorted(unknown))}")

    def sub(m: re.Match) -> str:
        body = replace.get(m.group(1), m.group(2))
        return body if not body or body.endswith("\n") else body + "\n"

    return _BLOCK.sub(sub, TEMPLATE)
