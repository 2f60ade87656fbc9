"""The driver of test_attacks.py's job: an actor on every node (so that every node's core worker
ports are open for the attacker to knock on), then `READY-FOR-ATTACKS`, then it waits until the
test says go (GO_FILE appears) and ends with exit code 0.

    python3 attack_driver.py GO_FILE NODES

It also says whether the job's secret reached it (by name: a secret's value is never printed).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import ray


@ray.remote(num_cpus=1)
class Idle:
    def node(self) -> str:
        return os.environ.get("SLURMD_NODENAME", "")


def main() -> None:
    go, nodes = Path(sys.argv[1]), int(sys.argv[2])
    ray.init(address="auto")
    strategy = "SPREAD"
    actors = [Idle.options(scheduling_strategy=strategy).remote() for _ in range(nodes)]  # type: ignore[attr-defined]
    on = sorted(ray.get([a.node.remote() for a in actors]))
    print(f"actors on {on}", flush=True)
    print(f"HF_TOKEN reached the driver: {bool(os.environ.get('HF_TOKEN'))}", flush=True)
    print("READY-FOR-ATTACKS", flush=True)
    deadline = time.monotonic() + 600
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    print(f"go: {go.exists()}", flush=True)


if __name__ == "__main__":
    main()
