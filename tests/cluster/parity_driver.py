"""The driver of tests/cluster/test_ray_sub_parity.py: what each node's Ray workers were given
(the external debugger, the GCS settings) and what the driver was told about the job's start,
printed as one `PARITY <json>` line."""

import json
import os

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

SETTINGS = ("RAY_gcs_server_rpc_server_thread_num", "RAY_num_server_call_thread")


@ray.remote(num_cpus=0)
def on_node() -> dict[str, object]:
    worker = ray._private.worker.global_worker  # where Ray keeps the flag
    return {
        "debugger_external": worker.ray_debugger_external,
        **{name: os.environ.get(name) for name in SETTINGS},
    }


ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
nodes = {}
for node in ray.nodes():
    if node["Alive"]:
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        nodes[node["NodeManagerHostname"]] = ray.get(
            on_node.options(scheduling_strategy=strategy).remote()
        )
epochs = {name: os.environ.get(name) for name in ("NRL_JOB_START_EPOCH", "NRL_RAY_READY_EPOCH")}
print("PARITY " + json.dumps({"nodes": nodes, "driver": epochs}), flush=True)
