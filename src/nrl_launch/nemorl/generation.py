"""Generation's GPUs and engines, as NeMo RL's GRPO, PPO and distillation setups size them.

- Colocated generation shares the training GPUs; non-colocated generation on one node takes
  `colocated.resources.gpus_per_node` GPUs of it and leaves the rest for training; on several
  nodes it takes `colocated.resources.num_nodes` whole nodes, each with the cluster's GPUs per
  node.
- The backends each algorithm runs at all (its setup in grpo.py, ppo.py, distillation.py): GRPO
  vllm, sglang, megatron, trtllm and dynamo; PPO vllm and sglang; distillation vllm and
  megatron. Non-colocated: GRPO every one but SGLang (its refit raises NotImplementedError;
  Megatron: a dedicated inference model with the training parallelism, overridable under
  `policy.generation.mcore_generation_config`), and Dynamo only so; PPO only vLLM;
  distillation only vLLM.
- vLLM's world must be divisible by its TP x PP; PP > 1 needs the async engine; EP is a multiple
  of TP.
- TensorRT-LLM and Dynamo: see `_trtllm` and `_dynamo`.
- SGLang, in two shapes (see `_sglang`): NeMo RL v0.7.0 and later size its engines from
  `sglang_cfg.sglang_server_config` (num_gpus, num_gpus_per_engine); v0.6.x from
  `sglang_cfg.gpus_per_server`.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from nrl_launch.nemorl.sizing import Reader, Training, algorithm, divides, megatron_sizes

__all__ = ["Generation", "sglang_training_problem", "size"]

G = "policy.generation"
SG = f"{G}.sglang_cfg"
SERVER = f"{SG}.sglang_server_config"


@dataclass(frozen=True)
class Generation:
    backend: str
    colocated: bool
    tp: int
    pp: int
    ep: int
    gpus: int
    instances: int | None  # engines: gpus / (tp x pp), None when it does not divide
    # The GPUs the engines run on, where fewer than `gpus` (SGLang's num_gpus); None: all.
    engine_gpus: int | None = None

    def describe(self) -> str:
        where = "colocated with training" if self.colocated else "on GPUs of its own"
        engines = f", {self.instances} engine(s)" if self.instances else ""
        if engines and self.engine_gpus is not None and self.engine_gpus < self.gpus:
            engines += f" on {self.engine_gpus} of them"
        ep = f" EP{self.ep}" if self.ep > 1 else ""
        return f"{self.backend} TP{self.tp} PP{self.pp}{ep} on {self.gpus} GPU(s){engines}, {where}"


@dataclass(frozen=True)
class _Engines:
    tp: int
    pp: int
    ep: int
    engines: int | None
    engine_gpus: int | None = None


def size(
    read: Reader, nodes: int, gpus: int, where: str, node: str = "the node"
) -> tuple[Generation | None, int, int]:
    """Generation's engines, the GPUs left for training, and the nodes generation takes whole
    (of the policy's `nodes`, which `where` names; on one node, of its `gpus`, which `node`
    names)."""
    total = nodes * gpus
    if not read.has(G):
        return None, total, 0  # SFT, DPO, RM: every GPU trains
    backend = read.lookup(f"{G}.backend")
    backend = backend if isinstance(backend, str) else "vllm"
    colocated = read.flag(f"{G}.colocated.enabled", True)
    train_gpus, gen_gpus, gen_nodes = total, total, 0
    runs = _backend_runs(read, backend, colocated)
    if not colocated:
        train_gpus, gen_gpus, gen_nodes = _split(read, nodes, gpus, where, node)
    gen_gpus = max(gen_gpus, 0)
    # The GPUs of each node generation has: the policy's, or on one node the ones it takes.
    per_node = gpus if colocated or nodes > 1 else gen_gpus
    # A backend the algorithm refuses is sized, to show it, but not checked as if it ran.
    checked = read if runs else Reader(read.lookup, read.present, read.raw)
    sizes = _sizes(checked, backend, colocated, gen_gpus, per_node)
    gen = Generation(
        backend,
        colocated,
        sizes.tp,
        sizes.pp,
        sizes.ep,
        gen_gpus,
        sizes.engines,
        sizes.engine_gpus,
    )
    return gen, max(train_gpus, 0), gen_nodes


def _sizes(read: Reader, backend: str, colocated: bool, gpus: int, per_node: int) -> _Engines:
    """The engines of `backend` on generation's `gpus`, `per_node` of them on each node."""
    if backend == "sglang":
        return _sglang(read, gpus, per_node)
    if backend == "trtllm":
        return _trtllm(read, gpus, per_node, colocated)
    if backend == "dynamo":
        return _dynamo(read, gpus, per_node, colocated)
    if backend == "megatron" and not colocated:
        # A dedicated inference model: the training's megatron_cfg, with what
        # mcore_generation_config sets over it.
        def key(name: str) -> str:
            own = f"{G}.mcore_generation_config.{name}"
            return own if read.has(own) else f"policy.megatron_cfg.{name}"

        what = "generation (Megatron)"
        m = megatron_sizes(read, gpus, key, what, f"{what} experts")
        return _Engines(m.tp, m.pp, m.ep, m.dp)
    # Colocated Megatron generation runs on the training model (layout.py sizes it so).
    return _vllm(read, gpus, check=backend == "vllm")


