#!/usr/bin/env python3
"""tools/bench/exposed_comm.py on a trace made by hand: its shares and its --gaps list.

One rank, 6 steps of 1000 us (a data op of 5 us at each step's start; the last step ends with
the rank's last event, at 900 us). In every step the compute thread runs forward 5-400 and
backward 400-500, then waits for a transfer: the comm thread posts it during 450-470 (while
backward runs) and sums what arrived during 690-700 (while nothing computes), and `update` runs
800-900. With the first step skipped: compute 595 us a step, communication 30 us of which 10
exposed, and `update` waiting 300 us after the sum in each of the 4 whole steps.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench", "exposed_comm.py")


def trace():
    events = [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "rank0:cpu/main"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 2, "args": {"name": "rank0:cpu/comm"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 3, "args": {"name": "rank0:cpu/data"}},
    ]
    for step in range(6):
        t = 1000 * step

        def task(tid, name, start, end):
            events.append({"ph": "X", "pid": 0, "tid": tid, "name": name, "ts": t + start,
                           "dur": end - start})

        task(3, "replica0::data", 0, 5)
        task(1, "replica0::net::forward", 5, 400)
        task(1, "replica0::net::backward", 400, 500)
        task(2, "replica0::net::grad::send", 450, 470)
        task(2, "replica0::net::grad::sum", 690, 700)
        task(1, "replica0::net::update", 1000 - 200, 1000 - 100)
    return {"traceEvents": events}


class ExposedCommTest(unittest.TestCase):
    def run_script(self, *flags):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(trace(), f)
            done = subprocess.run([sys.executable, SCRIPT, path, "--skip=1", *flags],
                                  capture_output=True, text=True, check=True)
        return done.stdout

    def test_shares(self):
        row = self.run_script().splitlines()[1].split()
        # rank, steps, step ms, compute %, comm %, exposed %, tail %, idle %
        self.assertEqual(row[:3], ["0", "5", "1.00"])
        self.assertEqual(row[3], "60.7")  # 5 x 595 us of 4 x 1000 + 900
        self.assertEqual(row[4], "3.1")  # 5 x 30 us
        self.assertEqual(row[5], "1.0")  # the sums, while nothing computes
        self.assertEqual(row[6], "0.0")  # the last computation ends after the last comm task
        self.assertEqual(row[7], "39.3")

    def test_gaps_name_the_waiting_task_and_the_transfer_before_it(self):
        out = self.run_script("--gaps=3")
        lines = out[out.index("rank 0: compute tasks"):].splitlines()
        self.assertEqual(len(lines), 2, out)  # only update waits; forward starts with its step
        fields = lines[1].split()
        self.assertEqual(fields[:3], ["1.20", "0.30", "4"])  # 4 steps of 300 us
        self.assertEqual(fields[3], "net::update")
        self.assertEqual(fields[-1], "net::grad::sum")


if __name__ == "__main__":
    unittest.main()
