"""The dev cluster (scripts/dev-cluster) and a Ray for its jobs.

Cluster tests run real jobs on a real Slurm with real Ray. Where the cluster cannot run (not
root, no namespaces) they skip with the reason; in CI they must run, so there they fail instead.
The jobs take Ray from the `ray_venv` fixture (tests/conftest.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, unavailable

DEV_CLUSTER = REPO / "scripts" / "dev-cluster"


@pytest.fixture(scope="session")
def dev_cluster() -> Iterator[None]:
    check = subprocess.run([str(DEV_CLUSTER), "check"], capture_output=True, text=True)
    if check.returncode != 0:
        unavailable(f"the dev cluster cannot run here: {check.stdout.strip()}")
    up = subprocess.run(
        [str(DEV_CLUSTER), "up"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/dev-cluster up failed:\n{up.stderr[-3000:]}")
    yield


@pytest.fixture
def cluster_job(
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    ray_venv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> list[str]:
    """The flags every cluster job shares: no container, Ray from the test venv, logs in tmp."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return [
        "--container-runtime",
        "none",
        "--set",
        f"setup=source {ray_venv}/bin/activate",
        "--log-dir",
        str(tmp_path / "logs"),
        "--time",
        "10",
    ]