# The generation backends each algorithm's setup runs (grpo.py, ppo.py, distillation.py).
_RUNS = {
    "grpo": ("GRPO", ("vllm", "sglang", "megatron", "trtllm", "dynamo"), ""),
    "ppo": ("PPO", ("vllm", "sglang"), " (sglang colocated): use vllm"),
    "distillation": ("distillation", ("vllm", "megatron"), " (megatron colocated): use vllm"),
}


def _backend_runs(read: Reader, backend: str, colocated: bool) -> bool:
    """Whether the algorithm runs `backend` at all (a problem when not), and what it runs on
    GPUs of its own."""
    name = algorithm(read)
    label, runs, hint = _RUNS[name]
    if backend not in runs:
        listed = f"{', '.join(runs[:-1])} or {runs[-1]}"
        read.problems.append(
            f"{G}.backend={backend}: NeMo RL's {label} generates only with {listed}{hint}"
        )
        return False
    if colocated:
        return True
    if name == "distillation" and backend == "megatron":
        read.problems.append(
            f"{G}.backend=megatron cannot run without colocation in distillation: "
            f"set {G}.colocated.enabled=true or use vllm"
        )
    elif name == "ppo" and backend != "vllm":
        read.problems.append(
            f"{G}.backend={backend}: PPO runs non-colocated generation only on vllm: "
            f"set {G}.colocated.enabled=true or use vllm"
        )
    elif backend == "sglang":
        # grpo.py's refit_policy_generation (and distillation's): NotImplementedError.
        read.problems.append(
            f"{G}.backend=sglang cannot run without colocation (NeMo RL has not implemented "
            f"non-colocated SGLang): set {G}.colocated.enabled=true or use vllm"
        )
    return True


def _vllm(read: Reader, gpus: int, *, check: bool) -> _Engines:
    """vLLM's sizes and, with `check`, its checks."""
    v = f"{G}.vllm_cfg"
    tp = read.int(f"{v}.tensor_parallel_size", 1) or 1
    pp = read.int(f"{v}.pipeline_parallel_size", 1) or 1
    ep = read.int(f"{v}.expert_parallel_size", 1) or 1
    if not check:
        return _Engines(tp, pp, ep, None)
    engines = divides(
        read,
        "generation (vLLM)",
        gpus,
        tp * pp,
        f"{v}.tensor_parallel_size={tp} x pipeline_parallel_size={pp}",
    )
    if pp > 1 and not read.flag(f"{v}.async_engine", False):
        read.problems.append(f"{v}.pipeline_parallel_size={pp} needs {v}.async_engine=true")
    if ep > 1 and ep % tp:
        read.problems.append(
            f"{v}.expert_parallel_size={ep} must be a multiple of tensor_parallel_size={tp}"
        )
    if ep > 1 and ep != tp and read.flag(f"{v}.async_engine", False):
        read.problems.append(
            f"{v}.expert_parallel_size={ep} differs from tensor_parallel_size={tp}, which "
            f"the async engine does not support: set {v}.async_engine=false"
        )
    return _Engines(tp, pp, ep, engines)


