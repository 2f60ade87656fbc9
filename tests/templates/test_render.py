"""`render` is a pure dry run, and the template environment refuses unquoted values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jinja2
import pytest

from nrl_launch import templating
from nrl_launch.shell import quote
from tests.conftest import EXAMPLES, SHARED_LOGS, TINY_RL, Cli, shellcheck
from tests.helpers import bash_values


def tree(*roots: Path) -> set[Path]:
    return {p for root in roots for p in root.rglob("*")}


def test_render_writes_nothing_and_runs_nothing(
    cli: Cli, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **_: object) -> None:
        raise AssertionError(f"render started a subprocess: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    before = tree(isolated, tmp_path / "home")
    result = cli("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    assert result.code == 0, result.err
    assert tree(isolated, tmp_path / "home") == before


def test_render_json_is_versioned_and_complete(cli: Cli) -> None:
    data = json.loads(cli("render", "--json", "--interactive").out)
    assert data["nrl_launch_json"] == 1
    assert data["command"] == "render"
    assert data["ok"] is True
    assert data["argv"][0] == "sbatch"
    assert data["script"].startswith("#!/usr/bin/env bash")
    assert data["script_path"] is None


def test_render_to_file_prints_the_submit_command(cli: Cli, isolated: Path) -> None:
    result = cli("render", "--interactive", "-o", "job.sbatch")
    assert result.code == 0, result.err
    assert result.out.startswith("sbatch --parsable ")
    assert result.out.rstrip().endswith(" job.sbatch")
    assert (isolated / "job.sbatch").read_text().splitlines()[2] == (
        "# Submit with: " + result.out.rstrip()
    )


def test_template_environment_refuses_unquoted_strings() -> None:
    finalize = templating._only_quoted
    assert finalize(quote("a b")) == "'a b'"
    assert finalize(8) == 8
    with pytest.raises(jinja2.TemplateError, match="pass it through the q filter"):
        finalize("$(id)")
    with pytest.raises(jinja2.TemplateError):
        finalize(True)


def test_template_environment_is_strict_about_undefined_names() -> None:
    env = templating._environment()
    with pytest.raises(jinja2.UndefinedError, match="missing"):
        env.from_string("{{ missing | q }}").render()
    with pytest.raises(jinja2.UndefinedError, match="argv"):
        env.from_string("{{ argv | qjoin }}").render()


@pytest.mark.parametrize("caches", [[], ["--set", "caches.uv=/lustre/uv"]])
def test_a_container_job_drops_the_login_shell_s_uv_cache_as_ray_sub_does(
    cli: Cli, tmp_path: Path, caches: list[str]
) -> None:
    out = tmp_path / "job.sbatch"
    args = ["render", "--container", "nvcr.io/nvidia/nemo-rl:v0.6.0", "-o", str(out), *caches]
    assert cli(*args, "--", "python", "train.py").code == 0
    # UV_CACHE_DIR from the shell sbatch exports is a login-node path; caches.uv sets the job's.
    script = (
        "UV_CACHE_DIR=/home/me/.cache/uv; "
        f"source {out}; "
        'NRL_LOG_DIR=/x job_env; echo "${UV_CACHE_DIR-unset}"'
    )
    job_env = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert job_env.stdout.strip() == ("/lustre/uv" if caches else "unset")


# ---- srun's MPI plugin (slurm.mpi) ----


def _step_args(script: str) -> list[str]:
    """NRL_STEP_ARGS as bash sets it: the srun arguments of the job's steps."""
    return bash_values(script, 'NRL_NODES=2; printf "%s\\0" "${NRL_STEP_ARGS[@]}"')


@pytest.mark.parametrize("command", ["render", "run"])
def test_slurm_mpi_goes_to_the_steps_srun_args(cli: Cli, tmp_path: Path, command: str) -> None:
    job = ["--dry-run"] if command == "run" else []
    mpi = cli(command, *job, "--set", "slurm.mpi=pmix", "--", "python", "x.py")
    assert mpi.code == 0, mpi.err
    assert "--mpi=pmix" in _step_args(mpi.out)
    script = tmp_path / "job.sbatch"
    script.write_text(mpi.out)
    assert shellcheck(script).stdout == ""
    default = cli(command, *job, "--", "python", "x.py")
    assert default.code == 0, default.err
    assert [a for a in _step_args(default.out) if a.startswith("--mpi")] == []
    assert "--mpi" not in default.out  # nor anywhere else: the site's MpiDefault


# ---- the defaults taken, said in the script's header ----


def _header(script: str) -> list[str]:
    """The script's comment lines before its first #SBATCH line."""
    lines = script.split("\n#SBATCH ", 1)[0].splitlines()
    return [line for line in lines if line.startswith("#")]


def _sbatch_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_the_header_names_each_default_taken(cli: Cli) -> None:
    result = cli("render", "--", "python", "x.py")
    assert result.code == 0, result.err
    assert _header(result.out)[3:] == [
        "# Not given, so nrl-launch's defaults:",
        "#   slurm.exclusive: not set, so whole nodes (--exclusive), as a Ray job takes every CPU "
        "and GPU of its nodes",
        "#   slurm.time: not set, so no --time: the partition's default time limit",
    ]
    assert "#SBATCH --exclusive" in _sbatch_lines(result.out)
    assert not any(line.startswith("#SBATCH --time") for line in _sbatch_lines(result.out))


