"""The tiny-rl GRPO run on the dev cluster at 1, 2 and 4 nodes: time to the first step and the
step's split.

For each node count, submits RUNS real `nrl-launch submit --wait grpo` jobs from
examples/tiny-rl (2 GPUs per node, colocated: a training rank and a generation engine on every
GPU; 20 steps), the node counts interleaved (1, 2, 4, 1, 2, 4, ...), and reports medians of:
job start (Slurm's StartTime, as timings.json's `started`) -> the driver started, -> every actor
placed and set up (placement), -> the end of step 1; and over steps 2..20 without a checkpoint,
the step time and its split into generation, training (log-probs and the update) and weight
sync (gathering the FSDP2 shards and loading them into every engine).

    scripts/dev-cluster up
    (cd examples/tiny-rl && uv venv -q --allow-existing && uv pip install -q -e .)
    python benchmarks/grpo_steps.py [--nodes 1 2 4] [--runs 2]

Writes nothing outside a temp dir.
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

PROJECT = Path(__file__).resolve().parents[1] / "examples" / "tiny-rl"
NRL_LAUNCH = str(Path(sys.executable).parent / "nrl-launch")


def one_run(nodes: int, work: Path, index: int) -> dict[str, float]:
    out = work / f"run-{nodes}-{index}"
    env = {**os.environ, "NRL_LAUNCH_STATE_DIR": str(work / "state")}
    argv = [
        NRL_LAUNCH, "submit", "--wait", "-q", "--container-runtime", "none",
        "--log-dir", str(out / "jobs"), "--time", "15",
        "grpo", "--config", "examples/configs/grpo_tiny.yaml", f"cluster.num_nodes={nodes}",
        f"logger.log_dir={out / 'logs'}", f"checkpointing.checkpoint_dir={out / 'ckpt'}",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{nodes} node(s): the job failed:\n{done.stdout}{done.stderr}")
    (timings_file,) = (out / "jobs").glob("*-logs/timings.json")
    timings = json.loads(timings_file.read_text())
    started = timings["submitted_at"] + timings["phases"]["started"]
    (exp,) = (out / "logs").glob("exp_*")
    steps = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    placement = json.loads((exp / "placement.json").read_text())
    placed_at = (exp / "placement.json").stat().st_mtime
    steady = [s for s in steps[1:] if s["checkpoint_s"] == 0]
    return {
        "driver_started": timings["phases"]["driver_started"] - timings["phases"]["started"],
        "placed": placed_at - started,
        "first_step": steps[0]["time"] - started,
        "step": statistics.median(s["step_s"] for s in steady),
        "generation": statistics.median(s["generation_s"] for s in steady),
        "training": statistics.median(s["training_s"] for s in steady),
        "weight_sync": statistics.median(s["weight_sync_s"] for s in steady),
        "actors": placement["training"]["gpus"] + placement["generation"]["gpus"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    results: dict[int, list[dict[str, float]]] = {n: [] for n in args.nodes}
    with tempfile.TemporaryDirectory(prefix="nrl-grpo-bench-") as tmp:
        for index in range(args.runs):
            for nodes in args.nodes:
                results[nodes].append(one_run(nodes, Path(tmp), index))
                print(f"{nodes} node(s), run {index + 1}: {results[nodes][-1]}", file=sys.stderr)
    print(
        f"host: {platform.node()}, {os.cpu_count()} CPUs; "
        f"{args.runs} run(s) per node count, medians (s)"
    )
    keys = [
        "actors",
        "driver_started",
        "placed",
        "first_step",
        "step",
        "generation",
        "training",
        "weight_sync",
    ]
    print("| nodes | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for nodes, runs in results.items():
        cells = [f"{statistics.median(r[k] for r in runs):.2f}" for k in keys]
        print(f"| {nodes} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
