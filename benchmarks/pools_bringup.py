"""Do a job's model pools come up beside its training cluster, or after it? (issue 35)

Runs, interleaved, RUNS real jobs of each kind on the dev cluster (no container, Ray from
RAY_VENV) and reports medians from each job's timeline:

- `training alone`: a 1-node Ray job whose driver connects to Ray and exits: job start ->
  driver started.
- `with a pool`: the same job with a pool of 2 replicas (a server that takes LOAD_S seconds to
  start listening, standing for a model's load), each on a node of its own (a heterogeneous
  job): job start -> driver started, and job start -> the pool's last replica healthy (its
  balancer's pool-<name>.json: when each became healthy).

The driver waits for the pool, so with a pool it cannot start before max(training alone, the
pool's own start): the goal is within 1.10x of that, which holds only if the replicas load while
Ray comes up, not after it.

    scripts/dev-cluster up
    python benchmarks/pools_bringup.py [--runs 5] [--load-s 10] [--ray-venv .venv]

Needs root and the dev cluster; writes nothing outside a temp dir.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SCRIPT = Path(sys.executable).with_name("nrl-launch")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "nrl_launch"]
DRIVER = "import ray; ray.init(address='auto'); print(len(ray.nodes()), 'nodes')"
# A server that sleeps before it listens (a model's load), then answers every GET with 200.
SERVER = """\
import http.server, os, sys, time
time.sleep(float(sys.argv[1]))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
port = int(os.environ["NRL_POOL_PORT"])
http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
"""


def submit(work: Path, ray_venv: Path, load_s: float, *, pool: bool) -> Path:
    """Runs one job to its end; returns its log dir."""
    flags = ["--container-runtime", "none", "--set", f"setup=source {ray_venv}/bin/activate"]
    flags += ["--log-dir", str(work / "logs"), "--time", "10", "--set", "slurm.exclude=node3"]
    driver = ["python", "-c", DRIVER]
    if pool:
        spec = {
            "pools": {
                "bench": {
                    "replicas": 2,
                    "command": ["python", str(work / "server.py"), str(load_s)],
                    "balancer_port": 8100,
                    "startup_timeout_s": 600,
                    "required": True,
                }
            }
        }
        (work / "pool.yaml").write_text(json.dumps(spec))
        flags += ["-f", str(work / "pool.yaml")]
        driver = ["python", "-c", f"{DRIVER}  # __BENCH_URL__"]
    env = dict(os.environ, NRL_LAUNCH_STATE_DIR=str(work / "state"))
    done = subprocess.run(
        [*CLI, "submit", "--wait", "-q", *flags, "--", *driver],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"a job failed: {done.stdout}{done.stderr}")
    return work / "logs" / f"{done.stdout.strip()}-logs"


def timeline(log_dir: Path) -> dict[str, float]:
    phases = {}
    for line in (log_dir / "timeline").read_text().splitlines():
        name, _, at = line.partition(" ")
        phases.setdefault(name, float(at))
    return phases


def pool_up(log_dir: Path) -> float:
    """When the pool's last replica became healthy, by its balancer (epoch seconds)."""
    state = json.loads((log_dir / "pool-bench.json").read_text())
    return max(backend["since"] for backend in state["backends"])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load-s", type=float, default=10.0)
    parser.add_argument("--ray-venv", type=Path, default=Path(sys.prefix))
    args = parser.parse_args()
    alone: list[float] = []
    with_pool: list[float] = []
    pool_own: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nrl-pools-bench-", dir="/tmp") as tmp:
        work = Path(tmp)
        (work / "server.py").write_text(SERVER)
        for _ in range(args.runs):
            phases = timeline(submit(work, args.ray_venv, args.load_s, pool=False))
            alone.append(phases["driver_started"] - phases["started"])
            log_dir = submit(work, args.ray_venv, args.load_s, pool=True)
            phases = timeline(log_dir)
            with_pool.append(phases["driver_started"] - phases["started"])
            pool_own.append(pool_up(log_dir) - phases["started"])
    floor = [max(a, p) for a, p in zip(alone, pool_own, strict=True)]
    ratio = [w / f for w, f in zip(with_pool, floor, strict=True)]
    print(
        f"# Pools beside training, {args.runs} runs each, load {args.load_s:g} s "
        f"({time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f})\n"
    )
    print("| span | median s | min s | max s |")
    print("|---|---|---|---|")
    for name, values in [
        ("training alone: start -> driver started", alone),
        ("with a pool: start -> the pool's last replica healthy", pool_own),
        ("with a pool: start -> driver started", with_pool),
    ]:
        print(
            f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |"
        )
    print(
        f"\nwith a pool / max(training alone, the pool's own start), per run: "
        f"{', '.join(f'{r:.2f}' for r in ratio)}; median {statistics.median(ratio):.2f} "
        f"(goal <= 1.10: {'met' if statistics.median(ratio) <= 1.10 else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
