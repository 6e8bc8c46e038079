#!/usr/bin/env python3
"""PyTorch's own NCCL backend (ProcessGroupNCCL) running on Plexus's libnccl.so.2: part of scripts/gpu-check.sh.

    gpu-check-torch.py <plexus lib dir>            # the check: prints one PASS/FAIL/SKIP line per part, exits 1 on FAIL
    gpu-check-torch.py --worker                    # one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)

How torch finds libnccl.so.2 decides how to put Plexus in its place. The wheels' libtorch_cuda.so (or whichever torch
library needs libnccl.so.2) finds NVIDIA's copy (the nvidia-nccl wheel) through its own search path: with DT_RUNPATH,
LD_LIBRARY_PATH comes first and a Plexus folder there wins; with DT_RPATH, the library's own path comes first and
only LD_PRELOAD puts Plexus's symbols ahead (torch may also load NVIDIA's copy by full path on import). So the check
reads those entries from the ELF files, runs with LD_LIBRARY_PATH first, and proves from inside each rank which
library ran: the files mapped into the process (/proc/self/maps), the version torch reports
(torch.cuda.nccl.version()) against each library's ncclGetVersion, and Plexus's own log lines (NCCL_DEBUG=INFO);
if NVIDIA's ran, it tries again with LD_PRELOAD.
"""
import ctypes
import glob
import json
import os
import re
import struct
import subprocess
import sys
import time


def worker():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)  # every rank on the one GPU: NCCL refuses that, Plexus allows it
    dev = torch.device("cuda:0")
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    problems = []
    for count, dtype in ((1, torch.float32), ((1 << 20) + 3, torch.float32), (4097, torch.bfloat16),
                         (1000, torch.int64), (12345, torch.float16)):
        idx = torch.arange(count, device=dev, dtype=torch.int64)
        x = ((idx % 7) + rank).to(dtype)
        dist.all_reduce(x)
        want = ((idx % 7) * world + world * (world - 1) // 2).to(dtype)
        if not torch.equal(x, want):
            bad = (x != want).nonzero()
            problems.append(f"all_reduce of {count} {dtype}: {bad.numel()} wrong elements, first at {bad[0].item()}")
    y = torch.full((777,), float(rank), device=dev)
    dist.broadcast(y, src=world - 1)
    if not torch.equal(y, torch.full_like(y, float(world - 1))):
        problems.append("broadcast: wrong result")
    g = [torch.empty(333, device=dev) for _ in range(world)]
    dist.all_gather(g, torch.full((333,), float(rank + 1), device=dev))
    if any(not torch.equal(t, torch.full_like(t, float(r + 1))) for r, t in enumerate(g)):
        problems.append("all_gather: wrong result")
    torch.cuda.synchronize()
    maps = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if "libnccl" in line or "libplexus" in line})
    version = torch.cuda.nccl.version()  # a tuple in recent torch, an int in old ones
    report = {"rank": rank, "world": world, "problems": problems, "maps": maps,
              "torch_nccl_version": list(version) if isinstance(version, tuple) else [version],
              "torch": torch.__version__}
    dist.destroy_process_group()
    print("WORKER " + json.dumps(report), flush=True)


