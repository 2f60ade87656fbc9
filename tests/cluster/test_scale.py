"""A 16-node job, end to end (issue 15): every node joins through the one batched worker step,
readiness counts 16/16, status follows JOINING k/16 to the end, and the driver sees all 16 nodes
and their GPUs. Needs a dev cluster of 16 nodes or more (`scripts/dev-cluster down;
DEV_CLUSTER_NODES=16 scripts/dev-cluster up`); CI's has 4, so it is skipped there."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import TERMINAL, job_status
from tests.conftest import Cli

pytestmark = pytest.mark.cluster
DRIVER = str(Path(__file__).resolve().parent / "scale_driver.py")
NODES = 16


def _idle_nodes() -> int:
    out = subprocess.run(
        ["sinfo", "-h", "-p", "batch", "-t", "idle", "-o", "%D"], capture_output=True, text=True
    ).stdout.split()
    return sum(int(x) for x in out) if out else 0


def test_a_16_node_job_joins_every_node_and_its_driver_sees_them_all(
    cli: Cli, cluster_job: list[str]
) -> None:
    if _idle_nodes() < NODES:
        pytest.skip(f"needs {NODES} idle dev-cluster nodes: DEV_CLUSTER_NODES={NODES}")
    result = cli("submit", "--nodes", str(NODES), *cluster_job, "--", "python", DRIVER)
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[2]

    # status as a user watching it: each phase with its detail, until the job ends (the dev
    # cluster's 16 nodes share this machine's cores: the join takes minutes, bounded here).
    seen: list[tuple[str, str]] = []
    deadline = time.monotonic() + 900
    status = job_status(cli, job_id)
    while status["phase"] not in TERMINAL and time.monotonic() < deadline:
        if not seen or seen[-1] != (status["phase"], status.get("detail") or ""):
            seen.append((status["phase"], status.get("detail") or ""))
        time.sleep(1)
        status = job_status(cli, job_id)
    assert status["phase"] == "COMPLETED", (status, seen)
    assert status["nodes_expected"] == NODES and status["nodes_joined"] == NODES, status
    joining = [detail for phase, detail in seen if phase == "JOINING"]
    assert joining, seen
    assert all(f"/{NODES} nodes joined" in detail for detail in joining), joining

    log_dir = Path(status["log_dir"])
    readiness = json.loads((log_dir / "readiness.json").read_text())
    assert readiness == {
        "nodes": NODES,
        "nodes_expected": NODES,
        "gpus": NODES * 8,
        "gpus_expected": NODES * 8,
    }
    driver = (log_dir / "ray-driver.log").read_text()
    report = json.loads(next(x for x in driver.splitlines() if x.startswith("SCALE "))[6:])
    # The driver's Ray has every node of the allocation (the whole 16-node cluster), each with
    # its 8 GPUs.
    assert report["nodes"] == {f"node{k}": 8.0 for k in range(NODES)}, report
    # One step for the head, one batched step for the 15 workers (no step per worker).
    steps = [
        dict(field.split("=", 1) for field in line.split() if "=" in field)
        for line in report["steps"]
    ]
    ours = sorted((s["NodeList"], s["Tasks"]) for s in steps if s.get("Name") == "bash")
    assert ours == [("node0", "1"), (f"node[1-{NODES - 1}]", str(NODES - 1))], steps
    # Each worker wrote its own log; the timeline has a join for every node.
    timeline = (log_dir / "timeline").read_text()
    for k in range(NODES):
        assert f"joined:node{k} " in timeline, timeline
        if k:
            assert (log_dir / f"ray-worker-{k}.log").exists(), k
