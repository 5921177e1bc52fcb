#!/usr/bin/env python3
"""Where an iteration's wall time goes, from a `purine train --trace` file.

Iterations are told apart by their tasks: every task runs once per iteration, so the n-th run
of each task belongs to iteration n. For the iterations after the warm-up it prints the median
iteration period (start to start), the host gap (from the last task of one iteration ending to
the first task of the next starting: the trainer's own time between runs) as a share of the
period, and each thread's busy share (the union of its tasks' spans over the period; on a GPU
stream this is the device's busy share, since traces show device times there).

With --top=N it also lists the N tasks that take the most time per iteration (median span, and
the thread they ran on), so the op that holds the device up is named. --match=TEXT lists every
task whose name contains TEXT (a regular expression) and their medians' sum: what a change to
some ops did, compared between two traces (e.g. --match='bn|relu' with and without --nofuse).

Usage: tools/bench/trace_gaps.py TRACE.json [--skip=5] [--top=0] [--match=REGEX]
"""
import argparse
import collections
import json
import re
import statistics
import sys


def union_length(spans):
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--skip", type=int, default=5, help="warm-up iterations left out")
    parser.add_argument("--top", type=int, default=0, help="list the N longest tasks")
    parser.add_argument("--match", help="list the tasks whose names match this regular "
                        "expression, with the sum of their medians")
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tasks = [e for e in events if e.get("ph") == "X"]
    runs = collections.Counter(e["name"] for e in tasks)
    iterations = max(runs.values(), default=0)
    if iterations <= args.skip + 1:
        sys.exit(f"error: {args.trace} holds {iterations} iterations; need more than "
                 f"{args.skip + 1} (train longer, or lower --skip)")
    seen = collections.Counter()
    by_iteration = collections.defaultdict(list)  # iteration -> [(start, end, tid)]
    for e in sorted(tasks, key=lambda e: e["ts"]):
        n = seen[e["name"]]
        seen[e["name"]] += 1
        by_iteration[n].append((e["ts"], e["ts"] + e["dur"], e["tid"]))
    timed = range(args.skip, iterations - 1)
    starts = {n: min(s for s, _, _ in by_iteration[n]) for n in range(iterations)}
    ends = {n: max(t for _, t, _ in by_iteration[n]) for n in range(iterations)}
    periods = [starts[n + 1] - starts[n] for n in timed]
    gaps = [max(0.0, starts[n + 1] - ends[n]) for n in timed]
    period = statistics.median(periods)
    print(f"{len(timed)} iterations after {args.skip} of warm-up: period {period / 1e3:.3f} ms, "
          f"host gap {statistics.median(gaps) / 1e3:.3f} ms "
          f"({statistics.median(g / p for g, p in zip(gaps, periods)):.1%} of the period)")
    for tid, name in sorted(threads.items()):
        shares = []
        for n in timed:
            spans = [(s, t) for s, t, who in by_iteration[n] if who == tid]
            shares.append(union_length(spans) / (starts[n + 1] - starts[n]))
        print(f"  {name:32s} busy {statistics.median(shares):6.1%}")
    if args.top > 0:
        print_longest_tasks(tasks, threads, args.skip, args.top, period)
    if args.match:
        pattern = re.compile(args.match)
        matched = [e for e in tasks if pattern.search(e["name"])]
        if not matched:
            sys.exit(f"error: no task of {args.trace} matches '{args.match}'")
        print_longest_tasks(matched, threads, args.skip, len(matched), period,
                            f"tasks matching '{args.match}'")


def print_longest_tasks(tasks, threads, skip, top, period, title="longest tasks"):
    spans = collections.defaultdict(list)  # (name, tid) -> durations after the warm-up
    seen = collections.Counter()
    for e in sorted(tasks, key=lambda e: e["ts"]):
        key = (e["name"], e["tid"])
        if seen[key] >= skip:
            spans[key].append(e["dur"])
        seen[key] += 1
    medians = sorted(((statistics.median(d), key) for key, d in spans.items() if d),
                     reverse=True)
    print(f"  {title} (median per iteration; share of the period):")
    for dur, (name, tid) in medians[:top]:
        print(f"    {dur / 1e3:9.3f} ms {dur / period:6.1%}  {name}  [{threads.get(tid, tid)}]")
    total = sum(dur for dur, _ in medians[:top])
    print(f"    {total / 1e3:9.3f} ms {total / period:6.1%}  (these {min(top, len(medians))} together)")


if __name__ == "__main__":
    main()
