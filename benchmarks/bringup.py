"""How long the Ray bring-up takes on the dev cluster, read from each job's timings.json.

For each node count, submits RUNS real jobs (no container, Ray from RAY_VENV) whose driver
connects to Ray and exits, one after another, and reports the median time from the job's start
on its first node to (a) the Ray head listening, (b) every node joined, (c) the driver started.
Also reports submission -> start (Slurm's scheduling) and the whole job (sbatch -> gone).

    scripts/dev-cluster up
    python benchmarks/bringup.py [--ray-venv .venv] [--nodes 2 4] [--runs 3]

Needs root and the dev cluster (scripts/dev-cluster); writes nothing outside a temp dir.
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
import time
from pathlib import Path

_SCRIPT = Path(sys.executable).with_name("nrl-launch")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "nrl_launch"]
DRIVER = "import ray; ray.init(address='auto'); print(len(ray.nodes()), 'nodes')"
# (label, phase it ends at, phase it starts from)
SPANS = [
    ("queued: submit -> job start", "started", "submitted"),
    ("start -> Ray head up", "head_up", "started"),
    ("start -> all nodes joined", "all_joined", "started"),
    ("start -> driver started", "driver_started", "started"),
]


def one_run(nodes: int, ray_venv: Path, work: Path) -> dict[str, float]:
    env = dict(os.environ, NRL_LAUNCH_STATE_DIR=str(work / "state"))
    argv = [
        *CLI,
        "submit",
        "--wait",
        "--json",
        "--nodes",
        str(nodes),
        "--container-runtime",
        "none",
        "--set",
        f"setup=source {ray_venv}/bin/activate",
        "--log-dir",
        str(work / "logs"),
        "--time",
        "10",
        "--",
        "python",
        "-c",
        DRIVER,
    ]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work)
    total = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"job failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    log_dir = Path(json.loads(done.stdout)["log_dir"])
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    spans = {label: phases[end] - phases[begin] for label, end, begin in SPANS}
    spans["whole job: submit -> gone (as `submit --wait` sees it)"] = total
    return spans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray-venv", type=Path, default=Path(sys.prefix))
    args = parser.parse_args()
    ray_venv = args.ray_venv.resolve()
    if not (ray_venv / "bin" / "ray").exists():
        sys.exit(f"{ray_venv} has no bin/ray: pip install -e '.[local]' there")

    results: dict[int, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="nrl-bringup-") as tmp:
        for nodes in args.nodes:
            for run in range(args.runs):
                spans = one_run(nodes, ray_venv, Path(tmp))
                results.setdefault(nodes, []).append(spans)
                print(
                    f"{nodes} nodes, run {run + 1}: "
                    + ", ".join(f"{k.split(':')[0]} {v:.1f}s" for k, v in spans.items()),
                    file=sys.stderr,
                )

    print(
        f"# Ray bring-up on the dev cluster, median of {args.runs} runs "
        f"({platform.machine()}, {os.cpu_count()} cores)\n"
    )
    labels = [label for label, _, _ in SPANS] + [
        "whole job: submit -> gone (as `submit --wait` sees it)"
    ]
    print("| span | " + " | ".join(f"{n} nodes (s)" for n in args.nodes) + " |")
    print("|---|" + "---|" * len(args.nodes))
    for label in labels:
        cells = []
        for n in args.nodes:
            values = [r[label] for r in results[n]]
            cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
