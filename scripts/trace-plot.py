#!/usr/bin/env python3
"""Renders a singletrain --trace file (the Chrome trace event format) to a
PNG timeline with gnuplot (Debian's gnuplot-nox): a row per track (each
rank's scheduler, workers, prefetcher and communication thread), a box per
event, coloured by category (iterations behind, their phases and waits on
them, layers and all-reduces in front, narrower; backward darker than
forward), the x axis in ms since the first iteration began (what other
threads did before it, such as the prefetcher reading ahead, is cut off). Python reads the JSON and writes the boxes as a
TSV and a gnuplot script into a scratch directory; gnuplot draws them.
For an interactive view open the file in ui.perfetto.dev instead.

usage: scripts/trace-plot.py TRACE.json OUT.png [--title TEXT] [--iters A:B]
  --iters A:B   only the events of iterations A to B (default: all)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

# category: (colour, half-height of its boxes, drawing order)
STYLE = {
    "iteration": ("#d9d9d9", 0.45, 0),
    "phase": ("#9ecae1", 0.36, 1),
    "report": ("#9ecae1", 0.36, 1),
    "data": ("#a1d99b", 0.36, 1),
    "wait": ("#fdae6b", 0.36, 1),
    "layer": ("#3182bd", 0.26, 2),
    "comm": ("#e6550d", 0.26, 2),
}
BACKWARD = "#08306b"
LEGEND = [("iteration", "iteration"), ("phase", "phase"), ("wait", "wait"),
          ("layer", "layer forward"), ("backward", "layer backward"),
          ("data", "reading a batch"), ("comm", "all-reduce, control sum")]


def die(msg):
    print("trace-plot.py: " + msg, file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1].split("\n")[0])
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--title", default=None)
    p.add_argument("--iters", default=None)
    a = p.parse_args()
    if not shutil.which("gnuplot"):
        die("gnuplot is not installed: scripts/deps.sh --test installs gnuplot-nox")
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        die("%s: not a --trace file: %s" % (a.trace, e))
    lo, hi = (None, None)
    if a.iters:
        try:
            lo, hi = (int(v) for v in a.iters.split(":"))
        except ValueError:
            die("--iters: expected A:B, got '%s'" % a.iters)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    xs = [e for e in events if e.get("ph") == "X" and
          (lo is None or lo <= e.get("args", {}).get("iteration", lo) <= hi)]
    if not xs:
        die("%s: no events%s" % (a.trace, " in iterations " + a.iters if a.iters else ""))
    # rows top to bottom: by rank, then the track's order in the file
    tracks = sorted({(e["pid"], e["tid"]) for e in xs})
    row = {k: len(tracks) - 1 - i for i, k in enumerate(tracks)}
    starts = [e["ts"] for e in xs if e["cat"] == "iteration"] or [e["ts"] for e in xs]
    t0 = min(starts)
    xs = [e for e in xs if e["ts"] + e["dur"] > t0]
    work = tempfile.mkdtemp(prefix="st-trace-plot.")
    try:
        boxes = os.path.join(work, "boxes.tsv")
        with open(boxes, "w") as f:
            for e in sorted(xs, key=lambda e: STYLE.get(e["cat"], STYLE["phase"])[2]):
                colour, half, _ = STYLE.get(e["cat"], STYLE["phase"])
                if e["cat"] == "layer" and e["name"].startswith("backward"):
                    colour = BACKWARD
                x0 = max(e["ts"] - t0, 0.0) / 1000.0
                x1 = (e["ts"] + e["dur"] - t0) / 1000.0
                y = row[(e["pid"], e["tid"])]
                f.write("%.6f\t%.6f\t%.3f\t%.3f\t0x%s\n"
                        % (x0, x1, y - half, y + half, colour[1:]))
        label = lambda k: "%s %s" % (procs.get(k[0], "rank %d" % k[0]),
                                     names.get(k, "thread %d" % k[1]))
        one_rank = len({k[0] for k in tracks}) == 1
        ytics = ", ".join('"%s" %d' % (names.get(k, "") if one_rank else label(k), row[k])
                          for k in tracks)
        term = "pngcairo noenhanced font 'sans,10'"
        if subprocess.run(["gnuplot", "-e", "set terminal " + term],
                          stderr=subprocess.DEVNULL).returncode != 0:
            term = "png noenhanced"
        script = os.path.join(work, "plot.gp")
        present = {e["cat"] for e in xs} | \
            {"backward" for e in xs if e["name"].startswith("backward")}
        legend = ", ".join("NaN with boxes fillstyle solid lc rgb '%s' title '%s'"
                           % (BACKWARD if c == "backward" else STYLE[c][0], t)
                           for c, t in LEGEND if c in present)
        with open(script, "w") as f:
            f.write("set terminal %s size 1400,%d\n" % (term, 140 + 42 * len(tracks)))
            f.write("set output '%s'\n" % a.out.replace("'", "''"))
            f.write("set title '%s'\n" % (a.title or os.path.basename(a.trace)).replace("'", "''"))
            f.write("set xlabel 'ms'\nset yrange [-0.7:%f]\n" % (len(tracks) - 0.3))
            f.write("set ytics (%s)\nset grid xtics\n" % ytics)
            f.write("set key outside bottom center horizontal\n")
            f.write("plot '%s' using (($1+$2)/2):(($3+$4)/2):(($2-$1)/2):(($4-$3)/2):5 "
                    "with boxxyerror fillstyle solid noborder lc rgb variable notitle, %s\n"
                    % (boxes, legend))
        r = subprocess.run(["gnuplot", script], capture_output=True, text=True)
        if r.returncode != 0:
            die("gnuplot failed: " + r.stderr.strip())
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
