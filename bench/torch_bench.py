"""torch.distributed collectives on one backend: time per operation and NCCL's bus bandwidth, 8 B to 64 MiB, for the
operations that backend has (torch 1.13's gloo has no reduce_scatter). Run under plexus_torch.launch; rank 0 prints
one JSON line per (operation, size): {"backend", "world", "op", "bytes", "us", "busbw"}.
    python3 -m plexus_torch.launch --nproc-per-node 2 bench/torch_bench.py --backend plexus"""
import argparse
import datetime
import json
import time

import torch
import torch.distributed as dist


def bus_factor(op, n):
    return {"allreduce": 2.0 * (n - 1) / n, "allgather": (n - 1) / n, "broadcast": 1.0,
            "reduce_scatter": (n - 1) / n, "alltoall": (n - 1) / n}[op]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="plexus")
    p.add_argument("--sizes", default="8,64,512,4096,32768,262144,1048576,4194304,16777216,67108864",
                   help="bytes, comma-separated")
    p.add_argument("--ops", default="allreduce,allgather,broadcast,reduce_scatter,alltoall")
    p.add_argument("--seconds", type=float, default=0.3, help="time spent per (operation, size), roughly")
    a = p.parse_args()
    if a.backend == "plexus":
        import plexus_torch  # noqa: F401
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=300))
    rank, n = dist.get_rank(), dist.get_world_size()
    ops = a.ops.split(",")
    if a.backend == "gloo":
        ops = [o for o in ops if o != "reduce_scatter"]  # torch 1.13's gloo has none
    for size in [int(x) for x in a.sizes.split(",")]:
        count = max(1, size // 4)
        for op in ops:
            # Bytes as NCCL's tests count them: the per-rank buffer for allreduce/broadcast, the gathered whole for
            # allgather, reduce_scatter and alltoall.
            per = max(1, count // n)
            x = torch.zeros(count)
            if op == "allreduce":
                fn = lambda: dist.all_reduce(x)
            elif op == "broadcast":
                fn = lambda: dist.broadcast(x, src=0)
            elif op == "allgather":
                part = torch.ones(per)
                outs = [torch.empty(per) for _ in range(n)]
                fn = lambda: dist.all_gather(outs, part)
            elif op == "reduce_scatter":
                out = torch.empty(per)
                ins = [torch.ones(per) for _ in range(n)]
                fn = lambda: dist.reduce_scatter(out, ins)
            else:
                src, dst = torch.ones(per * n), torch.empty(per * n)
                fn = lambda: dist.all_to_all_single(dst, src)
            nbytes = (count if op in ("allreduce", "broadcast") else per * n) * 4
            # Warm-up as nccl-tests' (-w 5): connections are made on demand, and a process's first use of each
            # page of a buffer (the library's or the tensor's) costs more than the copy on some machines (README).
            for _ in range(5):
                fn()
            # Iterations: as many as fit the time budget by a first timing, the same on every rank; a fifth of them
            # more as warm-up, so that the operations reach every slot of the library's buffers before timing.
            t0 = time.perf_counter()
            fn()
            one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(one, op=dist.ReduceOp.MAX)
            iters = int(max(3, min(2000, a.seconds / max(one.item(), 1e-7))))
            for _ in range(iters // 5):
                fn()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            took = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)
            us = took.item() * 1e6
            if rank == 0:
                print(json.dumps({"backend": a.backend, "world": n, "op": op, "bytes": nbytes, "us": us,
                                  "busbw": nbytes / us / 1e3 * bus_factor(op, n), "iters": iters}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
