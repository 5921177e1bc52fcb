#!/usr/bin/env python3
"""What Purine's cuDNN algorithm rules cost, from the log of a GPU training run with GLOG_v=1
(operators/cuda/conv_algorithms.cpp logs every algorithm cuDNN's find timed for each
convolution geometry and direction, and the one chosen).

For each direction it sums, over the geometries, cuDNN's time of the algorithm chosen and of
the fastest one each rule allows: `--math=exact` (deterministic, no non-fused Winograd),
`--math=fp32` (non-fused Winograd too), fp32 with nondeterministic algorithms, and anything
(tensor ops too; the log holds them only from a --math=tf32 run). The gaps say what
determinism and exact sums cost per iteration (each geometry counted once, though a network
may run it more).

Usage: purine train --device=0 --v=1 ... 2>log; conv_choices.py log
"""
import collections
import re
import sys

HEADER = re.compile(r"conv (forward|data gradient|weight gradient) (x \[.*\] stride \d+ pad \d+)"
                    r": chose algo (\w+)")
ROW = re.compile(r"^\s+algo (\d+): ([0-9.e+-]+) ms, (\d+) MiB, (\w+)(.*)$")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    entries = []  # (direction, geometry, chosen, {algo: (ms, deterministic, lossy, tensor)})
    current = None
    with open(sys.argv[1]) as f:
        for line in f:
            header = HEADER.search(line)
            if header:
                current = (header.group(1), header.group(2), header.group(3), {})
                entries.append(current)
                continue
            row = ROW.match(line)
            if row and current:
                rest = row.group(5)
                current[3][int(row.group(1))] = (float(row.group(2)),
                                                 row.group(4) == "deterministic",
                                                 "lossy" in rest, "tensor ops" in rest)
            elif not line.startswith(" "):
                current = None
    if not entries:
        sys.exit(f"error: {sys.argv[1]} holds no conv algorithm log (run with GLOG_v=1)")

    rules = {  # which of cuDNN's results each rule may take: (deterministic, lossy, tensor)
        "chosen": None,
        "exact": lambda d, tr, tc: d and not tr and not tc,
        "fp32": lambda d, tr, tc: d and not tc,
        "fp32 nondeterm.": lambda d, tr, tc: not tc,
        "anything": lambda d, tr, tc: True,
    }
    totals = collections.defaultdict(lambda: collections.defaultdict(float))
    for direction, _, chosen, algos in entries:
        for name, allowed in rules.items():
            if allowed is None:
                times = [algos[int(chosen)][0]] if chosen.isdigit() and int(chosen) in algos else []
            else:
                times = [ms for ms, d, tr, tc in algos.values() if allowed(d, tr, tc)]
            totals[direction][name] += min(times, default=0.0)
    print(f"{len(entries)} geometry-directions; cuDNN's times summed once per geometry, ms:")
    print(f"{'direction':16s}" + "".join(f"{name:>19s}" for name in rules))
    for direction, sums in totals.items():
        print(f"{direction:16s}" + "".join(f"{sums[name]:19.3f}" for name in rules))


if __name__ == "__main__":
    main()
