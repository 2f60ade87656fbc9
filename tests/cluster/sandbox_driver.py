"""The driver of tests/cluster/test_sandbox.py: asks the sandbox on its own node, and through a
Ray task pinned to each other node the sandbox there, for GET /health at 127.0.0.1 on
$NEMO_SKILLS_SANDBOX_PORT (as NeMo Skills' client does), and prints one `SANDBOX <json>` line
keyed by node name. With an argument, then sleeps that many seconds (a job that keeps running
while a sandbox fails)."""

import json
import os
import sys
import time
import urllib.request

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def health() -> dict[str, str]:
    host = os.environ["NEMO_SKILLS_SANDBOX_HOST"]
    port = os.environ["NEMO_SKILLS_SANDBOX_PORT"]
    with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=10) as answer:
        return {
            "status": str(answer.status),
            "body": answer.read().decode().strip(),
            "port": port,
            "host": host,
            "at": f"{time.time():.3f}",
        }


@ray.remote(num_cpus=0)
def health_there() -> dict[str, str]:
    return health()


ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
me = ray.util.get_node_ip_address()
report = {}
for node in ray.nodes():
    if not node["Alive"]:
        continue
    name = node["NodeManagerHostname"]
    if node["NodeManagerAddress"] == me:
        report[name] = health()
    else:
        on_node = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        report[name] = ray.get(health_there.options(scheduling_strategy=on_node).remote())
print("SANDBOX " + json.dumps(report), flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
