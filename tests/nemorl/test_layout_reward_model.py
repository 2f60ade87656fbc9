"""A reward model environment takes GPUs of `cluster.num_nodes` as NeMo RL's GRPO and PPO setup
take them (nemo_rl/algorithms/grpo.py, ppo.py): whole nodes on a cluster of several, GPUs of the
one node on a cluster of one. On NeMo RL's own examples/configs/grpo_rm_1B.yaml (a copy from
its main branch, tests/data/nemo_rl), which trains on 1 GPU of 2."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from nrl_launch.nemorl.config import load
from nrl_launch.nemorl.layout import Layout, RewardModel, compute
from tests.conftest import Cli
from tests.helpers import NEMO

GRPO_RM = NEMO / "grpo_rm_1B.yaml"
RES = "env.reward_model.resources"
GEN = "policy.generation.colocated"
SKYWORK = "Skywork/Skywork-Reward-V2-Qwen3-0.6B"


def layout_of(overrides: Sequence[str] = (), path: Path = GRPO_RM) -> Layout:
    cfg = load(path, overrides)
    return compute(cfg.value, cfg.present, cfg.raw)


def test_on_one_node_the_reward_model_takes_gpus_of_it() -> None:
    layout = layout_of()
    assert layout.problems == ()
    assert layout.reward_model == RewardModel(SKYWORK, 1, 1, shares_node=True)
    assert (layout.nodes, layout.gpus_per_node) == (1, 2)  # the allocation is cluster.num_nodes
    assert (layout.training_gpus, layout.generation_gpus) == (1, 1)
    assert layout.training is not None and layout.training.dp == 1
    assert [(r.role, r.training_gpus) for r in layout.nodes_layout] == [("training+generation", 1)]


def test_on_several_nodes_it_takes_whole_nodes_of_the_cluster() -> None:
    layout = layout_of(["cluster.num_nodes=3", "cluster.gpus_per_node=8", f"{RES}.num_nodes=1"])
    assert layout.problems == ()
    assert layout.nodes == 3
    assert (layout.training_gpus, layout.generation_gpus) == (16, 16)
    assert [r.role for r in layout.nodes_layout] == ["training+generation"] * 2 + ["reward-model"]
    assert layout.reward_model is not None
    assert layout.reward_model.describe() == f"{SKYWORK}: 1 node(s) x 1 GPU(s)"


def test_only_when_the_data_names_it() -> None:
    layout = layout_of(["data.default.env_name=math"])  # env.reward_model is there, unused
    assert layout.reward_model is None
    assert (layout.training_gpus, [r.role for r in layout.nodes_layout]) == (
        2,
        ["training+generation"],
    )


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (
            [f"{RES}.gpus_per_node=2"],
            f"{RES}.gpus_per_node=2 takes all 2 GPU(s) of the node (cluster.num_nodes=1): none "
            "are left for the policy",
        ),
        (
            ["cluster.num_nodes=2", f"{RES}.num_nodes=2"],
            f"{RES}.num_nodes=2 takes all 2 node(s) of cluster.num_nodes=2: none are left for "
            "the policy",
        ),
        (
            [f"{RES}.num_nodes=2"],
            f"{RES}.num_nodes=2: the cluster has one node (cluster.num_nodes=1), and the reward "
            "model takes GPUs of it (set num_nodes to 1)",
        ),
        (
            ["cluster.num_nodes=2", f"{RES}.gpus_per_node=4"],
            f"{RES}.gpus_per_node=4 is more than cluster.gpus_per_node=2: the reward model "
            "must fit on its nodes",
        ),
        (
            [f"{RES}.num_nodes=null"],
            f"{RES}.num_nodes is not set: the data's env_name is reward_model, which runs on "
            "its own GPUs",
        ),
        (
            # A training TP that fit the node's 2 GPUs does not fit the 1 the policy has.
            ["policy.dtensor_cfg.tensor_parallel_size=2"],
            "policy training: 1 GPU(s) are not a multiple of 2",
        ),
        (
            [f"{GEN}.enabled=false", f"{GEN}.resources.gpus_per_node=1"],
            f"{GEN}.resources.gpus_per_node=1 takes all 1 GPUs of the node the reward model "
            "leaves (it takes 1 of 2): none are left for training",
        ),
        (
            ["cluster.num_nodes=2", "env.reward_model.dtensor_cfg.tensor_parallel_size=2"],
            "reward model: 1 GPU(s) are not a multiple of 2",
        ),
    ],
    ids=[
        "one node: all its GPUs",
        "all the nodes",
        "one node: more nodes",
        "more GPUs than a node has",
        "no resources",
        "the policy's TP on what is left",
        "non-colocated generation on what is left",
        "its own TP",
    ],
)
def test_what_does_not_fit(overrides: list[str], problem: str) -> None:
    problems = layout_of(overrides).problems
    assert len(problems) == 1, problems
    assert problem in problems[0]


def test_plan_of_grpo_rm_trains_on_the_gpus_the_reward_model_leaves(cli: Cli) -> None:
    result = cli("plan", "--config", str(GRPO_RM))
    assert result.code == 0, result.err
    assert "1 node(s) x 2 GPU(s) = 2 GPU(s)" in result.out
    assert "FSDP2/DTensor TP1 CP1 PP1 -> DP1 on 1 GPU(s)" in result.out
    assert "vllm TP1 PP1 on 1 GPU(s), 1 engine(s), colocated with training" in result.out
    assert "Reward:      Skywork/" in result.out and "1 GPU(s) of the policy's node" in result.out
    data = json.loads(cli("plan", "--config", str(GRPO_RM), "--json").out)
    assert (data["reward_model"]["nodes"], data["reward_model"]["shares_node"]) == (1, True)
    plan = cli("plan", "--config", str(GRPO_RM), "cluster.num_nodes=2")
    assert plan.code == 0, plan.err
    assert "1     reward-model" in plan.out
