"""The sandbox sidecar (sandbox:, ray.sub's SANDBOX_CONTAINER and SANDBOX_COMMAND) on real jobs of
the dev cluster, with a small HTTP server as the sandbox (sandbox_server.py): one per node in a
step of its own, the driver started only once every node's answers, and a sandbox that dies or
never answers failing the job soon, naming its node.

The jobs run without a container (sandbox.image unset: the server runs on the node itself, from
this Python), as the other cluster tests do; the last test runs the sandbox in a container of
its own beside the job's (pyxis)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes
from tests.cluster.test_failures import ended_after, submit
from tests.conftest import REPO, Cli, Result

pytestmark = pytest.mark.cluster
HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "sandbox_server.py")
DRIVER = str(HERE / "sandbox_driver.py")
PORT = 6000  # sandbox.port's default, ray.sub's NEMO_SKILLS_SANDBOX_PORT


def job_file(tmp_path: Path, **sandbox: Any) -> list[str]:
    """-f FILE for a job whose sandbox is the test server (on the node itself, which the job
    says it accepts) with `sandbox`."""
    values = {"command": [sys.executable, SERVER], "unsafe_on_host": True, **sandbox}
    path = tmp_path / "sandbox.yaml"
    path.write_text(yaml.safe_dump({"sandbox": values}))
    return ["-f", str(path)]


def timeline(log_dir: Path) -> dict[str, float]:
    lines = (log_dir / "timeline").read_text().splitlines()
    return {name: float(at) for name, at in (line.split() for line in lines)}


def _driver_report(cli: Cli, result: Result) -> tuple[Path, dict[str, Any]]:
    """The log dir of a job that completed, and its driver's SANDBOX report."""
    assert result.code == 0, result.out + result.err
    log_dir = Path(job_status(cli, result.out.split()[2])["log_dir"])
    driver = (log_dir / "ray-driver.log").read_text()
    return log_dir, json.loads(next(x for x in driver.splitlines() if x.startswith("SANDBOX "))[8:])


@pytest.mark.slurm_smoke
def test_the_driver_starts_once_every_node_s_sandbox_answers(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    # Each sandbox listens only 5 s after it starts: a driver started before would find none.
    sandbox = job_file(tmp_path, env={"SANDBOX_DELAY_S": "5"})
    result = cli(
        "submit", "--wait", *ON_NODE0_AND_1, *cluster_job, *sandbox, "--", "python", DRIVER
    )
    log_dir, report = _driver_report(cli, result)
    # The driver and a Ray task on the other node each reached their own node's sandbox.
    assert sorted(report) == ["node0", "node1"]
    for node, answer in report.items():
        assert answer["status"] == "200" and answer["body"] == f"ok {node}", answer
        assert answer["host"] == "127.0.0.1" and answer["port"] == str(PORT)
    phases = timeline(log_dir)
    for node in ("node0", "node1"):
        started = float((log_dir / "sandbox" / f"STARTED.{node}").read_text())
        ready = phases[f"sandbox_ready:{node}"]
        assert ready - started >= 5, node  # not before the server listened
        assert ready <= phases["sandboxes_ready"] <= phases["driver_started"]
        log = (log_dir / f"sandbox-{node}.log").read_text()
        assert f"listening on port {PORT}" in log and "GET /health" in log
    # The sandboxes stopped with the job: nothing of them is left on the nodes.
    wait_for_clean_nodes(60)


def test_a_sandbox_that_dies_fails_the_job_soon_naming_its_node(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    # node1's sandbox exits with code 3 25 s after it answers; the driver would run 10 minutes.
    sandbox = job_file(tmp_path, env={"SANDBOX_EXIT_AFTER_S": "25", "SANDBOX_ON_NODES": "node1"})
    job_id = submit(cli, [*cluster_job, *sandbox], "--", "python", DRIVER, "600")
    status = ended_after(cli, job_id, None, "sandbox died")
    assert status["phase"] == "FAILED"
    assert "the sandbox on node node1 exited with code 3; see sandbox-node1.log" in status["detail"]
    log_dir = Path(status["log_dir"])
    ready = float((log_dir / "sandbox" / "READY.node1").read_text())  # it died after answering
    assert (log_dir / "ENDED").stat().st_mtime - ready < 25 + 15
    assert "exiting with code 3" in (log_dir / "sandbox-node1.log").read_text()
    wait_for_clean_nodes(60)


def test_a_sandbox_that_never_answers_fails_the_job_naming_its_node_and_port(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    sandbox = job_file(
        tmp_path, ready_timeout_s=10, env={"SANDBOX_SILENT": "1", "SANDBOX_ON_NODES": "node1"}
    )
    job_id = submit(cli, [*cluster_job, *sandbox], "--", "python", DRIVER)
    status = ended_after(cli, job_id, None, "sandbox never answers")
    assert status["phase"] == "FAILED"
    assert (
        f"the sandbox on node node1 did not answer on port {PORT} within 10 s; see "
        "sandbox-node1.log" in status["detail"]
    )
    log_dir = Path(status["log_dir"])
    assert "driver_started" not in timeline(log_dir)
    assert (log_dir / "sandbox" / "READY.node0").exists()
    assert not (log_dir / "sandbox" / "READY.node1").exists()
    wait_for_clean_nodes(60)


@pytest.mark.slurm_smoke
def test_a_sandbox_image_runs_in_a_container_of_its_own(
    cli: Cli, container_job: list[str], test_image: Path, tmp_path: Path
) -> None:
    sandbox = job_file(
        tmp_path,
        unsafe_on_host=False,
        image=str(test_image),
        command=["python3", SERVER],
        mounts=[f"{REPO}:{REPO}:ro"],
        env={"SANDBOX_DELAY_S": "2"},
    )
    result = cli(
        "submit", "--wait", *ON_NODE0_AND_1, *container_job, *sandbox, "--", "python", DRIVER
    )
    log_dir, report = _driver_report(cli, result)
    assert {node: answer["body"] for node, answer in report.items()} == {
        "node0": "ok node0",
        "node1": "ok node1",
    }
    token = (log_dir / "ray-auth-token").read_text().strip()
    assert len(token) == 64  # the job has one; the sandboxes see none of the log dir
    for node in ("node0", "node1"):
        log = (log_dir / f"sandbox-{node}.log").read_text()
        assert "listening on port" in log
        seen = json.loads(next(x for x in log.splitlines() if " sees {" in x).split(" sees ")[1])
        # Its exchange dir only, at a path of its own; its own processes only.
        assert seen["ports_dir"] == "/nrl-sandbox"
        assert not {"ray-auth-token", "job.sbatch", "ENDED"} & set(seen["beside_ports_dir"])
        assert seen["processes"] <= 2, seen
    wait_for_clean_nodes(60)
