"""The GPU arithmetic of a NeMo RL config, done before queueing instead of minutes into a job.

NeMo RL checks these rules in Python once the Ray cluster is up (`ResourceInsufficientError`,
"Maximum number of retries"); here they run on the config alone. Pure: no I/O.

- Training runs on `cluster.num_nodes x cluster.gpus_per_node` GPUs, less what non-colocated
  generation takes; that world must be divisible by TP x CP x PP (DTensor: PP is 1).
- Generation, colocated or on GPUs of its own, and its engines: generation.py.
- Non-colocated on-policy distillation teachers (`on_policy_distillation.non_colocated_teachers`,
  one per distinct teacher model) take whole nodes of `cluster.num_nodes`; the policy (training
  and generation) gets the rest.
- A reward model environment (`env.reward_model`, when a data set of `data.train`,
  `data.validation` or `data.default` has `env_name: reward_model`) takes
  `env.reward_model.resources.num_nodes` whole nodes of `cluster.num_nodes`; on a one-node
  cluster it takes `resources.gpus_per_node` GPUs of that node instead (GRPO's and PPO's setup).
- NeMo Gym GPU nodes are Slurm nodes beyond `cluster.num_nodes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from nrl_launch.nemorl import generation as gen
from nrl_launch.nemorl.config import MISSING
from nrl_launch.nemorl.generation import Generation
from nrl_launch.nemorl.sizing import Lookup, Reader, Training, algorithm, divides, megatron_sizes

__all__ = ["Generation", "Layout", "NodeRole", "RewardModel", "Teacher", "Training", "compute"]


@dataclass(frozen=True)
class Teacher:
    """A non-colocated on-policy distillation teacher: Megatron inference on nodes of its own."""

    alias: str
    model: str
    nodes: int
    gpus_per_node: int
    tp: int
    cp: int
    pp: int

    def describe(self) -> str:
        gpus = f"{self.nodes} node(s) x {self.gpus_per_node} GPU(s)"
        return (
            f"{self.alias} ({self.model}): Megatron TP{self.tp} CP{self.cp} PP{self.pp} on {gpus}"
        )


@dataclass(frozen=True)
class RewardModel:
    """A reward model environment: its own nodes of `cluster.num_nodes`, or on a one-node
    cluster GPUs of the policy's node (`shares_node`)."""

    model: str
    nodes: int
    gpus_per_node: int
    shares_node: bool

    def describe(self) -> str:
        if self.shares_node:
            return f"{self.model}: {self.gpus_per_node} GPU(s) of the policy's node"
        return f"{self.model}: {self.nodes} node(s) x {self.gpus_per_node} GPU(s)"


@dataclass(frozen=True)
class NodeRole:
    """What one Slurm node of the job does. Which physical node takes which role is Ray's choice;
    the counts are what the config fixes."""

    node: int
    role: str  # training+generation, training, generation, reward-model, teacher, nemo-gym
    training_gpus: int
    generation_gpus: int


@dataclass(frozen=True)
class Layout:
    cluster_nodes: int  # cluster.num_nodes: the nodes NeMo RL's Ray cluster trains and generates on
    gpus_per_node: int
    extra_nodes: tuple[tuple[int, str], ...]  # (count, why): Slurm nodes beyond cluster.num_nodes
    training: Training | None
    generation: Generation | None
    nodes_layout: tuple[NodeRole, ...]
    problems: tuple[str, ...]
    teachers: tuple[Teacher, ...] = ()  # on nodes of cluster.num_nodes, not extra ones
    reward_model: RewardModel | None = None  # on nodes of cluster.num_nodes, too

    @property
    def nodes(self) -> int:
        return self.cluster_nodes + sum(count for count, _ in self.extra_nodes)

    @property
    def training_gpus(self) -> int:
        return self.training.gpus if self.training else 0

    @property
    def generation_gpus(self) -> int:
        return self.generation.gpus if self.generation else 0

    def node_roles(self, dedicated_head: bool) -> list[NodeRole]:
        """What each Slurm node of the job does, by its index in the job (as attach and logs
        name it): with a dedicated head (ray.dedicated_head), node 0 is the head and the GPU
        nodes follow it."""
        if not dedicated_head:
            return list(self.nodes_layout)
        head = NodeRole(0, "ray-head", 0, 0)
        return [head, *(replace(role, node=role.node + 1) for role in self.nodes_layout)]


