"""The CLI stays fast: `ray` is never imported on the render path, and `--help` imports none
of the heavy libraries (they load inside the commands that need them)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import EXAMPLES


def imported(*args: str) -> set[str]:
    """Every module a fresh `python -m nrl_launch ARGS` imports (from -X importtime)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nrl_launch", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_render_never_imports_ray() -> None:
    modules = imported("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    assert "nrl_launch.backends.slurm" in modules  # the render path really ran
    assert "ray" not in roots(modules)


def test_config_show_never_imports_ray() -> None:
    assert "ray" not in roots(imported("config", "show", "--interactive"))


def test_help_imports_no_heavy_library() -> None:
    heavy = {"ray", "pydantic", "jinja2", "yaml", "omegaconf", "rich"}
    assert not roots(imported("--help")) & heavy
    # typer itself converts a command's option values with pydantic (typer >= 0.22), so a
    # command's --help loads pydantic; nothing of ours may load more.
    assert not roots(imported("render", "--help")) & (heavy - {"pydantic"})


def test_a_command_imports_only_what_it_runs() -> None:
    # Only the command that runs is imported and built (cli._app), not the other commands.
    modules = imported("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    commands = {m for m in modules if m.startswith("nrl_launch.cli.")}
    assert commands == {"nrl_launch.cli.render", "nrl_launch.cli.options"}
    # Without --config there is no NeMo RL config to read; without -o no script to write.
    assert not roots(modules) & {"omegaconf", "rich"}
    assert not {"nrl_launch.nemorl.layout", "nrl_launch.jobs.launch"} & modules
    plan = imported("plan", "--config", str(EXAMPLES / "tiny-rl/examples/configs/grpo_tiny.yaml"))
    assert "omegaconf" in roots(plan) and not roots(plan) & {"jinja2", "rich"}
