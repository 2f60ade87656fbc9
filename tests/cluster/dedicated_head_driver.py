"""The driver of tests/cluster/test_dedicated_head.py: where it runs, what Ray reports for every
node (its GPUs and custom resources), and where 16 one-GPU tasks run at once, printed as one
`DEDICATED <json>` line; then it waits (bounded) for the file named by its argument, so that the
test can look at the running job. Only the standard library and Ray."""

import json
import socket
import sys
import time
from pathlib import Path

import ray


@ray.remote(num_cpus=0)
class Barrier:
    """Opens once `parties` tasks have arrived."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived = parties, 0

    def arrive(self) -> None:
        self.arrived += 1

    def is_open(self) -> bool:
        return self.arrived >= self.parties


@ray.remote(num_gpus=1)
def gpu_task(barrier: "ray.actor.ActorHandle") -> str:
    # Held until all 16 run at once, so together they take every GPU: a task that ended early
    # would free its GPU for another (a sleep of a second did not hold them while the other
    # node's workers were still starting, on 2 shared cores).
    ray.get(barrier.arrive.remote())
    deadline = time.monotonic() + 120
    while not ray.get(barrier.is_open.remote()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return socket.gethostname()


ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
alive = [node for node in ray.nodes() if node["Alive"]]
here = ray.get_runtime_context().get_node_id()
barrier = Barrier.remote(16)
report = {
    "driver_host": socket.gethostname(),
    "driver_node": next(n["NodeManagerHostname"] for n in alive if n["NodeID"] == here),
    "gpus": ray.cluster_resources().get("GPU", 0),
    "nodes": {n["NodeManagerHostname"]: n["Resources"] for n in alive},
    "gpu_tasks_ran_on": sorted(ray.get([gpu_task.remote(barrier) for _ in range(16)])),
}
print("DEDICATED " + json.dumps(report), flush=True)

release = Path(sys.argv[1])
deadline = time.monotonic() + 120
while not release.exists() and time.monotonic() < deadline:
    time.sleep(0.2)
