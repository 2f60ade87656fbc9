"""`logs -f` of a job Slurm no longer knows (sacct purged it, or the site keeps no accounting):
it exits with the end the job's log dir records (ENDED, exit_code), or, with none recorded,
says so in one line and exits 4, never 1 (a bug's code).

Slurm is the fakes of tests/fakes.py (alone on PATH): squeue, sacct and scontrol answer that
they do not know the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nrl_launch.errors import ExitCode
from nrl_launch.jobs.status import read_log_dir
from tests.conftest import Cli
from tests.fakes import FakeSlurm, install
from tests.helpers import save

INVALID = "slurm_load_jobs error: Invalid job id specified\n"


@pytest.fixture
def forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Job 41's record and log dir (its driver printed one line); Slurm knows nothing of it."""
    fake: FakeSlurm = install(tmp_path, monkeypatch)
    fake.answer("squeue", stderr=INVALID, code=1)
    fake.answer("sacct", stdout="")  # accounting has purged it
    fake.answer("scontrol", stderr=INVALID, code=1)
    log_dir = save(tmp_path, "41")
    log_dir.mkdir(parents=True)
    (log_dir / "ray-driver.log").write_text("step 1\n")
    return log_dir


_FORGOTTEN = "(as its log dir records; the scheduler no longer knows this job)"


@pytest.mark.parametrize(
    ("files", "code", "phase"),
    [
        ({"ENDED": "driver exited with code 0\n"}, 0, "COMPLETED"),
        ({"ENDED": "driver exited with code 3\n"}, 3, "FAILED"),
        # A plain or local job's script writes its exit code: that is the job's.
        ({"ENDED": "the head ended with exit code 7\n", "exit_code": "7\n"}, 7, "FAILED"),
        ({"ENDED": "the head ended with exit code 9\n", "exit_code": "143\n"}, 143, "FAILED"),
        # `nrl-launch stop` ends a job well.
        ({"ENDED": "stop requested by alice with nrl-launch stop\n"}, 0, "COMPLETED"),
        # Any other recorded end is a failure, as Slurm would say.
        ({"ENDED": "the Ray head on node0 exited\n"}, 1, "FAILED"),
    ],
    ids=["completed", "driver-failed", "exit-code-file", "exit-code-file-wins", "stop", "other"],
)
def test_logs_follow_and_status_tell_the_end_the_log_dir_records(
    cli: Cli, forgotten: Path, files: dict[str, str], code: int, phase: str
) -> None:
    for name, text in files.items():
        (forgotten / name).write_text(text)
    reason = files["ENDED"].strip()
    result = cli("logs", "41", "-f")
    assert (result.code, result.out) == (code, "step 1\n"), result.err
    said = f"nrl-launch: note: job 41 ended {phase}: {reason} {_FORGOTTEN}\n"
    assert result.err == (said if code else ""), result.err
    # status says the same: not UNKNOWN while the log dir records how the job ended.
    status = json.loads(cli("status", "41", "--json").out)["jobs"][0]
    assert (status["phase"], status["exit_code"]) == (phase, code)
    assert status["detail"] == f"{reason} {_FORGOTTEN}"


def test_a_job_slurm_stopped_and_forgot_stays_unknown(cli: Cli, forgotten: Path) -> None:
    """Cancelled, out of time, requeued or preempted: the log dir cannot say which."""
    (forgotten / "ENDED").write_text(
        "Slurm stopped the job (cancelled, time limit, requeue or preemption)\n"
    )
    status = json.loads(cli("status", "41", "--json").out)["jobs"][0]
    assert status["phase"] == "UNKNOWN"
    assert "it ended: Slurm stopped the job" in status["detail"]
    result = cli("logs", "41", "-f")
    assert result.code == 1
    assert result.err.startswith(
        "nrl-launch: note: Slurm no longer knows job 41; its log dir says it ended: Slurm "
    )


def test_logs_follow_of_a_job_with_no_recorded_end_says_so_and_exits_4(
    cli: Cli, forgotten: Path
) -> None:
    result = cli("logs", "41", "-f")
    assert (result.code, result.out) == (ExitCode.NOT_FOUND, "step 1\n"), result.err
    assert result.err == (
        "nrl-launch: error: Slurm no longer knows job 41 (its accounting may have been purged) "
        f"and its log dir {forgotten} records no end (no ENDED): how it ended is unknown\n"
    )


def test_the_recorded_end_reads_exit_code_then_ended(tmp_path: Path) -> None:
    assert read_log_dir(tmp_path).end is None
    (tmp_path / "exit_code").write_text("not a number\n")
    assert read_log_dir(tmp_path).end is None
    (tmp_path / "ENDED").write_text("the head step ended with exit code 2\n")
    assert read_log_dir(tmp_path).end == (2, "the head step ended with exit code 2")
    (tmp_path / "ENDED").write_text("a worker step ended (exit 3) while the head was running\n")
    assert read_log_dir(tmp_path).end == (
        1,
        "a worker step ended (exit 3) while the head was running",
    )
    (tmp_path / "exit_code").write_text("0\n")
    assert read_log_dir(tmp_path).end == (
        0,
        "a worker step ended (exit 3) while the head was running",
    )
