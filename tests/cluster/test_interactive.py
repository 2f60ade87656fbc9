"""Interactive clusters, attach, stop, dashboard and requeue, on the dev cluster with real Ray."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes
from tests.cluster.terminal import Terminal
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]


@pytest.fixture
def interactive(cli: Cli, cluster_job: list[str]) -> str:
    """A 2-node interactive cluster, up (all nodes joined); stopped or cancelled after."""
    result = cli("submit", "--interactive", *ON_NODE0_AND_1, *cluster_job)
    assert result.code == 0, result.err
    job_id = result.out.split()[2]
    wait_until(lambda: "all 2 nodes joined" in job_status(cli, job_id)["detail"])
    yield job_id  # type: ignore[misc]
    cli("cancel", job_id)


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: attach replaces its process with srun."""
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


def test_submit_interactive_prints_the_attach_script(cli: Cli, cluster_job: list[str]) -> None:
    on_node0 = ["--nodes", "1", "--set", "slurm.exclude=node[1-3]"]
    result = cli("submit", "--interactive", *on_node0, *cluster_job)
    job_id = result.out.split()[2]
    try:
        script = Path(job_status(cli, job_id)["log_dir"]) / f"{job_id}-attach.sh"
        assert f"bash {script}" in result.out
        wait_until(script.exists)
        # ray.sub's usage: COMMAND='...' bash <JOBID>-attach.sh runs one command on the head.
        wait_until(lambda: "all 1 nodes joined" in job_status(cli, job_id)["detail"])
        done = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, "COMMAND": "hostname"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "node0"), done.stderr
    finally:
        cli("cancel", job_id)


def test_attach_runs_commands_on_the_job_s_nodes(interactive: str) -> None:
    def ray_status() -> str:
        done = run_cli("attach", interactive, "--", "ray", "status")
        assert done.returncode == 0, done.stderr
        return done.stdout

    # Both nodes, seen from inside the job (ray status reports what Ray's monitor last
    # summarised, a few seconds behind the nodes joining).
    wait_until(lambda: ray_status().split("Active:")[1].split("Pending:")[0].count("node_") == 2)
    assert "0.0/16.0 GPU" in ray_status()
    worker = run_cli("attach", interactive, "--node", "1", "--", "hostname")
    assert (worker.returncode, worker.stdout.strip()) == (0, "node1")
    failing = run_cli("attach", interactive, "--", "bash", "-c", "exit 7")
    assert failing.returncode == 7  # the command's exit code is attach's
    missing = run_cli("attach", interactive, "--node", "2", "--", "hostname")
    assert missing.returncode == 2
    assert "--node '2': expected head, or a node index 0..1" in missing.stderr


@pytest.mark.slurm_smoke
def test_attach_opens_a_shell_in_a_terminal(interactive: str) -> None:
    """The pty path, driven through tmux: type a command in the attached shell, read it back."""
    # ray.sub users export COMMAND for their training run: attach without -- still opens a shell.
    command = shlex.join(["env", "COMMAND=echo hijacked", *CLI, "attach", interactive])
    with Terminal(command, f"nrl-attach-{interactive}") as terminal:
        terminal.wait_for_prompt()
        terminal.type('echo "on $(hostname): $((6 * 7))"')
        terminal.wait_for("on node0: 42")
        terminal.type("env | grep ^RAY_ADDRESS")
        terminal.wait_for("RAY_ADDRESS=10.77.0.10:1200")
        assert "hijacked" not in terminal.screen()
        terminal.type("exit")


def test_dashboard_names_the_head_and_the_tunnel(cli: Cli, interactive: str) -> None:
    result = cli("dashboard", interactive, "--json")
    assert result.code == 0, result.err
    info = json.loads(result.out)
    assert (info["head_node"], info["port"]) == ("node0", 8265)
    assert info["ssh"].startswith("ssh -N -L 8265:node0:8265 ")
    # What the tunnel would reach: the dashboard answers on the head node.
    with urllib.request.urlopen("http://node0:8265/", timeout=30) as page:
        assert page.status == 200


