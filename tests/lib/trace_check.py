#!/usr/bin/env python3
"""Checks a --trace file (the Chrome trace event format) the way the
tests want it; prints one "ok"/"FAIL" line per check and exits 1 if any
failed (2 on bad usage).

  trace_check.py TRACE.json --ranks P --workers T --iters A:B
                 [--metrics CSV] [--comm] [--allreduce] [--async]
                 [--layers-cover F]

- format: a JSON object whose "traceEvents" is a list; every event has
  the fields Perfetto's JSON importer reads for its phase ("ph"): complete
  events ("X") a string name and cat, numeric ts and dur >= 0, integer pid
  and tid; metadata events ("M") a known name and args;
- tracks: process_name "rank R" for each of the P ranks, and on each
  thread_name "scheduler", "worker 0" .. "worker T-1", "prefetch" (and
  "communication" with --comm); every event's (pid, tid) is named;
- window: every event's iteration is in A..B, and each worker has one
  "iteration I" event for each I of A..B;
- nesting: on each track no two events overlap partly (one holds the
  other, or they do not meet), every layer event lies inside its
  iteration's "compute" phase on the same track, and every phase and wait
  of a worker inside its iteration;
- phases: a worker's iteration is covered by its phases (the events
  directly inside it): their durations sum to the iteration's within 5%;
  the layers cover at least F (default 0.9; 0: not checked) of the
  window's compute phases (summed: a preemption that falls between two
  layers is one iteration's, not the run's) (with --overlap the communication thread, woken as a
  bucket is ready, takes the core between layers on a busy host);
- scheduler and prefetcher: a "report" on the scheduler's track and a
  "read batch" on the prefetcher's for each iteration of the window
  (--async, SSP and ASP: the workers read their shards, there is no
  prefetcher, and the scheduler reports no iterations);
- --metrics CSV (rows of --log-every 1): the time the CSV gives each
  iteration (data + compute + barrier + aggregation + update +
  communication, means over the workers, which count an iteration's wait
  at its end in the next one's barrier) equals, within 5%, the mean over
  the workers of the iteration event, less its "wait: iteration end",
  plus the previous iteration's (for A+1..B, on rank 0);
- --allreduce: the workers' "all-reduce" (or, with --comm, the
  communication thread's "all-reduce bucket N") events carry bytes > 0
  and an algorithm, and the ranks' clocks agree: an iteration's
  all-reduces end on every rank within 10 ms of each other.
"""
import argparse
import csv
import json
import sys

failed = 0


