#!/usr/bin/env python3
"""Checks the Chrome trace files profiler-trace wrote for one communicator of N ranks: every file parses, one per
rank (pid = rank); durations and times are not negative; on each lane, events nest or follow one another (never
overlap partly); each rank has an application-thread lane with its calls, an operations lane and channel lanes; every
channel's event lies inside an operation of the same name, which carries NCCL's strings for the algorithm and the
protocol; the calls nest GroupApi > CollApi > launch.
    check_trace.py <nranks> <collective name, e.g. AllReduce> <file>..."""
import json
import sys

EPS = 0.5  # microseconds: readers parse times since the epoch as doubles, 0.25 us apart


def fail(msg):
    print("check_trace: FAIL: " + msg)
    sys.exit(1)


def main():
    nranks, name, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if len(files) != nranks:
        fail("%d files for %d ranks: %s" % (len(files), nranks, files))
    ranks = set()
    for path in files:
        with open(path) as f:
            try:
                doc = json.load(f)
            except ValueError as e:
                fail("%s does not parse: %s" % (path, e))
        events = doc["traceEvents"]
        xs = [e for e in events if e["ph"] == "X"]
        lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
        pids = {e["pid"] for e in events}
        if len(pids) != 1:
            fail("%s holds several processes: %s" % (path, pids))
        rank = pids.pop()
        ranks.add(rank)
        for e in xs:
            if e["dur"] < 0 or e["ts"] < 0:
                fail("%s: a negative time or duration: %s" % (path, e))
        by_lane = {}
        for e in xs:
            by_lane.setdefault(e["tid"], []).append(e)
        for tid, evs in by_lane.items():
            if tid not in lanes:
                fail("%s: lane %d has no name" % (path, tid))
            evs.sort(key=lambda e: (e["ts"], -e["dur"]))
            stack = []
            for e in evs:
                while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + EPS:
                    stack.pop()
                if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
                    fail("%s, %s: '%s' at %.3f overlaps '%s' at %.3f partly" %
                         (path, lanes[tid], e["name"], e["ts"], stack[-1]["name"], stack[-1]["ts"]))
                stack.append(e)
        names = set(lanes.values())
        ops = [e for t, n in lanes.items() if n.startswith("operations") for e in by_lane.get(t, [])]
        chans = [e for t, n in lanes.items() if n.startswith("channel ") for e in by_lane.get(t, [])]
        threads = [e for t, n in lanes.items() if n.startswith("thread ") for e in by_lane.get(t, [])]
        if not ops or not chans or not threads:
            fail("%s: lanes %s: want operations, channel and thread lanes with events" % (path, sorted(names)))
        mine = [e for e in ops if e["name"] == name]
        if not mine:
            fail("%s: no %s on the operations lane" % (path, name))
        for e in mine:
            if e["args"].get("algo", "") != e["args"].get("algo", "").upper() or not e["args"].get("algo"):
                fail("%s: %s without NCCL's algorithm name: %s" % (path, name, e["args"]))
            if e["args"].get("proto") not in ("LL", "LL128", "SIMPLE"):
                fail("%s: %s without NCCL's protocol name: %s" % (path, name, e["args"]))
        for c in chans:
            if not any(o["name"] == c["name"] and o["ts"] <= c["ts"] + EPS and
                       c["ts"] + c["dur"] <= o["ts"] + o["dur"] + EPS for o in ops):
                fail("%s: channel event '%s' at %.3f lies in no operation of that name" % (path, c["name"], c["ts"]))
        calls = [e for e in threads if e["name"] == "nccl" + name]
        if not calls:
            fail("%s: no nccl%s call on a thread lane" % (path, name))
        print("check_trace: %s: rank %d, %d events: %d operations, %d channel events on %d channels, %d calls" %
              (path, rank, len(xs), len(ops), len(chans), sum(1 for n in names if n.startswith("channel ")), len(calls)))
    if ranks != set(range(nranks)):
        fail("ranks %s, want 0..%d" % (sorted(ranks), nranks - 1))
    print("check_trace: PASS")


main()
