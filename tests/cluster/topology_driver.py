"""The driver of tests/cluster/test_topology.py: for every node of the job's Ray, the custom
resources Ray reports for it and the GPU -> CPU file its workers are pointed at (read by a
task on that node), printed as one `TOPOLOGY <json>` line keyed by the node's hostname."""

import json
import os
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
def affinity_file() -> tuple[str, str | None]:
    path = os.environ.get("NRL_GPU_CPU_AFFINITY_FILE", "")
    if not path or not Path(path).exists():
        return path, None
    return path, Path(path).read_text()


ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
report = {}
for node in ray.nodes():
    if not node["Alive"]:
        continue
    on_node = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
    path, text = ray.get(affinity_file.options(scheduling_strategy=on_node).remote())
    report[node["NodeManagerHostname"]] = {
        "resources": node["Resources"],
        "affinity_file": path,
        "affinity": text,
    }
print("TOPOLOGY " + json.dumps(report), flush=True)
