"""An option the command does not have: the hint names a command that takes it, and that
command, run as the hint writes it, does not fail the same way."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.fakes import install
from tests.helpers import NEMO

CONFIG = str(NEMO / "grpo_math_1B.yaml")


def hinted(err: str) -> list[str]:
    """The command line a one-line error hints at (after its last `nrl-launch `), as words."""
    (line,) = err.splitlines()
    return shlex.split(line.rpartition("nrl-launch ")[2].removesuffix(")"))


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        # render has no sweeps: plan checks each point, submit queues them (after the recipe too).
        (
            ["render", "grpo", "--config", CONFIG, "--sweep", "grpo.seed=1,2"],
            "No such option: --sweep (render has none; plan and submit take it: nrl-launch plan "
            f"grpo --config {CONFIG} --sweep grpo.seed=1,2)",
        ),
        # A driver's own option, its `--` forgotten: the driver after `--`.
        (
            ["render", *SHARED_LOGS, "python", "train.py", "--lr", "3"],
            "No such option: --lr; options of the driver (or command) go after `--`: nrl-launch "
            "render --log-dir /lustre/logs -- python train.py --lr 3",
        ),
    ],
)
def test_the_hinted_command_runs(cli: Cli, args: list[str], hint: str) -> None:
    result = cli(*args)
    assert result.code == 2
    assert result.err == f"nrl-launch: error: {hint}\n"
    again = cli(*hinted(result.err))
    assert again.code == 0, again.err
    assert "No such option" not in again.err


def test_an_option_of_submit_given_to_render_is_submit_s(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = ["--container-runtime", "none", *SHARED_LOGS]
    result = cli("render", *own, "--quiet", "--", "python", "train.py")
    assert result.code == 2
    assert "(render has none; submit and run take it: nrl-launch submit --container-runtime" in (
        result.err
    )
    fake = install(tmp_path, monkeypatch)
    fake.answer("sbatch", stdout="4242\n")
    again = cli(*hinted(result.err))
    assert (again.code, again.out) == (0, "4242\n"), again.err


def test_an_option_after_a_recipe_is_never_sent_after_the_dashes(cli: Cli) -> None:
    # After --config, the words are the RECIPE and its overrides: `--` would make the option
    # an override. A typo of nrl-launch's own option is told the option it meant.
    result = cli("render", "grpo", "--config", CONFIG, "--nodez", "2")
    assert result.code == 2
    assert result.err == "nrl-launch: error: No such option: --nodez (Possible options: --nodes)\n"


def test_a_command_that_takes_the_option_but_not_the_others_is_named_without_a_command(
    cli: Cli,
) -> None:
    result = cli("render", "-o", "job.sbatch", "grpo", "--config", CONFIG, "--sweep", "a=1,2")
    assert result.code == 2
    assert result.err == (
        "nrl-launch: error: No such option: --sweep (render has none; plan and submit take it)\n"
    )
    # A job id's command is never sent to one that does something else with the job.
    result = cli("status", "--wait")
    assert "stop" not in result.err
