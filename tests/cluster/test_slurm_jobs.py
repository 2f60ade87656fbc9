"""Real jobs on the dev cluster: 4 nodes x 8 GPUs of Slurm 22.05, with real Ray."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes, watched_phase
from tests.conftest import EXAMPLES, Cli, ray_processes, wait_until

pytestmark = pytest.mark.cluster
CHECK = str(EXAMPLES / "cluster_check.py")
CLI = [sys.executable, "-m", "nrl_launch"]


@pytest.mark.slurm_smoke
@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_batch_job_places_one_actor_per_gpu(cli: Cli, cluster_job: list[str], nodes: int) -> None:
    result = cli(
        "submit",
        "--wait",
        "--nodes",
        str(nodes),
        *cluster_job,
        "--",
        "python",
        CHECK,
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        "8",
    )
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[2]
    status = job_status(cli, job_id)
    assert status["phase"] == "COMPLETED"
    log_dir = Path(status["log_dir"])
    driver = (log_dir / "ray-driver.log").read_text()
    assert f"placed {8 * nodes} actors, one per GPU" in driver
    assert driver.count(": 8 GPUs, 16 CPUs") == nodes
    assert (
        f"Number of actors online: {8 * nodes}/{8 * nodes}"
        in (log_dir / "ray-head.log").read_text()
    )
    assert json.loads((log_dir / "readiness.json").read_text())["nodes"] == nodes
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    assert (
        phases["head_up"]
        <= phases["all_joined"]
        <= phases["driver_started"]
        <= phases["driver_ended"]
    )
    for name in ["job.sbatch", "spec.json", "STARTED_RAY_HEAD", "ENDED"]:
        assert (log_dir / name).exists(), name
    workers = sorted(p.name for p in log_dir.glob("ray-worker-*.log"))
    assert workers == sorted(f"ray-worker-{k}.log" for k in range(1, nodes))
    # Each node started by ray_start.py, which said when the GCS listed it (on a busy machine
    # Ray's own line can come first: which one is a timing, for the benchmarks); the head's
    # dashboard, started beside its raylet, stayed up, as did every Ray process.
    for name in ["ray-head.log", *workers]:
        text = (log_dir / name).read_text()
        assert "nrl-launch: the GCS lists this node alive" in text, text
        assert "Ray runtime started." in text, text
        assert "Some Ray subprocesses exited unexpectedly" not in text, text
    wait_for_clean_nodes(60)


def test_failing_driver_fails_the_job_with_its_exit_code(cli: Cli, cluster_job: list[str]) -> None:
    result = cli(
        "submit",
        "--wait",
        "-q",
        "--nodes",
        "2",
        *cluster_job,
        "--",
        "python",
        CHECK,
        "--exit-code",
        "3",
    )
    assert result.code == 3, result.out + result.err
    status = job_status(cli, result.out.split()[0])
    assert (status["phase"], status["exit_code"]) == ("FAILED", 3)
    assert "driver exited with code 3" in status["detail"]


@pytest.mark.slurm_smoke
def test_attach_to_a_batch_job_then_cancel_stops_ray_on_every_node(
    cli: Cli, cluster_job: list[str]
) -> None:
    sleeper = "import ray, time; ray.init(address='auto'); time.sleep(600)"
    job = [*ON_NODE0_AND_1, *cluster_job]
    submitted = cli("submit", "-q", *job, "--", "python", "-c", sleeper)
    assert submitted.code == 0, submitted.err
    job_id = submitted.out.strip()
    wait_until(
        lambda: (
            job_status(cli, job_id)["phase"] == "RUNNING"
            and "driver running" in job_status(cli, job_id)["detail"]
        )
    )
    assert ray_processes(job_status(cli, job_id)["log_dir"])  # the job's own, on its nodes
    # Live debugging of a batch job: a command on worker 1, in the job's Ray cluster.
    count = "import ray, socket; ray.init(); print(socket.gethostname(), len(ray.nodes()))"
    attached = subprocess.run(
        [*CLI, "attach", job_id, "--node", "1", "--", "python", "-c", count],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (attached.returncode, attached.stdout.split()) == (0, ["node1", "2"]), attached.stderr
    assert cli("cancel", job_id).code == 0
    wait_until(lambda: job_status(cli, job_id)["phase"] == "CANCELLED", timeout=60)
    wait_for_clean_nodes(60)  # every node's process table, not just Ray's daemons
    assert "cancelled" in job_status(cli, job_id)["detail"]


def test_status_says_pending_with_slurm_s_reason(cli: Cli, cluster_job: list[str]) -> None:
    sleeper = ["--", "python", "-c", "import time; time.sleep(600)"]
    holder = cli("submit", "-q", "--nodes", "4", *cluster_job, *sleeper).out.strip()
    waiting = cli("submit", "-q", "--nodes", "2", *cluster_job, *sleeper).out.strip()
    try:
        wait_until(lambda: job_status(cli, waiting)["phase"] == "PENDING", timeout=30)
        status = job_status(cli, waiting)
        assert "Resources" in status["detail"] or "Priority" in status["detail"]
    finally:
        cli("cancel", holder, waiting)
    wait_for_clean_nodes(60)


def test_status_and_logs_follow_every_phase(
    cli: Cli, cluster_job: list[str], ray_venv: Path, tmp_path: Path
) -> None:
    """Gates (files) hold the job in each phase in turn, so that status can be read there:
    the head's setup waits for `head`, the worker's for `worker`, the driver for `driver`."""
    gates = tmp_path / "gates"
    gates.mkdir()
    hold = f'until [[ -e {gates}/"$1" ]]; do sleep 0.2; done'
    setup = (
        f"gate() {{ {hold}; }}; "
        '[[ $SLURMD_NODENAME == "$NRL_HEAD_NODE" ]] && gate head || gate worker; '
        f"source {ray_venv}/bin/activate"
    )
    driver = (
        "import os, time\n"
        "print('driver says hello', flush=True)\n"
        f"while not os.path.exists('{gates}/driver'): time.sleep(0.2)\n"
    )
    job = [*cluster_job, "--set", f"setup={setup}"]
    job_id = cli("submit", "-q", "--nodes", "2", *job, "--", "python", "-c", driver).out.strip()
    watcher = subprocess.Popen(
        [*CLI, "status", "--watch", job_id], stdout=subprocess.PIPE, text=True
    )
    follower = subprocess.Popen([*CLI, "logs", "-f", job_id], stdout=subprocess.PIPE, text=True)
    watched: list[str] = []  # status --watch's lines as it prints them

    def read_watcher() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            watched.append(line)  # noqa: PERF402 - as each comes: the test reads it meanwhile

    reader = threading.Thread(target=read_watcher, daemon=True)
    reader.start()

    def phase_is(phase: str, detail: str) -> bool:
        status = job_status(cli, job_id)
        return status["phase"] == phase and detail in status["detail"]

    def watch_saw(phase: str) -> bool:
        return any(watched_phase(line, job_id) == phase for line in watched)

    # Each gate opens once the watcher has printed the phase it holds: a poll of --watch that
    # backed off while nothing changed cannot miss a short phase then.
    try:
        wait_until(lambda: phase_is("STARTING", "starting the Ray head"))
        wait_until(lambda: watch_saw("STARTING"))
        (gates / "head").touch()
        wait_until(lambda: phase_is("JOINING", "1/2 nodes joined, 8/16 GPUs"))
        wait_until(lambda: watch_saw("JOINING"))
        (gates / "worker").touch()
        wait_until(lambda: phase_is("RUNNING", "driver running on 2 node(s)"))
        assert "worker on" in cli("logs", job_id, "--node", "1").out
        # Ctrl-C stops following, not the job.
        interrupted = subprocess.Popen(
            [*CLI, "logs", "-f", job_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert interrupted.stdout is not None
        assert "driver says hello" in interrupted.stdout.readline()  # it is following now
        interrupted.send_signal(signal.SIGINT)
        _, err = interrupted.communicate(timeout=30)
        assert interrupted.returncode == 130
        assert f"stopped following; job {job_id} keeps running" in err
        assert job_status(cli, job_id)["phase"] == "RUNNING"
        wait_until(lambda: watch_saw("RUNNING"))
        (gates / "driver").touch()
        wait_until(lambda: phase_is("COMPLETED", "driver exited with code 0"))
        assert watcher.wait(timeout=60) == 0
        followed, _ = follower.communicate(timeout=60)  # ends by itself once the job has ended
    finally:
        for proc in (watcher, follower):
            proc.kill()
            proc.wait()
        reader.join(timeout=30)
        assert follower.stdout is not None and watcher.stdout is not None
        follower.stdout.close()
        watcher.stdout.close()
    phases = [p for line in watched if (p := watched_phase(line, job_id))]
    seen = [p for i, p in enumerate(phases) if (i == 0 or phases[i - 1] != p) and p != "PENDING"]
    assert seen == ["STARTING", "JOINING", "RUNNING", "COMPLETED"], "".join(watched)
    assert follower.returncode == 0 and "driver says hello" in followed


def test_time_limit_ends_the_job_as_timeout(cli: Cli, cluster_job: list[str]) -> None:
    """Slurm enforces time limits about every 30 s: a 1-minute job ends within ~2 minutes."""
    job = [*cluster_job]
    job[job.index("--time") + 1] = "1"
    sleeper = ["--", "python", "-c", "import time; time.sleep(600)"]
    job_id = cli("submit", "-q", "--nodes", "2", *job, *sleeper).out.strip()
    wait_until(lambda: job_status(cli, job_id)["phase"] == "TIMEOUT", timeout=240)
    status = job_status(cli, job_id)
    assert "time limit" in status["detail"]
    wait_for_clean_nodes(60)
    log_dir = Path(status["log_dir"])  # the logs say how it ended, on every node
    for name in ("ray-head.log", "ray-worker-1.log"):
        assert "stopping Ray" in (log_dir / name).read_text(), name
    assert "ended" in json.loads((log_dir / "timings.json").read_text())["phases"]
