"""Model pools beside training (pools:) on the dev cluster: one heterogeneous Slurm job whose
second component serves a pool's replicas, one balancer per pool on the head, the driver started
once the pool answers with its URL in place of the placeholder. Real Slurm, Ray and bash; the
judge is tiny-rl's (tiny_rl/judge.py), the GRPO run tiny-rl's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import (
    GRPO,
    TERMINAL,
    job_status,
    mean,
    metrics,
    no_container_of,
    runs,
    wait_for_clean_nodes,
)
from tests.conftest import Cli, wait_until
from tests.helpers import git

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]

# tiny-rl's judge as a pool of two replicas, each on a node of its own.
JUDGE = {
    "pools": {
        "judge": {
            "replicas": 2,
            # As the driver runs: uv run, in the code frozen at submit, with the project's env.
            "command": ["uv", "run", "python", "-m", "tiny_rl.judge"],
            "balancer_port": 8100,
            "startup_timeout_s": 300,
        }
    }
}
# A server in a few lines (any Python): answers every GET with which replica it is.
SERVER = """\
import http.server, json, os, socket, sys
LABEL = "/etc/nrl-test-image"  # in the test image only
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        seen = {"replica": os.environ["NRL_POOL_REPLICA"], "host": socket.gethostname(),
                "python": sys.executable,
                "image": open(LABEL).read().strip() if os.path.exists(LABEL) else None}
        body = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
port = int(os.environ["NRL_POOL_PORT"])
http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
"""
# A replica of two nodes: its server reports the Ray cluster of its own (RAY_ADDRESS).
RAY_SERVER = """\
import http.server, json, os, ray
ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
alive = [n for n in ray.nodes() if n["Alive"]]
seen = {"nodes": sorted(n["NodeManagerHostname"] for n in alive),
        "gpus": int(sum(n["Resources"].get("GPU", 0) for n in alive)),
        "address": os.environ["RAY_ADDRESS"]}
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
port = int(os.environ["NRL_POOL_PORT"])
http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
"""
# A driver that asks the pool every half second until it is stopped, printing each answer.
ASKER = """\
import sys, time, urllib.request
print("pool at", sys.argv[1], flush=True)
while True:
    try:
        answer = urllib.request.urlopen(sys.argv[1] + "/models", timeout=10).read()
        print(answer.decode(), flush=True)
    except OSError as error:
        print("error:", error, flush=True)
    time.sleep(0.5)
"""


@pytest.fixture(autouse=True)
def _cancel_what_is_left() -> Iterator[None]:
    """A test that fails midway leaves no job behind on the cluster the next tests share."""
    yield
    while SUBMITTED:
        subprocess.run(["scancel", SUBMITTED.pop()], check=False)


SUBMITTED: list[str] = []


def job_file(path: Path, data: dict[str, object]) -> str:
    path.write_text(json.dumps(data))  # JSON is YAML
    return str(path)


def server_pids(log_dir: Path, replica: int | None = None) -> list[int]:
    """This job's pool servers on the dev nodes (the machine's process table: the nodes share
    it), by the NRL_LOG_DIR and NRL_POOL_REPLICA in their environment; of one replica, or all."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            f"NRL_LOG_DIR={log_dir}".encode() not in environ
            or b"NRL_POOL_NAME=judge" not in environ
        ):
            continue
        if replica is not None and f"NRL_POOL_REPLICA={replica}".encode() not in environ:
            continue
        # The server itself (setsid: its own group's leader), not the replica's bash around it.
        if os.getpgid(int(entry.name)) == int(entry.name):
            found.append(int(entry.name))
    return found


def kill(pids: list[int]) -> None:
    """Each server and what it started (uv run's python): a replica that dies."""
    assert pids
    for pid in pids:
        os.killpg(pid, signal.SIGKILL)


