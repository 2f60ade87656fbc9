"""A driver that checks the Ray cluster it runs on: every node with its GPUs and CPUs, then one
actor per GPU placed with a placement group. Exits non-zero when the cluster is not what was
asked for.

    python examples/cluster_check.py [--nodes N] [--gpus-per-node G] [--exit-code C]
"""

from __future__ import annotations

import argparse
import socket
import sys

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_gpus=1, num_cpus=0)
class GpuActor:
    def where(self) -> tuple[str, str]:
        gpu_ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        return socket.gethostname(), ",".join(gpu_ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, help="fail unless exactly this many nodes joined")
    parser.add_argument("--gpus-per-node", type=int, help="fail unless each node has these GPUs")
    parser.add_argument("--exit-code", type=int, default=0, help="exit with this code at the end")
    args = parser.parse_args()

    ray.init(address="auto")  # as NeMo RL's drivers connect
    nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeManagerHostname"])
    for n in nodes:
        res = n["Resources"]
        print(
            f"node {n['NodeManagerHostname']} {n['NodeManagerAddress']}: "
            f"{res.get('GPU', 0):g} GPUs, {res.get('CPU', 0):g} CPUs",
            flush=True,
        )
    if args.nodes is not None and len(nodes) != args.nodes:
        print(f"FAIL: {len(nodes)} nodes joined, expected {args.nodes}", flush=True)
        return 1
    gpus = [int(n["Resources"].get("GPU", 0)) for n in nodes]
    if args.gpus_per_node is not None and any(g != args.gpus_per_node for g in gpus):
        print(f"FAIL: GPUs per node {gpus}, expected {args.gpus_per_node} each", flush=True)
        return 1

    total = sum(gpus)
    group = placement_group([{"GPU": 1}] * total, strategy="PACK")
    ray.get(group.ready(), timeout=120)
    actors = [
        GpuActor.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=i
            )
        ).remote()
        for i in range(total)
    ]
    placed = ray.get([a.where.remote() for a in actors])
    per_node: dict[str, int] = {}
    for host, _ in placed:
        per_node[host] = per_node.get(host, 0) + 1
    print(f"placed {len(placed)} actors, one per GPU: {dict(sorted(per_node.items()))}", flush=True)
    remove_placement_group(group)
    if len(set(placed)) != total:
        print("FAIL: two actors share a GPU", flush=True)
        return 1
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
