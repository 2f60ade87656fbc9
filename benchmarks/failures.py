"""How long a failure takes to end the job, on the dev cluster: fault -> terminal state.

Runs the failure tests (tests/cluster/test_failures.py: a taken head port, no Ray on the head, a
worker's setup failing, a worker never joining, a worker's raylet or srun killed, the driver
crashing) RUNS times each; every test measures the time from its fault to the job's terminal
state as `status` sees it (polled every 0.25 s) and appends it to a file. Prints the median
(min-max) per case as a Markdown table.

    python benchmarks/failures.py [--runs 3]

Needs root and the dev cluster (the tests start it); writes nothing outside a temp dir.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrl-failures-") as tmp:
        times = Path(tmp) / "times.jsonl"
        for run in range(args.runs):
            print(f"run {run + 1} of {args.runs}", file=sys.stderr)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-s",
                    "-p",
                    "no:cacheprovider",
                    str(REPO / "tests" / "cluster" / "test_failures.py"),
                ],
                cwd=REPO,
                env=dict(os.environ, NRL_FAULT_TIMES=str(times)),
                stdout=sys.stderr,  # stdout is the table
            )
            if done.returncode != 0:
                return done.returncode
        results: dict[str, list[float]] = {}
        for line in times.read_text().splitlines():
            entry = json.loads(line)
            results.setdefault(entry["case"], []).append(entry["seconds"])

    print(
        f"# Fault -> terminal state on the dev cluster, {args.runs} runs "
        f"({platform.machine()}, {os.cpu_count()} cores)\n"
    )
    print("| case | median (s) | min-max (s) |")
    print("|---|---|---|")
    for case, values in results.items():
        print(f"| {case} | {statistics.median(values):.1f} | {min(values):.1f}-{max(values):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
