"""The dev cluster (scripts/dev-cluster) and a Ray for its jobs.

Cluster tests run real jobs on a real Slurm with real Ray. Where the cluster cannot run (not
root, no namespaces) they skip with the reason; in CI they must run, so there they fail instead.
The jobs take Ray from the `ray_venv` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli, unavailable

DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
# A 2-node job on node0 (the head) and node1, whichever nodes an earlier job still holds.
ON_NODE0_AND_1 = ["--nodes", "2", "--set", "slurm.exclude=node[2-3]"]


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


def _node_namespaces() -> dict[str, str]:
    """Each dev-cluster node's PID namespace, by node name (from the pid files `up` writes)."""
    run = Path(os.environ.get("DEV_CLUSTER_DIR", "/var/lib/nrl-dev-cluster")) / "run"
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    spaces = {}
    for pid_file in run.glob("node-*.pid"):
        # The pid file names `unshare`; its child is PID 1 of the node's namespace.
        for child in children.get(int(pid_file.read_text()), []):
            spaces[pid_file.stem.removeprefix("node-")] = str(
                Path(f"/proc/{child}/ns/pid").readlink()
            )
    return spaces


def _node_table() -> list[tuple[str, int, str]]:
    """(node, pid as this machine sees it, command name) of every process on every node."""
    spaces = {ns: name for name, ns in _node_namespaces().items()}
    table = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            name = spaces.get(str((proc / "ns" / "pid").readlink()))
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if name:
            table.append((name, int(proc.name), comm))
    return table


def node_pids(node: str, comm: str) -> list[int]:
    """The pids (as this machine sees them) of `comm` processes on `node`."""
    return [pid for name, pid, command in _node_table() if name == node and command == comm]


def node_processes() -> dict[str, list[str]]:
    """What runs on each node besides the node itself (its PID-1 shell and slurmd): after a
    job has ended, anything here is an orphan."""
    found: dict[str, list[str]] = {name: [] for name in _node_namespaces()}
    for name, _, comm in _node_table():
        if comm not in ("sh", "slurmd"):
            found[name].append(comm)
    return found


def nodes_are_clean() -> bool:
    return not any(node_processes().values())


def job_status(cli: Cli, job_id: str) -> dict:  # type: ignore[type-arg]
    """`status JOBID --json`'s object for the job."""
    result = cli("status", job_id, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)["jobs"][0]  # type: ignore[no-any-return]
