"""Placing the work on every GPU of the allocation, as NeMo RL's virtual cluster does.

One placement group per node (STRICT_PACK, one bundle per GPU), so each bundle's node is known.
Training ranks and generation ranks go into bundles as the layout (nrl-launch's, from the
config) says: colocated, a training rank and a generation rank share every GPU (half a GPU
each); non-colocated, generation gets its GPUs on one node, or its whole nodes, apart. Then
every bundle must carry work, or the run stops.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, placement_group_table
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from nrl_launch.nemorl.layout import Layout
from tiny_rl.workers import GenerationWorker, TrainWorker


def connect(address: str) -> None:
    """Join the job's Ray. Actors run this driver's own interpreter (its uv environment, on
    shared storage), not the Python Ray was started from; Ray's own `uv run` hook, which would
    ship the project dir to every worker and run `uv run` there, is turned off as NeMo RL does."""
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    ray.init(
        address=address,
        # c10d warns on every connection that a node's hostname does not resolve to it (as in
        # the dev cluster's namespaces); the rendezvous uses addresses, so that is noise.
        runtime_env={"py_executable": sys.executable, "env_vars": {"TORCH_CPP_LOG_LEVEL": "ERROR"}},
        log_to_driver=True,
        logging_level="WARNING",
    )


@dataclass
class Slot:
    node: int  # index of the node (placement group)
    gpu: int  # bundle index on that node
    pg: PlacementGroup


def reserve(nodes: int, gpus_per_node: int, timeout_s: float = 120) -> list[list[Slot]]:
    """A placement group per node; waits until Ray has placed them all."""
    groups = [
        placement_group([{"GPU": 1}] * gpus_per_node, strategy="STRICT_PACK") for _ in range(nodes)
    ]
    ready = [pg.ready() for pg in groups]
    done, pending = ray.wait(ready, num_returns=len(ready), timeout=timeout_s)
    if pending:
        raise RuntimeError(
            f"Ray placed {len(done)} of {nodes} node(s) x {gpus_per_node} GPU(s) "
            f"in {timeout_s:.0f} s: "
            f"the cluster has {ray.cluster_resources().get('GPU', 0):.0f} GPU(s) "
            "(cluster.num_nodes / cluster.gpus_per_node must match the job)"
        )
    # Distinct nodes: with STRICT_PACK two groups could share a big node; order them by node.
    node_of = {id(pg): placement_group_table(pg)["bundles_to_node_id"][0] for pg in groups}
    if len(set(node_of.values())) != nodes:
        raise RuntimeError(f"the {nodes} node placement groups landed on fewer nodes")
    return [[Slot(i, g, pg) for g in range(gpus_per_node)] for i, pg in enumerate(groups)]


@dataclass
class Assignment:
    train: list[Slot]
    engines: list[list[Slot]]  # each engine's TP ranks, on one node
    share: float  # GPU fraction each actor takes (0.5 colocated)


def assign(layout: Layout, slots: list[list[Slot]]) -> Assignment:
    gen = layout.generation
    flat = [s for node in slots for s in node]
    if gen is None:
        return Assignment(flat, [], 1.0)
    tp = gen.tp
    if gen.colocated:
        return Assignment(flat, _engines(slots, tp), 0.5)
    if len(slots) == 1:
        train_gpus = layout.nodes_layout[0].training_gpus
        train, rest = slots[0][:train_gpus], slots[0][train_gpus:]
        return Assignment(train, _engines([rest], tp), 1.0)
    train_nodes = sum(1 for role in layout.nodes_layout if role.training_gpus)
    train = [s for node in slots[:train_nodes] for s in node]
    return Assignment(train, _engines(slots[train_nodes:], tp), 1.0)


def _engines(nodes: Sequence[list[Slot]], tp: int) -> list[list[Slot]]:
    engines = []
    for node in nodes:
        if len(node) % tp:
            raise RuntimeError(
                f"vLLM TP {tp} does not divide the {len(node)} generation GPU(s) of a node"
            )
        engines += [node[i : i + tp] for i in range(0, len(node), tp)]
    return engines


def start(cls: type, slot: Slot, share: float) -> Any:
    strategy = PlacementGroupSchedulingStrategy(
        placement_group=slot.pg, placement_group_bundle_index=slot.gpu
    )
    return ray.remote(num_cpus=0, num_gpus=share, scheduling_strategy=strategy)(cls).remote()


def form_group(actors: list[Any]) -> str:
    """One torch.distributed world over `actors`; returns its backend."""
    address = ray.get(actors[0].rendezvous.remote())
    backends = ray.get([a.join.remote(address, rank, len(actors)) for rank, a in enumerate(actors)])
    return str(backends[0])


@dataclass
class Workers:
    train: list[Any]
    engines: list[list[Any]]
    placement: dict[str, Any]
    started_s: float


def launch(layout: Layout, model: dict[str, Any], seed: int, optim: dict[str, Any]) -> Workers:
    """Every actor placed, grouped and set up; the placement checked and described."""
    began = time.perf_counter()
    slots = reserve(layout.cluster_nodes, layout.gpus_per_node)
    plan = assign(layout, slots)
    train = [start(TrainWorker, s, plan.share) for s in plan.train]
    engines = [[start(GenerationWorker, s, plan.share) for s in engine] for engine in plan.engines]
    backend = form_group(train)
    for engine in engines:
        form_group(engine)
    ray.get(
        [a.setup.remote(model, seed, optim["lr"], optim.get("weight_decay", 0.0)) for a in train]
    )
    ray.get([a.setup.remote(model) for engine in engines for a in engine])
    placement = describe(layout, plan, train, engines, backend)
    return Workers(train, engines, placement, time.perf_counter() - began)


def describe(
    layout: Layout, plan: Assignment, train: list[Any], engines: list[list[Any]], backend: str
) -> dict[str, Any]:
    """Where each rank runs, by Ray's own account; raises unless every GPU carries work."""
    train_at = ray.get([a.where.remote() for a in train])
    gen_at = [ray.get([a.where.remote() for a in engine]) for engine in engines]
    work: dict[tuple[int, int], list[str]] = {}
    for rank, slot in enumerate(plan.train):
        work.setdefault((slot.node, slot.gpu), []).append(f"train rank {rank}")
    for e, engine in enumerate(plan.engines):
        for tp_rank, slot in enumerate(engine):
            work.setdefault((slot.node, slot.gpu), []).append(
                f"generation engine {e} TP rank {tp_rank}"
            )
    idle = [
        f"node {n} GPU {g}"
        for n in range(layout.cluster_nodes)
        for g in range(layout.gpus_per_node)
        if (n, g) not in work
    ]
    if idle:
        raise RuntimeError(f"no work placed on {', '.join(idle)}")
    nodes = []
    for n in range(layout.cluster_nodes):
        hosts = {t["hostname"] for t, s in zip(train_at, plan.train, strict=True) if s.node == n}
        hosts |= {
            w["hostname"]
            for ws, e in zip(gen_at, plan.engines, strict=True)
            for w, s in zip(ws, e, strict=True)
            if s.node == n
        }
        nodes.append(
            {
                "node": n,
                "hostname": sorted(hosts)[0] if hosts else None,
                "training_gpus": sum(1 for s in plan.train if s.node == n),
                "generation_gpus": sum(1 for e in plan.engines for s in e if s.node == n),
                "gpus": {str(g): work[(n, g)] for g in range(layout.gpus_per_node)},
            }
        )
    gen = layout.generation
    return {
        "backend": backend,
        "training": {"gpus": len(train), "dp": len(train), "tp": 1},
        "generation": {
            "gpus": sum(len(e) for e in engines),
            "tp": gen.tp if gen else 0,
            "engines": len(engines),
            "colocated": bool(gen and gen.colocated),
        },
        "nodes": nodes,
        "actors": {"train": train_at, "generation": gen_at},
    }
