"""Starts N processes of a training script with torchrun's variables, for machines where torchrun does not start
(Debian 12's torch 1.13 on Python 3.11 dies in torchrun before any backend runs).

    python3 -m plexus_torch.launch --nproc-per-node 4 train.py --epochs 1

Each process gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (one node), so that
init_process_group("plexus") with the default env:// method finds its peers, and OMP_NUM_THREADS=1 unless set (as
torchrun does). If one process fails, the others are
stopped; the exit status is the first failure's. --timeout bounds the whole run (seconds, 0: none).
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time


def free_port(addr):
    """A port that binds now, below the kernel's ephemeral range where there is one: the port is free again once
    this returns, and rank 0's store binds it later; an ephemeral port could meanwhile become the local end of any
    process's outgoing connection (another test's, on a busy machine)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    candidates = [random.randrange(10000, low) for _ in range(64)] if low > 10001 else []
    for port in candidates + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise SystemExit("plexus_torch.launch: no free port on %s; pass --master-port" % addr)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m plexus_torch.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=2)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=0, help="0: a free port")
    p.add_argument("--timeout", type=float, default=0)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    port = a.master_port or free_port(a.master_addr)
    procs = []
    if a.nproc_per_node > 1 and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun: torch's OpenMP threads spin after each parallel region, and on a node shared by several
        # processes they take the cores the others' communication needs (10x slower collectives were measured).
        os.environ["OMP_NUM_THREADS"] = "1"
    for rank in range(a.nproc_per_node):
        env = dict(os.environ, MASTER_ADDR=a.master_addr, MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(a.nproc_per_node), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(a.nproc_per_node))
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
    deadline = time.monotonic() + a.timeout if a.timeout > 0 else None
    status = 0
    while procs:
        for proc in list(procs):
            rc = proc.poll()
            if rc is None:
                continue
            procs.remove(proc)
            if rc != 0 and status == 0:
                status = rc if rc > 0 else 128 - rc
                print("plexus_torch.launch: a process exited with %d; stopping the others" % rc, file=sys.stderr)
                for other in procs:
                    other.send_signal(signal.SIGTERM)
        if deadline and time.monotonic() > deadline and procs:
            print("plexus_torch.launch: still running after %.0f s; stopping them" % a.timeout, file=sys.stderr)
            for proc in procs:
                proc.kill()
            status = status or 124
            deadline = None
        time.sleep(0.02)
    return status


if __name__ == "__main__":
    sys.exit(main())