def elf_dynamic(path):
    """DT_NEEDED, DT_RPATH and DT_RUNPATH of a 64-bit little-endian ELF file, read without binutils."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = {"NEEDED": [], "RPATH": [], "RUNPATH": []}
    for sec in sections:
        if sec[1] != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[sec[6]]
        for off in range(sec[4], sec[4] + sec[5], 16):
            tag, val = struct.unpack_from("<qQ", data, off)
            name = {1: "NEEDED", 15: "RPATH", 29: "RUNPATH"}.get(tag)
            if name:
                s = data[strtab[4] + val:data.index(b"\0", strtab[4] + val)].decode()
                out[name].append(s)
    return out


def library_version(path):
    try:
        lib = ctypes.CDLL(path)
        v = ctypes.c_int(0)
        return v.value if lib.ncclGetVersion(ctypes.byref(v)) == 0 else None
    except OSError:
        return None


def run_ranks(world, env_extra, logname, timeout):
    port = 29600 + (os.getpid() + world * 7 + len(env_extra) * 13) % 300
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), NCCL_DEBUG="INFO", NCCL_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1",
                   **env_extra)
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs, codes = [], []
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n(killed after {timeout} s)"
        outputs.append(out)
        codes.append(p.returncode)
    with open(logname, "a") as log:
        for rank, out in enumerate(outputs):
            log.write(f"===== {world} process(es), {env_extra}, rank {rank}, exit {codes[rank]}\n{out}\n")
    reports = []
    for out in outputs:
        for line in out.splitlines():
            if line.startswith("WORKER "):
                reports.append(json.loads(line[7:]))
    return codes, outputs, reports


def main():
    if sys.argv[1:] == ["--worker"]:
        return worker()
    libdir = os.path.realpath(sys.argv[1])
    logname = sys.argv[2] if len(sys.argv) > 2 else "torch.log"
    plexus_lib = os.path.realpath(os.path.join(libdir, "libnccl.so.2"))
    try:
        import torch
    except ImportError as e:
        print(f"SKIP torch: PyTorch is not importable ({e})")
        return 0
    if not torch.cuda.is_available():
        print("SKIP torch: torch.cuda.is_available() is False")
        return 0
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    # Which torch libraries need libnccl.so.2, and how they search for it.
    how = []
    for path in sorted(glob.glob(os.path.join(torch_lib, "*.so*"))):
        dyn = elf_dynamic(path)
        if dyn and any(n.startswith("libnccl") for n in dyn["NEEDED"]):
            how.append(f"{os.path.basename(path)} needs {','.join(n for n in dyn['NEEDED'] if 'nccl' in n)}; "
                       f"RPATH={':'.join(dyn['RPATH']) or '-'} RUNPATH={':'.join(dyn['RUNPATH']) or '-'}")
    nvidia = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "nccl", "lib",
                                           "libnccl.so*")))
    print("INFO torch " + torch.__version__ + "; " + ("; ".join(how) or "no torch library needs libnccl directly"))
    print("INFO NVIDIA NCCL wheel: " + (", ".join(f"{p} (ncclGetVersion {library_version(p)})" for p in nvidia) or
                                       "none found"))
    print(f"INFO Plexus: {plexus_lib} (ncclGetVersion {library_version(plexus_lib)})")
    failed = False
    for world in (1, 2):
        attempts = [("LD_LIBRARY_PATH", {"LD_LIBRARY_PATH": libdir + (":" + os.environ["LD_LIBRARY_PATH"]
                                                                        if os.environ.get("LD_LIBRARY_PATH") else "")}),
                    ("LD_PRELOAD", {"LD_PRELOAD": plexus_lib, "LD_LIBRARY_PATH": libdir})]
        notes = []
        verdict = None
        for name, env in attempts:
            codes, outputs, reports = run_ranks(world, env, logname, 150)
            text = "\n".join(outputs)
            plexus_mapped = bool(reports) and all(any(os.path.realpath(m) == plexus_lib for m in r["maps"])
                                                  for r in reports)
            nvidia_mapped = [m for r in reports for m in r["maps"] if "nvidia" in m and "nccl" in m]
            # Plexus's plugin loader logs "algorithm plugin 'ring': loaded ..."; NVIDIA's NCCL has no such line.
            plexus_logged = re.search(r"NCCL INFO (\S+:\d+ )?algorithm plugin '", text) is not None
            nvidia_logged = "NCCL version 2." in text
            versions = sorted({tuple(r["torch_nccl_version"]) for r in reports})
            which = (f"maps Plexus={plexus_mapped}, NVIDIA's mapped={bool(nvidia_mapped)}, Plexus log lines="
                     f"{plexus_logged}, NVIDIA's version banner={nvidia_logged}, torch.cuda.nccl.version()={versions}")
            ok = len(reports) == world and all(c == 0 for c in codes)
            problems = [p for r in reports for p in r["problems"]]
            # A rank that died before reporting leaves the log lines as the evidence.
            if plexus_logged and not nvidia_logged and (plexus_mapped or len(reports) < world):
                if ok and not problems:
                    verdict = (f"PASS torch {world} process(es) on cuda:0: allreduce/broadcast/allgather correct on "
                               f"Plexus via {name} ({which})")
                else:
                    why = "; ".join(problems) or f"exit codes {codes}, {len(reports)} of {world} reports"
                    verdict = f"FAIL torch {world} process(es) on cuda:0 via {name}: Plexus ran but {why} ({which})"
                break
            notes.append(f"{name}: Plexus did not run ({which}; exit codes {codes})")
        if verdict is None:
            verdict = f"FAIL torch {world} process(es) on cuda:0: " + "; ".join(notes)
        elif notes:
            verdict += " [" + "; ".join(notes) + "]"
        print(verdict, flush=True)
        failed |= verdict.startswith("FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
