"""examples/torch-ddp on plexus and on gloo, 2 and 3 processes, with and without the allreduce communication hook,
and with PowerSGD's hook (2 processes; its callbacks wait for allreduces they launch): the losses of every step agree
with gloo's (to float32 rounding: 3 ranks may sum in another order).
    test_ddp.py <examples/torch-ddp/train.py>"""
import json
import subprocess
import sys


def run(script, backend, nproc, hook):
    cmd = [sys.executable, "-m", "plexus_torch.launch", "--nproc-per-node", str(nproc), "--timeout", "240", script,
           "--backend", backend, "--steps", "12"] + (["--hook", hook] if hook else [])
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        print(out.stdout)
        raise SystemExit("test_ddp: %s failed (exit %d)" % (" ".join(cmd), out.returncode))
    return json.loads(lines[-1])


def main():
    script = sys.argv[1]
    bad = 0

    def compare(nproc, hook, gloo):
        mine = run(script, "plexus", nproc, hook)
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(mine["losses"], gloo["losses"]))
        ok = len(mine["losses"]) == len(gloo["losses"]) and worst <= 1e-5
        print("%s: %d processes%s: %d steps, loss %.6f -> %.6f, largest difference from gloo %.2e (step %.2f ms, "
              "gloo %.2f ms)" % ("PASS" if ok else "FAIL", nproc, ", %s hook" % hook if hook else "",
                                 len(mine["losses"]), mine["losses"][0], mine["losses"][-1], worst,
                                 mine["step_ms"], gloo["step_ms"]))
        return not ok

    for nproc in (2, 3):
        gloo = run(script, "gloo", nproc, None)
        for hook in (None, "allreduce"):
            bad += compare(nproc, hook, gloo)
        if not gloo["losses"][-1] < gloo["losses"][0]:
            print("FAIL: the model did not learn (loss %.6f -> %.6f)" % (gloo["losses"][0], gloo["losses"][-1]))
            bad += 1
    bad += compare(2, "powersgd", run(script, "gloo", 2, "powersgd"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
