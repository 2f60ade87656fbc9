"""`plan` and the checks `submit` runs before queueing: every rule, a fit and a misfit each,
on configs shaped like NeMo RL's (tests/data/nemo_rl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.helpers import NEMO, NONCOLOC_2N, RECIPES, fits_then_one_problem, layout_of, rule_cases

GYM_DIR = NEMO.parent / "nemo_gym"
NONCOLOC_1N = RECIPES / "grpo-qwen2.5-7b-1n8g-noncolocated.yaml"
DENSE_32N = RECIPES / "grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.yaml"
MOE_8N = RECIPES / "grpo-qwen3-30ba3b-8n8g-megatron.yaml"
SFT_8N = RECIPES / "sft-llama3.1-70b-8n8g-tp4pp2-long-megatron.yaml"
GYM = GYM_DIR / "grpo_nanov3_judge_node.yaml"
MEGATRON_GEN_2N = RECIPES / "grpo-llama3.2-1b-instruct-2n8g-megatron_generation-noncolocated.yaml"
MOPD_3N = RECIPES / "mopd-qwen3-1.7b-3n8g-megatron-pack.yaml"
MULTI_DATA = NEMO / "grpo_multiple_datasets.yaml"
# NeMo RL main names it so: it has disabled it.
DISABLED = RECIPES / "sft-nemotron-super-49b-8n8g-fsdp2tp4cp8-tulu-v3.yaml.disabled"

V = "policy.generation.vllm_cfg"
SG = "policy.generation.sglang_cfg"


RES = "policy.generation.colocated.resources"
MCORE = "policy.generation.mcore_generation_config"
OPD = "on_policy_distillation"
TEACHER = f"{OPD}.non_colocated_teachers.default_teacher_cfg"

# (rule, config, overrides that make it misfit, words the one problem line must hold)
RULES = [
    (
        "dtensor world % TP x CP",
        DENSE_32N,
        ["policy.dtensor_cfg.tensor_parallel_size=3"],
        "policy training: 256 GPU(s) are not a multiple of 3",
    ),
    (
        "megatron world % TP x CP x PP",
        SFT_8N,
        ["policy.megatron_cfg.context_parallel_size=3"],
        "policy training: 64 GPU(s) are not a multiple of 24",
    ),
    (
        "training world >= TP x CP x PP",
        NONCOLOC_1N,
        ["policy.dtensor_cfg.tensor_parallel_size=8"],
        "policy training: 6 GPU(s) are not a multiple of 8",
    ),
    (
        "megatron experts: world % ETP x EP x PP",
        MOE_8N,
        ["policy.megatron_cfg.expert_model_parallel_size=48"],
        "expert_model_parallel_size=48",
    ),
    (
        "vLLM world % TP x PP",
        NONCOLOC_1N,
        [f"{V}.tensor_parallel_size=3"],
        "generation (vLLM): 2 GPU(s) are not a multiple of 3",
    ),
    (
        "vLLM PP > 1 needs the async engine",
        MOE_8N,
        [f"{V}.async_engine=false"],
        f"{V}.pipeline_parallel_size=2 needs {V}.async_engine=true",
    ),
    (
        "vLLM EP a multiple of TP",
        MOE_8N,
        [
            f"{V}.pipeline_parallel_size=1",
            f"{V}.async_engine=false",
            f"++{V}.expert_parallel_size=6",
        ],
        f"{V}.expert_parallel_size=6 must be a multiple of tensor_parallel_size=4",
    ),
    (
        "one node: generation takes GPUs and leaves some",
        NONCOLOC_1N,
        [f"{RES}.gpus_per_node=8"],
        f"{RES}.gpus_per_node=8 takes all 8 GPUs of the node",
    ),
    (
        "one node: generation needs a GPU count",
        NONCOLOC_1N,
        [f"{RES}.gpus_per_node=null"],
        f"{RES}.gpus_per_node must be > 0",
    ),
    (
        "one node: generation takes no nodes of its own",
        NONCOLOC_1N,
        [f"{RES}.num_nodes=2"],
        f"{RES}.num_nodes=2: the cluster has one node",
    ),
    (
        "several nodes: whole nodes of the cluster's size",
        NONCOLOC_2N,
        [f"{RES}.gpus_per_node=4"],
        f"{RES}.gpus_per_node is 4; it must equal cluster.gpus_per_node=8",
    ),
    (
        "several nodes: generation leaves nodes for training",
        NONCOLOC_2N,
        [f"{RES}.num_nodes=2"],
        f"{RES}.num_nodes=2 takes all 2 nodes",
    ),
    (
        "several nodes: generation needs a node count",
        NONCOLOC_2N,
        [f"{RES}.num_nodes=null"],
        f"{RES}.num_nodes must be > 0",
    ),
    (
        "distillation: megatron generation cannot be non-colocated",
        NONCOLOC_2N,
        ["policy.generation.backend=megatron", "++distillation.max_num_steps=10"],
        "backend=megatron cannot run without colocation in distillation",
    ),
    (
        "PPO: non-colocated generation only on vLLM",
        NONCOLOC_2N,
        ["policy.generation.backend=sglang", "++ppo.max_num_steps=10", f"++{SG}.gpus_per_server=8"],
        "policy.generation.backend=sglang: PPO runs non-colocated generation only on vllm",
    ),
    (
        "GRPO: non-colocated Megatron generation, world % its TP x CP x PP",
        MEGATRON_GEN_2N,
        [f"++{MCORE}.tensor_model_parallel_size=3"],
        f"generation (Megatron): 8 GPU(s) are not a multiple of 3 "
        f"({MCORE}.tensor_model_parallel_size=3",
    ),
    (
        "OPD teachers leave nodes for the policy",
        MOPD_3N,
        [f"{TEACHER}.num_nodes=3"],
        f"{OPD}.non_colocated_teachers take 3 node(s) of cluster.num_nodes=3: none are left",
    ),
    (
        "OPD teachers take nodes the policy's generation would need",
        MOPD_3N,
        [f"{TEACHER}.num_nodes=2"],
        f"{RES}.gpus_per_node=8 takes all 8 GPUs of the node: none are left for training",
    ),
    (
        "an OPD teacher's world % TP x CP x PP",
        MOPD_3N,
        [f"{TEACHER}.tensor_model_parallel_size=3"],
        "teacher 'default_teacher': 8 GPU(s) are not a multiple of 3",
    ),
    (
        "an OPD teacher fits the cluster's nodes",
        MOPD_3N,
        [f"{TEACHER}.gpus_per_node=16"],
        f"{TEACHER}.gpus_per_node=16 is more than cluster.gpus_per_node=8",
    ),
    (
        "OPD teachers need async rollouts",
        MOPD_3N,
        [f"{V}.async_engine=false"],
        f"{OPD}.non_colocated_teachers.enabled needs async rollouts",
    ),
    (
        "exactly one training backend",
        DENSE_32N,
        ["policy.megatron_cfg.enabled=true"],
        "dtensor_cfg.enabled and policy.megatron_cfg.enabled are both true",
    ),
    (
        "segment size divides the nodes",
        DENSE_32N,
        ["++cluster.segment_size=6"],
        "cluster.segment_size=6 does not divide cluster.num_nodes=32",
    ),
    (
        "FSDP2 under its later name, automodel_cfg",
        DENSE_32N,
        ["++policy.automodel_cfg.enabled=true", "++policy.automodel_cfg.tensor_parallel_size=3"],
        "policy training: 256 GPU(s) are not a multiple of 3 "
        "(policy.automodel_cfg.tensor_parallel_size=3",
    ),
    (
        "FSDP2 experts: EP divides DP x CP",
        DENSE_32N,
        ["++policy.dtensor_cfg.expert_parallel_size=64"],
        "expert_parallel_size=64 must divide the 32 data- and context-parallel rank(s)",
    ),
    (
        "vLLM EP other than TP needs the async engine off",
        MOE_8N,
        [f"++{V}.expert_parallel_size=8"],
        f"{V}.expert_parallel_size=8 differs from tensor_parallel_size=4",
    ),
    (
        "SGLang servers fit on a node",
        DENSE_32N,
        ["policy.generation.backend=sglang", f"++{SG}.gpus_per_server=16"],
        f"{SG}.gpus_per_server=16 is more than a node's 8 GPU(s)",
    ),
    (
        "PPO's value model shares the training GPUs",
        SFT_8N,
        [
            "++value.dtensor_cfg.enabled=true",
            "++value.dtensor_cfg._v2=true",
            "++value.megatron_cfg.enabled=false",
            "++value.dtensor_cfg.tensor_parallel_size=3",
        ],
        "value training: 64 GPU(s) are not a multiple of 3",
    ),
    (
        "a training backend is enabled",
        DENSE_32N,
        ["policy.dtensor_cfg.enabled=false"],
        "neither policy.dtensor_cfg.enabled nor policy.megatron_cfg.enabled is true",
    ),
    (
        "a size that does not resolve is named",
        DENSE_32N,
        ["policy.dtensor_cfg.tensor_parallel_size=${policy.nope}"],
        "policy.dtensor_cfg.tensor_parallel_size=${policy.nope}: its interpolation does not "
        "resolve here; expected a whole number >= 1",
    ),
    (
        "sizes are numbers",
        DENSE_32N,
        ["policy.dtensor_cfg.tensor_parallel_size=eight"],
        "policy.dtensor_cfg.tensor_parallel_size: expected a whole number >= 1, got 'eight'",
    ),
]


@pytest.mark.parametrize(("path", "overrides", "problem"), rule_cases(RULES))
def test_each_rule_fits_and_misfits(path: Path, overrides: list[str], problem: str) -> None:
    fits_then_one_problem(path, overrides, problem)


@pytest.mark.parametrize(
    ("path", "nodes", "gpus", "training", "generation", "dp", "roles"),
    [
        (NONCOLOC_2N, 2, 8, 8, 8, 8, ["training", "generation"]),
        (NONCOLOC_1N, 1, 8, 6, 2, 3, ["training+generation"]),
        (DENSE_32N, 32, 8, 256, 256, 32, ["training+generation"] * 32),
        (MOE_8N, 8, 8, 64, 64, 16, ["training+generation"] * 8),
        (SFT_8N, 8, 8, 64, 0, 4, ["training"] * 8),
        (GYM, 33, 8, 256, 256, 128, ["training+generation"] * 32 + ["nemo-gym"]),
        (MEGATRON_GEN_2N, 2, 8, 8, 8, 8, ["training", "generation"]),
        (MOPD_3N, 3, 8, 8, 8, 4, ["training", "generation", "teacher"]),
        (MULTI_DATA, 1, 1, 1, 1, 1, ["training+generation"]),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_layouts_of_fitting_configs(
    path: Path,
    nodes: int,
    gpus: int,
    training: int,
    generation: int,
    dp: int,
    roles: list[str],
) -> None:
    layout = layout_of(path)
    assert layout.problems == ()
    assert (layout.nodes, layout.gpus_per_node) == (nodes, gpus)
    assert (layout.training_gpus, layout.generation_gpus) == (training, generation)
    assert layout.training is not None and layout.training.dp == dp
    assert [r.role for r in layout.nodes_layout] == roles


def test_plan_prints_the_allocation_and_layout(cli: Cli) -> None:
    result = cli("plan", "--config", str(GYM))
    assert result.code == 0, result.err
    assert "33 node(s) x 8 GPU(s) = 264 GPU(s)" in result.out
    assert "+ 1 NeMo Gym GPU node(s)" in result.out
    assert "Megatron TP2 CP1 PP1 EP8 -> DP128 on 256 GPU(s)" in result.out
    assert "vllm TP4 PP1 on 256 GPU(s), 64 engine(s), colocated with training" in result.out
    assert "0-31  training+generation   8         8" in result.out
    assert "32    nemo-gym" in result.out
    assert result.out.rstrip().endswith("Fits.")


def test_plan_json_has_the_promised_keys(cli: Cli) -> None:
    result = cli("plan", "--config", str(NONCOLOC_2N), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["nrl_launch_json"] == 1 and data["ok"] is True
    assert data["nodes"] == 2 and data["gpus_per_node"] == 8
    assert data["training_gpus"] == 8 and data["generation_gpus"] == 8
    assert data["problems"] == []
    assert [n["role"] for n in data["layout"]] == ["training", "generation"]


def test_plan_shows_the_time_limit_and_the_steps_the_overrides_leave(cli: Cli) -> None:
    # The recipe's section holds the step count; an override changes it, as the driver reads it.
    args = ["plan", "sft", "--config", str(NEMO / "sft_base.yaml"), "--time", "4:00:00"]
    result = cli(*args, "sft.max_num_steps=120")
    assert result.code == 0, result.err
    assert "\nTime limit:  4:00:00 (slurm.time)\nSteps:       120 (sft.max_num_steps)\n" in (
        result.out
    )
    data = json.loads(cli(*args, "--json").out)
    assert (data["time_limit"], data["max_num_steps"], data["max_num_steps_key"]) == (
        "4:00:00",
        60,
        "sft.max_num_steps",
    )
    # No --time: Slurm's partition gives the limit; a local job has none; no step count: said.
    result = cli("plan", "--config", str(NEMO / "grpo_base.yaml"), "~grpo.max_num_steps")
    assert "\nTime limit:  the partition's default\nSteps:       not set\n" in result.out
    result = cli("plan", "--backend", "local", "--config", str(NEMO / "grpo_base.yaml"), "--json")
    data = json.loads(result.out)
    assert (data["time_limit"], data["max_num_steps"]) == (None, 1000000)
    assert (
        "Time limit:  none (a local job runs to its end)"
        in cli("plan", "--backend", "local", "--config", str(NEMO / "grpo_base.yaml")).out
    )


def test_plan_exits_2_with_one_line_per_problem(cli: Cli) -> None:
    result = cli(
        "plan",
        "--config",
        str(NONCOLOC_1N),
        f"{RES}.gpus_per_node=8",
        f"{V}.pipeline_parallel_size=3",
        "--json",
    )
    assert result.code == 2
    data = json.loads(result.out)
    assert data["ok"] is False
    assert len(data["problems"]) == 3
    # The keys every command's error object has (docs/exit-codes.md), beside the plan's own.
    assert (data["exit_code"], data["errors"]) == (2, data["problems"])
    errors = result.err.splitlines()
    assert errors == [f"nrl-launch: error: {p}" for p in data["problems"]]
    assert "Traceback" not in result.err


def test_plan_prints_its_problems_under_their_header_on_stdout_too(cli: Cli) -> None:
    """`plan > plan.txt`, or a CI log that keeps stdout only, has the problems, not only
    their count."""
    args = ["plan", "--config", str(NONCOLOC_1N), f"{RES}.gpus_per_node=8"]
    result = cli(*args, f"{V}.pipeline_parallel_size=3")
    assert result.code == 2
    problems = [line.removeprefix("nrl-launch: error: ") for line in result.err.splitlines()]
    assert len(problems) == 3
    tail = result.out.splitlines()[-4:]
    assert tail == ["3 problem(s):", *(f"  {p}" for p in problems)]


def test_plan_checks_the_job_against_the_config(cli: Cli) -> None:
    result = cli("plan", "--config", str(GYM), "--nodes", "32", *SHARED_LOGS)
    assert result.code == 2
    assert result.err.strip() == (
        "nrl-launch: error: slurm.nodes=32 (from --nodes) but the config needs 33 node(s) "
        "(cluster.num_nodes=32 + 1 NeMo Gym GPU node(s) (env.nemo_gym.num_gpu_nodes)): "
        "use --nodes 33, or pass cluster.num_nodes to the driver"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--config FILE: plan needs a NeMo RL config"),
        (["--config", "nope.yaml"], "--config nope.yaml: no such file"),
        (["--config", str(NONCOLOC_2N), "cluster.nodes=2"], "override 'cluster.nodes=2': "),
        (["frobnicate", "--config", str(NONCOLOC_2N)], "recipe 'frobnicate' is not known"),
    ],
)
def test_plan_bad_input_is_one_line(cli: Cli, args: list[str], message: str) -> None:
    result = cli("plan", *args)
    assert result.code == 2
    (line,) = result.err.splitlines()
    assert message in line


def test_generation_is_checked_when_another_key_of_it_does_not_resolve() -> None:
    broken = ["policy.generation.max_new_tokens=${policy.nope}", f"{V}.tensor_parallel_size=3"]
    layout = layout_of(DENSE_32N, broken)
    assert layout.generation is not None
    assert any(
        "generation (vLLM): 256 GPU(s) are not a multiple of 3" in p for p in layout.problems
    )


def test_opd_teachers_are_one_per_distinct_model_each_with_its_nodes() -> None:
    agents = f"++{OPD}.teacher_model_by_agent_name"
    same = layout_of(MOPD_3N, [f"{agents}.math=Qwen/Qwen3-1.7B"])  # deduplicated: one teacher
    assert [t.alias for t in same.teachers] == ["default_teacher"] and same.problems == ()
    two = layout_of(
        MOPD_3N,
        [
            "cluster.num_nodes=5",
            f"{agents}.math=Qwen/Qwen3-8B",
            f"++{OPD}.non_colocated_teachers.teacher_overrides.math.num_nodes=2",
        ],
    )
    assert two.problems == ()
    assert [(t.alias, t.nodes) for t in two.teachers] == [("default_teacher", 1), ("math", 2)]
    assert [r.role for r in two.nodes_layout] == ["training", "generation"] + ["teacher"] * 3
    assert (two.nodes, two.training_gpus, two.generation_gpus) == (5, 8, 8)


def test_plan_counts_opd_teacher_nodes_in_the_allocation(cli: Cli) -> None:
    result = cli("plan", "--config", str(MOPD_3N))
    assert result.code == 0, result.err
    assert "3 node(s) x 8 GPU(s) = 24 GPU(s)" in result.out
    assert "Megatron TP2 CP1 PP1 -> DP4 on 8 GPU(s)" in result.out
    assert (
        "Teacher:     default_teacher (Qwen/Qwen3-1.7B): Megatron TP2 CP1 PP1 on 1 node(s) x 8 "
        "GPU(s)" in result.out
    )
    assert "2     teacher" in result.out


def test_plan_runs_megatron_generation_non_colocated(cli: Cli) -> None:
    result = cli("plan", "--config", str(MEGATRON_GEN_2N))
    assert result.code == 0, result.err
    assert "megatron TP1 PP1 on 8 GPU(s), 8 engine(s), on GPUs of its own" in result.out
    assert "1     generation" in result.out


def test_plan_reads_a_config_whose_override_marker_replaces_a_section(cli: Cli) -> None:
    result = cli("plan", "--config", str(MULTI_DATA))
    assert result.code == 0, result.err
    assert result.out.rstrip().endswith("Fits.")


def _job_file(tmp_path: Path, nodes: int, *driver: str) -> Path:
    job = tmp_path / "job.yaml"
    command = ["uv", "run", "examples/run_grpo.py", *driver]
    job.write_text(json.dumps({"slurm": {"nodes": nodes}, "driver": {"command": command}}))
    return job


def test_plan_checks_a_job_file_with_the_overrides_its_driver_runs(
    cli: Cli, tmp_path: Path
) -> None:
    # The job's driver passes cluster.num_nodes=3: the 3-node job fits what NeMo RL will run.
    job = _job_file(tmp_path, 3, "--config", str(NONCOLOC_2N), "cluster.num_nodes=3")
    for args in (["-f", str(job)], ["-f", str(job), "--config", str(NONCOLOC_2N)]):
        result = cli("plan", *args, "--json", *SHARED_LOGS)
        assert result.code == 0, result.err
        data = json.loads(result.out)
        assert (data["nodes"], data["training_gpus"]) == (3, 16)
        assert data["overrides"] == ["cluster.num_nodes=3"]
        assert "warning" not in result.err


def test_plan_says_when_config_is_not_the_one_the_driver_runs(cli: Cli, tmp_path: Path) -> None:
    job = _job_file(tmp_path, 2, f"--config={NONCOLOC_2N}")
    result = cli("plan", "-f", str(job), "--config", str(NONCOLOC_1N), "--json", *SHARED_LOGS)
    assert result.code == 0, result.err
    assert json.loads(result.out)["config"] == str(NONCOLOC_2N)
    assert result.err.splitlines() == [
        f"nrl-launch: warning: nemo_rl.config {NONCOLOC_1N} (from --config) is not the "
        f"driver's --config {NONCOLOC_2N}: checking the driver's, which NeMo RL runs"
    ]


def test_plan_of_a_driver_command(cli: Cli) -> None:
    args = ["--", "uv", "run", "examples/run_grpo.py", "--config", str(NONCOLOC_2N)]
    result = cli("plan", *args, "cluster.num_nodes=3")
    assert result.code == 0, result.err
    assert "3 node(s) x 8 GPU(s) = 24 GPU(s)" in result.out
    assert "0-1   training" in result.out


def test_plan_reads_this_machine_s_copy_of_the_driver_s_config_with_its_argv(
    cli: Cli, tmp_path: Path
) -> None:
    # The driver's path is inside the image: --config is the copy here; the driver's overrides
    # still apply, and overrides the driver does not run are said not to be checked.
    job = _job_file(tmp_path, 3, "--config", "/opt/nemo-rl/c.yaml", "cluster.num_nodes=3")
    args = ["-f", str(job), "--config", str(NONCOLOC_2N), "grpo.val_period=5", *SHARED_LOGS]
    result = cli("plan", *args)
    assert result.code == 0, result.err
    assert "3 node(s) x 8 GPU(s)" in result.out
    assert result.err.splitlines() == [
        "nrl-launch: warning: nemo_rl.overrides grpo.val_period=5 are not in the driver's "
        "command: not checked (the driver's own overrides are what NeMo RL runs)"
    ]


def test_the_docs_plan_example_runs_as_written() -> None:
    """The `plan --config` block of the NeMo RL configs page (docs/nemo-rl-configs.md), from
    the repository root, as a reader pastes it."""
    import subprocess

    from tests.conftest import REPO, as_reader, doc_block, readme_shell_env

    commands = doc_block("grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml")
    done = subprocess.run(
        as_reader(commands),
        cwd=REPO,
        env=readme_shell_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Allocation:  2 node(s) x 8 GPU(s) = 16 GPU(s)" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "args",
    [["plan", "--config", str(DISABLED)], ["render", "sft", "--config", str(DISABLED)]],
    ids=["plan", "render"],
)
def test_a_config_nemo_rl_has_disabled_is_a_warning(cli: Cli, args: list[str]) -> None:
    result = cli(*args, *SHARED_LOGS)
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if "disabled" in line]
    assert warnings == [
        f"nrl-launch: warning: {DISABLED}: NeMo RL has disabled this config (renamed "
        "*.disabled): its nightly tests no longer run it, so it may not work"
    ]
    result = cli("plan", "--config", str(SFT_8N), *SHARED_LOGS)  # one NeMo RL runs: no word
    assert result.code == 0 and "disabled" not in result.err


def test_plan_reads_the_driver_of_ray_sub_s_command(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = f"uv run ./examples/run_grpo.py --config {NONCOLOC_2N} cluster.num_nodes=3"
    monkeypatch.setenv("COMMAND", command)
    result = cli("plan", *SHARED_LOGS)
    assert result.code == 0, result.err
    assert "Allocation:  3 node(s) x 8 GPU(s) = 24 GPU(s) (cluster.num_nodes=3)" in result.out
    assert "0-1   training" in result.out
    assert result.err.splitlines() == [
        "nrl-launch: warning: ray.sub variables set in your shell are used: COMMAND "
        "(driver.command); unset them if they are not meant for this job"
    ]


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("cluster.num_nodes=abc", "cluster.num_nodes: expected a whole number >= 1, got 'abc'"),
        ("cluster.num_nodes=0", "cluster.num_nodes: expected a whole number >= 1, got 0"),
        (
            "cluster.num_nodes=${oc.env:NRL_TEST_UNSET}",
            "cluster.num_nodes=${oc.env:NRL_TEST_UNSET}: its interpolation does not resolve "
            "here; expected a whole number >= 1",
        ),
        (
            "cluster.gpus_per_node=eight",
            "cluster.gpus_per_node: expected a whole number >= 1, got 'eight'",
        ),
        (
            "~cluster.num_nodes",
            "cluster.num_nodes is not set: give it in the config (cluster.num_nodes=N) or --nodes",
        ),
    ],
)
@pytest.mark.parametrize("command", [["plan"], ["render", "grpo"]], ids=["plan", "render"])
def test_a_bad_cluster_size_is_one_line_without_an_allocation(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, command: list[str], override: str, problem: str
) -> None:
    monkeypatch.delenv("NRL_TEST_UNSET", raising=False)
    result = cli(*command, "--config", str(NONCOLOC_2N), override, *SHARED_LOGS)
    assert result.code == 2
    assert result.err.splitlines() == [f"nrl-launch: error: {problem}"]
    assert result.out == ""


# ---- cluster.segment_size and sbatch --segment (slurm.segment) ----


def _segmented(tmp_path: Path, segment_size: int | None) -> Path:
    """A 4-node config of NeMo RL's grpo_math_1B, with `cluster.segment_size` (None: null)."""
    config = tmp_path / "grpo-4n.yaml"
    size = "null" if segment_size is None else segment_size
    config.write_text(
        f"defaults: {NEMO / 'grpo_math_1B.yaml'}\n"
        f"cluster:\n  num_nodes: 4\n  gpus_per_node: 8\n  segment_size: {size}\n"
    )
    return config


