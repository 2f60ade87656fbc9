"""The driver of tests/cluster/test_ray_sub_parity.py: what each node's Ray workers were given
(the external debugger, the GCS settings) and what the driver was told about the job's start,
printed as one `PARITY <json>` line."""

import json
import os

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

SETTINGS = ("RAY_gcs_server_rpc_server_thread_num", "RAY_num_server_call_thread")


# What a worker must not take from the Slurm step (as ray.sub clears it): MPI's and Slurm's.
CLEARED = ("PMI_", "PMIX_", "MPI_", "OMPI_", "SLURM_")


def step_env() -> dict[str, object]:
    """What this process has of the step's environment, and its open-files limit."""
    import resource

    return {
        "step_vars": sorted(n for n in os.environ if n.startswith(CLEARED)),
        "CI": os.environ.get("CI"),
        # The job's spec reaches the batch step only, which writes spec.json and unsets it.
        "job_spec_env": "NRL_JOB_SPEC" in os.environ,
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "compile_cache": os.environ.get("TRITON_CACHE_DIR"),
    }


@ray.remote(num_cpus=0)
def on_node() -> dict[str, object]:
    worker = ray._private.worker.global_worker  # where Ray keeps the flag
    return {
        "debugger_external": worker.ray_debugger_external,
        **{name: os.environ.get(name) for name in SETTINGS},
        **step_env(),
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
print("PARITY " + json.dumps({"nodes": nodes, "driver": {**epochs, **step_env()}}), flush=True)
