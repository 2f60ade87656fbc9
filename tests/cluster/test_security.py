"""Security on the dev cluster, with real Ray: a job's Ray refuses clients without its token,
and secrets reach the driver by name while their values are written nowhere."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]


@pytest.fixture
def cluster(cli: Cli, cluster_job: list[str]) -> Iterator[str]:
    """A 2-node interactive cluster with the default settings (token auth on), up."""
    result = cli("submit", "--interactive", *ON_NODE0_AND_1, *cluster_job)
    assert result.code == 0, result.err
    job_id = result.out.split()[2]
    wait_until(lambda: "all 2 nodes joined" in job_status(cli, job_id)["detail"])
    yield job_id
    cli("cancel", job_id)


def ray_cli(ray_venv: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`ray ...` as another client on the login node: no token unless `env` gives one."""
    clean = {"PATH": f"{ray_venv}/bin:/usr/bin:/bin", "HOME": str(home), **env}
    return subprocess.run(
        [str(ray_venv / "bin" / "ray"), *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=120,
        check=False,
    )


def test_only_a_client_with_the_job_s_token_gets_in(
    cli: Cli, cluster: str, ray_venv: Path, tmp_path: Path
) -> None:
    log_dir = Path(job_status(cli, cluster)["log_dir"])
    token_file = log_dir / "ray-auth-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text()
    home = tmp_path / "client-home"
    home.mkdir()

    # No token, with or without auth mode, or a wrong one: the GCS refuses.
    for env in (
        {},
        {"RAY_AUTH_MODE": "token"},
        {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},
    ):
        done = ray_cli(ray_venv, home, "status", "--address", "node0:1200", **env)
        assert done.returncode != 0, env
        assert "Auth" in done.stdout + done.stderr, done.stdout + done.stderr
    # Nor can one submit a Ray job: the dashboard's job API answers 401 without the token.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen("http://node0:8265/api/jobs/", timeout=30)
    assert refused.value.code == 401
    refused.value.close()  # the error holds the answer's socket (else a ResourceWarning later)
    submitted = ray_cli(
        ray_venv, home, "job", "submit", "--address", "http://node0:8265", "--", "id"
    )
    assert submitted.returncode != 0
    assert "Succeeded" not in submitted.stdout

    # The job's own token opens it, and attach brings it along.
    request = urllib.request.Request(
        "http://node0:8265/api/jobs/", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    # `ray status` shows the autoscaler's view, which catches up with the GCS's (where the job
    # counted both nodes) a few seconds later: ask again until it does, within a bound.
    deadline = time.monotonic() + 60
    while True:
        attached = subprocess.run(
            [*CLI, "attach", cluster, "--", "ray", "status"],
            capture_output=True,
            text=True,
            timeout=180,
            env=os.environ,
            check=False,
        )
        assert attached.returncode == 0, attached.stderr
        assert "Active:" in attached.stdout
        if attached.stdout.count(" node_") >= 2 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert attached.stdout.count(" node_") >= 2, attached.stdout  # both nodes, active

    # The token is in its file only: not in the logs, the script, the spec or the record.
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != token_file]
    assert files
    holding = [str(p) for p in files if token in p.read_text(errors="replace")]
    assert holding == []


def test_secrets_reach_the_driver_by_name_and_are_written_nowhere(
    cli: Cli, cluster_job: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = uuid.uuid4().hex
    secrets = {
        "HF_TOKEN": f"hf_{mark}",
        "WANDB_API_KEY": f"wandb{mark}",
        "MY_SECRET": f'it\'s "{mark}" $(id) `x`\nline two',
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    # The driver gets each secret's hash, never its value, and says whether its env matches.
    driver = tmp_path / "check_secrets.py"
    driver.write_text(
        "import hashlib, os, sys\n"
        "names, hashes = sys.argv[1::2], sys.argv[2::2]\n"
        "seen = [hashlib.sha256(os.environ.get(n, '').encode()).hexdigest() == h"
        " for n, h in zip(names, hashes)]\n"
        "print(f'secrets as expected: {sum(seen)} of {len(seen)}')\n"
        "sys.exit(0 if all(seen) else 1)\n"
    )
    pairs = [
        word
        for name, value in secrets.items()
        for word in (name, hashlib.sha256(value.encode()).hexdigest())
    ]
    result = cli(
        "submit",
        "--wait",
        "--secret",
        "MY_SECRET",
        *ON_NODE0_AND_1,
        *cluster_job,
        "--",
        "python",
        str(driver),
        *pairs,
    )
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[2]  # "Submitted job ID ..."
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    assert "secrets as expected: 3 of 3" in (log_dir / "ray-driver.log").read_text()

    outputs = [result.out + result.err]
    for args in (
        ["status", job_id, "--json"],
        ["logs", job_id],
        ["logs", job_id, "--node", "head"],
        ["list", "--json"],
        ["render", "--secret", "MY_SECRET", *cluster_job, "--", "python", str(driver)],
        ["render", "--json", "--secret", "MY_SECRET", *cluster_job, "--", "python", str(driver)],
    ):
        done = cli(*args)
        outputs.append(done.out + done.err)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == f"{job_id}.json" for p in files)  # the record is among them
    texts = outputs + [p.read_text(errors="replace") for p in files]
    hits = [value for value in secrets.values() for text in texts if value in text]
    hits += [mark for text in texts if mark in text]
    assert hits == [], f"{len(hits)} secret value(s) found written"
