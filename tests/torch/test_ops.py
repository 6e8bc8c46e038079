"""Every operation of torch.distributed's process-group API over the plexus backend, every dtype torch and NCCL
share, checked element by element against values each rank computes alone from every rank's known inputs (run by
plexus_torch.launch with 2..4 processes). Prints one line per failed check and exits 1 if any failed.
    python3 -m plexus_torch.launch --nproc-per-node 3 test_ops.py"""
import datetime
import os
import sys
import warnings

import torch
import torch.distributed as dist

import plexus_torch  # noqa: F401  (registers "plexus")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]
N = 37  # elements: not a multiple of any line or step


def data(rank, dtype, n=N, salt=0):
    """Rank `rank`'s input: small integers, exact in every dtype (bool: a pattern)."""
    v = (torch.arange(n, dtype=torch.int64) * 3 + rank * 5 + salt) % 4 + 1
    return (v % 2 == 0) if dtype == torch.bool else v.to(dtype)


def reference(op, tensors, dtype):
    """What a reduction of `tensors` gives, computed here in int64/float64."""
    if dtype == torch.bool:
        stack = torch.stack([t.to(torch.int64) for t in tensors])
        r = {"sum": stack.max(0).values, "product": stack.min(0).values, "min": stack.min(0).values,
             "max": stack.max(0).values}[op]
        return r.to(torch.bool)
    stack = torch.stack([t.to(torch.float64) for t in tensors])
    r = {"sum": stack.sum(0), "product": stack.prod(0), "min": stack.min(0).values, "max": stack.max(0).values,
         "avg": stack.sum(0) / len(tensors)}[op]
    if op == "avg" and not dtype.is_floating_point:
        r = torch.div(stack.sum(0), len(tensors), rounding_mode="trunc")
    return r.to(dtype)