def check(name, ok, detail=""):
    global failed
    if ok:
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def ns(x):
    """Microseconds as whole nanoseconds (the file has three decimals)."""
    return round(x * 1000)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--iters", required=True)
    p.add_argument("--metrics")
    p.add_argument("--comm", action="store_true")
    p.add_argument("--allreduce", action="store_true")
    p.add_argument("--async", dest="sync_async", action="store_true")
    p.add_argument("--layers-cover", type=float, default=0.9)
    a = p.parse_args()
    first, last = (int(v) for v in a.iters.split(":"))
    window = set(range(first, last + 1))

    with open(a.trace) as f:
        doc = json.load(f)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    check("the file is an object with a traceEvents list", isinstance(events, list))
    if not isinstance(events, list):
        return
    bad = []
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            if not (isinstance(e.get("name"), str) and isinstance(e.get("cat"), str)
                    and isinstance(e.get("ts"), (int, float))
                    and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0
                    and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)):
                bad.append(e)
        elif ph == "M":
            if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index") or not isinstance(e.get("args"), dict) \
                    or not isinstance(e.get("pid"), int):
                bad.append(e)
        else:
            bad.append(e)
    check("every event has the fields of its phase (X or M)", not bad, str(bad[:2]))
    xs = [e for e in events if e.get("ph") == "X" and e not in bad]

    # tracks
    procs = {e["pid"]: e["args"].get("name") for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    check("one process per rank, named", procs == {r: "rank %d" % r for r in range(a.ranks)},
          str(procs))
    threads = {(e["pid"], e["tid"]): e["args"].get("name") for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    want = ["scheduler"] + ([] if a.sync_async else ["prefetch"]) + \
        ["worker %d" % w for w in range(a.workers)]
    if a.comm:
        want.append("communication")
    for r in range(a.ranks):
        names = sorted(n for (pid, _), n in threads.items() if pid == r)
        check("rank %d's tracks: %s" % (r, ", ".join(sorted(want))), names == sorted(want),
              str(names))
    unnamed = {(e["pid"], e["tid"]) for e in xs} - set(threads)
    check("every event is on a named track", not unnamed, str(unnamed))
    track = {}
    for e in xs:
        track.setdefault((e["pid"], threads.get((e["pid"], e["tid"]))), []).append(e)

    # window
    its = {e["args"].get("iteration") for e in xs if "iteration" in e.get("args", {})}
    check("only iterations %d to %d recorded" % (first, last), its <= window, str(sorted(its)))
    for r in range(a.ranks):
        for w in range(a.workers):
            got = sorted(e["args"]["iteration"] for e in track.get((r, "worker %d" % w), [])
                         if e["cat"] == "iteration")
            check("rank %d worker %d: one iteration event each of %d to %d" % (r, w, first, last),
                  got == sorted(window), str(got))

    # nesting: no partial overlaps on a track
    for key, evs in sorted(track.items(), key=lambda kv: str(kv[0])):
        stack, partial = [], []
        for e in sorted(evs, key=lambda e: (ns(e["ts"]), -ns(e["dur"]))):
            b, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while stack and stack[-1][1] <= b:
                stack.pop()
            if stack and end > stack[-1][1]:
                partial.append((stack[-1][2]["name"], e["name"]))
            stack.append((b, end, e))
        check("rank %d %s: no two events overlap partly" % key, not partial, str(partial[:3]))

    def inside(e, outer):
        return ns(outer["ts"]) <= ns(e["ts"]) and \
            ns(e["ts"]) + ns(e["dur"]) <= ns(outer["ts"]) + ns(outer["dur"])

    for r in range(a.ranks):
        for w in range(a.workers):
            evs = track.get((r, "worker %d" % w), [])
            by = lambda cat, name=None: {e["args"]["iteration"]: e for e in evs
                                         if e["cat"] == cat and (name is None or e["name"] == name)}
            iters, computes = by("iteration"), by("phase", "compute")
            where = "rank %d worker %d" % (r, w)
            layers = [e for e in evs if e["cat"] == "layer"]
            check(where + ": forward and backward of every layer recorded", len(layers) > 0
                  and {e["name"].split()[0] for e in layers} == {"forward", "backward"})
            out = [e["name"] for e in layers
                   if e["args"]["iteration"] not in computes
                   or not inside(e, computes[e["args"]["iteration"]])]
            check(where + ": each layer event inside its iteration's compute phase", not out,
                  str(out[:3]))
            out = [e["name"] for e in evs if e["cat"] in ("phase", "wait", "comm")
                   and not inside(e, iters.get(e["args"]["iteration"], {"ts": 0, "dur": -1}))]
            check(where + ": each phase and wait inside its iteration", not out, str(out[:3]))
            worst, covered, computed = 0.0, 0.0, 0.0
            for it, ie in iters.items():
                # the phases: the events directly inside the iteration
                kids = [e for e in evs if e is not ie and e["cat"] in ("phase", "wait")
                        and e["args"].get("iteration") == it and inside(e, ie)]
                direct = [e for e in kids if not any(o is not e and inside(e, o) for o in kids)]
                total = sum(e["dur"] for e in direct)
                worst = max(worst, abs(total - ie["dur"]) / ie["dur"])
                computed += computes[it]["dur"]
                covered += sum(e["dur"] for e in layers if e["args"]["iteration"] == it)
            thin = covered / computed if computed > 0 else 0.0
            check(where + ": the phases sum to each iteration's time within 5%% (worst %.3f%%)"
                  % (100 * worst), worst <= 0.05)
            if a.layers_cover > 0:
                check(where + ": the layers cover the compute phases to %.0f%% (%.1f%%)"
                      % (100 * a.layers_cover, 100 * thin), thin >= a.layers_cover)
        for name, what in () if a.sync_async else (("scheduler", "report"),
                                                   ("prefetch", "read batch")):
            got = sorted(e["args"]["iteration"] for e in track.get((r, name), [])
                         if e["name"] == what)
            check("rank %d %s: a %s event for each iteration" % (r, name, what),
                  got == sorted(window), str(got))

    if a.metrics:
        rows = {}
        with open(a.metrics) as f:
            for row in csv.DictReader(f):
                if row["phase"] == "train" and row["data_ms"]:
                    rows[int(row["iteration"]) - 1] = sum(float(row[k]) for k in (
                        "data_ms", "compute_ms", "barrier_ms", "aggregation_ms", "update_ms",
                        "communication_ms"))
        worst = 0.0
        for it in range(first + 1, last + 1):
            trace_ms = 0.0
            for w in range(a.workers):
                evs = track[(0, "worker %d" % w)]
                end_wait = {e["args"]["iteration"]: e["dur"] for e in evs
                            if e["name"] == "wait: iteration end"}
                ie = [e for e in evs if e["cat"] == "iteration" and e["args"]["iteration"] == it]
                if not ie or it not in end_wait or it - 1 not in end_wait:
                    trace_ms = float("nan")
                    break
                trace_ms += (ie[0]["dur"] - end_wait[it] + end_wait[it - 1]) / 1000 / a.workers
            if it not in rows or trace_ms != trace_ms:
                worst = float("inf")
                break
            worst = max(worst, abs(trace_ms - rows[it]) / rows[it])
        check("the iterations' times agree with --metrics within 5%% (worst %.3f%%)"
              % (100 * worst), worst <= 0.05)

    if a.allreduce:
        name = "all-reduce bucket" if a.comm else "all-reduce"
        ars = [e for e in xs if e["cat"] == "comm" and e["name"].startswith(name)]
        check("all-reduce events with bytes and an algorithm", ars and all(
            e["args"].get("bytes", 0) > 0 and e["args"].get("algorithm") not in (None, "none")
            for e in ars), str(ars[:1]))
        skew = 0.0
        for it in window:
            ends = {}
            for e in ars:
                if e["args"]["iteration"] == it:
                    end = e["ts"] + e["dur"]
                    ends[e["pid"]] = max(ends.get(e["pid"], end), end)
            if len(ends) == a.ranks:
                skew = max(skew, max(ends.values()) - min(ends.values()))
            else:
                skew = float("inf")
        check("the ranks' clocks agree: each iteration's all-reduces end within 10 ms "
              "(worst %.3f ms)" % (skew / 1000), skew <= 10000)


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
