"""`submit RECIPE --config FILE OVERRIDES`: the job sized from the config, the driver command
built, overrides passed on untouched, contradictions refused, before anything is written.
Rendered through the same path as submit (`render`), and the driver argv read back by bash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.helpers import NEMO, bash_values, submit_argv

GYM_DIR = NEMO.parent / "nemo_gym"
NONCOLOC_2N = NEMO / "recipes" / "llm" / "grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml"
SFT_8N = NEMO / "recipes" / "llm" / "sft-llama3.1-70b-8n8g-tp4pp2-long-megatron.yaml"
GYM = GYM_DIR / "grpo_nanov3_judge_node.yaml"
DRIVER = 'printf "%s\\0" "${NRL_DRIVER[@]}"'


def rendered(cli: Cli, *args: str) -> tuple[str, str]:
    result = cli("render", *args)
    assert result.code == 0, result.err
    return result.out, result.err


def test_recipe_builds_the_driver_and_sizes_the_job(cli: Cli) -> None:
    script, err = rendered(cli, "grpo", "--config", str(NONCOLOC_2N), "--time", "30")
    assert bash_values(script, DRIVER) == [
        "uv",
        "run",
        "examples/run_grpo.py",
        "--config",
        str(NONCOLOC_2N),
    ]
    # The save deadline is the node's to set, from the job's end (30 min less 15).
    assert bash_values(script, 'printf "%s\\0" "$NRL_SAVE_MARGIN_S"') == ["900"]
    argv = submit_argv(script)
    assert "--nodes=2" in argv and "--gres=gpu:8" in argv
    assert "note: slurm.nodes=2: from cluster.num_nodes=2" in err


def test_overrides_reach_the_driver_untouched(cli: Cli) -> None:
    overrides = [
        "policy.model_name=/models/it's a $(whoami) `x`",
        "++logger.wandb.name=${oc.env:USER}-run",
        "~policy.tokenizer",
        "+data.extra='quoted; rm -rf /'",
        "logger.wandb_enabled=False",
    ]
    script, _ = rendered(cli, "grpo", "--config", str(NONCOLOC_2N), *overrides, "--time", "5")
    driver = bash_values(script, DRIVER)
    assert driver[5:10] == overrides


def test_nemo_gym_nodes_are_extra_slurm_nodes(cli: Cli) -> None:
    script, _ = rendered(cli, "nemo-gym-grpo", "--config", str(GYM))
    assert "--nodes=33" in submit_argv(script)
    assert bash_values(script, DRIVER)[2] == "examples/nemo_gym/run_grpo_nemo_gym.py"


def test_flags_that_differ_from_the_file_are_passed_to_the_driver(cli: Cli) -> None:
    script, err = rendered(cli, "nemo-gym-grpo", "--config", str(GYM), "--nodes", "17")
    assert "--nodes=17" in submit_argv(script)
    assert "++cluster.num_nodes=16" in bash_values(script, DRIVER)
    assert "cluster.num_nodes is 32 in the config; the job has 16 (--nodes)" in err


def test_a_config_without_cluster_keys_gets_them(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "bare.yaml"
    config.write_text("defaults: " + str(NEMO / "sft_base.yaml") + "\n")
    config.write_text(config.read_text() + "cluster: {}\n")
    script, _ = rendered(
        cli, "sft", "--config", str(config), "--nodes", "2", "--gpus-per-node", "4"
    )
    driver = bash_values(script, DRIVER)
    assert "++cluster.num_nodes=2" in driver and "++cluster.gpus_per_node=4" in driver


def test_a_flag_contradicting_an_override_is_refused(cli: Cli, isolated: Path) -> None:
    result = cli(
        "render",
        "grpo",
        "--config",
        str(NONCOLOC_2N),
        "cluster.num_nodes=2",
        "--nodes",
        "3",
        "-o",
        "job.sbatch",
        *SHARED_LOGS,
    )
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.nodes=3 (from --nodes) contradicts the override "
        "'cluster.num_nodes=2': drop one of them"
    ]
    assert not (isolated / "job.sbatch").exists()


def test_a_misfit_is_refused_before_anything_is_written(cli: Cli, isolated: Path) -> None:
    args = ["grpo", "--config", str(NONCOLOC_2N), "policy.dtensor_cfg.tensor_parallel_size=3"]
    result = cli("submit", *args)
    assert result.code == 2
    assert "policy training: 8 GPU(s) are not a multiple of 3" in result.err
    assert not list(isolated.rglob("*")) and not (isolated.parent / "home" / ".local").exists()
    # --no-check: the same job renders, the problem becomes a warning
    result = cli("render", *args, "--no-check")
    assert result.code == 0
    assert "warning: policy training: 8 GPU(s) are not a multiple of 3" in result.err
    assert "--nodes=2" in submit_argv(result.out)


def test_a_raw_command_with_a_config_is_checked_not_changed(cli: Cli) -> None:
    result = cli(
        "render",
        "--set",
        f"nemo_rl.config={SFT_8N}",
        "--nodes",
        "4",
        "--",
        "uv",
        "run",
        "examples/run_sft.py",
        "--config",
        str(SFT_8N),
    )
    assert result.code == 2
    assert "slurm.nodes=4 (from --nodes) but the config needs 8 node(s)" in result.err


def test_a_profile_can_rename_a_driver(cli: Cli, tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("nemo_rl:\n  drivers:\n    grpo: examples/run_grpo_math.py\n")
    script, _ = rendered(cli, "--profile", str(profile), "grpo", "--config", str(NONCOLOC_2N))
    assert bash_values(script, DRIVER)[2] == "examples/run_grpo_math.py"
    script, _ = rendered(cli, "--profile", str(profile), "sft", "--config", str(SFT_8N))
    assert bash_values(script, DRIVER)[2] == "examples/run_sft.py"  # the others stay


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grpo", "--config", "missing.yaml"], "--config missing.yaml: no such file"),
        (["grpo"], "RECIPE grpo: give the NeMo RL config with --config FILE"),
        (["dance", "--config", str(SFT_8N)], "recipe 'dance' is not known; accepted: grpo, sft"),
        (["grpo", "--config", str(SFT_8N), "--interactive"], "but the job is interactive"),
        (["--config", str(SFT_8N), "sft", "x=1"], "override 'x=1': x is not in the config"),
    ],
)
def test_recipe_bad_input_is_one_line(cli: Cli, args: list[str], message: str) -> None:
    result = cli("render", *args)
    assert result.code == 2
    (line,) = result.err.splitlines()
    assert message in line


def test_a_misspelt_override_is_told_the_key_it_meant_not_to_add_it(cli: Cli) -> None:
    config = str(NEMO / "grpo_math_1B.yaml")
    result = cli("render", "grpo", "--config", config, "policy.modle_name=X")
    assert result.code == 2 and result.out == ""
    assert result.err == (
        "nrl-launch: error: override 'policy.modle_name=X': policy.modle_name is not in the "
        "config; did you mean policy.model_name?\n"
    )
    # A key like none in the config is a new one: that is when `+key` is the answer.
    result = cli("render", "grpo", "--config", config, "policy.qqzx=1")
    assert result.code == 2
    assert "policy.qqzx is not in the config; use +policy.qqzx=1 to add it" in result.err


def test_time_limit_sets_the_checkpoint_deadline_with_a_margin(cli: Cli) -> None:
    script, _ = rendered(
        cli,
        "sft",
        "--config",
        str(SFT_8N),
        "--time",
        "1-00:00:00",
        "--set",
        "nemo_rl.checkpoint_margin_min=30",
    )
    margin = 'printf "%s\\0" "${NRL_SAVE_MARGIN_S-unset}" "${NRL_TIMER_CLASS-unset}"'
    assert bash_values(script, margin) == ["1800", "nemo_rl.utils.timer:TimeoutChecker"]
    assert not any("must_save_by" in w for w in bash_values(script, DRIVER))
    script, _ = rendered(
        cli, "sft", "--config", str(SFT_8N), "checkpointing.enabled=false", "--time", "4:00:00"
    )
    assert bash_values(script, margin) == ["unset", "unset"]


def test_a_deadline_of_the_config_s_own_is_left_as_it_is(cli: Cli) -> None:
    """The user's value (or nemo_rl.save_by_job_end=false) is theirs: the node adds none."""
    margin = 'printf "%s\\0" "${NRL_SAVE_MARGIN_S-unset}"'
    for extra in (
        ["++checkpointing.checkpoint_must_save_by=00:00:30:00"],
        ["--set", "nemo_rl.save_by_job_end=false"],
    ):
        script, _ = rendered(cli, "sft", "--config", str(SFT_8N), "--time", "1:00:00", *extra)
        assert bash_values(script, margin) == ["unset"], extra


