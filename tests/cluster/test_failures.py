"""Every failure ends the job soon, FAILED, with the reason, and leaves nothing on any node.

Real jobs on the dev cluster with real Ray. Each test measures the time from the fault to the
job's terminal state; `benchmarks/failures.py` runs them repeatedly and tabulates those times
(set NRL_FAULT_TIMES=FILE to collect them). The bounds asserted here only tell "ended soon" from
"hung until the time limit" (10 minutes): the targets are the benchmark's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, node_pids, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
SLEEPER = ["--", "python", "-c", "import ray, time; ray.init(address='auto'); time.sleep(600)"]
# A fault that hangs would show as this: the job's time limit is 10 minutes.
ENDS_SOON_S = 90.0


def ended_after(cli: Cli, job_id: str, fault_at: float | None, case: str) -> dict:  # type: ignore[type-arg]
    """Poll until the job has ended; record the time from the fault (now, if None: the moment
    the job wrote ENDED) to the terminal state, and return the final status."""
    deadline = time.time() + 600
    while (status := job_status(cli, job_id))["phase"] not in (
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
    ):
        assert time.time() < deadline, status
        time.sleep(0.25)
    ended_at = time.time()
    if fault_at is None:
        fault_at = (Path(status["log_dir"]) / "ENDED").stat().st_mtime
    latency = ended_at - fault_at
    # Past pytest's capture (the cli fixture reads it): shown with -s, as the benchmark runs.
    print(f"{case}: fault -> {status['phase']} in {latency:.1f} s", file=sys.__stderr__)
    if os.environ.get("NRL_FAULT_TIMES"):
        with open(os.environ["NRL_FAULT_TIMES"], "a") as out:
            out.write(json.dumps({"case": case, "seconds": latency}) + "\n")
    assert latency < ENDS_SOON_S, f"{case} took {latency:.0f} s"
    return status


def submit(cli: Cli, job: list[str], *args: str) -> str:
    result = cli("submit", "-q", *ON_NODE0_AND_1, *job, *args)
    assert result.code == 0, result.err
    return result.out.strip()


def per_node_setup(head: str, worker: str) -> list[str]:
    """A setup command that runs `head` on node 0 and `worker` on the other nodes."""
    setup = f'if [[ $SLURMD_NODENAME == "$NRL_HEAD_NODE" ]]; then {head}; else {worker}; fi'
    return ["--set", f"setup={setup}"]


def running(cli: Cli, job_id: str) -> None:
    wait_until(lambda: "driver running" in job_status(cli, job_id)["detail"])


def test_head_port_taken_fails_at_once(cli: Cli, cluster_job: list[str]) -> None:
    """Another process on node 0 holds the GCS port (1200 by default)."""
    holder = subprocess.Popen(
        [
            "nsenter",
            "--net=/run/netns/nrldev-node0",
            sys.executable,
            "-c",
            "import socket, time; s = socket.socket();"
            " s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
            " s.bind(('0.0.0.0', 1200)); s.listen();"
            " print('listening', flush=True); time.sleep(300)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "listening"
        job_id = submit(cli, cluster_job, *SLEEPER)
        status = ended_after(cli, job_id, None, "1. head port taken")
    finally:
        holder.kill()
        holder.communicate()
    assert status["phase"] == "FAILED"
    assert "port 1200 (ray.ports.gcs=1200) is already in use on node0" in status["detail"]
    assert status["cause"].startswith("a port is already in use")
    wait_for_clean_nodes(60)


# A node's setup breaks it as the job starts: (case, node 0's setup, the others', what status
# says, the likely cause it names). ACTIVATE stands for activating Ray's venv.
BROKEN_SETUPS = [
    (
        "1. ray missing on the head",
        "export PATH=/usr/bin:/bin",
        "ACTIVATE",
        "ray is not on PATH on node 0 (node0)",
        "Ray is missing from the node's environment",
    ),
    (
        "2. worker setup fails",
        "ACTIVATE",
        "false",
        "the setup command failed on node 1 (node1)",
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "head", "worker", "detail", "cause"), BROKEN_SETUPS, ids=[c[0] for c in BROKEN_SETUPS]
)
def test_a_node_broken_at_start_fails_the_job_naming_it(
    cli: Cli,
    cluster_job: list[str],
    ray_venv: Path,
    case: str,
    head: str,
    worker: str,
    detail: str,
    cause: str | None,
) -> None:
    activate = f"source {ray_venv}/bin/activate"
    setup = per_node_setup(head.replace("ACTIVATE", activate), worker.replace("ACTIVATE", activate))
    job_id = submit(cli, [*cluster_job, *setup], *SLEEPER)
    status = ended_after(cli, job_id, None, case)
    assert status["phase"] == "FAILED"
    assert detail in status["detail"]
    if cause:
        assert status["cause"].startswith(cause)
    wait_for_clean_nodes(60)


def test_worker_that_never_joins_fails_at_the_join_timeout(
    cli: Cli, cluster_job: list[str], ray_venv: Path
) -> None:
    activate = f"source {ray_venv}/bin/activate"
    setup = per_node_setup(head=activate, worker=f"sleep 300; {activate}")
    job = [*cluster_job, *setup, "--set", "ray.timeouts.join_s=10"]
    job_id = submit(cli, job, *SLEEPER)
    status = ended_after(cli, job_id, None, "2. worker never joins (join_s=10)")
    assert status["phase"] == "FAILED"
    # node1 is named; on a slow machine node0's own raylet may not have joined in 10 s either.
    _, _, missing = status["detail"].partition("not every node joined within 10s: ")
    assert "node1 (node 1)" in missing.split(" missing")[0], status["detail"]
    assert "ray-worker-1.log" in missing
    # The worker stuck in its setup is stopped too (through srun), not left to its sleep.
    wait_for_clean_nodes(60)


@pytest.mark.slurm_smoke
@pytest.mark.parametrize("victim", ["raylet", "srun"])
def test_worker_lost_after_bring_up_fails_the_job(
    cli: Cli, cluster_job: list[str], victim: str
) -> None:
    job_id = submit(cli, cluster_job, *SLEEPER)
    running(cli, job_id)
    if victim == "raylet":
        pids = node_pids("node1", "raylet")
    else:  # the batched worker step's srun (and its helper), on node 0, the batch host
        pids = [p for p in node_pids("node0", "srun") if b"--exclude" in cmdline(p)]
    assert pids
    fault_at = time.time()
    killed = 0
    for pid in pids:
        # srun's helper may be gone already: it ends when srun itself is killed.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    assert killed
    status = ended_after(cli, job_id, fault_at, f"3. worker's {victim} killed")
    assert status["phase"] == "FAILED"
    if victim == "raylet":
        assert "Ray on node node1 exited" in status["detail"]
    else:
        assert "a worker step ended (exit 137) while the head was running" in status["detail"]
    wait_for_clean_nodes(60)


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_driver_crash_fails_the_job_and_stops_every_node(cli: Cli, cluster_job: list[str]) -> None:
    crash = (
        "import time, ray; ray.init(address='auto'); time.sleep(2)\n"
        "print(f'crashing at {time.time():.3f}', flush=True)\n"
        "raise RuntimeError('the driver crashed')\n"
    )
    job_id = submit(cli, cluster_job, "--", "python", "-c", crash)
    wait_until(lambda: "crashing at" in cli("logs", job_id).out)
    crashed_at = float(cli("logs", job_id).out.split("crashing at ")[1].split()[0])
    status = ended_after(cli, job_id, crashed_at, "4. driver crashes")
    assert (status["phase"], status["exit_code"]) == ("FAILED", 1)
    assert "driver exited with code 1" in status["detail"]
    assert "RuntimeError: the driver crashed" in cli("logs", job_id, "--tail", "1").out
    wait_for_clean_nodes(60)