def test_a_config_s_segment_size_renders_sbatch_s_segment(cli: Cli, tmp_path: Path) -> None:
    result = cli("render", "grpo", "--config", str(_segmented(tmp_path, 2)), *SHARED_LOGS)
    assert result.code == 0, result.err
    assert "#SBATCH --segment=2" in result.out.splitlines()
    assert "#SBATCH --nodes=4" in result.out.splitlines()
    assert (
        "nrl-launch: note: slurm.segment=2: from cluster.segment_size=2 (sbatch --segment)"
        in result.err.splitlines()
    )
    submit = next(x for x in result.out.splitlines() if x.startswith("# Submit with: "))
    assert " --segment=2 " in submit


def test_a_dedicated_head_breaks_the_segments(cli: Cli, tmp_path: Path) -> None:
    config = _segmented(tmp_path, 2)
    result = cli("render", "grpo", "--config", str(config), "--dedicated-head", *SHARED_LOGS)
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.segment=2: the job's 5 nodes, a dedicated Ray head included "
        "(it breaks the segments: drop it) are not whole segments of 2; sbatch --segment needs "
        "a multiple of it"
    ]
    assert result.out == ""


def test_a_segment_the_config_does_not_share_is_a_problem(cli: Cli, tmp_path: Path) -> None:
    args = ["grpo", "--config", str(_segmented(tmp_path, 4)), "--set", "slurm.segment=2"]
    problem = (
        "slurm.segment=2 (from --set slurm.segment) but the config has cluster.segment_size=4: "
        "NeMo RL places its workers by the segments Slurm makes, so set both to one value"
    )
    result = cli("plan", *args, *SHARED_LOGS)
    assert result.code == 2
    assert f"nrl-launch: error: {problem}" in result.err.splitlines()
    assert result.out.splitlines()[-2:] == ["1 problem(s):", f"  {problem}"]
    assert cli("render", *args, *SHARED_LOGS).code == 2


def test_a_segment_given_for_a_config_without_one_is_passed_to_it(cli: Cli, tmp_path: Path) -> None:
    config = _segmented(tmp_path, None)
    result = cli("render", "grpo", "--config", str(config), "--set", "slurm.segment=2")
    assert result.code == 0, result.err
    assert "#SBATCH --segment=2" in result.out.splitlines()
    (driver,) = [x for x in result.out.splitlines() if x.startswith("NRL_DRIVER=(")]
    assert driver.endswith(" ++cluster.segment_size=2)")
    assert (
        "nrl-launch: note: cluster.segment_size is not in the config; passing "
        "++cluster.segment_size=2" in result.err.splitlines()
    )


def test_a_segment_that_does_not_divide_the_nodes_is_refused(cli: Cli, tmp_path: Path) -> None:
    config = _segmented(tmp_path, None)
    result = cli("plan", "grpo", "--config", str(config), "--set", "slurm.segment=3", *SHARED_LOGS)
    assert result.code == 2
    assert (
        "nrl-launch: error: slurm.segment=3: the job's 4 nodes are not whole segments of 3; "
        "sbatch --segment needs a multiple of it" in result.err.splitlines()
    )