def compute(
    lookup: Lookup,
    present: Callable[[str], bool] | None = None,
    raw: Callable[[str], Any] | None = None,
) -> Layout:
    """The layout and the problems of a config: `lookup` gives a key's resolved value (e.g.
    NemoConfig.value), `present` whether the key is there and not null, resolved or not (e.g.
    NemoConfig.present; by default, from `lookup`), `raw` its text unresolved (e.g.
    NemoConfig.raw), to name a value that does not resolve."""

    def resolved_present(key: str) -> bool:
        return lookup(key) not in (MISSING, None)

    read = Reader(lookup, present or resolved_present, raw)
    nodes = read.required(
        "cluster.num_nodes", "give it in the config (cluster.num_nodes=N) or --nodes"
    )
    gpus = read.required(
        "cluster.gpus_per_node",
        "give it in the config (cluster.gpus_per_node=N) or --gpus-per-node",
    )
    if nodes is None or gpus is None:
        return Layout(0, 0, (), None, None, (), tuple(read.problems))
    extra = []
    gym = read.int("env.nemo_gym.num_gpu_nodes", 0, low=0)
    if gym:
        extra.append((gym, "NeMo Gym GPU node(s) (env.nemo_gym.num_gpu_nodes)"))
    segment = read.int("cluster.segment_size", None)
    if segment and nodes % segment:
        read.problems.append(
            f"cluster.segment_size={segment} does not divide cluster.num_nodes={nodes}"
        )

    share = _share(read, nodes, gpus, gym)
    if share.policy_nodes < 1 or share.policy_gpus < 1:  # nothing left for the policy
        return Layout(
            nodes,
            gpus,
            tuple(extra),
            None,
            None,
            tuple(share.others),
            tuple(read.problems),
            tuple(share.teachers),
            share.reward_model,
        )
    policy_nodes, policy_gpus = share.policy_nodes, share.policy_gpus
    generation, train_gpus, gen_nodes = gen.size(
        read, policy_nodes, policy_gpus, share.where, share.node
    )
    training = _training(read, "policy", train_gpus)
    gen.sglang_training_problem(read, training)
    if generation and generation.backend == "megatron" and generation.colocated:
        # Colocated Megatron generation runs on the training model, with its parallelism.
        generation = replace(
            generation, tp=training.tp, pp=training.pp, ep=training.ep, instances=training.dp
        )
    # Models that train beside the policy, on the same GPUs: distillation's teacher, PPO's value.
    for section in ("teacher", "value"):
        if read.has(section):
            _training(read, section, train_gpus)
    roles = _roles(policy_nodes, policy_gpus, generation, train_gpus, gen_nodes)
    return Layout(
        nodes,
        gpus,
        tuple(extra),
        training,
        generation,
        tuple(roles + share.others),
        tuple(read.problems),
        tuple(share.teachers),
        share.reward_model,
    )


@dataclass(frozen=True)
class _Share:
    """What of cluster.num_nodes the policy (training and generation) gets: its nodes and the
    GPUs of each, `where` naming them for the problems; the others' roles (reward model,
    teachers, NeMo Gym) and what took them. No nodes or no GPUs: nothing is left."""

    policy_nodes: int
    policy_gpus: int
    where: str
    others: list[NodeRole]
    teachers: list[Teacher]
    reward_model: RewardModel | None
    node: str = "the node"  # the GPUs of one node the policy has, as a problem names them


