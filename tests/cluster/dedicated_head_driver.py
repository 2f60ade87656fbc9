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


@ray.remote(num_gpus=1)
def gpu_task() -> str:
    time.sleep(1)  # held together: the 16 tasks take every GPU at once
    return socket.gethostname()


ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
alive = [node for node in ray.nodes() if node["Alive"]]
here = ray.get_runtime_context().get_node_id()
report = {
    "driver_host": socket.gethostname(),
    "driver_node": next(n["NodeManagerHostname"] for n in alive if n["NodeID"] == here),
    "gpus": ray.cluster_resources().get("GPU", 0),
    "nodes": {n["NodeManagerHostname"]: n["Resources"] for n in alive},
    "gpu_tasks_ran_on": sorted(ray.get([gpu_task.remote() for _ in range(16)])),
}
print("DEDICATED " + json.dumps(report), flush=True)

release = Path(sys.argv[1])
deadline = time.monotonic() + 120
while not release.exists() and time.monotonic() < deadline:
    time.sleep(0.2)