def test_stop_ends_an_interactive_job_completed(cli: Cli, interactive: str) -> None:
    result = cli("stop", interactive, "--wait")
    assert result.code == 0, result.out + result.err
    status = job_status(cli, interactive)
    assert status["phase"] == "COMPLETED"
    assert status["detail"].startswith("stop requested by ")
    wait_for_clean_nodes(60)
    again = cli("attach", interactive, "--", "hostname")
    assert again.code == 5 and "has ended (COMPLETED" in again.err


def test_stop_of_a_batch_job_stops_its_driver_and_completes(
    cli: Cli, cluster_job: list[str]
) -> None:
    # The driver says when SIGTERM reaches it and leaves at once: Ray's own handler exits 15,
    # but its core worker may crash while tearing down (code 139 on CI), which is Ray's matter.
    sleeper = (
        "import os, signal, time, ray; ray.init(address='auto');"
        "signal.signal(signal.SIGTERM, lambda *_: (print('driver got SIGTERM', flush=True),"
        " os._exit(15)));"
        "print('driver ready', flush=True); time.sleep(600)"
    )
    job = [*ON_NODE0_AND_1, *cluster_job, "--", "python", "-c", sleeper]
    job_id = cli("submit", "-q", *job).out.strip()
    driver_log = Path(job_status(cli, job_id)["log_dir"]) / "ray-driver.log"
    wait_until(lambda: driver_log.exists() and "driver ready" in driver_log.read_text())
    assert cli("stop", job_id, "--wait").code == 0
    status = job_status(cli, job_id)
    assert status["phase"] == "COMPLETED" and status["detail"].startswith("stop requested by ")
    head_log = (Path(status["log_dir"]) / "ray-head.log").read_text()
    # The driver got SIGTERM and the job still ended well.
    assert "stopping the driver: stop requested by" in head_log
    assert "the driver stopped with code 15" in head_log
    assert "driver got SIGTERM" in driver_log.read_text()
    wait_for_clean_nodes(60)


def test_cancel_stops_ray_on_every_node_and_keeps_the_logs(cli: Cli, interactive: str) -> None:
    log_dir = Path(job_status(cli, interactive)["log_dir"])
    assert cli("cancel", interactive).code == 0
    wait_until(lambda: job_status(cli, interactive)["phase"] == "CANCELLED", timeout=60)
    wait_for_clean_nodes(60)  # no orphan on any node's process table
    assert "cancelled" in (log_dir / "ENDED").read_text()
    for name in ("ray-head.log", "ray-worker-1.log"):
        assert "stopping Ray" in (log_dir / name).read_text(), name
    assert "ended" in json.loads((log_dir / "timings.json").read_text())["phases"]


def test_requeue_gets_a_new_log_dir_and_the_record_knows_both(cli: Cli, interactive: str) -> None:
    first = Path(job_status(cli, interactive)["log_dir"])
    head_log = (first / "ray-head.log").read_text()
    subprocess.run(["scontrol", "requeue", interactive], check=True)
    wait_until(lambda: (first / "ENDED").exists(), timeout=60)
    # Slurm holds a requeued job back for a while (BeginTime); let it start now.
    wait_until(lambda: job_status(cli, interactive)["phase"] == "PENDING", timeout=60)
    subprocess.run(["scontrol", "update", f"jobid={interactive}", "StartTime=now"], check=True)
    wait_until(lambda: "all 2 nodes joined" in job_status(cli, interactive)["detail"])
    status = job_status(cli, interactive)
    second = first.with_name(f"{interactive}-1-logs")
    assert status["log_dir"] == str(second)
    assert status["log_dirs"] == [str(first), str(second)]
    # The first run's logs are as it left them: only appended to, never overwritten.
    assert (first / "ray-head.log").read_text().startswith(head_log)
    assert "requeue" in (first / "ENDED").read_text()
    assert not (second / "ENDED").exists()
    state = Path(os.environ["NRL_LAUNCH_STATE_DIR"])
    saved = json.loads((state / "jobs" / f"{interactive}.json").read_text())
    assert saved["runs"] == [str(first), str(second)]
    assert (second / f"{interactive}-attach.sh").exists()
