"""A dedicated CPU Ray head on the dev cluster, given as ray.sub users give it
(DEDICATED_RAY_HEAD=1 in the shell): a 1+2-node job whose driver, on the head, sees 16 GPUs on the
2 GPU nodes and a head with none; status counts 3 nodes; attach reaches the head and the GPU
nodes. The dev cluster's nodes each have 8 GPUs of Slurm gres (not real ones): each GPU node
offers Ray Slurm's 8, the head none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import job_status
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
DRIVER = str(Path(__file__).resolve().parent / "dedicated_head_driver.py")
# 2 GPU nodes and the head, on node0 (the head) to node2, whichever nodes an earlier job holds.
ON_NODE0_TO_2 = ["--nodes", "2", "--set", "slurm.exclude=node3"]


def attach(job_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """attach in a process of its own: it replaces its process with srun."""
    return subprocess.run(
        [sys.executable, "-m", "nrl_launch", "attach", job_id, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )


def test_a_cpu_head_and_two_gpu_nodes(
    cli: Cli, cluster_job: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEDICATED_RAY_HEAD", "1")
    release = tmp_path / "release"  # the driver waits for it: the job is looked at running
    result = cli("submit", "-q", *ON_NODE0_TO_2, *cluster_job, "--", "python", DRIVER, str(release))
    assert result.code == 0, result.err
    assert "DEDICATED_RAY_HEAD (ray.dedicated_head)" in result.err
    assert "3 nodes in all" in result.err
    job_id = result.out.strip()
    try:
        log_dir, report = _while_it_runs(cli, job_id)
    except BaseException:
        cli("cancel", job_id)
        raise
    finally:
        release.touch()
    assert report["driver_host"] == report["driver_node"] == "node0"
    assert report["gpus"] == 16
    nodes = report["nodes"]
    assert sorted(nodes) == ["node0", "node1", "node2"]
    head = nodes["node0"]
    assert head.get("GPU", 0) == 0 and head["ray_head"] == 1
    assert head["slurm_managed_ray_cluster"] == 1
    assert not [k for k in head if k in ("worker_units", "topo_rank") or "nvlink_domain" in k]
    for name in ("node1", "node2"):
        assert nodes[name]["GPU"] == 8 and nodes[name]["worker_units"] == 8, name
        assert "topo_rank" in nodes[name] and "ray_head" not in nodes[name], name
    # No GPU task landed on the head: 8 on each GPU node.
    assert report["gpu_tasks_ran_on"] == ["node1"] * 8 + ["node2"] * 8

    wait_until(lambda: job_status(cli, job_id)["phase"] == "COMPLETED")
    assert job_status(cli, job_id)["nodes_expected"] == 3
    assert json.loads((log_dir / "readiness.json").read_text()) == {
        "nodes": 3,
        "nodes_expected": 3,
        "gpus": 16,
        "gpus_expected": 16,
        "dedicated_head": 1,
    }
    head_log = (log_dir / "ray-head.log").read_text()
    assert "Number of actors online: 16/16" in head_log
    assert "a dedicated CPU head: Ray gets no GPUs and no worker_units on this node" in head_log


def _while_it_runs(cli: Cli, job_id: str) -> tuple[Path, dict]:  # type: ignore[type-arg]
    """status and attach while the driver waits, and what the driver saw."""

    def detail() -> str:
        return str(job_status(cli, job_id)["detail"])

    # Every node of the allocation counted, the head named.
    wait_until(lambda: detail().startswith("driver running"))
    status = job_status(cli, job_id)
    assert status["detail"] == "driver running on 3 node(s) (1 CPU head + 2 GPU nodes)"
    assert (status["nodes_joined"], status["nodes_expected"]) == (3, 3)
    log_dir = Path(status["log_dir"])
    assert "#SBATCH --nodes=3" in (log_dir / "job.sbatch").read_text().splitlines()

    # The head is node 0; the GPU nodes keep their places in the node list.
    head = attach(job_id, "--node", "head", "--", "hostname")
    assert (head.returncode, head.stdout.strip()) == (0, "node0"), head.stderr
    gpu_node = attach(job_id, "--node", "2", "--", "hostname")
    assert (gpu_node.returncode, gpu_node.stdout.strip()) == (0, "node2"), gpu_node.stderr
    missing = attach(job_id, "--node", "3", "--", "hostname")
    assert missing.returncode == 2
    assert "--node '3': expected head, or a node index 0..2" in missing.stderr

    def report_line() -> str | None:
        driver = (log_dir / "ray-driver.log").read_text()
        return next((x for x in driver.splitlines() if x.startswith("DEDICATED ")), None)

    wait_until(report_line)
    return log_dir, json.loads((report_line() or "").removeprefix("DEDICATED "))
