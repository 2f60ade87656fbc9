"""A driver given as a shell string (`bash -c "uv run examples/run_grpo.py --config X ..."`,
which is what ray.sub's COMMAND becomes) is read for its --config and overrides as an argv is:
plan and render check the config it runs. A string whose driver is not plain to see (no driver,
several, `$` expansions) is left unread, as any command that runs no driver."""

from __future__ import annotations

import json

import pytest

from nrl_launch.nemorl.driver import DriverConfig, read
from tests.conftest import Cli
from tests.helpers import NEMO

NONCOLOC_2N = NEMO / "recipes" / "llm" / "grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml"
GRPO = "examples/run_grpo.py"


@pytest.mark.parametrize(
    ("command", "found"),
    [
        (
            ["bash", "-c", f"uv run {GRPO} --config c.yaml cluster.num_nodes=2"],
            DriverConfig(GRPO, "c.yaml", ("cluster.num_nodes=2",)),
        ),
        (
            ["/bin/sh", "-c", f"python {GRPO} --config=c.yaml 'logger.name=a;b'"],
            DriverConfig(GRPO, "c.yaml", ("logger.name=a;b",)),
        ),
        (  # options before -c; a pipe and a redirection around the driver
            ["bash", "-eo", "pipefail", "-lc", f"uv run {GRPO} --config c.yaml a.b=1 2>&1 | tee x"],
            DriverConfig(GRPO, "c.yaml", ("a.b=1",)),
        ),
        (  # the cd before it: a relative --config is in that dir
            ["bash", "-c", f"cd /opt/RL && uv run {GRPO} --config examples/c.yaml a.b=1"],
            DriverConfig(GRPO, "/opt/RL/examples/c.yaml", ("a.b=1",)),
        ),
        (  # commands on lines of their own, and a line continued
            ["bash", "-c", f"export X=$(hostname)\nuv run {GRPO} \\\n  --config c.yaml a.b=1\n"],
            DriverConfig(GRPO, "c.yaml", ("a.b=1",)),
        ),
        (["bash", "-c", f"python {GRPO} --config a && python {GRPO} --config b"], None),
        (["bash", "-c", f"python {GRPO} --config $CONFIG"], None),
        (["bash", "-c", f"python {GRPO} --config c.yaml cluster.num_nodes=`nodes`"], None),
        (["bash", "-c", f"cd ~/RL && python {GRPO} --config c.yaml"], None),
        (["bash", "-c", f"python {GRPO} --config 'c.yaml"], None),  # no closing quote
        (["bash", "-c", "python train.py --config c.yaml"], None),  # no NeMo RL driver
        (["bash", "job.sh", "--config", "c.yaml"], None),  # a script, not a string
    ],
    ids=[
        "bash -c",
        "sh -c",
        "options, pipe",
        "cd",
        "lines",
        "two drivers",
        "a variable",
        "a backquote",
        "cd home",
        "unclosed quote",
        "no driver",
        "bash script",
    ],
)
def test_a_shell_string_is_read_for_its_driver(
    command: list[str], found: DriverConfig | None
) -> None:
    assert read(command) == found


def test_an_argv_is_read_as_before() -> None:
    argv = ["uv", "run", GRPO, "--config", "c.yaml", "cluster.num_nodes=2"]
    assert read(argv) == DriverConfig(GRPO, "c.yaml", ("cluster.num_nodes=2",))


def test_plan_checks_the_config_of_a_bash_c_driver(cli: Cli) -> None:
    string = f"uv run {GRPO} --config {NONCOLOC_2N} cluster.num_nodes=3"
    result = cli("plan", "--json", "--", "bash", "-c", string)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert (data["config"], data["overrides"]) == (str(NONCOLOC_2N), ["cluster.num_nodes=3"])
    assert (data["nodes"], data["training_gpus"]) == (3, 16)
    misfit = f"uv run {GRPO} --config {NONCOLOC_2N} policy.dtensor_cfg.tensor_parallel_size=3"
    result = cli("render", "--", "bash", "-c", misfit)
    assert result.code == 2
    assert "policy training: 8 GPU(s) are not a multiple of 3" in result.err


def test_ray_sub_s_command_gets_the_config_check(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMAND", f"uv run {GRPO} --config {NONCOLOC_2N} cluster.num_nodes=3")
    result = cli("render")
    assert result.code == 0, result.err
    assert "#SBATCH --nodes=3" in result.out
    assert "note: slurm.nodes=3: from cluster.num_nodes=3" in result.err
