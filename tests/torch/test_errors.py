"""Errors from Plexus surface in Python with Plexus's message: a collective a peer never joins fails with a
timeout (the process group's timeout is Plexus's) naming what waited; bad arguments are refused before anything is
enqueued. 2 processes (plexus_torch.launch); exits 1 with the reason when anything differs."""
import datetime
import sys
import time

import torch
import torch.distributed as dist

import plexus_torch  # noqa: F401


def main():
    dist.init_process_group("plexus", timeout=datetime.timedelta(seconds=4))
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    problems = []
    # Refused at once, on every rank alike: no operation starts.
    try:
        dist.all_reduce(torch.zeros(3, dtype=torch.int16))
        problems.append("an int16 tensor (no NCCL type) was accepted")
    except RuntimeError as e:
        if "plexus" not in str(e):
            problems.append("an int16 tensor failed without Plexus's message: %s" % e)
    try:  # torch leaves the output lists' type to the backend: a float64 list for float32 inputs
        dist.all_gather_coalesced([[torch.empty(4, dtype=torch.float64)] for _ in range(2)], [torch.ones(4)])
        problems.append("all_gather_coalesced into float64 outputs of float32 inputs was accepted")
    except RuntimeError as e:
        if "plexus: allgather_coalesced: output 0 holds 4 x Double, its input 4 x Float" not in str(e):
            problems.append("all_gather_coalesced of mismatched types failed without Plexus's message: %s" % e)
    t = torch.ones(8)
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((8,), 2.0)):
        problems.append("the all_reduce before the fault gave %s" % t.tolist())
    if rank == 0:
        # Rank 1 never joins this one: the wait times out after the group's 4 s.
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(8), async_op=True)
        try:
            work.wait()
            problems.append("an all_reduce rank 1 never joined completed")
        except RuntimeError as e:
            took = time.monotonic() - start
            msg = str(e)
            print("rank 0: after %.1f s: %s" % (took, msg.splitlines()[0][:400]))
            for want in ("plexus: allreduce failed", "timed out"):
                if want not in msg:
                    problems.append("the failure does not say '%s': %s" % (want, msg))
            if not 3 <= took <= 60:
                problems.append("the timeout took %.1f s for a 4 s process-group timeout" % took)
        store.set("rank0_saw_failure", "1")
        store.wait(["rank1_left"], datetime.timedelta(seconds=120))  # rank 0 serves the store: it leaves last
    else:
        store.wait(["rank0_saw_failure"], datetime.timedelta(seconds=120))
        store.set("rank1_left", "1")
    for p in problems:
        print("rank %d: %s" % (rank, p))
    print("rank %d: %s" % (rank, "FAIL" if problems else "PASS"))
    sys.stdout.flush()
    # The communicator is broken (rank 0 aborted its wait): leave without tearing it down together.
    import os
    os._exit(1 if problems else 0)


if __name__ == "__main__":
    main()