def test_a_fork_s_timer_class_must_be_module_and_class(cli: Cli) -> None:
    result = cli("render", "sft", "--config", str(SFT_8N), "--set", "nemo_rl.timer_class=no_colon")
    assert result.code == 2
    assert "nemo_rl.timer_class" in result.err and "is not module:Class" in result.err
    assert "Traceback" not in result.err
    script, _ = rendered(
        cli, "sft", "--config", str(SFT_8N), "--set", "nemo_rl.timer_class=fork.timer:Clock"
    )
    assert bash_values(script, 'printf "%s\\0" "$NRL_TIMER_CLASS"') == ["fork.timer:Clock"]


def test_a_deadline_after_the_time_limit_is_a_warning(cli: Cli) -> None:
    _, err = rendered(
        cli,
        "sft",
        "--config",
        str(SFT_8N),
        "--time",
        "1:00:00",
        "++checkpointing.checkpoint_must_save_by=00:02:00:00",
    )
    assert "checkpoint_must_save_by=00:02:00:00 is after the time limit 1:00:00" in err


def test_caches_dir_sets_every_cache_and_mounts_it(cli: Cli) -> None:
    """Every shared cache but uv's: NeMo RL's maintainers keep UV_CACHE_DIR unset in the
    container (its prebuilt envs; concurrent jobs corrupt a shared one), as ray.sub does."""
    script, _ = rendered(
        cli, "--interactive", "--container", "img", "--set", "caches=/lustre/me/cache"
    )
    env = bash_values(
        script,
        'UV_CACHE_DIR=/login/uv; job_env; printf "%s\\0" "$HF_HOME" "$TRANSFORMERS_CACHE" '
        '"$HF_DATASETS_CACHE" "$NRL_MEGATRON_CHECKPOINT_DIR" "${UV_CACHE_DIR-unset}" '
        '"${NRL_CACHE_DIRS[@]}"',
    )
    assert env == [
        "/lustre/me/cache/huggingface",
        "/lustre/me/cache/huggingface/hub",
        "/lustre/me/cache/huggingface/datasets",
        "/lustre/me/cache/megatron",
        "unset",
        "/lustre/me/cache",
    ]
    (mounts,) = bash_values(
        script, 'NRL_SUBMIT_DIR=/s; set_container_args x; printf "%s\\0" "${NRL_CONTAINER_ARGS[1]}"'
    )
    assert (
        mounts == "--container-mounts=/lustre/me/cache:/lustre/me/cache,/logs/1-logs:/logs/1-logs"
    )


