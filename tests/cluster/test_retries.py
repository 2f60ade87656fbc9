"""submit --retries N on the dev cluster: real Slurm starts the next try when one fails for a
cause another try can fix, without the node that failed, and the next try resumes from the
newest checkpoint; a failure another try cannot fix is not retried. A stalled try retried with
the code as submitted (and its pool) is test_pools.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import TERMINAL, job_status, node_pids, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
GRPO = "examples/configs/grpo_tiny.yaml"


def _steps(run: Path) -> list[int]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def _nodes(log_dir: Path) -> set[str]:
    """The nodes that joined a try's Ray cluster (its log dir's joined/<index> files)."""
    return {f.read_text().split()[0] for f in (log_dir / "joined").iterdir()}


def _squeue_states(job_ids: list[str]) -> dict[str, str]:
    shown = subprocess.run(
        ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i %T"],
        capture_output=True,
        text=True,
        check=False,
    )
    return dict(line.split() for line in shown.stdout.splitlines() if line.strip())


def test_a_lost_worker_is_retried_without_its_node_and_resumes(
    cli: Cli, project: list[str], tmp_path: Path
) -> None:
    """tiny-rl GRPO, 20 steps saved after each (save_period=1: nothing is redone), on 2 nodes of
    node[0-2]; the raylet of try 1's worker is killed mid-training: try 1 fails within a minute.
    Slurm starts try 2 without that node; it resumes from the newest checkpoint and finishes:
    every step trained once."""
    args = ["--config", GRPO, "cluster.num_nodes=2", "checkpointing.save_period=1"]
    flags = ["--retries", "2", "--set", "slurm.exclude=node3"]
    result = cli("submit", "-q", "grpo", *args, "grpo.max_num_steps=20", *project, *flags)
    assert result.code == 0, result.err
    run_id = result.out.strip()
    record = job_status(cli, run_id)
    assert record["try_count"] == 3
    first_logs = Path(record["log_dir"])

    wait_until(lambda: (tmp_path / "ckpt" / "step_5").is_dir(), 400)
    (worker,) = _nodes(first_logs) - {
        (first_logs / "joined" / "0").read_text().split()[0]
    }  # the node that is not the head
    pids = node_pids(worker, "raylet")
    assert pids
    killed_at = time.time()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)

    def over() -> dict[str, Any]:
        found = job_status(cli, run_id)
        return found if found["phase"] in TERMINAL and found["try_index"] == 2 else {}

    wait_until(over, 600)
    final = job_status(cli, run_id)
    assert final["phase"] == "COMPLETED", final
    assert final["try_index"] == 2 and "try 2/3" in final["detail"]
    (before,) = final["earlier_tries"]
    assert f"Ray on node {worker} exited" in before
    # Try 1 failed fast: it knew within a minute of the kill (its ENDED, which status reads).
    assert (first_logs / "ENDED").stat().st_mtime - killed_at < 60
    assert f"retried; the next try runs without {worker}" in before
    second_logs = Path(final["log_dir"])
    assert second_logs != first_logs
    assert worker not in _nodes(second_logs)
    phases = json.loads((second_logs / "timings.json").read_text())
    at = phases["submitted_at"] + phases["phases"]["started"]
    driver_at = phases["submitted_at"] + phases["phases"]["driver_started"]
    # Past pytest's capture: shown with -s.
    print(
        f"retries: raylet killed -> try 2 started in {at - killed_at:.1f} s, its driver in "
        f"{driver_at - killed_at:.1f} s",
        file=sys.__stderr__,
    )
    # try 1's verdict named the node; try 2's said it completed
    assert (first_logs / "RETRY").read_text().startswith(f"retry|{worker}|")
    assert (second_logs / "RETRY").read_text().startswith("done|")

    # Every step trained once: try 2 resumed from the newest save, which is try 1's last
    # logged step, or the step after it when the kill came between its save and its log line.
    one, two = sorted((tmp_path / "logs").glob("exp_*"))
    done_first, done_second = _steps(one), _steps(two)
    assert done_first == list(range(1, len(done_first) + 1))
    resumed = done_second[0] - 1
    assert resumed in (done_first[-1], done_first[-1] + 1)
    assert done_second == list(range(resumed + 1, 21))
    driver = (second_logs / "ray-driver.log").read_text()
    assert f"resumed from {tmp_path / 'ckpt'}/step_{resumed}" in driver
    # Try 3 was never needed: try 2's batch step cancelled it (afternotok leaves it pending).
    (listed,) = json.loads(cli("list", "--json").out)["jobs"]
    third = listed["tries"][2]["job_id"]
    assert _squeue_states([third]).get(third, "CANCELLED") == "CANCELLED"
    wait_for_clean_nodes(60)


def test_a_driver_that_fails_at_once_is_not_retried(cli: Cli, cluster_job: list[str]) -> None:
    result = cli(
        "submit", "--json", "--retries", "2", "--nodes", "1", *cluster_job,
        "--", "bash", "-c", "exit 3",
    )  # fmt: skip
    assert result.code == 0, result.err
    submitted = json.loads(result.out)
    run_id, tries = submitted["job_id"], submitted["tries"]
    assert tries[0] == run_id and len(tries) == 3

    def ended() -> dict[str, Any]:
        found = job_status(cli, run_id)
        return found if found["phase"] in TERMINAL else {}

    wait_until(ended, 300)
    final = job_status(cli, run_id)
    assert final["phase"] == "FAILED" and final["exit_code"] == 3, final
    assert final["try_index"] == 1 and final["earlier_tries"] == []
    assert "try 1/3: " in final["detail"]
    assert "not retried: the driver failed" in final["detail"]
    # The spares are cancelled, never started: no log dir of theirs.
    wait_until(lambda: set(_squeue_states(tries[1:]).values()) == {"CANCELLED"}, 60)
    for spare in tries[1:]:
        assert not (Path(final["log_dir"]).parent / f"{spare}-logs").exists()
    # One line in list for the run.
    listed = json.loads(cli("list", "--json").out)["jobs"]
    assert [job["job_id"] for job in listed] == [run_id]


def test_a_bare_scancel_of_the_running_try_cancels_the_spares(
    cli: Cli, cluster_job: list[str]
) -> None:
    """afternotok takes CANCELLED for a failure: without the batch step's verdict, Slurm would
    start the spare as soon as the user scancels the running try."""
    sleeper = ["--", "python", "-c", "import ray, time; ray.init(address='auto'); time.sleep(600)"]
    result = cli("submit", "--json", "--retries", "1", "--nodes", "1", *cluster_job, *sleeper)
    assert result.code == 0, result.err
    run_id, spare = json.loads(result.out)["tries"]
    wait_until(lambda: "driver running" in job_status(cli, run_id)["detail"], 300)
    subprocess.run(["scancel", run_id], check=True)
    wait_until(lambda: _squeue_states([run_id, spare]).get(spare) == "CANCELLED", 60)
    wait_until(lambda: job_status(cli, run_id)["phase"] in TERMINAL, 60)
    final = job_status(cli, run_id)
    assert final["phase"] == "CANCELLED" and final["try_index"] == 1, final
    assert "not retried: the try was cancelled (Slurm: " in final["detail"]
    assert not (Path(final["log_dir"]).parent / f"{spare}-logs").exists()
