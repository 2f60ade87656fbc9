"""TensorRT-LLM and Dynamo generation sized and checked as NeMo RL main does (tests/data/nemo_rl):

- trtllm: engines of `trtllm_cfg.tensor_parallel_size` GPUs on generation's world, which it must
  divide; no pipeline parallelism; moe TP x moe EP is TP; the async engine only; TP across nodes
  only non-colocated, and an engine within a node divides its GPUs
  (nemo_rl/models/generation/trtllm/trtllm_generation.py: TrtllmGeneration).
- dynamo: non-colocated only; engines of vllm_cfg TP x PP GPUs, each on one node, so they divide
  a node's generation GPUs; EP is 1 or TP; GRPO refuses in-flight weight updates
  (dynamo/config.py: DynamoConfig, managed_runtime.py, worker_pool.py; grpo.py: setup).
- Which algorithm runs which backend: GRPO all five, PPO vllm and sglang, distillation vllm and
  megatron (grpo.py, ppo.py, distillation.py: setup).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.helpers import NEMO, fits_then_one_problem, layout_of, rule_cases

RECIPES = NEMO / "recipes" / "llm"
TRT_1B = NEMO / "grpo_math_1B_trtllm.yaml"  # 1 GPU, colocated, TP1
TRT_2N = RECIPES / "grpo-qwen3-1.7b-2n4g-fsdp2-trtllm.yaml"  # 2 nodes x 4, colocated, TP4
TRT_NONCOLOC = RECIPES / "grpo-qwen2.5-0.5b-1n4g-megatron-trtllm-noncolocated-async.yaml"
DYNAMO = NEMO / "grpo_math_1B_dynamo.yaml"  # 1 node x 2: 1 trains, 1 generates
NONCOLOC_2N = RECIPES / "grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml"
GRPO_1B = NEMO / "grpo_math_1B.yaml"
G = "policy.generation"
T = f"{G}.trtllm_cfg"
V = f"{G}.vllm_cfg"
RES = f"{G}.colocated.resources"


@pytest.mark.parametrize(
    ("path", "generation", "tp", "engines"),
    [
        (TRT_1B, "trtllm TP1 PP1 on 1 GPU(s), 1 engine(s), colocated with training", 1, 1),
        (TRT_2N, "trtllm TP4 PP1 on 8 GPU(s), 2 engine(s), colocated with training", 4, 2),
        (TRT_NONCOLOC, "trtllm TP1 PP1 on 2 GPU(s), 2 engine(s), on GPUs of its own", 1, 2),
        (DYNAMO, "dynamo TP1 PP1 on 1 GPU(s), 1 engine(s), on GPUs of its own", 1, 1),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_plan_sizes_the_backend_s_own_engines(
    cli: Cli, path: Path, generation: str, tp: int, engines: int
) -> None:
    result = cli("plan", "--config", str(path), *SHARED_LOGS)
    assert result.code == 0, result.err
    assert f"Generation:  {generation}" in result.out
    data = json.loads(cli("plan", "--config", str(path), "--json", *SHARED_LOGS).out)
    assert (data["generation"]["tp"], data["generation"]["instances"]) == (tp, engines)


def test_trtllm_moe_parallelism_is_shown_as_its_ep() -> None:
    moe = [f"{T}.moe_tensor_parallel_size=2", f"{T}.moe_expert_parallel_size=2"]
    layout = layout_of(TRT_2N, moe)
    assert layout.problems == ()
    assert layout.generation is not None
    assert layout.generation.describe() == (
        "trtllm TP4 PP1 EP2 on 8 GPU(s), 2 engine(s), colocated with training"
    )


def test_trtllm_tp_may_span_nodes_only_non_colocated() -> None:
    # Non-colocated on a node of 4 of 8 (2 nodes): TP8 spans both generation nodes.
    over = ["cluster.num_nodes=3", f"{G}.colocated.enabled=false", f"{RES}.gpus_per_node=4"]
    layout = layout_of(TRT_2N, [*over, f"{RES}.num_nodes=2", f"{T}.tensor_parallel_size=8"])
    assert layout.problems == ()
    assert layout.generation is not None and layout.generation.instances == 1


RULES = [
    (
        "trtllm: the world divides into engines of TP",
        TRT_2N,
        [f"{T}.tensor_parallel_size=3"],
        f"generation (TRT-LLM): 8 GPU(s) are not a multiple of 3 ({T}.tensor_parallel_size=3)",
    ),
    (
        "trtllm: no pipeline parallelism",
        TRT_2N,
        [f"++{T}.pipeline_parallel_size=2"],
        f"{T}.pipeline_parallel_size=2: NeMo RL's TRT-LLM backend has no pipeline parallelism",
    ),
    (
        "trtllm: moe TP x moe EP is TP",
        TRT_2N,
        [f"{T}.moe_expert_parallel_size=2"],
        f"{T}.moe_tensor_parallel_size=1 x moe_expert_parallel_size=2 must equal "
        "tensor_parallel_size=4",
    ),
    (
        "trtllm: the async engine only",
        TRT_2N,
        [f"{T}.async_engine=false"],
        f"{T}.async_engine must be true",
    ),
    (
        "trtllm: TP across nodes only non-colocated",
        TRT_2N,
        [f"{T}.tensor_parallel_size=8"],
        f"{T}.tensor_parallel_size=8 is more than a node's 4 GPU(s): NeMo RL runs TRT-LLM's "
        "TP across nodes only non-colocated",
    ),
    (
        "trtllm: an engine within a node divides its GPUs",
        TRT_2N,
        ["cluster.gpus_per_node=6", f"{T}.tensor_parallel_size=4"],
        f"{T}.tensor_parallel_size=4 does not divide a node's 6 GPU(s)",
    ),
    (
        "trtllm: TP is set",
        TRT_2N,
        [f"~{T}.tensor_parallel_size"],
        f"{T}.tensor_parallel_size is not set",
    ),
    (
        "dynamo: non-colocated only",
        DYNAMO,
        [f"{G}.colocated.enabled=true"],
        f"{G}.backend=dynamo needs {G}.colocated.enabled=false",
    ),
    (
        "dynamo: an engine fits a node's generation GPUs",
        DYNAMO,
        [f"{V}.tensor_parallel_size=2", "cluster.gpus_per_node=4", f"{RES}.gpus_per_node=1"],
        f"{V}.tensor_parallel_size=2 x pipeline_parallel_size=1 is more than a node's 1 "
        "generation GPU(s)",
    ),
    (
        "dynamo: engines divide a node's generation GPUs",
        DYNAMO,
        [f"{V}.tensor_parallel_size=2", "cluster.gpus_per_node=4", f"{RES}.gpus_per_node=3"],
        f"{V}.tensor_parallel_size=2 x pipeline_parallel_size=1 does not divide a node's 3 "
        "generation GPU(s)",
    ),
    (
        "dynamo: EP is 1 or TP",
        DYNAMO,
        [f"{V}.expert_parallel_size=2"],
        f"{V}.expert_parallel_size=2 must be 1 or tensor_parallel_size=1",
    ),
    (
        "dynamo: no in-flight weight updates in GRPO",
        DYNAMO,
        ["grpo.async_grpo.in_flight_weight_updates=true"],
        "grpo.async_grpo.in_flight_weight_updates=true: NeMo RL's Dynamo backend drains",
    ),
    (
        "PPO: no Megatron generation, colocated or not",
        GRPO_1B,
        [f"{G}.backend=megatron", "++ppo.max_num_steps=10"],
        f"{G}.backend=megatron: NeMo RL's PPO generates only with vllm or sglang",
    ),
    (
        "PPO: no TRT-LLM",
        TRT_1B,
        ["++ppo.max_num_steps=10"],
        f"{G}.backend=trtllm: NeMo RL's PPO generates only with vllm or sglang",
    ),
    (
        "distillation: only vLLM or Megatron",
        TRT_1B,
        ["++distillation.max_num_steps=10"],
        f"{G}.backend=trtllm: NeMo RL's distillation generates only with vllm or megatron",
    ),
    (
        "distillation: not SGLang either",
        GRPO_1B,
        [f"{G}.backend=sglang", "++distillation.max_num_steps=10"],
        f"{G}.backend=sglang: NeMo RL's distillation generates only with vllm or megatron",
    ),
    (
        "GRPO: a backend it has",
        GRPO_1B,
        [f"{G}.backend=hf"],
        f"{G}.backend=hf: NeMo RL's GRPO generates only with vllm, sglang, megatron, trtllm "
        "or dynamo",
    ),
]


@pytest.mark.parametrize(("path", "overrides", "problem"), rule_cases(RULES))
def test_each_rule_fits_and_misfits(path: Path, overrides: list[str], problem: str) -> None:
    fits_then_one_problem(path, overrides, problem)


def test_ppo_megatron_generation_is_one_line_with_exit_2(cli: Cli) -> None:
    args = [f"{G}.backend=megatron", "++ppo.max_num_steps=10", *SHARED_LOGS]
    result = cli("plan", "--config", str(GRPO_1B), *args)
    assert result.code == 2
    assert result.err.splitlines() == [
        f"nrl-launch: error: {G}.backend=megatron: NeMo RL's PPO generates only with vllm or "
        "sglang (sglang colocated): use vllm"
    ]
    assert "Traceback" not in result.err


def test_a_refused_backend_is_not_also_checked_as_if_it_ran() -> None:
    # Distillation refuses TRT-LLM: its sizes are not checked on top (one line for one input).
    layout = layout_of(TRT_2N, ["++distillation.max_num_steps=10", f"{T}.async_engine=false"])
    assert len(layout.problems) == 1 and "distillation" in layout.problems[0]
    assert layout.generation is not None and layout.generation.tp == 4


def test_dynamo_engines_on_whole_nodes() -> None:
    over = ["cluster.num_nodes=3", "cluster.gpus_per_node=8", f"{RES}.gpus_per_node=8"]
    layout = layout_of(DYNAMO, [*over, f"{RES}.num_nodes=2", f"{V}.tensor_parallel_size=4"])
    assert layout.problems == ()
    assert layout.generation is not None
    assert layout.generation.describe() == (
        "dynamo TP4 PP1 on 16 GPU(s), 4 engine(s), on GPUs of its own"
    )


def test_distillation_refusing_sglang_says_only_that() -> None:
    # grpo_math_1B_sglang.yaml trains on DTensor v1: GRPO would also say SGLang needs v2.
    sglang = NEMO / "grpo_math_1B_sglang.yaml"
    over = ["policy.dtensor_cfg._v2=false", "++distillation.max_num_steps=10"]
    problems = layout_of(sglang, over).problems
    assert len(problems) == 1 and "NeMo RL's distillation generates only with" in problems[0]
