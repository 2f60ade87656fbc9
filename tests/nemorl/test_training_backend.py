"""The training backend picked as NeMo RL picks it (tests/data/nemo_rl), v0.4 to main alike:

- Exactly one of `dtensor_cfg.enabled` and `megatron_cfg.enabled` is true; one not given is
  false, and nothing defaults to DTensor (models/policy/lm_policy.py: Policy.__init__).
- PPO reads the value model's `megatron_cfg.enabled` always (algorithms/ppo.py: setup), and a
  DTensor value model runs only on the v2 worker (models/value/lm_value.py).

Main's config schema (PolicyConfig) also wants `dtensor_cfg.enabled` written out; the releases
before it did not, so that alone is not refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.helpers import NEMO, fits_then_one_problem, layout_of, rule_cases

RECIPES = NEMO / "recipes" / "llm"
DENSE_32N = RECIPES / "grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.yaml"  # FSDP2
SFT_8N = RECIPES / "sft-llama3.1-70b-8n8g-tp4pp2-long-megatron.yaml"  # Megatron
VALUE_FSDP = ["++value.dtensor_cfg.enabled=true", "++value.dtensor_cfg._v2=true"]


RULES = [
    (
        "dtensor_cfg.enabled does not default to true",
        DENSE_32N,
        ["~policy.dtensor_cfg.enabled"],
        "neither policy.dtensor_cfg.enabled nor policy.megatron_cfg.enabled is true",
    ),
    (
        "both enabled",
        SFT_8N,
        ["policy.dtensor_cfg.enabled=true"],
        "policy.dtensor_cfg.enabled and policy.megatron_cfg.enabled are both true: enable one",
    ),
    (
        "a megatron_cfg without enabled is not Megatron",
        SFT_8N,
        ["~policy.megatron_cfg.enabled"],
        "neither policy.dtensor_cfg.enabled nor policy.megatron_cfg.enabled is true",
    ),
    (
        "distillation's teacher is picked the same way",
        SFT_8N,
        ["++teacher.megatron_cfg.enabled=true", "++teacher.dtensor_cfg.enabled=true"],
        "teacher.dtensor_cfg.enabled and teacher.megatron_cfg.enabled are both true",
    ),
    (
        "PPO reads the value model's megatron_cfg.enabled",
        SFT_8N,
        VALUE_FSDP,
        "value.megatron_cfg.enabled is not set: NeMo RL's PPO reads it",
    ),
    (
        "a DTensor value model runs on the v2 worker",
        SFT_8N,
        [*VALUE_FSDP, "++value.megatron_cfg.enabled=false", "value.dtensor_cfg._v2=false"],
        "value.dtensor_cfg._v2 must be true: NeMo RL trains a DTensor value model only on "
        "its v2 worker",
    ),
]


@pytest.mark.parametrize(("path", "overrides", "problem"), rule_cases(RULES))
def test_each_rule_fits_and_misfits(path: Path, overrides: list[str], problem: str) -> None:
    fits_then_one_problem(path, overrides, problem)


def test_a_value_model_nemo_rl_runs_fits() -> None:
    layout = layout_of(SFT_8N, [*VALUE_FSDP, "++value.megatron_cfg.enabled=false"])
    assert layout.problems == ()


def test_plan_refuses_a_policy_with_no_backend_enabled_in_one_line(cli: Cli) -> None:
    result = cli("plan", "--config", str(DENSE_32N), "~policy.dtensor_cfg.enabled", *SHARED_LOGS)
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: neither policy.dtensor_cfg.enabled nor policy.megatron_cfg.enabled "
        "is true: NeMo RL trains with the one enabled; enable one"
    ]


def test_a_megatron_policy_needs_no_dtensor_cfg() -> None:
    """As NeMo RL before main's schema: Megatron enabled, no dtensor_cfg at all, fits."""
    assert layout_of(SFT_8N, ["~policy.dtensor_cfg"]).problems == ()


def test_an_eval_config_which_trains_nothing_still_plans(cli: Cli, tmp_path: Path) -> None:
    # run_eval.py's config has no policy: no training backend to pick.
    config = tmp_path / "eval.yaml"
    config.write_text(
        "eval: {num_tests_per_prompt: 1}\n"
        "generation: {backend: vllm, vllm_cfg: {tensor_parallel_size: 1}}\n"
        "cluster: {gpus_per_node: 1, num_nodes: 1}\n"
    )
    result = cli("plan", "--config", str(config), *SHARED_LOGS)
    assert result.code == 0, result.err
