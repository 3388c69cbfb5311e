"""Two ranks on GPU 0 with NCCL: records the error NCCL gives for a duplicate device."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = torch.ones(1, device="cuda:0") * (int(os.environ["RANK"]) + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all_reduce -> {t.item()}", flush=True)
dist.destroy_process_group()