def _share(read: Reader, nodes: int, gpus: int, gym: int | None) -> _Share:
    """The reward model's nodes first, then the non-colocated teachers', as GRPO's setup takes
    them; the policy gets the rest (on one node: the GPUs the reward model leaves)."""
    rm = _reward_model(read, nodes, gpus)
    rm_nodes = rm.nodes if rm and not rm.shares_node else 0
    if rm_nodes and nodes - rm_nodes < 1:
        read.problems.append(
            f"env.reward_model.resources.num_nodes={rm_nodes} takes all {nodes} node(s) of "
            f"cluster.num_nodes={nodes}: none are left for the policy"
        )
        roles = [NodeRole(i, "reward-model", 0, 0) for i in range(nodes)]
        return _Share(0, gpus, "", roles + _gym_roles(nodes, gym), [], rm)
    teachers = _teachers(read, gpus)
    teacher_nodes = sum(t.nodes for t in teachers)
    policy_nodes = nodes - rm_nodes - teacher_nodes
    first = max(policy_nodes, 0)
    others = [NodeRole(first + i, "reward-model", 0, 0) for i in range(rm_nodes)]
    others += [NodeRole(i, "teacher", 0, 0) for i in range(first + rm_nodes, nodes)]
    others += _gym_roles(nodes, gym)
    less = [f"{rm_nodes} reward model node(s)"] if rm_nodes else []
    if policy_nodes < 1:
        read.problems.append(
            f"on_policy_distillation.non_colocated_teachers take {teacher_nodes} node(s) of "
            f"cluster.num_nodes={nodes}{''.join(f' less {n}' for n in less)}: none are left "
            "for the policy"
        )
        return _Share(0, gpus, "", others, teachers, rm)
    less += [f"{teacher_nodes} teacher node(s)"] if teacher_nodes else []
    where = f"cluster.num_nodes={nodes} less {' and '.join(less)}" if less else "cluster.num_nodes"
    if rm is None or not rm.shares_node:
        return _Share(policy_nodes, gpus, where, others, teachers, rm)
    # One node: the reward model takes GPUs of it.
    left = gpus - rm.gpus_per_node
    if left < 1:
        read.problems.append(
            f"env.reward_model.resources.gpus_per_node={rm.gpus_per_node} takes all {gpus} "
            "GPU(s) of the node (cluster.num_nodes=1): none are left for the policy"
        )
    node = f"the node the reward model leaves (it takes {rm.gpus_per_node} of {gpus})"
    return _Share(policy_nodes, left, where, others, teachers, rm, node)


def _gym_roles(nodes: int, gym: int | None) -> list[NodeRole]:
    """NeMo Gym's GPU nodes: after cluster.num_nodes."""
    return [NodeRole(nodes + i, "nemo-gym", 0, 0) for i in range(gym or 0)]


def _reward_model(read: Reader, nodes: int, gpus_per_node: int) -> RewardModel | None:
    """The reward model environment, as GRPO's and PPO's setup reserve it: when a data set
    names it (`env_name: reward_model` in data.train, data.validation or data.default, each a
    mapping or a list of them); its resources from env.reward_model.resources."""
    if algorithm(read) == "distillation" or not (read.has("grpo") or read.has("ppo")):
        return None  # only GRPO's and PPO's setup run one
    if "reward_model" not in _env_names(read):
        return None
    res = "env.reward_model.resources"
    why = "the data's env_name is reward_model, which runs on its own GPUs"
    rm_nodes = read.required(f"{res}.num_nodes", why)
    rm_gpus = read.required(f"{res}.gpus_per_node", why)
    if rm_nodes is None or rm_gpus is None:
        return None
    model = read.lookup("env.reward_model.model_name")
    name = str(model) if isinstance(model, str) else "reward model"
    rm = RewardModel(name, rm_nodes, rm_gpus, shares_node=nodes == 1)
    if rm_gpus > gpus_per_node:
        read.problems.append(
            f"{res}.gpus_per_node={rm_gpus} is more than cluster.gpus_per_node={gpus_per_node}: "
            "the reward model must fit on its nodes"
        )
    elif rm.shares_node and rm_nodes != 1:
        read.problems.append(
            f"{res}.num_nodes={rm_nodes}: the cluster has one node (cluster.num_nodes=1), and "
            "the reward model takes GPUs of it (set num_nodes to 1)"
        )
    else:
        tp = read.int("env.reward_model.dtensor_cfg.tensor_parallel_size", 1) or 1
        cp = read.int("env.reward_model.dtensor_cfg.context_parallel_size", 1) or 1
        names = f"env.reward_model.dtensor_cfg.tensor_parallel_size={tp} x "
        names += f"context_parallel_size={cp}"
        divides(read, "reward model", rm_nodes * rm_gpus, tp * cp, names)
    return rm