@pytest.mark.parametrize(
    ("args", "warning"),
    [
        (["--set", "caches.hf_home=/tmp/hf"], "caches (HF_HOME) /tmp/hf is not on storage every"),
        (["--set", "caches=/dev/shm/c"], "/dev/shm is local to each node"),
        (
            [
                "grpo",
                "--config",
                str(NONCOLOC_2N),
                "--container",
                "img",
                "--set",
                "container.workdir=/opt/nemo-rl",
            ],
            "checkpointing.checkpoint_dir results/grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-"
            "noncolocated is not on storage every node shares: it is relative to the driver's "
            "working directory /opt/nemo-rl, and it is inside the container",
        ),
        (
            ["grpo", "--config", str(NONCOLOC_2N), "++logger.log_dir=/tmp/logs"],
            "logger.log_dir /tmp/logs is not on storage every node shares",
        ),
    ],
)
def test_node_local_storage_is_a_warning(cli: Cli, args: list[str], warning: str) -> None:
    if "grpo" not in args:
        args = [*args, "--interactive"]
    _, err = rendered(cli, *args)
    assert warning in err


def test_shared_storage_gives_no_warning(cli: Cli) -> None:
    _, err = rendered(
        cli,
        "grpo",
        "--config",
        str(NONCOLOC_2N),
        "--set",
        "caches=/lustre/me/cache",
        "++checkpointing.checkpoint_dir=/lustre/me/ckpt",
        "++logger.log_dir=/lustre/me/logs",
        *SHARED_LOGS,
    )
    assert "warning" not in err