def _trtllm(read: Reader, gpus: int, per_node: int, colocated: bool) -> _Engines:
    """TensorRT-LLM (trtllm/trtllm_generation.py, TrtllmGeneration): engines of
    `trtllm_cfg.tensor_parallel_size` GPUs, which must divide generation's world; no pipeline
    parallelism; MoE layers split TP into moe TP x moe EP; only the async engine. An engine
    larger than a node spans nodes (one placement group) only non-colocated; one within a node
    stays on it (a placement group per node), so it divides the node's GPUs."""
    t = f"{G}.trtllm_cfg"
    tp = read.required(f"{t}.tensor_parallel_size", "NeMo RL sizes TRT-LLM's engines from it")
    if tp is None:
        return _Engines(1, 1, 1, None)
    pp = read.int(f"{t}.pipeline_parallel_size", 1) or 1
    moe_tp = read.int(f"{t}.moe_tensor_parallel_size", None)
    moe_ep = read.int(f"{t}.moe_expert_parallel_size", None)
    if pp != 1:
        read.problems.append(
            f"{t}.pipeline_parallel_size={pp}: NeMo RL's TRT-LLM backend has no pipeline "
            "parallelism (set it to 1)"
        )
    if (moe_tp or moe_ep) and (moe_tp or 1) * (moe_ep or 1) != tp:
        read.problems.append(
            f"{t}.moe_tensor_parallel_size={moe_tp or 1} x moe_expert_parallel_size="
            f"{moe_ep or 1} must equal tensor_parallel_size={tp}"
        )
    if not read.flag(f"{t}.async_engine", False):
        read.problems.append(
            f"{t}.async_engine must be true: NeMo RL runs TRT-LLM only with its async engine"
        )
    engines = divides(read, "generation (TRT-LLM)", gpus, tp, f"{t}.tensor_parallel_size={tp}")
    if engines and colocated and tp > per_node:
        read.problems.append(
            f"{t}.tensor_parallel_size={tp} is more than a node's {per_node} GPU(s): NeMo RL "
            "runs TRT-LLM's TP across nodes only non-colocated"
        )
        engines = None
    elif engines and tp <= per_node and per_node % tp:
        read.problems.append(
            f"{t}.tensor_parallel_size={tp} does not divide a node's {per_node} GPU(s): NeMo RL "
            "keeps an engine no larger than a node on one node"
        )
        engines = None
    return _Engines(tp, pp, moe_ep or 1, engines)