def main():
    warnings.filterwarnings("ignore", category=UserWarning)  # torch's notes on private and deprecated calls
    # TEST_INIT_METHOD: env (the default), tcp or file:<path>; the launcher's variables name the peers either way.
    how = os.environ.get("TEST_INIT_METHOD", "env")
    kwargs = {}
    if how == "tcp":
        kwargs = dict(init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
                      rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    elif how.startswith("file:"):
        kwargs = dict(init_method="file://" + how[5:], rank=int(os.environ["RANK"]),
                      world_size=int(os.environ["WORLD_SIZE"]))
    dist.init_process_group("plexus", timeout=datetime.timedelta(seconds=120), **kwargs)
    rank, n = dist.get_rank(), dist.get_world_size()
    failures = []
    checks = 0

    def check(what, got, want, rtol=0.0):
        nonlocal checks
        checks += 1
        # AVG multiplies each part by 1/n before summing (NCCL's PreMulSum), so it rounds unlike sum / n.
        same = torch.equal(got, want) if rtol == 0 else torch.allclose(got.double(), want.double(), rtol=rtol)
        if got.dtype != want.dtype or got.shape != want.shape or not same:
            failures.append("rank %d: %s: got %s, want %s" % (rank, what, got.flatten()[:8].tolist(),
                                                               want.flatten()[:8].tolist()))

    ops = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
           "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    for dtype in DTYPES:
        every = [data(r, dtype) for r in range(n)]
        for name, op in ops.items():
            if name == "avg" and dtype == torch.bool:
                continue
            t = data(rank, dtype)
            dist.all_reduce(t, op=op)
            rtol = 0.0
            if name == "avg" and dtype.is_floating_point:
                rtol = {torch.float64: 1e-12, torch.float32: 1e-6}.get(dtype, 1e-2)
            check("all_reduce %s %s" % (name, dtype), t, reference(name, every, dtype), rtol)
        # Asynchronous: wait, is_completed and the future's value.
        t = data(rank, dtype)
        work = dist.all_reduce(t, async_op=True)
        fut = work.get_future()
        work.wait()
        check("all_reduce async %s" % dtype, t, reference("sum", every, dtype))
        check("future of all_reduce %s" % dtype, fut.value()[0], reference("sum", every, dtype))
        if not work.is_completed() or not fut.done():
            failures.append("rank %d: a waited work (or its future) is not completed" % rank)
        root = n - 1
        t = data(rank, dtype)
        dist.broadcast(t, src=root)
        check("broadcast %s" % dtype, t, every[root])
        t = data(rank, dtype)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if rank == root:
            check("reduce max %s" % dtype, t, reference("max", every, dtype))
        outs = [torch.empty(N, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, data(rank, dtype))
        for r in range(n):
            check("all_gather %s part %d" % (dtype, r), outs[r], every[r])
        flat = torch.empty(N * n, dtype=dtype)
        dist._all_gather_base(flat, data(rank, dtype))
        check("_all_gather_base %s" % dtype, flat, torch.cat(every))
        outs = [torch.empty(N, dtype=dtype) for _ in range(n)] if rank == 0 else None
        dist.gather(data(rank, dtype), outs, dst=0)
        if rank == 0:
            for r in range(n):
                check("gather %s part %d" % (dtype, r), outs[r], every[r])
        out = torch.empty(N, dtype=dtype)
        dist.scatter(out, [data(r, dtype, salt=7) for r in range(n)] if rank == 1 % n else None, src=1 % n)
        check("scatter %s" % dtype, out, data(rank, dtype, salt=7))
        if dtype != torch.bool:
            parts = [data(rank, dtype, salt=p) for p in range(n)]
            out = torch.empty(N, dtype=dtype)
            dist.reduce_scatter(out, parts)
            check("reduce_scatter %s" % dtype, out, reference("sum", [data(r, dtype, salt=rank) for r in range(n)],
                                                               dtype))
            out = torch.empty(N, dtype=dtype)
            dist._reduce_scatter_base(out, torch.cat(parts))
            check("_reduce_scatter_base %s" % dtype, out,
                  reference("sum", [data(r, dtype, salt=rank) for r in range(n)], dtype))
        # AlltoAll: equal splits, uneven splits (rank p gets p+1 rows from each), and lists.
        rows = 4
        inp = torch.cat([data(rank, dtype, rows * 3, salt=p).view(rows, 3) for p in range(n)])
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        check("all_to_all_single %s" % dtype, out,
              torch.cat([data(r, dtype, rows * 3, salt=rank).view(rows, 3) for r in range(n)]))
        inp = torch.cat([data(rank, dtype, (p + 1) * 2, salt=p).view(p + 1, 2) for p in range(n)])
        out = torch.empty((rank + 1) * n, 2, dtype=dtype)
        dist.all_to_all_single(out, inp, output_split_sizes=[rank + 1] * n,
                               input_split_sizes=[p + 1 for p in range(n)])
        check("all_to_all_single uneven %s" % dtype, out,
              torch.cat([data(r, dtype, (rank + 1) * 2, salt=rank).view(rank + 1, 2) for r in range(n)]))
        outs = [torch.empty(r + 2, dtype=dtype) for r in range(n)]
        dist.all_to_all(outs, [data(rank, dtype, rank + 2, salt=p) for p in range(n)])
        for r in range(n):
            check("all_to_all %s from %d" % (dtype, r), outs[r], data(r, dtype, r + 2, salt=rank))
        # Point-to-point around the ring, and batched.
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        got = torch.empty(N, dtype=dtype)
        if rank % 2 == 0:
            dist.send(data(rank, dtype), nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(data(rank, dtype), nxt)
        check("send/recv %s" % dtype, got, data(prv, dtype))
        got = torch.empty(N, dtype=dtype)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, data(rank, dtype, salt=1), nxt),
                                       dist.P2POp(dist.irecv, got, prv)])
        for req in reqs:
            req.wait()
        check("batch_isend_irecv %s" % dtype, got, data(prv, dtype, salt=1))
    # all_gather into separate tensors with parts of 64 KiB and more: sent straight into each tensor (below: through
    # a staging buffer).
    for dtype, count in ((torch.float32, 16384), (torch.int8, 70001), (torch.float64, 100003)):
        outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, data(rank, dtype, count, salt=2))
        for r in range(n):
            check("all_gather %s x %d part %d" % (dtype, count, r), outs[r], data(r, dtype, count, salt=2))
    # PREMUL_SUM: each rank's input times a factor, then summed.
    for dtype in (torch.float32, torch.float64):
        t = data(rank, dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        check("all_reduce premul_sum %s" % dtype, t, reference("sum", [data(r, dtype) * 2 for r in range(n)], dtype))
    # Coalesced, objects, barriers.
    a, b = data(rank, torch.float32), data(rank, torch.float32, 5, salt=3)
    dist.all_reduce_coalesced([a, b])
    check("all_reduce_coalesced 1", a, reference("sum", [data(r, torch.float32) for r in range(n)], torch.float32))
    check("all_reduce_coalesced 2", b,
          reference("sum", [data(r, torch.float32, 5, salt=3) for r in range(n)], torch.float32))
    # all_gather_coalesced: two inputs of different sizes (torch wants one dtype), each gathered into its own list.
    a, b = data(rank, torch.float32), data(rank, torch.float32, 5, salt=3)
    outs = [[torch.empty(N, dtype=torch.float32), torch.empty(5, dtype=torch.float32)] for _ in range(n)]
    dist.all_gather_coalesced(outs, [a, b])
    for r in range(n):
        check("all_gather_coalesced 1 part %d" % r, outs[r][0], data(r, torch.float32))
        check("all_gather_coalesced 2 part %d" % r, outs[r][1], data(r, torch.float32, 5, salt=3))
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "name": "r%d" % rank})
    if objs != [{"rank": r, "name": "r%d" % r} for r in range(n)]:
        failures.append("rank %d: all_gather_object gave %s" % (rank, objs))
    lst = [{"from": 0}] if rank == 0 else [None]
    dist.broadcast_object_list(lst, src=0)
    if lst != [{"from": 0}]:
        failures.append("rank %d: broadcast_object_list gave %s" % (rank, lst))
    dist.barrier()
    # torch 1.13's dist.monitored_barrier lets only Gloo through; the group's own method reaches the backend.
    dist.distributed_c10d._get_default_group().monitored_barrier(datetime.timedelta(seconds=30))
    # A subgroup of the even ranks.
    evens = list(range(0, n, 2))
    sub = dist.new_group(evens, backend="plexus")
    if rank in evens:
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=sub)
        check("all_reduce in new_group(%s)" % evens, t, torch.full((3,), float(sum(evens))))
    # Refused clearly: non-contiguous tensors, bitwise reductions, receives from any source.
    for what, fn in [("non-contiguous", lambda: dist.all_reduce(torch.zeros(4, 4).t())),
                     ("BAND", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND)),
                     ("recv from any source", lambda: dist.recv(torch.zeros(2)))]:
        try:
            fn()
            failures.append("rank %d: %s was accepted" % (rank, what))
        except RuntimeError as e:
            if "plexus" not in str(e):
                failures.append("rank %d: %s failed without Plexus's message: %s" % (rank, what, e))
    dist.barrier()
    dist.destroy_process_group()
    for f in failures:
        print(f)
    print("rank %d: %d checks, %d failed" % (rank, checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
