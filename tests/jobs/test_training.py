"""What status says of a job's training (jobs/training.py): the step, the pace, the verdict
against the job's limit and the last save, from a driver's log as NeMo RL and tiny-rl print
it; and nothing for a driver that is neither."""

from __future__ import annotations

import shutil
from pathlib import Path

from nrl_launch.jobs.record import JobRecord
from nrl_launch.jobs.report import duration
from nrl_launch.jobs.status import read_timeline
from nrl_launch.jobs.training import read_training

LOGS = Path(__file__).resolve().parents[1] / "data" / "nemo_rl_logs"


def _job(tmp_path: Path, log: str | None, *, started: float, limit: str | None) -> JobRecord:
    log_dir = tmp_path / "7-logs"
    log_dir.mkdir()
    (log_dir / "timeline").write_text(f"submitted {started - 5}\nstarted {started}\n")
    if log is not None:
        shutil.copy(LOGS / log, log_dir / "ray-driver.log")
    return JobRecord(
        job_id="7", backend="slurm", job_name="j", nodes=1, submitted_at=0, submit_dir="/",
        log_dir=str(log_dir), script_path="/x", argv=[],
        spec={"slurm": {"time": limit}} if limit else {},
    )  # fmt: skip


def _lines(tmp_path: Path, log: str, *, limit: str | None, running_for: float) -> list[str]:
    rec = _job(tmp_path, log, started=1000.0, limit=limit)
    found = read_training(rec, Path(rec.log_dir), now=1000.0 + running_for)
    assert found is not None
    return found.lines(over=False)


def test_a_tiny_rl_run_shows_its_step_pace_reward_and_save(tmp_path: Path) -> None:
    lines = _lines(tmp_path, "tiny_rl_grpo.log", limit="4:00:00", running_for=600)
    head, verdict, metrics, save = lines
    assert head.startswith("training: step ") and "(tiny-rl grpo)" in head and "s/step" in head
    assert verdict.startswith("  finishes in this job at this pace (3 h 50 min of its limit")
    assert metrics.startswith("  reward ") and "loss " in metrics
    assert save.startswith("  last save: step ")


def test_a_run_that_cannot_finish_says_how_many_more_jobs_it_needs(tmp_path: Path) -> None:
    rec = _job(tmp_path, "grpo.log", started=1000.0, limit="10")
    found = read_training(rec, Path(rec.log_dir), now=1000.0 + 540)
    assert found is not None
    p = found.progress
    assert p.step is not None and p.total is not None and p.seconds_left() is not None
    assert found.left_in_job_s == 60
    # the steps left at this pace, past the minute left, in jobs of 10 min
    needed = found.jobs_needed
    assert needed is not None and needed >= 1
    assert found.lines(over=False)[1] == (
        f"  does not finish in this job (1 min left): {needed} more job(s) of 10 min at this "
        "pace (submit --chain)"
    )
    assert found.as_json()["jobs_needed"] == needed


def test_without_a_limit_there_is_no_verdict_and_an_ended_job_has_none(tmp_path: Path) -> None:
    rec = _job(tmp_path, "sft.log", started=1000.0, limit=None)
    found = read_training(rec, Path(rec.log_dir), now=2000.0)
    assert found is not None and found.jobs_needed is None
    assert not any("this job" in line for line in found.lines(over=False))
    assert not any("to the last step" in line for line in found.lines(over=True))


def test_a_driver_that_is_no_trainer_shows_no_training(tmp_path: Path) -> None:
    rec = _job(tmp_path, None, started=1000.0, limit="10")
    (Path(rec.log_dir) / "ray-driver.log").write_text("hello\nstep into the light\n")
    assert read_training(rec, Path(rec.log_dir)) is None


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (42, 600, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)] == [
        "42 s", "10 min", "3 h 05 min", "2 d 4 h",
    ]  # fmt: skip


def test_a_log_dir_another_user_could_write_shows_no_training(tmp_path: Path) -> None:
    """What such a dir says (a planted log, a timeline) is not read: status shows nothing of it,
    and no GPU-hours come from its timeline."""
    rec = _job(tmp_path, "grpo.log", started=1000.0, limit="10")
    log_dir = Path(rec.log_dir)
    log_dir.chmod(0o777)
    assert read_training(rec, log_dir, now=1500.0) is None
    assert read_timeline(log_dir) == []
