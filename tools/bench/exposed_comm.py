#!/usr/bin/env python3
"""exposed_comm: how much of a data-parallel step is communication not hidden by computation.

Reads the Chrome-trace JSON written by `purine train --parallel=data --trace=FILE` (one file per
rank: FILE.rank0, FILE.rank1, ...; or a merged file; events are grouped by pid = rank) and
prints one row per rank:

  step ms      median step time; a step runs from one start of the data op (the executor whose
               name ends in "/data") to the next; the last one ends with the rank's last event
  compute %    union of the compute executors' events (every executor but data, "/comm" and
               "/mpi") as a share of the step time
  comm %       union of the communication executors' events (names containing "/mpi" or "/comm")
  exposed %    communication time not overlapped by computation: union(comm) minus
               union(compute), summed over the steps, as a share of the summed step time
               (the target is under 10%)
  tail %       time from the step's last computation to the end of its last communication
               event (the final sums and updates, and the transfers they waited for); in a
               data-parallel step computation never waits for communication (new weights are
               swapped in between runs), so this is where communication can be exposed
  idle %       step time in which no compute executor runs: an upper bound of the exposed
               communication (it also counts waiting for data, dispatch and the gap between runs)

The first --skip steps (warm-up) are left out. Python 3 standard library only.

Caveat: the dispatcher traces a polled task (an MPI send, receive or allreduce) only while it
is started, not while it is in flight, so "exposed" counts the posting and the comm thread's
copies, sums and updates, but not time spent waiting for bytes to arrive; that waiting shows up
in "tail" and "idle" instead.

--gaps=K lists, per rank, the K compute tasks that most often wait with no computation running
before them inside a step (the gap's median and summed length, and the last communication task
to end before the gap did: what the computation likely waited for); on a layout that falls
short of its ceiling, it says which ops wait and on which transfers.

Usage: exposed_comm.py TRACE [TRACE...] [--skip=N] [--gaps=K]
  A TRACE that does not exist but has TRACE.rank0, TRACE.rank1, ... stands for those files.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys


def load_events(paths):
    """Returns {rank: {"names": {tid: executor name}, "events": [(tid, name, start, end)]}}."""
    ranks = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"error: cannot read trace file '{path}': {e}")
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(events, list):
            sys.exit(f"error: '{path}' is not a Chrome trace (no traceEvents array)")
        for e in events:
            pid = e.get("pid", 0)
            rank = ranks.setdefault(pid, {"names": {}, "events": []})
            if e.get("ph") == "M" and e.get("name") == "thread_name":
                rank["names"][e.get("tid")] = e.get("args", {}).get("name", "")
            elif e.get("ph") == "X":
                start = float(e["ts"])
                rank["events"].append((e.get("tid"), e.get("name", ""), start,
                                       start + float(e.get("dur", 0))))
    return ranks


def expand(paths):
    """Replaces a missing FILE by its FILE.rank<R> files, in rank order."""
    out = []
    for p in paths:
        if os.path.exists(p):
            out.append(p)
            continue
        parts = glob.glob(glob.escape(p) + ".rank*")
        parts = [q for q in parts if re.fullmatch(r"\.rank\d+", q[len(p):])]
        if not parts:
            sys.exit(f"error: no trace file '{p}' (nor '{p}.rank0', ...)")
        out.extend(sorted(parts, key=lambda q: int(q[len(p) + 5:])))
    return out


def union(intervals):
    """Sorted, disjoint union of (start, end) intervals."""
    merged = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def length(intervals):
    return sum(e - s for s, e in intervals)


def clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def subtract(a, b):
    """Length of union a minus union b (both sorted and disjoint)."""
    total, j = 0.0, 0
    for s, e in a:
        covered = 0.0
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            covered += min(e, b[k][1]) - max(s, b[k][0])
            k += 1
        total += (e - s) - covered
    return total


def kind(executor):
    if executor.endswith("/data"):
        return "data"
    if "/mpi" in executor or "/comm" in executor:
        return "comm"
    return "compute"


def analyse(rank, skip):
    names, events = rank["names"], rank["events"]
    if not events:
        return None
    by_kind = {"data": [], "comm": [], "compute": []}
    for tid, _, s, e in events:
        by_kind[kind(names.get(tid, ""))].append((s, e))
    last_end = max(e for _, _, _, e in events)
    starts = sorted(s for s, _ in by_kind["data"])
    if not starts:
        # No data op traced: the whole window is one step.
        starts = [min(s for _, _, s, _ in events)]
    bounds = list(zip(starts, starts[1:] + [last_end]))[skip:]
    if not bounds:
        return None
    compute = union(by_kind["compute"])
    comm = union(by_kind["comm"])
    totals = {"step": 0.0, "compute": 0.0, "comm": 0.0, "exposed": 0.0, "tail": 0.0}
    steps = []
    for lo, hi in bounds:
        c, m = clip(compute, lo, hi), clip(comm, lo, hi)
        steps.append(hi - lo)
        totals["step"] += hi - lo
        totals["compute"] += length(c)
        totals["comm"] += length(m)
        totals["exposed"] += subtract(m, c)
        if c and m:
            totals["tail"] += max(0.0, m[-1][1] - c[-1][1])
    step = totals["step"]
    return {
        "steps": len(bounds),
        "step_ms": statistics.median(steps) / 1e3,
        "compute": 100 * totals["compute"] / step,
        "comm": 100 * totals["comm"] / step,
        "exposed": 100 * totals["exposed"] / step,
        "idle": 100 * (step - totals["compute"]) / step,
        "tail": 100 * totals["tail"] / step,
    }


def short(name, width=64):
    name = re.sub(r"^replica\d+::", "", name)
    return name if len(name) <= width else "..." + name[-(width - 3):]


def gaps(rank, skip, top):
    """The compute tasks that start after an idle gap inside a step, longest in total first:
    [(total us, median us, count, task, last comm task ended before the task started)]."""
    names, events = rank["names"], rank["events"]
    compute = sorted((s, e, n) for tid, n, s, e in events if kind(names.get(tid, "")) == "compute")
    comm = sorted((e, n) for tid, n, s, e in events if kind(names.get(tid, "")) == "comm")
    starts = sorted(s for tid, _, s, _ in events if kind(names.get(tid, "")) == "data")
    if not compute or len(starts) <= skip + 1:
        return []
    waits = {}
    for lo, hi in list(zip(starts, starts[1:]))[skip:]:
        busy_until = lo
        for s, e, n in compute:
            if s < lo or s >= hi:
                continue
            if s - busy_until > 100:  # us
                ended = [c for c in comm if c[0] <= s]
                before = ended[-1][1] if ended else "-"
                waits.setdefault((n, before), []).append(s - busy_until)
            busy_until = max(busy_until, e)
    rows = [(sum(v), statistics.median(v), len(v), n, b) for (n, b), v in waits.items()]
    return sorted(rows, reverse=True)[:top]


def main():
    parser = argparse.ArgumentParser(
        description="Share of data-parallel step time spent in communication not overlapped "
        "by computation, from purine Chrome traces.")
    parser.add_argument("traces", nargs="+", help="trace files (or FILE standing for FILE.rank*)")
    parser.add_argument("--skip", type=int, default=2, help="warm-up steps to leave out")
    parser.add_argument("--gaps", type=int, default=0,
                        help="per rank, the K compute tasks that wait longest (see above)")
    args = parser.parse_args()
    ranks = load_events(expand(args.traces))
    print(f"{'rank':>4} {'steps':>5} {'step ms':>9} {'compute %':>9} {'comm %':>7} "
          f"{'exposed %':>9} {'tail %':>7} {'idle %':>7}")
    worst = None
    for pid in sorted(ranks):
        r = analyse(ranks[pid], args.skip)
        if r is None:
            print(f"{pid:>4}  (no steps after skipping {args.skip})")
            continue
        print(f"{pid:>4} {r['steps']:>5} {r['step_ms']:>9.2f} {r['compute']:>9.1f} "
              f"{r['comm']:>7.1f} {r['exposed']:>9.1f} {r['tail']:>7.1f} {r['idle']:>7.1f}")
        worst = r["exposed"] if worst is None else max(worst, r["exposed"])
    if worst is not None:
        verdict = "meets" if worst < 10 else "misses"
        print(f"worst exposed communication {worst:.1f}% of step time ({verdict} the < 10% "
              f"target; tail % and idle % bound it from the untraced transfer waits)")
    for pid in sorted(ranks) if args.gaps > 0 else []:
        rows = gaps(ranks[pid], args.skip, args.gaps)
        print(f"rank {pid}: compute tasks started after an idle gap (ms summed over the steps, "
              f"median, steps; the last communication task to end before it)")
        for total, median, count, task, before in rows:
            print(f"  {total / 1e3:8.2f} {median / 1e3:7.2f} {count:4d}  {short(task)}  <-  "
                  f"{short(before)}")


if __name__ == "__main__":
    main()
