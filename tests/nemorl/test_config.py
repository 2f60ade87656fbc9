"""NeMo RL configs read as NeMo RL reads them: `defaults:` chains, `_override_`, Hydra overrides,
interpolations left for the driver and resolved for the checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_launch.errors import ConfigError
from nrl_launch.nemorl.config import MISSING, load, parse_override
from tests.helpers import NEMO

GYM_DIR = NEMO.parent / "nemo_gym"
RECIPES = NEMO / "recipes" / "llm"
# *.yaml.disabled: a config NeMo RL has disabled, still one of its configs.
EVERY_CONFIG = sorted([*NEMO.parent.rglob("*.yaml"), *NEMO.parent.rglob("*.yaml.disabled")])


@pytest.mark.parametrize("path", EVERY_CONFIG, ids=lambda p: p.name)
def test_every_fixture_config_loads_and_resolves(path: Path) -> None:
    from omegaconf import OmegaConf

    cfg = load(path)
    OmegaConf.to_container(cfg.tree, resolve=True)  # every interpolation resolves
    assert "defaults" not in cfg.tree


def test_defaults_are_relative_to_the_child_and_the_child_wins() -> None:
    cfg = load(RECIPES / "grpo-qwen2.5-7b-1n8g-noncolocated.yaml")
    assert cfg.value("cluster.gpus_per_node") == 8  # the child's
    assert cfg.value("policy.precision") == "bfloat16"  # the parent's, ../../grpo_base.yaml
    assert cfg.value("policy.tokenizer.name") == "Qwen/Qwen2.5-7B"  # interpolated after merge
    assert [p.name for p in cfg.files] == [
        "grpo-qwen2.5-7b-1n8g-noncolocated.yaml",
        "grpo_base.yaml",
    ]


def test_a_list_of_defaults_merges_in_order_depth_first() -> None:
    cfg = load(GYM_DIR / "grpo_nanov3_judge_node.yaml")
    # judge_node <- grpo_nanov3 <- megatron_gym_base <- [grpo_base, megatron]: megatron.yaml,
    # later, wins over grpo_base.yaml.
    assert cfg.value("policy.megatron_cfg.enabled") is True
    assert cfg.value("policy.dtensor_cfg.enabled") is False
    assert cfg.value("env.nemo_gym.num_gpu_nodes") == 1  # the child beats its parents' 0
    assert [p.name for p in cfg.files] == [
        "grpo_nanov3_judge_node.yaml",
        "grpo_nanov3.yaml",
        "megatron_gym_base.yaml",
        "grpo_base.yaml",
        "megatron.yaml",
    ]


def test_override_marker_replaces_instead_of_merging(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("data: {a: 1, b: 2}\nkeep: 1\n")
    (tmp_path / "child.yaml").write_text("defaults: base.yaml\ndata:\n  _override_: true\n  c: 3\n")
    cfg = load(tmp_path / "child.yaml")
    assert cfg.value("data") == {"c": 3}
    assert cfg.value("keep") == 1


def test_override_marker_replaces_a_mapping_with_a_list_as_nemo_rl_does() -> None:
    # NeMo RL's grpo_multiple_datasets.yaml: data.train is a mapping in the parent, a list here.
    cfg = load(NEMO / "grpo_multiple_datasets.yaml")
    assert [d["dataset_name"] for d in cfg.value("data.train")] == [
        "OpenMathInstruct-2",
        "DeepScaler",
    ]
    assert cfg.value("data.validation") == [{"dataset_name": "AIME2024"}]
    assert "_override_" not in cfg.tree.data
    assert cfg.value("policy.model_name") == "Qwen/Qwen2.5-1.5B"  # the rest merges as ever


def test_only_top_level_override_markers_replace(tmp_path: Path) -> None:
    # merge_with_override looks at the child's top-level keys only: a marker deeper down stays
    # an ordinary key and its mapping merges; `???` in the child keeps the parent's value.
    (tmp_path / "base.yaml").write_text("policy:\n  megatron_cfg: {enabled: true, tp: 2}\nx: 1\n")
    (tmp_path / "child.yaml").write_text(
        "defaults: base.yaml\npolicy:\n  megatron_cfg:\n    _override_: true\n"
        "    enabled: false\nx: ???\n"
    )
    cfg = load(tmp_path / "child.yaml")
    assert cfg.value("policy.megatron_cfg") == {"enabled": False, "tp": 2, "_override_": True}
    assert cfg.value("x") == 1


def test_interpolations_resolve_with_nemo_rl_resolvers() -> None:
    cfg = load(RECIPES / "grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.yaml")
    assert cfg.value("policy.generation.vllm_cfg.max_model_len") == 16384  # ${mul:...}
    assert cfg.value("policy.generation.max_new_tokens") == 16384


def test_overrides_follow_hydra_rules() -> None:
    cfg = load(
        RECIPES / "grpo-qwen2.5-7b-1n8g-noncolocated.yaml",
        [
            "cluster.num_nodes=2",
            "+logger.wandb.entity=my-team",
            "++checkpointing.keep_top_k=5",
            "++brand.new.key=[1,2]",
            "~policy.tokenizer",
            "logger.wandb_enabled=True",
            "policy.model_name=/models/a b",
        ],
    )
    assert cfg.value("cluster.num_nodes") == 2
    assert cfg.value("logger.wandb.entity") == "my-team"
    assert cfg.value("checkpointing.keep_top_k") == 5
    assert cfg.value("brand.new.key") == [1, 2]
    assert cfg.value("policy.tokenizer") is MISSING
    assert cfg.value("logger.wandb_enabled") is True
    assert cfg.value("policy.model_name") == "/models/a b"
    assert cfg.set_by_override("cluster.num_nodes") is not None
    assert cfg.set_by_override("cluster.gpus_per_node") is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # A key beside a close one is a typo of it; only a key like none there is a new one.
        ("cluster.nodes=2", "cluster.nodes is not in the config; did you mean cluster.num_nodes?"),
        ("polcy.model_name=m", "not in the config; did you mean policy.model_name?"),
        ("cluster.zone=a", "cluster.zone is not in the config; use +cluster.zone=a to add it"),
        ("+cluster.num_nodes=2", "already in the config; use cluster.num_nodes=2 to change it"),
        ("~policy.nope", "policy.nope is not in the config, so it cannot be deleted"),
        ("~policy.tokenzer", "so it cannot be deleted; did you mean policy.tokenizer?"),
        ("~cluster.num_nodes=3", "cluster.num_nodes is 1, not 3"),
        ("cluster.num_nodes", "no value; write cluster.num_nodes=VALUE"),
        ("--cluster.num_nodes=2", "expected key=value, +key=value, ++key=value or ~key"),
        ("cluster..num_nodes=2", "expected key=value"),
    ],
)
def test_a_bad_override_is_one_line_naming_it(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(NEMO / "grpo_base.yaml", [override])
    (line,) = caught.value.problems
    assert line.startswith(f"override {override!r}: ")
    assert message in line


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("-3", -3),
        ("1e-3", 0.001),
        ("0.5", 0.5),
        ("False", False),
        ("true", True),
        ("null", None),
        ("[1,2]", [1, 2]),
        ("'quoted'", "quoted"),
        ("${policy.model_name}", "${policy.model_name}"),
        ("a b $(x)", "a b $(x)"),
    ],
)
def test_override_values_parse_as_hydra_reads_them(text: str, value: object) -> None:
    assert parse_override(f"k={text}").value == value


def test_defaults_that_loop_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("defaults: b.yaml\n")
    (tmp_path / "b.yaml").write_text("defaults: a.yaml\n")
    with pytest.raises(ConfigError, match="defaults form a loop"):
        load(tmp_path / "a.yaml")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"c.yaml": "defaults: missing.yaml\n"}, "missing.yaml (in the defaults of"),
        ({"c.yaml": "a: [1\n"}, "invalid YAML"),
        ({"c.yaml": "- 1\n- 2\n"}, "must be a mapping of keys"),
        ({"c.yaml": "defaults: {a: 1}\n"}, "defaults must be a path or a list of paths"),
    ],
)
def test_a_broken_config_is_one_line(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as caught:
        load(tmp_path / "c.yaml")
    (line,) = caught.value.problems
    assert message in line
    assert "\n" not in line
