"""How the plexus backend completes operations (run by plexus_torch.launch with 2 processes):
- a thread that waits runs what it waits for itself: a loop of synchronous all_reduces leaves the group's completion
  thread asleep (its counters show it), where handing each operation to it cost 13 us;
- an operation nobody waits for still completes: polled with is_completed, through its future, or dropped;
- a future's callback that waits for another operation (as PowerSGD's DDP hook does) does not deadlock;
- a Work outlives its group.
Every wait is bounded; prints one line per failure and exits 1 if any."""
import datetime
import sys
import time
import warnings

import torch
import torch.distributed as dist

import plexus_torch  # noqa: F401  (registers "plexus")

BOUND = 30.0  # seconds any single completion may take here before it counts as never


def main():
    warnings.filterwarnings("ignore", category=UserWarning)
    dist.init_process_group("plexus", timeout=datetime.timedelta(seconds=120))
    rank, n = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    failures = []
    total = n * (n + 1) // 2  # sum over ranks of rank + 1

    def expect(what, got, want):
        if not torch.equal(got, want):
            failures.append("rank %d: %s: got %s, want %s" % (rank, what, got.tolist()[:4], want.tolist()[:4]))

    def until(what, done):
        deadline = time.monotonic() + BOUND
        while not done():
            if time.monotonic() > deadline:
                failures.append("rank %d: %s did not happen within %.0f s" % (rank, what, BOUND))
                return False
        return True

    # Waited operations: settled by the waiting thread. The completion thread wakes on its 100 ms poll timer only
    # (a run of ~0.1-1 s here), and settles none of them.
    wakes0, settled0 = pg.plexus_completer_counts()
    ops = 2000
    t = torch.zeros(2)
    for _ in range(ops):
        dist.all_reduce(t)
    wakes, settled = pg.plexus_completer_counts()
    if settled - settled0 > ops // 100 or wakes - wakes0 > ops // 20:
        failures.append("rank %d: %d waited all_reduces woke the completion thread %d times and it settled %d of "
                        "them; the waiting thread should settle them" % (rank, ops, wakes - wakes0,
                                                                         settled - settled0))

    # Polled with is_completed, never waited.
    t = torch.full((5,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    if until("an all_reduce polled with is_completed completing", work.is_completed):
        expect("all_reduce polled with is_completed", t, torch.full((5,), float(total)))

    # Through its future only (DDP's communication hooks).
    t = torch.full((3,), float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    if until("an all_reduce's future completing", fut.done):
        expect("future of an all_reduce", fut.value()[0], torch.full((3,), float(total)))

    # Dropped: a list all_gather copies its result out of a staging buffer when settled, which the completion
    # thread's polls do for an operation nobody waits for.
    part = torch.full((4,), float(rank))
    outs = [torch.full((4,), -1.0) for _ in range(n)]
    settled0 = pg.plexus_completer_counts()[1]
    dist.all_gather(outs, part, async_op=True)
    if until("a dropped all_gather being settled by the completion thread",
             lambda: pg.plexus_completer_counts()[1] > settled0):
        for r in range(n):
            expect("dropped all_gather part %d" % r, outs[r], torch.full((4,), float(r)))

    # A callback on the settling thread that waits for an operation it launches, as PowerSGD's hook does.
    a, b = torch.full((2,), float(rank + 1)), torch.full((2,), 10.0 * (rank + 1))

    def then(f):
        return f.value()[0] + dist.all_reduce(b, async_op=True).get_future().wait()[0]

    chained = dist.all_reduce(a, async_op=True).get_future().then(then)
    if until("a future whose callback waits for another all_reduce completing", chained.done):
        expect("chained futures", chained.value(), torch.full((2,), 11.0 * total))

    # A Work outlives its group: destroying the group settles what is pending.
    t = torch.full((2,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    dist.destroy_process_group()
    del pg
    work.wait()
    expect("all_reduce waited after destroy_process_group", t, torch.full((2,), float(total)))

    for f in failures:
        print(f, file=sys.stderr)
    print("rank %d: completion checks, %d failed" % (rank, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