def _env_names(read: Reader) -> set[str]:
    """The environments the data sets name (NeMo RL's extract_necessary_env_names)."""
    names = set()
    for split in ("data.train", "data.validation", "data.default"):
        sets = read.lookup(split)
        for one in sets if isinstance(sets, list) else [sets]:
            if isinstance(one, dict) and isinstance(one.get("env_name"), str):
                names.add(one["env_name"])
    return names


def _teachers(read: Reader, gpus_per_node: int) -> list[Teacher]:
    """Non-colocated OPD teachers, as NeMo RL reserves them (nemo_rl/algorithms/opd.py): one per
    distinct teacher model of teacher_model_by_agent_name (per alias without deduplication),
    each with default_teacher_cfg under its teacher_overrides.<alias>."""
    o = "on_policy_distillation"
    n = f"{o}.non_colocated_teachers"
    if not (read.flag(f"{o}.enabled", False) and read.flag(f"{n}.enabled", False)):
        return []
    backend = read.lookup("policy.generation.backend")
    if backend in ("vllm", MISSING, None) and not read.flag(
        "policy.generation.vllm_cfg.async_engine", False
    ):
        read.problems.append(
            f"{n}.enabled needs async rollouts: set policy.generation.vllm_cfg.async_engine=true"
        )
    agents = f"{o}.teacher_model_by_agent_name"
    models = read.lookup(agents)
    if models is MISSING and read.has(agents):
        read.problems.append(f"{agents}: a teacher model in it does not resolve")
    elif not isinstance(models, dict) and models not in (MISSING, None):
        read.problems.append(
            f"{agents}: expected a mapping of agent name to teacher model, got {models!r}"
        )
    if not isinstance(models, dict):
        return []
    dedup = read.flag(f"{o}.deduplicate_shared_teacher_checkpoints", True)
    teachers: list[Teacher] = []
    for alias, model in models.items():
        if model in ("???", None):
            read.problems.append(f"{agents}.{alias}: the teacher model is not set")
            continue
        if dedup and any(t.model == str(model) for t in teachers):
            continue

        def key(name: str, alias: str = str(alias)) -> str:
            own = f"{n}.teacher_overrides.{alias}.{name}"
            return own if read.has(own) else f"{n}.default_teacher_cfg.{name}"

        teachers.append(_teacher(read, str(alias), str(model), key, gpus_per_node))
    return teachers


def _teacher(
    read: Reader, alias: str, model: str, key: Callable[[str], str], gpus_per_node: int
) -> Teacher:
    nodes = read.int(key("num_nodes"), 1) or 1
    gpus = read.int(key("gpus_per_node"), 8) or 8  # NeMo RL's default
    tp = read.int(key("tensor_model_parallel_size"), 1) or 1
    pp = read.int(key("pipeline_model_parallel_size"), 1) or 1
    cp = read.int(key("context_parallel_size"), 1) or 1
    if gpus > gpus_per_node:
        read.problems.append(
            f"{key('gpus_per_node')}={gpus} is more than cluster.gpus_per_node={gpus_per_node}: "
            f"teacher {alias!r} must fit on its nodes"
        )
    names = f"{key('tensor_model_parallel_size')}={tp} x context_parallel_size={cp} x "
    names += f"pipeline_model_parallel_size={pp}"
    divides(read, f"teacher {alias!r}", nodes * min(gpus, gpus_per_node), tp * cp * pp, names)
    return Teacher(alias, model, nodes, gpus, tp, cp, pp)