def test_grpo_learns_from_a_two_replica_judge_and_goes_on_without_one(
    cli: Cli, project: list[str], tmp_path: Path
) -> None:
    """tiny-rl's rewards come from the judge through the pool's URL; one replica is killed
    mid-run, the balancer routes around it, and the run completes and learns."""
    args = ["-f", job_file(tmp_path / "pool.yaml", JUDGE), "--set", "slurm.exclude=node3"]
    submitted = cli(
        "submit", "-q", *args, "grpo", "--config", GRPO, *project,
        "tiny_rl.judge_url=__JUDGE_URL__", "grpo.max_num_steps=30",
    )  # fmt: skip
    assert submitted.code == 0, submitted.err
    job_id = submitted.out.strip()
    SUBMITTED.append(job_id)
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    # Some steps scored by both replicas, then replica 0 goes.
    wait_until(
        lambda: "step 5/" in _text(log_dir / "ray-driver.log") or (log_dir / "ENDED").exists(),
        timeout=600,
    )
    assert not (log_dir / "ENDED").exists(), (log_dir / "ENDED").read_text()
    assert job_status(cli, job_id)["pools"][0]["healthy"] == 2
    kill(server_pids(log_dir, replica=0))
    wait_until(lambda: job_status(cli, job_id)["pools"][0]["healthy"] == 1, timeout=60)
    wait_until(lambda: job_status(cli, job_id)["phase"] not in ("RUNNING", "PENDING"), 600)

    status = job_status(cli, job_id)
    assert status["phase"] == "COMPLETED", status["detail"]
    driver = (log_dir / "ray-driver.log").read_text()
    url = (log_dir / "judge_url").read_text().strip()
    assert url.startswith("http://") and url.endswith(":8100/v1")
    # The placeholder became the pool's URL: the driver scored every step there.
    assert f"rewards: from the judge tiny-judge at {url}, one request per sample" in driver
    (run,) = runs(tmp_path)
    rewards = [m["reward"] for m in metrics(run)]
    assert len(rewards) == 30
    assert mean(rewards[-5:]) > mean(rewards[:5]) + 0.2, rewards
    # Replica 0 was routed around (its balancer says so) while replica 1 went on scoring.
    balancer = (log_dir / "pool-judge-balancer.log").read_text()
    assert "unhealthy" in balancer
    assert "replica 0 exited" in _text(log_dir.parent / f"slurm-{job_id}.out")
    wait_for_clean_nodes(60)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def asker_job(
    cli: Cli,
    flags: list[str],
    where: Path,
    server: str = SERVER,
    driver: str = ASKER,
    **pool: object,
) -> str:
    """A job whose driver (ASKER: asks the pool judge until it is stopped) reaches a pool of
    `server`'s source, in `where`, which every node and container sees; its id."""
    (where / "server.py").write_text(server)
    (where / "asker.py").write_text(driver)
    judge = {
        "replicas": 2,
        "command": ["python3", str(where / "server.py")],
        "balancer_port": 8100,
        "startup_timeout_s": 120,
        **pool,
    }
    spec = job_file(where / "pool.yaml", {"pools": {"judge": judge}})
    submitted = cli(
        "submit", "-q", "-f", spec, *flags, "--set", "slurm.exclude=node3",
        "--", "python3", str(where / "asker.py"), "__JUDGE_URL__",
    )  # fmt: skip
    assert submitted.code == 0, submitted.err
    SUBMITTED.append(submitted.out.strip())
    return submitted.out.strip()


# A driver that says which code it is, asks the pool once, then hangs: what driver.stall_min
# ends.
STALLER = """\
import sys, time, urllib.request
print("MARKER", flush=True)
print("argv:", " ".join(sys.argv[1:]), flush=True)
print(urllib.request.urlopen(sys.argv[1] + "/models", timeout=30).read().decode(), flush=True)
time.sleep(3600)
"""