def _dynamo(read: Reader, gpus: int, per_node: int, colocated: bool) -> _Engines:
    """Dynamo (dynamo/config.py's DynamoConfig, managed_runtime.py, worker_pool.py): vLLM
    engines of vllm_cfg's TP x PP GPUs, each on one node, on GPUs of their own; so they divide
    each node's generation GPUs. EP is 1 or TP. GRPO refuses in-flight weight updates with it
    (grpo.py's setup: it drains rollouts before a refit)."""
    v = f"{G}.vllm_cfg"
    if colocated:
        read.problems.append(
            f"{G}.backend=dynamo needs {G}.colocated.enabled=false: NeMo RL runs Dynamo's "
            "engines only on GPUs of their own"
        )
    if algorithm(read) == "grpo" and read.flag("grpo.async_grpo.in_flight_weight_updates", False):
        read.problems.append(
            "grpo.async_grpo.in_flight_weight_updates=true: NeMo RL's Dynamo backend drains "
            "rollouts before each refit (set it to false)"
        )
    sizes = {
        name: read.required(f"{v}.{name}", "NeMo RL's Dynamo backend requires it")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "expert_parallel_size")
    }
    tp = sizes["tensor_parallel_size"] or 1
    pp = sizes["pipeline_parallel_size"] or 1
    ep = sizes["expert_parallel_size"] or 1
    if ep not in (1, tp):
        read.problems.append(
            f"{v}.expert_parallel_size={ep} must be 1 or tensor_parallel_size={tp} with "
            f"{G}.backend=dynamo"
        )
    if colocated or per_node <= 0 or None in sizes.values():
        return _Engines(tp, pp, ep, None)
    names = f"{v}.tensor_parallel_size={tp} x pipeline_parallel_size={pp}"
    if tp * pp > per_node:
        read.problems.append(
            f"{names} is more than a node's {per_node} generation GPU(s): NeMo RL runs each "
            "Dynamo engine on one node"
        )
    elif per_node % (tp * pp):
        read.problems.append(
            f"{names} does not divide a node's {per_node} generation GPU(s): NeMo RL runs each "
            "Dynamo engine on one node"
        )
    else:
        return _Engines(tp, pp, ep, gpus // (tp * pp))
    return _Engines(tp, pp, ep, None)


def _sglang(read: Reader, gpus: int, per_node: int) -> _Engines:
    """SGLang's engines on generation's `gpus` (`per_node` of them on each node), in the shape
    the config has: NeMo RL v0.7.0 and later (the SGLang rollout refactor, #2267) read
    sglang_cfg.sglang_server_config; v0.6.x (SGLang's first release, #1674) read
    sglang_cfg.gpus_per_server."""
    if read.has(SERVER):
        return _sglang_engines(read, gpus, per_node)
    if read.has(f"{SG}.gpus_per_server"):
        return _sglang_servers(read, gpus, per_node)
    read.problems.append(
        f"{SERVER} is not set: NeMo RL sizes SGLang's engines from its num_gpus and "
        f"num_gpus_per_engine (releases before v0.7.0: from {SG}.gpus_per_server)"
    )
    return _Engines(1, 1, 1, None)


def _sglang_engines(read: Reader, gpus: int, per_node: int) -> _Engines:
    """NeMo RL v0.7.0 and later (sglang_generation.py): `num_gpus` GPUs of generation's run
    engines of `num_gpus_per_engine` GPUs each, an engine larger than a node spanning whole
    nodes; each engine's SGLang server runs TP = num_gpus_per_engine / PP (sglang_worker.py)."""
    tp = read.int(f"{SG}.tp_size", 1) or 1
    pp = read.int(f"{SG}.pp_size", 1) or 1
    ep = read.int(f"{SG}.ep_size", 1) or 1
    why = "NeMo RL sizes SGLang's engines from it"
    used = read.required(f"{SERVER}.num_gpus", why)
    engine = read.required(f"{SERVER}.num_gpus_per_engine", why)
    if engine is None or used is None:
        return _Engines(tp, pp, ep, None)
    if tp != engine // pp:
        read.problems.append(
            f"{SG}.tp_size={tp} must equal {SERVER}.num_gpus_per_engine={engine} / pp_size={pp}"
        )
    if per_node <= 0 or gpus <= 0:
        return _Engines(tp, pp, ep, None)
    if engine > per_node and engine % per_node:
        read.problems.append(
            f"{SERVER}.num_gpus_per_engine={engine} is more than a node's {per_node} GPU(s) "
            f"and not a multiple of it: an engine larger than a node takes whole nodes"
        )
        return _Engines(tp, pp, ep, None)
    local = min(engine, per_node)  # an engine's GPUs on each node it runs on
    count = used // local  # an engine's share of each of its nodes, as NeMo RL counts them
    spans = max(1, engine // per_node)  # the nodes of one engine
    problem = None
    if count == 0:
        problem = f"is less than num_gpus_per_engine={engine}: no engine starts"
    elif count % spans:
        problem = (
            f"holds {count / spans:g} engine(s) of num_gpus_per_engine={engine}: the last one "
            "would be cut short"
        )
    elif count * local > gpus:
        problem = (
            f"is more than generation's {gpus} GPU(s): its engines of {engine} GPU(s) do not fit"
        )
    elif any(i * local // per_node != ((i + 1) * local - 1) // per_node for i in range(count)):
        # Engines sit side by side on the nodes' GPUs; one node's SGLang server each.
        problem = (
            f"puts an engine of num_gpus_per_engine={engine} across two nodes of {per_node} "
            "GPU(s): an engine smaller than a node must divide it"
        )
    if problem:
        read.problems.append(f"{SERVER}.num_gpus={used} {problem}")
        return _Engines(tp, pp, ep, None)
    return _Engines(tp, pp, ep, count // spans, count * local)


def _sglang_servers(read: Reader, gpus: int, per_node: int) -> _Engines:
    """NeMo RL v0.6.x: servers of `gpus_per_server` GPUs, each on one node, as many as
    generation's GPUs hold (leftover GPUs idle)."""
    key = f"{SG}.gpus_per_server"
    pp = read.int(f"{SG}.pp_size", 1) or 1
    ep = read.int(f"{SG}.ep_size", 1) or 1
    server = read.required(key, "SGLang needs the GPUs of each server")
    if server is None:
        return _Engines(1, pp, ep, None)
    if server > gpus:
        read.problems.append(f"{key}={server} is more than generation's {gpus} GPU(s)")
    elif server > per_node:
        read.problems.append(
            f"{key}={server} is more than a node's {per_node} GPU(s): a server runs on one node"
        )
    elif gpus // server > gpus // per_node * (per_node // server):
        read.problems.append(
            f"{key}={server}: {gpus // server} server(s) of generation's {gpus} GPU(s) do not "
            f"fit on its nodes of {per_node} GPU(s) (a server runs on one node)"
        )
    else:
        servers = gpus // server
        return _Engines(server, pp, ep, servers, servers * server)
    return _Engines(server, pp, ep, None)


def _split(read: Reader, nodes: int, gpus: int, where: str, node: str) -> tuple[int, int, int]:
    """Non-colocated: (training GPUs, generation GPUs, generation's whole nodes); on one node,
    `node` names its GPUs the policy has."""
    res = "policy.generation.colocated.resources"
    res_gpus = read.int(f"{res}.gpus_per_node", None)
    res_nodes = read.int(f"{res}.num_nodes", None)
    if nodes == 1:
        if res_nodes not in (None, 1):
            read.problems.append(
                f"{res}.num_nodes={res_nodes}: the cluster has one node ({where}); "
                "generation takes GPUs of it (set num_nodes to null or 1)"
            )
        taken = _taken(
            read,
            f"{res}.gpus_per_node",
            res_gpus,
            gpus,
            f"GPUs of {node}",
            "on one node non-colocated generation takes that many of its GPUs",
        )
        return gpus - taken, taken, 0
    if res_gpus != gpus:
        given = "is not set" if res_gpus is None else f"is {res_gpus}"
        read.problems.append(
            f"{res}.gpus_per_node {given}; it must equal cluster.gpus_per_node={gpus}: "
            "on several nodes generation takes whole nodes"
        )
    taken = _taken(
        read,
        f"{res}.num_nodes",
        res_nodes,
        nodes,
        f"nodes ({where})",
        f"on {nodes} nodes ({where}) non-colocated generation takes whole nodes",
    )
    return (nodes - taken) * gpus, taken * gpus, taken


def _taken(read: Reader, key: str, share: int | None, have: int, of: str, unset: str) -> int:
    """How many of the `have` GPUs or nodes generation takes by `key` (0 when unset), leaving
    training at least one: each way it does not is one problem."""
    if share is None:
        read.problems.append(f"{key} must be > 0: {unset}")
        return 0
    if share >= have:
        read.problems.append(f"{key}={share} takes all {have} {of}: none are left for training")
    return min(share, have)


def sglang_training_problem(read: Reader, training: Training) -> None:
    """NeMo RL v0.7.0 and later stream the weights to SGLang only from FSDP2 training on the
    DTensor v2 worker: the Megatron and DTensor v1 workers raise NotImplementedError when
    GRPO's setup hands them the engines' size. (An algorithm that runs no SGLang at all has
    said so: see `_backend_runs`.)"""
    if read.lookup(f"{G}.backend") != "sglang" or not read.has(SERVER):
        return
    if "sglang" not in _RUNS[algorithm(read)][1]:
        return
    if training.backend == "megatron":
        read.problems.append(
            f"{G}.backend=sglang needs FSDP2 training (policy.dtensor_cfg with _v2=true): "
            "NeMo RL does not refit SGLang from Megatron (policy.megatron_cfg.enabled=true)"
        )
    elif read.lookup("policy.dtensor_cfg._v2") is not True:
        read.problems.append(
            f"{G}.backend=sglang needs policy.dtensor_cfg._v2=true: NeMo RL refits SGLang "
            "only from the DTensor v2 worker"
        )
