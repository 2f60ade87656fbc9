"""Ray's token auth and secrets, in the rendered script run by a real bash: the token is made
per job and read from a 0600 file, never printed; secrets travel by name only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from nrl_launch import backends
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.test_quoting import bash_values

SENTINEL = "hf_sentinel_Zq9'$(x)\"secret"


def script(**values: object) -> str:
    base: dict[str, object] = {"driver": {"command": ["python", "train.py"]}}
    return backends.plan(LaunchSpec.model_validate({**base, **values})).script


def definitions(text: str) -> str:
    return text.split("# ---- Batch step")[0]


def run_bash(text: str, probe: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The script's values and helpers, then `probe`, in a real bash with only `env`."""
    helpers = "\n".join(
        _function(text, name)
        for name in ("log", "end_job", "make_ray_token", "has_ray_auth", "ray_python")
    )
    return subprocess.run(
        ["bash", "-c", definitions(text) + "\n" + helpers + "\n" + probe],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **env},
        check=False,
    )


def _function(text: str, name: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}() {{"))
    if lines[start].rstrip().endswith("}"):  # a one-line function
        return lines[start]
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(lines[start : end + 1])


def test_job_env_points_ray_at_the_job_s_token_file_and_drops_an_inherited_token() -> None:
    values = bash_values(
        script(),
        'RAY_AUTH_TOKEN=inherited; job_env; printf "%s\\0" "$RAY_AUTH_MODE" '
        '"$RAY_AUTH_TOKEN_PATH" "${RAY_AUTH_TOKEN-unset}"',
    )
    assert values == ["token", "/logs/1-logs/ray-auth-token", "unset"]


def test_auth_off_disables_it_and_warns(cli: Cli) -> None:
    assert bash_values(script(ray={"auth": "off"}), 'job_env; printf "%s\\0" "$RAY_AUTH_MODE"') == [
        "disabled"
    ]
    result = cli("render", "--set", "ray.auth=off", "--", "python", "x.py")
    assert result.code == 0
    assert "warning: ray.auth is off: anyone who can reach the job's Ray ports" in result.err


def test_each_job_makes_its_own_token_readable_by_its_owner_only(tmp_path: Path) -> None:
    tokens = []
    for run in range(2):
        log_dir = tmp_path / f"{run}-logs"
        log_dir.mkdir()
        done = run_bash(script(), "make_ray_token", {"NRL_LOG_DIR": str(log_dir)})
        assert done.returncode == 0, done.stderr
        token = log_dir / "ray-auth-token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600
        tokens.append(token.read_text())
        assert done.stdout == "" and done.stderr == ""  # nothing printed it
    assert all(len(t) == 64 and int(t, 16) >= 0 for t in tokens)
    assert tokens[0] != tokens[1]


def _has_ray_auth(tmp_path: Path, python: str) -> subprocess.CompletedProcess[str]:
    """has_ray_auth on node n0 with `ray` as pip writes it: its first line names a Python (here
    a shell running `python`) whose package metadata says which Ray it is."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(f"#!/bin/sh\n{python}\n")
    (fake / "ray").write_text(f"#!{fake / 'python'}\n")
    for tool in ("python", "ray"):
        (fake / tool).chmod(0o755)
    env = {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "NRL_LOG_DIR": str(tmp_path),
        "NRL_NODE_NAME": "n0",
    }
    return run_bash(script(), "has_ray_auth", env)


@pytest.mark.parametrize(("version", "ok"), [("2.51.2", False), ("2.52.0", True), ("2.60.0", True)])
def test_the_head_refuses_a_ray_without_token_auth(tmp_path: Path, version: str, ok: bool) -> None:
    done = _has_ray_auth(tmp_path, f"echo {version}")
    assert (done.returncode == 0) is ok
    if not ok:
        assert (
            (tmp_path / "ENDED")
            .read_text()
            .startswith(f"Ray {version} on n0 has no token authentication (Ray 2.52 or later has)")
        )


def test_a_ray_whose_version_cannot_be_read_is_refused(tmp_path: Path) -> None:
    """Token auth needs Ray 2.52: a version nobody can read fails the check, not passes it."""
    done = _has_ray_auth(tmp_path, "exit 1")  # no Ray in its Python; `ray --version` fails too
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "ENDED").read_text().startswith("cannot read the version of Ray on n0")


def test_a_required_secret_missing_on_a_node_is_named() -> None:
    text = script(secrets={"MY_KEY": "required"})
    probe = 'if secret=$(missing_secret); then printf "%s" "$secret"; else printf none; fi'
    assert run_bash(text, probe, {"HF_TOKEN": "x"}).stdout == "MY_KEY"
    assert run_bash(text, probe, {"MY_KEY": SENTINEL}).stdout == "none"


def test_secret_values_appear_in_no_output(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    monkeypatch.setenv("MY_KEY", SENTINEL + "2")
    args = ["--secret", "MY_KEY", "--secret", "HF_TOKEN", "--", "python", "x.py"]
    outputs = [
        cli("render", *args),
        cli("render", "--json", *args),
        cli("config", "show", "--sources", *args),
        cli("config", "show", "--json", *args),
    ]
    for result in outputs:
        assert result.code == 0, result.err
        assert SENTINEL not in result.out + result.err
    spec = json.loads(cli("config", "show", "--json", *args).out)["spec"]
    assert spec["secrets"] == {
        "HF_TOKEN": "required",
        "MY_KEY": "required",
        "WANDB_API_KEY": "optional",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--secret", "MY_KEY"],
            "secrets.MY_KEY: MY_KEY is not set in this shell and the job requires it",
        ),
        (["--set", "secrets=[A_KEY, B_KEY]"], "secrets.A_KEY: A_KEY is not set in this shell"),
        (["--secret", "1BAD"], "secrets.1BAD: '1BAD' is not an environment variable name"),
        (["--secret", "SLURM_JOB_ID"], "cannot be set: SLURM_JOB_ID is set by Slurm"),
        (["--set", "secrets.HF_TOKEN=always"], "secrets.HF_TOKEN: input should be 'required'"),
        (["--env", "HF_TOKEN=hf_abc"], "env.HF_TOKEN: HF_TOKEN is listed in secrets"),
    ],
)
def test_a_bad_or_missing_secret_stops_submit_before_anything_is_queued(
    cli: Cli, isolated: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    state = tmp_path / "state"
    os.environ["NRL_LAUNCH_STATE_DIR"] = str(state)
    try:
        result = cli("submit", *args, "--", "python", "x.py")
    finally:
        del os.environ["NRL_LAUNCH_STATE_DIR"]
    assert result.code == 2
    assert message in result.err.splitlines()[0]
    assert "Traceback" not in result.err
    assert not state.exists() and not list(isolated.iterdir())


def test_optional_secrets_missing_are_one_warning(cli: Cli) -> None:
    result = cli("render", "--", "python", "x.py")
    assert "warning" not in result.err  # render is a dry run: secrets are checked at submit
    from nrl_launch.jobs.launch import check_secrets

    spec = LaunchSpec.model_validate({"driver": {"command": ["x"]}})
    check_secrets(spec, {"HF_TOKEN": "x", "WANDB_API_KEY": "y"})  # all set: quiet
    with pytest.raises(Exception, match="MY_KEY"):
        check_secrets(
            LaunchSpec.model_validate({"driver": {"command": ["x"]}, "secrets": ["MY_KEY"]}),
            {},
        )


def test_off_drops_a_default_secret() -> None:
    spec = LaunchSpec.model_validate(
        {"driver": {"command": ["x"]}, "secrets": {"WANDB_API_KEY": "off"}}
    )
    assert spec.optional_secrets == ["HF_TOKEN"]
    assert spec.required_secrets == []


@pytest.mark.parametrize("secrets", [[[]], [{"A": 1}], ["HF_TOKEN", 3]])
def test_a_secrets_list_of_anything_but_names_is_refused(secrets: list[object]) -> None:
    """Found by the fuzz test: a list holding a list was hashed and raised a TypeError."""
    with pytest.raises(ValidationError) as refused:
        LaunchSpec.model_validate({"secrets": secrets, "driver": {"command": ["python"]}})
    assert "secrets" in str(refused.value)
