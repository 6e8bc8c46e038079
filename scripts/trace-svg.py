#!/usr/bin/env python3
"""Draws the Chrome trace files of profiler-trace (one per rank) as one SVG timeline: a row per lane of each rank
(application threads, operations, channels), a box per event, labelled where it is wide enough. For READMEs and
reports; Perfetto (ui.perfetto.dev) opens the JSON files themselves.
    trace-svg.py [--from-us T0] [--span-us D] out.svg trace-rank0.json trace-rank1.json ..."""
import argparse
import html
import json

COLORS = {"call": "#9ecae1", "ncclGroupStart..End": "#9ecae1", "launch": "#fdae6b", "group": "#c7e9c0"}
PALETTE = ["#6baed6", "#74c476", "#fd8d3c", "#9e9ac8", "#e377c2", "#bcbd22"]


def color(name):
    if name in COLORS:
        return COLORS[name]
    return PALETTE[sum(map(ord, name)) % len(PALETTE)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-us", type=float, default=None, help="start of the window, us from the first event")
    ap.add_argument("--span-us", type=float, default=None, help="width of the window in us")
    ap.add_argument("out")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rows = []  # (label, events)
    for path in a.files:
        doc = json.load(open(path))
        evs = doc["traceEvents"]
        rank = next(e["pid"] for e in evs)
        names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
        for tid in sorted(names):
            rows.append((rank, names[tid], [e for e in evs if e["ph"] == "X" and e["tid"] == tid]))
    # Per rank: its threads, then its operations, then its channels.
    order = {"thread": 0, "operations": 1, "channel": 2}
    rows.sort(key=lambda r: (r[0], order.get(r[1].split()[0], 3), r[1]))
    rows = [("rank %d %s" % (rank, name), evs) for rank, name, evs in rows]
    allx = [e for _, evs in rows for e in evs]
    t0 = min(e["ts"] for e in allx) if a.from_us is None else a.from_us
    t1 = max(e["ts"] + e["dur"] for e in allx) if a.span_us is None else t0 + a.span_us
    left, width, rowh = 190, 1000, 18
    scale = width / max(t1 - t0, 1e-9)
    h = 30 + rowh * len(rows) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="10">'
           % (left + width + 10, h), '<rect width="100%" height="100%" fill="white"/>']
    out.append('<text x="%d" y="14" font-size="11">%.1f us of %d ranks (profiler-trace)</text>'
               % (left, t1 - t0, len(a.files)))
    for i, (label, evs) in enumerate(rows):
        y = 24 + i * rowh
        out.append('<text x="4" y="%d">%s</text>' % (y + 12, html.escape(label)))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/>' % (left, y + rowh, left + width, y + rowh))
        for e in sorted(evs, key=lambda e: -e["dur"]):
            s, f = max(e["ts"], t0), min(e["ts"] + e["dur"], t1)
            if f < t0 or s > t1:
                continue
            x, w = left + (s - t0) * scale, max((f - s) * scale, 0.5)
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#555" stroke-width="0.3">'
                       '<title>%s %.3f us</title></rect>' % (x, y + 2, w, rowh - 4, color(e["name"]),
                                                              html.escape(e["name"]), e["dur"]))
            if w > 6 * len(e["name"]):
                out.append('<text x="%.1f" y="%d">%s</text>' % (x + 2, y + 12, html.escape(e["name"])))
    out.append('<text x="%d" y="%d">0 to %.0f us (hover a box for its name and duration)</text>' % (left, h - 6, t1 - t0))
    out.append("</svg>")
    open(a.out, "w").write("\n".join(out) + "\n")


main()
