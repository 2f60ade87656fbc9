"""A preempted or requeued job's status: the run before the newest, and why it ended (the
batch output's line from slurmstepd, as the dev cluster's Slurm 22.05 writes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nrl_launch.jobs.requeue import preempted_at, requeue_note
from nrl_launch.jobs.status import PREEMPTED
from tests.conftest import Cli
from tests.fakes import FakeSlurm

# What the batch step's and the head step's slurmstepd write when a preemption requeues job 42.
PREEMPTION = (
    "slurmstepd-node0: error: *** JOB 42 ON node0 CANCELLED AT 2026-11-27T03:55:57 DUE TO "
    "PREEMPTION ***\n"
    "slurmstepd-node0: error: *** STEP 42.0 ON node0 CANCELLED AT 2026-11-27T03:55:57 DUE TO "
    "PREEMPTION ***\n"
    "slurmstepd-node0: error: *** JOB 42 ON node0 CANCELLED AT 2026-11-27T03:55:57 DUE TO "
    "PREEMPTION ***\n"
)
STOPPED = "Slurm stopped the job (cancelled, time limit, requeue or preemption)\n"


def _runs(tmp_path: Path, count: int) -> list[Path]:
    runs = [tmp_path / "42-logs"] + [tmp_path / f"42-{k}-logs" for k in range(1, count)]
    for run in runs:
        run.mkdir()
    (runs[0] / "ENDED").write_text(STOPPED)
    return runs


def test_a_run_that_slurm_preempted_is_named_with_its_time(tmp_path: Path) -> None:
    out = tmp_path / "slurm-42.out"
    out.write_text("[nrl-launch] job 42: 2 node(s)\n" + PREEMPTION + "[nrl-launch] job 42\n")
    assert preempted_at(out) == ["2026-11-27T03:55:57"]
    runs = _runs(tmp_path, 2)
    assert requeue_note(runs, out, waiting=False) == (
        "run 1 was preempted by Slurm at 2026-11-27T03:55:57 and requeued"
    )
    # PENDING again, before the next run has begun: the same, of the newest run.
    assert requeue_note(runs[:1], out, waiting=True) == (
        "run 1 was preempted by Slurm at 2026-11-27T03:55:57 and requeued"
    )


def test_a_run_requeued_otherwise_is_named_with_its_ended(tmp_path: Path) -> None:
    """scontrol requeue, or a node that failed: no preemption line; its ENDED says the rest."""
    out = tmp_path / "slurm-42.out"
    out.write_text("[nrl-launch] job 42: 2 node(s)\n")
    runs = _runs(tmp_path, 2)
    assert (
        requeue_note(runs, out, waiting=False) == f"run 1 was requeued by Slurm ({STOPPED.strip()})"
    )
    # A second requeue after one preemption: the second was not a preemption.
    out.write_text(PREEMPTION)
    three = tmp_path / "three"
    three.mkdir()
    runs = _runs(three, 3)
    (runs[1] / "ENDED").write_text("Slurm stopped node node1 (job cancelled, ...)\n")
    assert requeue_note(runs, out, waiting=False) == (
        "run 2 was requeued by Slurm (Slurm stopped node node1 (job cancelled, ...))"
    )
    # PENDING again after run 2, no batch output: run 2's ENDED.
    assert requeue_note(runs[:2], tmp_path / "missing.out", waiting=True) == (
        "run 2 was requeued by Slurm (Slurm stopped node node1 (job cancelled, ...))"
    )


def test_a_job_never_requeued_has_no_note(tmp_path: Path) -> None:
    assert requeue_note(_runs(tmp_path, 1), None, waiting=False) is None


@pytest.fixture
def submitted(cli: Cli, slurm: FakeSlurm, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Job 42, submitted with fake Slurm; its first run's log dir (made)."""
    monkeypatch.setenv("HF_TOKEN", "hf-test")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-test")
    slurm.answer("sbatch", stdout="42\n")
    assert cli("submit", "-q", "--set", "slurm.requeue=true", "--", "python", "x.py").code == 0
    log_dir = isolated / "42-logs"
    log_dir.mkdir()
    return log_dir


def test_status_follows_a_preempted_job_across_its_runs(
    cli: Cli, slurm: FakeSlurm, submitted: Path
) -> None:
    (submitted / "ENDED").write_text(STOPPED)
    (submitted.parent / "slurm-42.out").write_text(PREEMPTION)
    slurm.answer("squeue", stdout="42|PENDING|BeginTime|1|\n")
    first = json.loads(cli("status", "42", "--json").out)["jobs"][0]
    assert first["phase"] == "PENDING"
    assert first["detail"] == (
        "waiting for resources (BeginTime); "
        "run 1 was preempted by Slurm at 2026-11-27T03:55:57 and requeued"
    )
    # The second run has its own log dir, and runs.
    second = submitted.parent / "42-1-logs"
    second.mkdir()
    (second / "STARTED_RAY_HEAD").write_text("")
    (second / "timeline").write_text("submitted 1\ndriver_started 2\n")
    (second / "readiness.json").write_text('{"nodes": 1, "nodes_expected": 1}\n')
    slurm.answer("squeue", stdout="42|RUNNING|None|1|node0\n")
    result = cli("status", "42")
    assert result.code == 0, result.err
    assert result.out.split()[:2] == ["42", "RUNNING"]
    assert (
        "driver running on 1 node(s); run 1 was preempted by Slurm at 2026-11-27T03:55:57 and "
        f"requeued   (logs: {second}, run 2 after a requeue)"
    ) in result.out


def test_status_of_a_job_preempted_without_requeue(
    cli: Cli, slurm: FakeSlurm, submitted: Path
) -> None:
    """squeue no longer lists it; the completion log says PREEMPTED: over, not pending."""
    (submitted / "ENDED").write_text("Slurm stopped node node0 (job cancelled, time limit, ...)\n")
    slurm.answer("squeue", stdout="")
    slurm.answer("sacct", stdout="42|PREEMPTED|0:0\n")
    status = json.loads(cli("status", "42", "--json").out)["jobs"][0]
    assert (status["phase"], status["detail"]) == ("CANCELLED", PREEMPTED)
