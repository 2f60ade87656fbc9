"""A secret's value never shows: given where a name belongs (`--secret NAME=VALUE`, `--set
secrets.NAME=VALUE`) it is in no message, plain or --json, and a job env variable whose name
says it holds a credential is refused, with the --secret way shown. Through the real CLI, with
nothing written and nothing queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_LOGS, Cli
from tests.fakes import FakeSlurm

VALUE = "hf_Zq8sEcReT0vAlUe"


def _written(tmp_path: Path) -> list[Path]:
    """Every file under the test's dirs but the fake Slurm's own."""
    return [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and "fake-" not in p.relative_to(tmp_path).parts[0]
    ]


@pytest.mark.parametrize(
    ("given", "names"),
    [
        (["--secret", f"HF_TOKEN={VALUE}"], "HF_TOKEN"),
        (["--set", f"secrets.HF_TOKEN={VALUE}"], "HF_TOKEN"),
        (["--set", f"secrets={{HF_TOKEN: {VALUE}}}"], "HF_TOKEN"),
        (["--secret", f"9={VALUE}"], "NAME"),
    ],
)
@pytest.mark.parametrize("command", ["render", "submit"])
@pytest.mark.parametrize("json", [[], ["--json"]])
def test_a_secret_value_given_for_a_name_is_in_no_message(
    cli: Cli,
    slurm: FakeSlurm,
    tmp_path: Path,
    given: list[str],
    names: str,
    command: str,
    json: list[str],
) -> None:
    found = cli(command, *json, "--nodes", "1", *SHARED_LOGS, *given, "--", "python", "x.py")
    assert found.code == 2
    assert VALUE not in found.out + found.err
    said = found.out + found.err
    assert f"--secret {names}" in said  # how a secret is given
    assert slurm.calls() == []
    assert _written(tmp_path) == []


@pytest.mark.parametrize(
    "name",
    ["GITHUB_PAT", "OPENAI_API_KEY", "HFTOKEN", "github_token", "CLIENTSECRET", "DB_PASSWORD"],
)
@pytest.mark.parametrize("how", ["--env", "--set"])
@pytest.mark.parametrize("command", ["render", "submit"])
def test_a_credential_in_env_is_refused_with_the_secret_way_shown(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, name: str, how: str, command: str
) -> None:
    given = ["--env", f"{name}={VALUE}"] if how == "--env" else ["--set", f"env.{name}={VALUE}"]
    found = cli(command, "--nodes", "1", *SHARED_LOGS, *given, "--", "python", "x.py")
    assert found.code == 2
    assert VALUE not in found.out + found.err
    lines = found.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"nrl-launch: error: env.{name}: its name says it holds a credential"
    )
    assert lines[0].endswith(f"give --secret {name}")
    assert slurm.calls() == []
    assert _written(tmp_path) == []


def test_a_variable_whose_name_only_looks_alike_is_taken(cli: Cli) -> None:
    """TOKENIZERS_PARALLELISM (Hugging Face's tokenizers) holds no credential."""
    found = cli(
        "render",
        "--nodes",
        "1",
        *SHARED_LOGS,
        "--env",
        "TOKENIZERS_PARALLELISM=false",
        "--",
        "python",
        "x.py",
    )
    assert found.code == 0, found.err
    assert "TOKENIZERS_PARALLELISM=false" in found.out


@pytest.mark.parametrize(
    "token", [VALUE, "ghp_a1B2c3D4e5F6g7H8i9J0", "AKIAABCDEFGHIJKLMNOP", "0123456789abcdef" * 2]
)
@pytest.mark.parametrize("json", [[], ["--json"]])
def test_a_credential_given_as_a_secret_s_name_is_never_said_back(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, token: str, json: list[str]
) -> None:
    """`--secret hf_...` (the value where the variable's name belongs): refused in one line that
    does not hold it, with the by-name way shown; nothing written or queued."""
    found = cli("submit", *json, "--nodes", "1", *SHARED_LOGS, "--secret", token, "--", "x")
    assert found.code == 2
    assert token not in found.out + found.err
    assert "--secret NAME, with NAME exported in your shell" in found.out + found.err
    assert slurm.calls() == []
    assert _written(tmp_path) == []


def test_a_secret_name_that_only_looks_alike_is_taken() -> None:
    from nrl_launch.spec.fields import looks_like_a_value

    for name in ("HF_TOKEN", "WANDB_API_KEY", "MY_SECRET_2", "NGC_API_KEY", "hf_home"):
        assert not looks_like_a_value(name), name
