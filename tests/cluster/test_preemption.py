"""Preemption on the dev cluster: its `urgent` partition (PriorityTier=10, PreemptMode=REQUEUE)
takes the nodes of a running tiny-rl GRPO job. With slurm.requeue the job is requeued, runs
again in a log dir of its own, resumes from its newest checkpoint and completes, every step
present; `status` follows it across the runs. Slurm holds a requeued job back for its
credentials' lifetime (cred_expire, 120 s by default) before it may start again."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import job_status, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
GRPO = "examples/configs/grpo_tiny.yaml"
STEPS = 25
SAVE_PERIOD = 5
ON_NODE0_AND_1 = ["--set", "slurm.exclude=node[2-3]"]


@pytest.fixture
def cancel_after() -> Iterator[list[str]]:
    """Job ids to cancel when the test ends, however it ends: a failed test must not leave a
    10-minute job holding the shared cluster's nodes."""
    jobs: list[str] = []
    yield jobs
    if jobs:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False)


def steps_of(run: Path) -> list[int]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def saved(ckpt: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in ckpt.glob("step_*") if p.name[5:].isdigit())


def urgent_job(nodes: str, tmp_path: Path) -> str:
    """An urgent job (it preempts batch jobs) that takes `nodes` whole for a few seconds."""
    done = subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "--exclusive", "-N", "2", "-w", nodes,
         "-t", "2", "-o", str(tmp_path / "urgent-%j.out"), "--wrap", "sleep 5"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def start_now(job_id: str) -> None:
    """Let the requeued job start as soon as its nodes are free, instead of after Slurm's
    hold (cred_expire, 120 s here): its owner may move its start time (scontrol update); a
    refusal only leaves the hold to pass."""
    subprocess.run(
        ["scontrol", "update", f"JobId={job_id}", "StartTime=now"],
        capture_output=True, check=False,
    )  # fmt: skip


def test_a_preempted_grpo_run_is_requeued_resumes_and_completes(
    cli: Cli, project: list[str], tmp_path: Path, cancel_after: list[str]
) -> None:
    args = ["--config", GRPO, "cluster.num_nodes=2", f"checkpointing.save_period={SAVE_PERIOD}"]
    submitted = cli(
        "submit", "-q", "grpo", *args, f"grpo.max_num_steps={STEPS}", *project,
        *ON_NODE0_AND_1, "--set", "slurm.requeue=true",
    )  # fmt: skip
    assert submitted.code == 0, submitted.err
    job_id = submitted.out.strip()
    cancel_after.append(job_id)
    ckpt, first_dir = tmp_path / "ckpt", tmp_path / "jobs" / f"{job_id}-logs"

    # Mid-training, once a checkpoint exists: an urgent job takes the job's nodes.
    wait_until(lambda: SAVE_PERIOD * 2 in saved(ckpt), 400)
    assert "#SBATCH --requeue" in (first_dir / "job.sbatch").read_text()
    urgent = urgent_job("node0,node1", tmp_path)
    preempted_at = time.time()
    wait_until(lambda: (first_dir / "ENDED").exists(), 120)
    stopped = job_status(cli, job_id)
    wait_until(lambda: job_status(cli, job_id)["phase"] == "PENDING", 120)
    pending = job_status(cli, job_id)
    start_now(job_id)

    # Requeued: Slurm holds it back a while (BeginTime), then it runs again, in its own dir.
    second_dir = tmp_path / "jobs" / f"{job_id}-1-logs"
    wait_until(lambda: (second_dir / "STARTED_RAY_HEAD").exists(), 400)
    restarted_at = time.time()
    running = job_status(cli, job_id)
    wait_until(lambda: job_status(cli, job_id)["phase"] in ("COMPLETED", "FAILED"), 400)
    final = job_status(cli, job_id)
    print(
        f"preempted -> running again in {restarted_at - preempted_at:.0f} s; "
        f"stopping: {stopped['detail']}; pending: {pending['detail']}; "
        f"run 2: {running['detail']}; final: {final['detail']}",
        file=sys.__stderr__,
    )
    assert final["phase"] == "COMPLETED", final
    assert final["log_dirs"] == [str(first_dir), str(second_dir)]
    assert "run 1 was preempted by Slurm at " in running["detail"], running
    assert "run 1 was preempted by Slurm at " in final["detail"], final
    assert "waiting for resources (BeginTime)" in pending["detail"], pending
    assert "run 1 was preempted by Slurm at " in pending["detail"], pending
    assert "Slurm stopped" in stopped["detail"] or "preempted" in stopped["detail"], stopped
    assert (tmp_path / f"urgent-{urgent}.out").exists()
    # Both runs' batch output, in one file: the first run's ends with Slurm's word on why.
    out = (tmp_path / "jobs" / f"slurm-{job_id}.out").read_text()
    assert f"JOB {job_id} ON node0 CANCELLED AT" in out and "DUE TO PREEMPTION" in out

    # The second run resumed from the newest checkpoint the first had saved, and every step of
    # the run is there: those after that checkpoint, up to the preemption, ran twice.
    first, second = sorted((tmp_path / "logs").glob("exp_*"))
    ran_first = steps_of(first)
    resumed = re.search(
        rf"resumed from {re.escape(str(ckpt))}/step_(\d+)",
        (second_dir / "ray-driver.log").read_text(),
    )
    assert resumed, (second_dir / "ray-driver.log").read_text()[-2000:]
    latest = int(resumed[1])
    assert ran_first == list(range(1, len(ran_first) + 1))
    assert latest % SAVE_PERIOD == 0 and latest >= SAVE_PERIOD * 2
    # The newest whole checkpoint: the last save of a finished step (a save the preemption cut
    # short leaves only its tmp_step_N, which does not count).
    assert len(ran_first) - SAVE_PERIOD <= latest <= len(ran_first)
    assert steps_of(second) == list(range(latest + 1, STEPS + 1))
    assert sorted(set(ran_first) | set(steps_of(second))) == list(range(1, STEPS + 1))
    wait_for_clean_nodes(60)


def test_a_preempted_job_without_requeue_is_reported_preempted(
    cli: Cli, project: list[str], tmp_path: Path, cancel_after: list[str]
) -> None:
    """Without slurm.requeue the urgent job's preemption cancels the job: status says it was
    preempted, not just cancelled."""
    args = ["--config", GRPO, "cluster.num_nodes=2", "grpo.max_num_steps=1000"]
    submitted = cli(
        "submit", "-q", "grpo", *args, *project, *ON_NODE0_AND_1, "--set", "slurm.requeue=false"
    )
    assert submitted.code == 0, submitted.err
    job_id = submitted.out.strip()
    cancel_after.append(job_id)
    log_dir = tmp_path / "jobs" / f"{job_id}-logs"
    wait_until(lambda: "driver running" in job_status(cli, job_id)["detail"], 400)
    urgent_job("node0,node1", tmp_path)
    wait_until(lambda: job_status(cli, job_id)["phase"] not in ("RUNNING", "STARTING"), 120)
    status: dict[str, Any] = job_status(cli, job_id)
    print(f"preempted without requeue: {status}", file=sys.__stderr__)
    assert status["phase"] == "CANCELLED", status
    assert "preempted" in status["detail"], status
    assert not (tmp_path / "jobs" / f"{job_id}-1-logs").exists()
    assert (log_dir / "ENDED").exists()
    wait_for_clean_nodes(60)
