"""The README's Quickstart, run as its reader runs it: from a NeMo RL checkout, whose recipe
configs set their own cluster sizes (grpo_math_1B.yaml: cluster.gpus_per_node: 1)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_LOGS, Cli, as_reader, doc_block, readme_shell_env
from tests.helpers import bash_values, submit_argv

# The Quickstart's job from flags alone, its driver after `--`.
FLAGS_EXAMPLE = "--gpus-per-node 8 --time 4:00:00"
DRIVER = 'printf "%s\\0" "${NRL_DRIVER[@]}"'
NOTE = (
    "nrl-launch: note: cluster.gpus_per_node is 1 in the config; the job has 8 "
    "(--gpus-per-node): passing ++cluster.gpus_per_node=8"
)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A NeMo RL checkout, as far as nrl-launch reads one: its examples/configs (with the
    recipes) from the test data, and its driver scripts."""
    root = tmp_path / "RL"
    shutil.copytree(REPO / "tests" / "data" / "nemo_rl" / "examples", root / "examples")
    for name in ("run_grpo.py", "run_sft.py", "run_dpo.py"):
        (root / "examples" / name).write_text("# NeMo RL's driver\n")
    return root


def test_the_quickstart_flags_example_renders_in_a_nemo_rl_checkout(checkout: Path) -> None:
    """`--gpus-per-node 8` is the user's word about the nodes' GPUs: the job asks for 8, and
    the driver is given ++cluster.gpus_per_node=8, as NeMo RL's own launchers pass it."""
    commands = doc_block(FLAGS_EXAMPLE)
    assert "grpo_math_1B.yaml" in "\n".join(commands)  # the config that sets its own GPUs
    done = subprocess.run(
        as_reader(commands),
        cwd=checkout,
        env=readme_shell_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    argv = submit_argv(done.stdout)
    assert "--nodes=2" in argv and "--gres=gpu:8" in argv
    assert NOTE in done.stderr.splitlines()
    driver = bash_values(done.stdout, DRIVER)
    assert driver[:3] == ["uv", "run", "examples/run_grpo.py"]
    assert driver[-2:] == ["cluster.num_nodes=2", "++cluster.gpus_per_node=8"]


def test_an_override_the_user_wrote_against_the_flag_is_still_refused(
    cli: Cli, checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two things the user said that disagree: one line naming both, exit 2, nothing written."""
    monkeypatch.chdir(checkout)
    config = "examples/configs/grpo_math_1B.yaml"
    driver = ["uv", "run", "examples/run_grpo.py", "--config", config, "cluster.num_nodes=2"]
    args = ["render", *SHARED_LOGS, "--nodes", "2", "--gpus-per-node", "8", "-o", "job.sbatch"]
    args += ["--", *driver]
    result = cli(*args, "cluster.gpus_per_node=4")
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.gpus_per_node=8 (from --gpus-per-node) contradicts the "
        "override 'cluster.gpus_per_node=4': drop one of them"
    ]
    assert not (checkout / "job.sbatch").exists()
    # The same override and flag agreeing: nothing to pass, the driver runs as written.
    result = cli(*args, "cluster.gpus_per_node=8")
    assert result.code == 0, result.err
    script = (checkout / "job.sbatch").read_text()
    assert bash_values(script, DRIVER) == [*driver, "cluster.gpus_per_node=8"]
    assert "passing ++cluster.gpus_per_node" not in result.err


def test_a_driver_in_a_shell_string_is_not_changed_and_the_misfit_is_said(
    cli: Cli, checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words appended after `bash -c STRING` would not reach the driver: the job is refused
    with what to do, as before."""
    monkeypatch.chdir(checkout)
    string = "uv run examples/run_grpo.py --config examples/configs/grpo_math_1B.yaml"
    result = cli("render", *SHARED_LOGS, "--gpus-per-node", "8", "--", "bash", "-c", string)
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.gpus_per_node=8 (from --gpus-per-node) but the config has "
        "cluster.gpus_per_node=1: use --gpus-per-node 1, or pass cluster.gpus_per_node to the "
        "driver"
    ]
