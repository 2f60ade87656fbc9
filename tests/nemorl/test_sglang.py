"""SGLang generation sized as NeMo RL sizes it, in both of its shapes (tests/data/nemo_rl):

- v0.7.0 and later (main): `sglang_cfg.sglang_server_config.num_gpus` GPUs run engines of
  `num_gpus_per_engine` GPUs (nemo_rl/models/generation/sglang/sglang_generation.py), each an
  SGLang server of TP = num_gpus_per_engine / pp_size (sglang_worker.py); weights reach them
  only from the DTensor v2 worker, and only colocated (grpo.py's refit).
- v0.6.x: servers of `sglang_cfg.gpus_per_server` GPUs, each on one node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.helpers import NEMO, fits_then_one_problem, layout_of, rule_cases

RECIPES = NEMO / "recipes" / "llm"
MATH_1B = NEMO / "grpo_math_1B_sglang.yaml"  # main: 1 node x 2 GPUs, TP1
QWEN_1N = RECIPES / "grpo-qwen2.5-math-1.5b-instruct-1n8g-fsdp2tp1-sglang.yaml"  # TP2, 8 GPUs
QWEN_2N = RECIPES / "grpo-qwen2.5-math-1.5b-instruct-2n8g-fsdp2tp1-sglang.yaml"  # TP4, 16 GPUs
OLD = NEMO / "grpo_math_1B_sglang-v0.6.0.yaml"  # v0.6.0: gpus_per_server 1, on 1 GPU
SG = "policy.generation.sglang_cfg"
SERVER = f"{SG}.sglang_server_config"
RES = "policy.generation.colocated.resources"


@pytest.mark.parametrize(
    ("path", "allocation", "generation"),
    [
        (MATH_1B, "1 node(s) x 2 GPU(s)", "sglang TP1 PP1 on 2 GPU(s), 2 engine(s), colocated"),
        (QWEN_1N, "1 node(s) x 8 GPU(s)", "sglang TP2 PP1 on 8 GPU(s), 4 engine(s), colocated"),
        (QWEN_2N, "2 node(s) x 8 GPU(s)", "sglang TP4 PP1 on 16 GPU(s), 4 engine(s), colocated"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_plan_sizes_nemo_rl_main_s_sglang_configs(
    cli: Cli, path: Path, allocation: str, generation: str
) -> None:
    result = cli("plan", "--config", str(path))
    assert result.code == 0, result.err
    assert f"Allocation:  {allocation}" in result.out
    assert f"Generation:  {generation}" in result.out
    assert result.out.rstrip().endswith("Fits.")


def test_the_v0_6_shape_is_still_sized_by_gpus_per_server(cli: Cli) -> None:
    result = cli("plan", "--config", str(OLD), "cluster.gpus_per_node=4", f"{SG}.gpus_per_server=2")
    assert result.code == 0, result.err
    assert "Generation:  sglang TP2 PP1 on 4 GPU(s), 2 engine(s), colocated" in result.out
    layout = layout_of(OLD, [f"{SG}.gpus_per_server=2"])  # 1 GPU: no server fits
    assert layout.problems == (f"{SG}.gpus_per_server=2 is more than generation's 1 GPU(s)",)


def test_engines_on_fewer_gpus_than_generation_has_are_shown() -> None:
    layout = layout_of(MATH_1B, ["cluster.num_nodes=2"])  # num_gpus stays 2 of 4
    assert layout.problems == ()
    assert layout.generation is not None
    assert layout.generation.describe() == (
        "sglang TP1 PP1 on 4 GPU(s), 2 engine(s) on 2 of them, colocated with training"
    )


def test_an_engine_larger_than_a_node_takes_whole_nodes() -> None:
    layout = layout_of(QWEN_2N, [f"{SG}.tp_size=16"])  # num_gpus_per_engine is ${tp_size}
    assert layout.problems == ()
    assert layout.generation is not None and layout.generation.instances == 1


SGLANG_RULES = [
    (
        "the engines fit generation's GPUs",
        MATH_1B,
        [f"{SERVER}.num_gpus=4"],
        f"{SERVER}.num_gpus=4 is more than generation's 2 GPU(s)",
    ),
    (
        "TP is the engine's GPUs over PP",
        QWEN_1N,
        [f"{SERVER}.num_gpus_per_engine=4"],
        f"{SG}.tp_size=2 must equal {SERVER}.num_gpus_per_engine=4 / pp_size=1",
    ),
    (
        "an engine larger than a node takes whole nodes",
        QWEN_2N,
        [f"{SG}.tp_size=12"],
        f"{SERVER}.num_gpus_per_engine=12 is more than a node's 8 GPU(s) and not a multiple",
    ),
    (
        "no engine cut short",
        QWEN_2N,
        [f"{SG}.tp_size=16", f"{SERVER}.num_gpus=24", "cluster.num_nodes=3"],
        f"{SERVER}.num_gpus=24 holds 1.5 engine(s) of num_gpus_per_engine=16",
    ),
    (
        "an engine smaller than a node stays on it",
        QWEN_2N,
        [f"{SG}.tp_size=3"],
        f"{SERVER}.num_gpus=16 puts an engine of num_gpus_per_engine=3 across two nodes",
    ),
    (
        "the server's sizes are set",
        MATH_1B,
        [f"~{SERVER}.num_gpus"],
        f"{SERVER}.num_gpus is not set",
    ),
    (
        "a config of neither shape",
        MATH_1B,
        [f"~{SERVER}"],
        f"{SERVER} is not set: NeMo RL sizes SGLang's engines from its num_gpus",
    ),
    (
        "only colocated",
        QWEN_2N,
        [
            "policy.generation.colocated.enabled=false",
            f"{RES}.num_nodes=1",
            f"{RES}.gpus_per_node=8",
            f"{SERVER}.num_gpus=8",
            "policy.dtensor_cfg.tensor_parallel_size=1",
        ],
        "policy.generation.backend=sglang cannot run without colocation",
    ),
    (
        "refit only from DTensor v2",
        MATH_1B,
        ["policy.dtensor_cfg._v2=false"],
        "policy.generation.backend=sglang needs policy.dtensor_cfg._v2=true",
    ),
    (
        "not from Megatron",
        MATH_1B,
        ["policy.dtensor_cfg.enabled=false", "policy.megatron_cfg.enabled=true"],
        "policy.generation.backend=sglang needs FSDP2 training",
    ),
]


@pytest.mark.parametrize(("path", "overrides", "problem"), rule_cases(SGLANG_RULES))
def test_each_sglang_rule_fits_and_misfits(path: Path, overrides: list[str], problem: str) -> None:
    fits_then_one_problem(path, overrides, problem)


def test_a_misfit_is_one_line_with_exit_2(cli: Cli) -> None:
    result = cli("plan", "--config", str(MATH_1B), f"{SERVER}.num_gpus=4")
    assert result.code == 2
    assert result.err.splitlines() == [
        f"nrl-launch: error: {SERVER}.num_gpus=4 is more than generation's 2 GPU(s): its "
        "engines of 1 GPU(s) do not fit"
    ]
