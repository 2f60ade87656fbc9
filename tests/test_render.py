"""`render` is a pure dry run, and the template environment refuses unquoted values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jinja2
import pytest

from nrl_launch import templating
from nrl_launch.shell import quote
from tests.conftest import EXAMPLES, Cli


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
        f'source <(sed -n "/^job_env()/,/^}}/p" {out}); '
        'NRL_LOG_DIR=/x job_env; echo "${UV_CACHE_DIR-unset}"'
    )
    job_env = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert job_env.stdout.strip() == ("/lustre/uv" if caches else "unset")
