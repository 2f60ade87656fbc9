"""`run` and `pull` for real on the dev cluster: plain Slurm jobs, no Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes, watched_phase
from tests.conftest import Cli, unavailable, wait_until

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]
# Seed 000's data preparation, in small: one file in, a train and a validation split out.
PREPARE = (
    'set -e; echo "preparing in $DATA_DIR on $(hostname)"; '
    'seq 1 1000 >"$DATA_DIR/train-full.jsonl"; '
    'head -n -100 "$DATA_DIR/train-full.jsonl" >"$DATA_DIR/train-split.jsonl"; '
    'tail -n 100 "$DATA_DIR/train-full.jsonl" >"$DATA_DIR/val-split.jsonl"; '
    'wc -l "$DATA_DIR/train-split.jsonl" "$DATA_DIR/val-split.jsonl"'
)


def test_run_prepares_data_on_a_node_and_logs_show_its_output(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    data = tmp_path / "data"  # the test's tmp dir is shared storage for the nodes
    data.mkdir()
    job = ["--gpus-per-node", "0", *cluster_job, "--env", f"DATA_DIR={data}"]
    result = cli("run", "--wait", "-q", *job, "--", "bash", "-c", PREPARE)
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[0]
    status = job_status(cli, job_id)
    assert (status["phase"], status["exit_code"]) == ("COMPLETED", 0)
    assert status["detail"] == "the command exited with code 0 on 1 node(s)"
    assert len((data / "train-split.jsonl").read_text().splitlines()) == 900
    assert len((data / "val-split.jsonl").read_text().splitlines()) == 100
    logs = cli("logs", job_id).out
    assert f"preparing in {data} on node" in logs and f"100 {data}/val-split.jsonl" in logs
    log_dir = Path(status["log_dir"])
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    assert phases["started"] <= phases["command_started"] <= phases["ended"]
    assert (log_dir / "exit_code").read_text() == "0\n"
    wait_for_clean_nodes(60)


def test_run_on_two_nodes_runs_the_command_once_on_each(cli: Cli, cluster_job: list[str]) -> None:
    result = cli("run", "--wait", "-q", *ON_NODE0_AND_1, *cluster_job, "--", "hostname")
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[0]
    assert job_status(cli, job_id)["phase"] == "COMPLETED"
    lines = sorted(cli("logs", job_id).out.splitlines())
    assert lines == ["0: node0", "1: node1"]  # srun --label: each line says its node


def test_a_failing_command_fails_the_job_with_its_exit_code(
    cli: Cli, cluster_job: list[str]
) -> None:
    command = ["bash", "-c", "echo about to fail >&2; exit 3"]
    result = cli("run", "--wait", "-q", *cluster_job, "--", *command)
    assert result.code == 3, result.out + result.err
    job_id = result.out.split()[0]
    status = job_status(cli, job_id)
    assert (status["phase"], status["exit_code"]) == ("FAILED", 3)
    assert status["detail"].startswith("exit code 3: the command exited with code 3 on node 0")
    assert "about to fail" in cli("logs", job_id).out


def test_one_failing_node_ends_the_job_at_once(cli: Cli, cluster_job: list[str]) -> None:
    """Node 1 fails while node 0 would sleep for minutes: the job ends within seconds, with
    node 1's code (not that of node 0's stopped task)."""
    command = ["bash", "-c", "[[ $SLURM_NODEID == 1 ]] && exit 4; sleep 300"]
    started = time.monotonic()
    result = cli("run", "--wait", "-q", *ON_NODE0_AND_1, *cluster_job, "--", *command)
    assert result.code == 4, result.out + result.err
    assert time.monotonic() - started < 90  # a hang bound: the sleep alone would take 300 s
    status = job_status(cli, result.out.split()[0])
    assert (status["phase"], status["exit_code"]) == ("FAILED", 4)
    assert "the command exited with code 4 on node 1 (node1)" in status["detail"]
    wait_for_clean_nodes(60)


def test_status_follows_a_plain_job_to_cancelled(
    cli: Cli, cluster_job: list[str], ray_venv: Path, tmp_path: Path
) -> None:
    """The setup command waits for a gate, so that STARTING can be seen; then the command
    runs until it is cancelled."""
    gate = tmp_path / "gate"
    setup = f"until [[ -e {gate} ]]; do sleep 0.2; done; source {ray_venv}/bin/activate"
    job = [*ON_NODE0_AND_1, *cluster_job, "--set", f"setup={setup}"]
    job_id = cli("run", "-q", *job, "--", "sleep", "600").out.strip()
    watcher = subprocess.Popen(
        [*CLI, "status", "--watch", job_id], stdout=subprocess.PIPE, text=True
    )

    def phase_is(phase: str, detail: str) -> bool:
        status = job_status(cli, job_id)
        return status["phase"] == phase and detail in status["detail"]

    watched: list[str] = []

    def watch_until(phase: str) -> None:
        """Read --watch's lines until it has printed `phase`: each change waits for it, since
        it polls at its own pace (one to five seconds)."""
        assert watcher.stdout is not None
        while not watched or watched_phase(watched[-1], job_id) != phase:
            line = watcher.stdout.readline()
            assert line, f"status --watch ended before {phase}: {watched}"
            watched.append(line)

    watch_until("STARTING")
    assert phase_is("STARTING", "starting the command (the job's environment and setup)")
    gate.touch()
    watch_until("RUNNING")
    assert phase_is("RUNNING", "command running on 2 node(s)")
    assert cli("cancel", job_id).code == 0
    wait_until(lambda: phase_is("CANCELLED", "cancelled"), timeout=60)
    rest, _ = watcher.communicate(timeout=60)
    watched.extend(rest.splitlines())
    assert watcher.returncode == 1  # --watch's code for a cancelled job
    phases = [p for line in watched if (p := watched_phase(line, job_id))]
    seen = [p for i, p in enumerate(phases) if (i == 0 or phases[i - 1] != p) and p != "PENDING"]
    assert seen == ["STARTING", "RUNNING", "CANCELLED"], watched
    wait_for_clean_nodes(60)  # the sleep is gone from both nodes


def test_pull_that_cannot_reach_the_registry_fails_with_one_line(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    """The dev cluster's nodes run enroot but reach no registry (as many clusters' compute
    nodes): the job fails at once, FAILED with enroot's exit code, says why in one line, and
    writes no image."""
    log_dir = cluster_job[cluster_job.index("--log-dir") + 1]
    target = tmp_path / "nemo-rl.sqsh"
    args = ["nvcr.io/nvidia/nemo-rl:v0.6.0", "-o", str(target), "--log-dir", log_dir]
    result = cli("pull", "--wait", "-q", *args, "--time", "10")
    job_id = result.out.split()[0]
    status = job_status(cli, job_id)
    if "enroot is not installed" in status["detail"]:
        unavailable("the dev cluster runs without pyxis and enroot (scripts/dev-cluster up)")
    assert result.code != 0 and status["phase"] == "FAILED", status
    assert status["cause"].startswith("the node cannot reach the container registry"), status
    assert "Could not resolve host: nvcr.io" in cli("logs", job_id).out
    assert not target.exists()
