"""The driver of tests/cluster/test_scale.py: the nodes of the job's Ray (hostname, GPUs, alive)
and the job's Slurm steps as scontrol lists them, printed as one `SCALE <json>` line."""

import json
import os
import subprocess
from pathlib import Path

import ray

ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
nodes = {
    node["NodeManagerHostname"]: node["Resources"].get("GPU", 0)
    for node in ray.nodes()
    if node["Alive"]
}
# The driver runs inside the job: scontrol shows its running steps (head and workers). Its id
# from its log dir's name (<JOBID>-logs): the node step clears Slurm's variables, as ray.sub.
job = Path(os.environ["NRL_LOG_DIR"]).name.split("-")[0]
steps = subprocess.run(
    ["scontrol", "show", "step", "-o", job], capture_output=True, text=True, check=False
).stdout
print("SCALE " + json.dumps({"nodes": nodes, "steps": steps.splitlines()}), flush=True)