def test_no_defaults_are_named_when_each_is_given(cli: Cli) -> None:
    result = cli("render", "--time", "1:00:00", "--exclusive", "--", "python", "x.py")
    assert result.code == 0, result.err
    assert "defaults" not in "\n".join(_header(result.out))
    assert {"#SBATCH --time=1:00:00", "#SBATCH --exclusive"} <= set(_sbatch_lines(result.out))


def test_a_cpu_only_command_shares_its_nodes_unless_told(cli: Cli) -> None:
    shared = cli("run", "--gpus-per-node", "0", "--dry-run", "--", "hostname")
    assert shared.code == 0, shared.err
    assert "#   slurm.exclusive: not set, so shared nodes (no GPUs)" in _header(shared.out)
    assert "--exclusive" not in shared.out
    whole = cli("run", "--gpus-per-node", "0", "--exclusive", "--dry-run", "--", "hostname")
    assert whole.code == 0, whole.err
    assert "#SBATCH --exclusive" in _sbatch_lines(whole.out)
    assert not any("slurm.exclusive" in line for line in _header(whole.out))
    # A command with GPUs takes whole nodes, as a Ray job does; --no-exclusive shares them.
    gpus = cli("run", "--dry-run", "--", "hostname")
    assert "#   slurm.exclusive: not set, so whole nodes (--exclusive), as a job with GPUs" in (
        _header(gpus.out)
    )
    no = cli("run", "--no-exclusive", "--dry-run", "--", "hostname")
    assert no.code == 0, no.err
    assert "--exclusive" not in no.out


def test_help_says_the_defaults(cli: Cli) -> None:
    result = cli("render", "--help")
    assert result.code == 0
    text = " ".join(result.out.split())  # the help is wrapped to the terminal
    assert "-N, --nodes N Nodes to allocate (default: 1)." in text
    assert "--gpus-per-node N GPUs per node, asked for as --gres=gpu:N (default: 8)." in text
    assert "(4:00 is 4 minutes; default: the partition's)." in text


# ---- NeMo RL's checkpoint deadline: only where a time limit ends the job ----

DEADLINE = "++checkpointing.checkpoint_must_save_by="
TINY = ["grpo", "--config", "examples/configs/grpo_tiny.yaml"]


def _driver(script: str) -> list[str]:
    """The driver's argv as bash reads the script's NRL_DRIVER line."""
    (line,) = [x for x in script.splitlines() if x.startswith("NRL_DRIVER=(")]
    return bash_values(line + "\n", 'printf "%s\\0" "${NRL_DRIVER[@]}"')


def _values(script: str) -> str:
    return script.split("# ---- nrl-launch node program")[0]


def test_a_local_job_gets_no_checkpoint_deadline(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TINY_RL)
    result = cli("render", "--backend", "local", *TINY)
    assert result.code == 0, result.err
    assert "NRL_SAVE_MARGIN_S" not in _values(result.out)
    assert _driver(result.out)[-2:] == ["--config", "examples/configs/grpo_tiny.yaml"]
    assert (
        "nrl-launch: note: checkpointing.checkpoint_must_save_by: as the config says (null): "
        "the local backend ends its jobs at no time limit"
    ) in result.err.splitlines()


def test_a_slurm_job_without_time_saves_before_the_partition_s_limit(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partition's default limit is known to the job when it starts: the node sets it."""
    monkeypatch.chdir(TINY_RL)
    result = cli("render", *TINY, *SHARED_LOGS)
    assert result.code == 0, result.err
    assert (
        "nrl-launch: note: checkpointing.checkpoint_must_save_by: set on the node when the "
        "driver starts, to the job's end (the partition's default time limit, which Slurm knows "
        "when the job starts) less 15 min, counted from when the job ends whatever NeMo "
        "RL's setup takes (its timer tiny_rl.timer:TimeoutChecker is made to count from it)"
    ) in result.err.splitlines()
    assert "\nNRL_SAVE_MARGIN_S=900\n" in _values(result.out)
    assert not any(a.startswith(DEADLINE) for a in _driver(result.out))


def test_a_slurm_job_with_time_saves_before_it(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The value is not fixed here (NeMo RL would count it from after its setup): the node
    passes the job's end less nemo_rl.checkpoint_margin_min when the driver starts, and names
    the timer (the project's nrl-launch.yaml: tiny-rl's) that the shim makes count from it."""
    monkeypatch.chdir(TINY_RL)
    result = cli("render", *TINY, *SHARED_LOGS, "--time", "2:00:00")
    assert result.code == 0, result.err
    assert not any(a.startswith(DEADLINE) for a in _driver(result.out))
    probe = 'printf "%s\\0" "$NRL_SAVE_MARGIN_S" "$NRL_TIMER_CLASS"'
    assert bash_values(_values(result.out), probe) == ["900", "tiny_rl.timer:TimeoutChecker"]
    assert (
        "nrl-launch: note: checkpointing.checkpoint_must_save_by: set on the node when the "
        "driver starts, to the job's end (slurm.time=2:00:00) less 15 min,"
    ) in result.err
