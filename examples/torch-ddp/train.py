"""DistributedDataParallel on the plexus backend: a small MLP learns a linear map from synthetic data, each process
on its own batches; gradients are averaged by DDP's bucketed allreduce (or, with --hook, by a communication hook
that reads the allreduce's future; --hook powersgd compresses them with PowerSGD, whose hook waits for allreduces
inside its futures' callbacks). --backend gloo runs the same on Gloo for comparison.

    python3 -m plexus_torch.launch --nproc-per-node 2 examples/torch-ddp/train.py --steps 20
    python3 -m plexus_torch.launch --nproc-per-node 2 examples/torch-ddp/train.py --backend gloo

Rank 0 prints the loss averaged over the processes after each step, and at the end one JSON line
{"backend": ..., "losses": [...], "step_ms": ...}."""
import argparse
import datetime
import json
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="plexus", choices=["plexus", "gloo"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--hook", nargs="?", const="allreduce", choices=["allreduce", "powersgd"],
                   help="average gradients through a communication hook: allreduce (the default) or powersgd")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.backend == "plexus":
        import plexus_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    w_true = torch.randn(32, 1) / 32 ** 0.5
    model = torch.nn.Sequential(torch.nn.Linear(32, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width),
                                torch.nn.ReLU(), torch.nn.Linear(a.width, 1))
    ddp = DDP(model, bucket_cap_mb=1)  # several buckets: several allreduces per step
    if a.hook == "allreduce":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    elif a.hook == "powersgd":  # compressing from the third step on (step 2), with error feedback and warm start
        state = powerSGD_hook.PowerSGDState(dist.group.WORLD, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                            min_compression_rate=1)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)  # each process its own data
    losses = []
    start = None
    for step in range(a.steps):
        if step == 1:
            start = time.perf_counter()  # the first step builds DDP's buckets
        x = torch.randn(a.batch, 32, generator=gen)
        y = x @ w_true + 0.01 * torch.randn(a.batch, 1, generator=gen)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0:
            print("step %d loss %.8f" % (step, losses[-1]), flush=True)
    step_ms = (time.perf_counter() - start) * 1e3 / max(1, a.steps - 1)
    if rank == 0:
        print(json.dumps({"backend": a.backend, "world": world, "hook": a.hook, "losses": losses,
                          "step_ms": step_ms}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