def test_a_stalled_try_is_retried_whole_its_pool_code_and_save_deadline_with_it(
    cli: Cli, cluster_job: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--retries, driver.stall_min and the save deadline treat a job with pools as one: each try
    is a heterogeneous job of its own that starts its pool, its driver reaches the pool and is
    told to save before its own end; the stalled try's pool goes with it. The driver, in a git
    checkout, is changed right after submit: both tries run the code as submitted (the
    snapshot)."""
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "server.py").write_text(SERVER)
    driver = repo / "driver.py"
    driver.write_text(STALLER.replace("MARKER", "driver as submitted"))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "driver"]):
        git(repo, *args)
    monkeypatch.chdir(repo)
    judge = {
        "replicas": 1,
        "command": ["python3", str(repo / "server.py")],
        "balancer_port": 8100,
        "startup_timeout_s": 120,
    }
    result = cli(
        "submit", "--json", "-f", job_file(tmp_path / "pool.yaml", {"pools": {"judge": judge}}),
        *cluster_job, "--retries", "1", "--time", "10", "--set", "slurm.exclude=node3",
        "--set", "driver.stall_min=0.25", "--set", "nemo_rl.save_by_job_end=true",
        "--set", "nemo_rl.checkpoint_margin_min=2",
        "--", "python3", "driver.py", "__JUDGE_URL__",
    )  # fmt: skip
    assert result.code == 0, result.err
    # Changed right after submit, before either try has started its driver.
    driver.write_text(STALLER.replace("MARKER", "driver changed after submit"))
    submitted = json.loads(result.out)
    SUBMITTED.extend(submitted["tries"])
    run_id = submitted["job_id"]

    def over() -> dict[str, Any]:
        found = job_status(cli, run_id)
        return found if found["phase"] in TERMINAL and found["try_index"] == 2 else {}

    wait_until(over, 400)
    final = job_status(cli, run_id)
    assert final["phase"] == "FAILED" and "stalled: no driver output" in final["detail"], final
    (before,) = final["earlier_tries"]
    assert "stalled: no driver output" in before and "retried" in before, before
    for try_id in submitted["tries"]:
        log_dir = tmp_path / "logs" / f"{try_id}-logs"
        log = _text(log_dir / "ray-driver.log")
        assert "driver as submitted" in log and "changed after submit" not in log, log
        assert '"replica": "0"' in log, log  # the try's own pool answered
        # Told to save 2 min before the try's own end (10 min after it started).
        left = log.split("++checkpointing.checkpoint_must_save_by=")[1].split()[0]
        days, hours, minutes, seconds = (int(part) for part in left.split(":"))
        assert 5 * 60 < ((days * 24 + hours) * 60 + minutes) * 60 + seconds <= 8 * 60, left
        assert not server_pids(log_dir), f"try {try_id}'s pool outlived it"
    wait_for_clean_nodes(60)


def test_a_required_pool_with_no_replica_left_fails_the_job_naming_it(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    job_id = asker_job(cli, cluster_job, tmp_path)
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    wait_until(lambda: '"replica"' in _text(log_dir / "ray-driver.log"), timeout=300)
    status = job_status(cli, job_id)
    assert status["pools"] == [
        {"name": "judge", "healthy": 2, "total": 2, "url": status["pools"][0]["url"],
         "exited": False}
    ]  # fmt: skip
    # A driver that is no trainer (it asks a pool): no training is shown, none invented.
    assert status["training"] is None
    # status shows the pool, as a user reads it.
    shown = cli("status", job_id).out
    assert f"pool judge: 2/2 replicas healthy, {status['pools'][0]['url']}" in shown
    kill(server_pids(log_dir))
    killed = time.monotonic()
    wait_until(lambda: job_status(cli, job_id)["phase"] == "FAILED", timeout=120)
    ended_in = time.monotonic() - killed
    status = job_status(cli, job_id)
    assert "pool judge: every replica has exited" in status["detail"]
    assert status["pools"][0]["exited"] is True
    # The head stopped the driver for it: the job did not wait for the driver to fail.
    assert "stopping the driver: pool judge: every replica has exited" in _text(
        log_dir / "ray-head.log"
    )
    print(f"the job failed {ended_in:.1f} s after its pool's last replica was killed")
    wait_for_clean_nodes(60)


def test_logs_and_attach_reach_each_replica_and_the_job_resubmits_by_hand(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    """logs --node judge.1 and attach --node judge.1 reach replica 1 on its own node; stopped,
    the job completes; its log dir's job.sbatch, sbatch'ed by hand, runs again with its pool."""
    job_id = asker_job(cli, cluster_job, tmp_path)
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    wait_until(lambda: '"replica"' in _text(log_dir / "ray-driver.log"), timeout=300)
    allocation = (log_dir / "node-allocation.txt").read_text()
    node = allocation.split("pool judge replica 1: ")[1].split()[0]
    # attach execs its script: in a process of its own, as users run it.
    attached = subprocess.run(
        [*CLI, "attach", job_id, "--node", "judge.1", "--", "hostname"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.strip() == node
    replica_log = cli("logs", job_id, "--node", "judge.1")
    assert f"pool judge replica 1 on {node}" in replica_log.out
    assert cli("stop", job_id, "--wait").code == 0
    assert job_status(cli, job_id)["phase"] == "COMPLETED"

    # By hand, as ray.sub users resubmit: the same heterogeneous job, its pool and all.
    again = subprocess.run(
        ["sbatch", "--parsable", "job.sbatch"], cwd=log_dir, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    SUBMITTED.append(again.stdout.strip())
    second = log_dir.parent / f"{again.stdout.strip()}-logs"
    wait_until(lambda: '"replica"' in _text(second / "ray-driver.log"), timeout=300)
    assert (second / "pool-judge-0.log").exists() and (second / "pool-judge-1.log").exists()
    subprocess.run(["scancel", again.stdout.strip()], check=True)
    wait_for_clean_nodes(120)


def answers(log_dir: Path) -> list[dict[str, object]]:
    """What the pool answered the driver, so far."""
    lines = _text(log_dir / "ray-driver.log").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_a_pool_runs_in_containers_of_the_job_s_image(
    cli: Cli, container_job: list[str], tmp_path: Path
) -> None:
    """In the test image (pyxis/enroot): each replica's server, and attach into replica 1's
    container; none of the pool's containers is left on a node after the job."""
    job_id = asker_job(cli, container_job, tmp_path / "scratch")
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    wait_until(lambda: len({a["replica"] for a in answers(log_dir)}) == 2, timeout=300)
    for answer in answers(log_dir):
        assert str(answer["python"]).startswith("/opt/venv/bin/python"), answer
        assert answer["image"], answer  # the image's label: inside it
    attached = subprocess.run(
        [*CLI, "attach", job_id, "--node", "judge.1", "--", "cat", "/etc/nrl-test-image"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.strip() == answers(log_dir)[0]["image"]
    assert cli("stop", job_id, "--wait").code == 0
    assert job_status(cli, job_id)["phase"] == "COMPLETED"
    wait_until(lambda: no_container_of(job_id), 60)
    wait_for_clean_nodes(60)


def test_a_replica_of_two_nodes_runs_a_ray_cluster_of_its_own(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    """gpus_per_replica 16 on nodes of 8: the replica takes two nodes, and its server sees a Ray
    cluster of its own across them (not the job's), with their 16 GPUs."""
    job_id = asker_job(cli, cluster_job, tmp_path, RAY_SERVER, replicas=1, gpus_per_replica=16)
    log_dir = Path(job_status(cli, job_id)["log_dir"])
    wait_until(lambda: bool(answers(log_dir)) or (log_dir / "ENDED").exists(), timeout=300)
    assert not (log_dir / "ENDED").exists(), _text(log_dir / "ENDED")
    allocation = (log_dir / "node-allocation.txt").read_text()
    slice_nodes = allocation.split("pool judge replica 0: ")[1].split("\n")[0].split()
    (seen, *_) = answers(log_dir)
    assert seen["nodes"] == sorted(slice_nodes) and len(slice_nodes) == 2
    assert seen["gpus"] == 16
    assert cli("stop", job_id, "--wait").code == 0
    wait_for_clean_nodes(60)