def _training(read: Reader, section: str, gpus: int) -> Training:
    megatron, fsdp = _training_backend(read, section)
    if megatron:
        return megatron_sizes(
            read,
            gpus,
            lambda name: f"{section}.megatron_cfg.{name}",
            f"{section} training",
            f"{section} experts",
        )
    tp = read.int(f"{fsdp}.tensor_parallel_size", 1) or 1
    cp = read.int(f"{fsdp}.context_parallel_size", 1) or 1
    ep = read.int(f"{fsdp}.expert_parallel_size", 1) or 1
    names = f"{fsdp}.tensor_parallel_size={tp} x context_parallel_size={cp}"
    dp = divides(read, f"{section} training", gpus, tp * cp, names)
    if ep > 1 and gpus and (gpus // tp) % ep:
        # FSDP2 shards experts over the data- and context-parallel ranks: (DP x CP) % EP == 0.
        read.problems.append(
            f"{section} training: {fsdp}.expert_parallel_size={ep} must divide the "
            f"{gpus // tp} data- and context-parallel rank(s) ({gpus} GPU(s) / "
            f"tensor_parallel_size={tp})"
        )
    return Training("dtensor", tp, cp, 1, ep, gpus, dp)


def _training_backend(read: Reader, section: str) -> tuple[bool, str]:
    """Whether `section` trains with Megatron, and its FSDP2 block, picked as NeMo RL picks them
    (lm_policy.py's Policy, lm_value.py's Value, v0.4 to main alike): by each block's `enabled`,
    exactly one true, neither defaulting to true (an `enabled` not given is false, as there).
    PPO reads the value model's `megatron_cfg.enabled` always, and trains a DTensor value model
    only on the v2 worker. (Main's config schema also requires `dtensor_cfg.enabled` to be
    written; releases before it did not, so that alone is not refused.)"""
    # FSDP2: dtensor_cfg, renamed automodel_cfg in later NeMo RL releases.
    automodel = f"{section}.automodel_cfg"
    fsdp = automodel if read.has(automodel) else f"{section}.dtensor_cfg"
    mcore = f"{section}.megatron_cfg"
    if not read.has(section):  # no policy: an eval config, which trains nothing
        return False, fsdp
    unset = section == "value" and not read.has(f"{mcore}.enabled")
    if unset:
        read.problems.append(
            f"{mcore}.enabled is not set: NeMo RL's PPO reads it (true to train the value model "
            f"with Megatron, false with {fsdp}.enabled=true)"
        )
    megatron = read.flag(f"{mcore}.enabled", False)
    fsdp_on = read.flag(f"{fsdp}.enabled", False)
    if megatron and fsdp_on:
        read.problems.append(f"{fsdp}.enabled and {mcore}.enabled are both true: enable one")
    elif not megatron and not fsdp_on and not unset:
        read.problems.append(
            f"neither {fsdp}.enabled nor {mcore}.enabled is true: NeMo RL trains with the one "
            "enabled; enable one"
        )
    elif (
        section == "value" and fsdp_on and fsdp != automodel and not read.flag(f"{fsdp}._v2", False)
    ):
        read.problems.append(
            f"{fsdp}._v2 must be true: NeMo RL trains a DTensor value model only on its v2 worker"
        )
    return megatron, fsdp


def _roles(
    nodes: int, gpus: int, gen: Generation | None, train_gpus: int, gen_nodes: int
) -> list[NodeRole]:
    if gen is None:
        return [NodeRole(i, "training", gpus, 0) for i in range(nodes)]
    if gen.colocated:
        return [NodeRole(i, "training+generation", gpus, gpus) for i in range(nodes)]
    if nodes == 1:
        return [NodeRole(0, "training+generation", max(train_gpus, 0), gen.gpus)]
    train_nodes = max(nodes - gen_nodes, 0)
    return [NodeRole(i, "training", gpus, 0) for i in range(train_nodes)] + [
        NodeRole(train_nodes + i, "generation", 0, gpus) for i in range(min(gen_nodes, nodes))
    ]