LOCAL_LOGS = (
    "nrl-launch: warning: logs.base_dir ., {cwd} from this directory, is local to each node "
    "(/tmp): each of the job's 2 nodes would write its logs and state where neither the others "
    "nor status and logs can read them; choose a directory every node shares"
)


@pytest.mark.parametrize(
    "given",
    [
        "flag",  # --nodes 2
        "recipe config",  # cluster.num_nodes: 2 in the recipe's config
        "job file",  # slurm.nodes: 2
        "job file's config",  # nemo_rl: {recipe, config} in a job file
        "driver's config",  # the --config of the job's own driver command
    ],
)
def test_a_node_local_log_dir_is_said_however_the_job_got_its_nodes(
    cli: Cli, isolated: Path, given: str
) -> None:
    """Submitted from /tmp (the tests' cwd), the default log dir `.` is on each node's own
    disk: said once, whether --nodes, a job file or the NeMo RL config gave the 2 nodes."""
    if not str(isolated).startswith("/tmp/"):
        pytest.skip(f"the tests' dir {isolated} is not under /tmp")
    job = isolated / "job.yaml"
    args = {
        "flag": ["--nodes", "2", "--", "python", "x.py"],
        "recipe config": ["grpo", "--config", str(NONCOLOC_2N)],
        "job file": ["-f", str(job), "--", "python", "x.py"],
        "job file's config": ["-f", str(job)],
        "driver's config": RAY_SUB,
    }[given]
    if given == "job file":
        job.write_text("slurm: {nodes: 2}\n")
    if given == "job file's config":
        job.write_text(f"nemo_rl: {{recipe: grpo, config: {NONCOLOC_2N}}}\n")
    result = cli("render", *args)
    assert result.code == 0, result.err
    assert "--nodes=2" in submit_argv(result.out)
    said = [line for line in result.err.splitlines() if "logs.base_dir" in line]
    assert said == [LOCAL_LOGS.format(cwd=isolated)]
    result = cli("render", *SHARED_LOGS, *args)  # a dir every node shares: nothing to say
    assert result.code == 0, result.err
    assert "logs.base_dir" not in result.err


def test_plan_json_shows_the_driver_a_recipe_would_run(cli: Cli) -> None:
    result = cli("plan", "sft", "--config", str(SFT_8N), "--json")
    data = json.loads(result.out)
    assert data["driver"][:3] == ["uv", "run", "examples/run_sft.py"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chain", "0"], "--chain 0: expected a number of jobs, 1 or more"),
        (["checkpointing.enabled=false", "--chain", "3"], "checkpointing.enabled is false"),
        (
            [
                "--chain",
                "2",
                "--backend",
                "local",
                "--set",
                f"nemo_rl.config={NEMO / 'sft_base.yaml'}",
            ],
            "--chain: the local backend has no scheduler",
        ),
    ],
)
def test_a_chain_that_cannot_resume_is_refused(
    cli: Cli, isolated: Path, args: list[str], message: str
) -> None:
    result = cli("submit", "sft", "--config", str(SFT_8N), *args)
    assert result.code == 2
    assert message in result.err.splitlines()[-1]
    assert not list(isolated.iterdir())


# ---- A driver command of the job's own (ray.sub style): its --config and overrides ----

RAY_SUB = ["--", "uv", "run", "examples/run_grpo.py", "--config", str(NONCOLOC_2N)]


def test_a_ray_sub_style_job_is_sized_and_checked_from_its_driver_argv(cli: Cli) -> None:
    script, err = rendered(cli, *RAY_SUB, "cluster.num_nodes=3")
    assert "--nodes=3" in submit_argv(script) and "--gres=gpu:8" in submit_argv(script)
    assert "note: slurm.nodes=3: from cluster.num_nodes=3" in err
    # the driver runs as given: nothing added to it
    assert bash_values(script, DRIVER) == [*RAY_SUB[1:], "cluster.num_nodes=3"]
    result = cli("render", *RAY_SUB, "policy.dtensor_cfg.tensor_parallel_size=3")
    assert result.code == 2
    assert "policy training: 8 GPU(s) are not a multiple of 3" in result.err
    result = cli("render", *SHARED_LOGS, "--nodes", "2", *RAY_SUB, "cluster.num_nodes=3")
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.nodes=2 (from --nodes) contradicts the override "
        "'cluster.num_nodes=3': drop one of them"
    ]


def test_a_driver_config_in_the_container_is_read_through_its_mount(
    cli: Cli, tmp_path: Path
) -> None:
    checkout = tmp_path / "RL"
    (checkout / "configs").mkdir(parents=True)
    (checkout / "configs" / "c.yaml").write_text(
        f"defaults: {NONCOLOC_2N}\ncluster: {{num_nodes: 4}}\n"
    )
    result = cli(
        "plan",
        *("--container", "nvcr.io/nvidia/nemo-rl:v0.6.0", "--mount", f"{checkout}:/workspace"),
        *("--set", "driver.workdir=/workspace", "--json"),
        *("--", "uv", "run", "examples/run_grpo.py", "--config", "configs/c.yaml"),
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["nodes"] == 4


def test_a_driver_config_not_readable_here_is_said_not_checked(cli: Cli) -> None:
    args = ["--nodes", "2", "--", "uv", "run", "examples/run_sft.py", "--config", "nope.yaml"]
    _, err = rendered(cli, *args)
    assert (
        "note: the driver's --config nope.yaml is not readable here (no file nope.yaml): "
        "its config is not checked"
    ) in err
    result = cli("plan", *SHARED_LOGS, *args)
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: the driver's --config nope.yaml is not readable here (no file "
        "nope.yaml): run plan where it is, or give --config FILE"
    ]


# ---- A recipe (or driver) and a config of different algorithms ----


@pytest.mark.parametrize(
    ("args", "who"),
    [
        (["sft", "--config", str(NONCOLOC_2N)], "recipe sft runs sft"),
        (
            ["--", "uv", "run", "examples/run_sft.py", "--config", str(NONCOLOC_2N)],
            "driver examples/run_sft.py runs sft",
        ),
    ],
)
def test_a_recipe_and_a_config_that_disagree_is_a_warning(
    cli: Cli, args: list[str], who: str
) -> None:
    _, err = rendered(cli, *SHARED_LOGS, *args)
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        f"nrl-launch: warning: {who}, but the config {NONCOLOC_2N} is for grpo (it has no sft: "
        "section): check the recipe and the config"
    ]


def test_a_recipe_and_its_own_config_give_no_warning(cli: Cli) -> None:
    for args in (
        ["grpo", "--config", str(NONCOLOC_2N)],
        ["nemo-gym-grpo", "--config", str(GYM)],
        ["sft", "--config", str(SFT_8N)],
    ):
        _, err = rendered(cli, *args, "--set", "logs.base_dir=/lustre/logs")
        assert "warning" not in err, err


def test_a_program_that_is_not_a_nemo_rl_driver_is_not_read_as_one(cli: Cli) -> None:
    # Only NeMo RL's drivers (examples/run_*.py, or one named under nemo_rl.drivers) take
    # --config FILE and Hydra overrides; another program's --config is its own business.
    script, err = rendered(cli, "--", "python", "train.py", "--config", str(NONCOLOC_2N), "--lr=1")
    assert "--nodes=1" in submit_argv(script)
    assert "cluster.num_nodes" not in err


def test_a_run_script_of_ones_own_with_its_own_config_is_not_refused(
    cli: Cli, tmp_path: Path
) -> None:
    """run_train.py --config train.yaml --epochs 3 is a Ray program's own: its config is no
    NeMo RL config (no cluster: section, or flags Hydra would not take), so it is not read as
    one and the job renders, with a note."""
    (tmp_path / "train.yaml").write_text("trainer: {epochs: 1}\n")
    for extra in ([], ["--epochs", "3"]):
        result = cli(
            "render",
            "--nodes",
            "2",
            "-o",
            str(tmp_path / "job.sbatch"),
            "--",
            "python",
            "run_train.py",
            "--config",
            str(tmp_path / "train.yaml"),
            *extra,
        )
        assert result.code == 0, result.err
        assert "its config is not checked" in result.err
        assert "--nodes=2" in result.out
