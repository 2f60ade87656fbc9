"""slurm.secrets_via file: the file of the secrets' values goes on every end of the job. The
node program removes it as the batch step ends however it ends (tests/node/test_secrets.py);
here, the login side: `status` and `list` remove the file of a job that is over, and of one
Slurm has forgotten (a cancelled or timed-out job, whose trap kept the file for a requeue)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_launch.jobs import record
from tests.conftest import SHARED_LOGS, Cli
from tests.fakes import FakeSlurm


@pytest.fixture
def secrets_file(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Job 42, submitted with its secrets in a file (its log dir is on the cluster's shared
    disk, which this machine does not see: the state of the job is Slurm's alone)."""
    monkeypatch.setenv("HF_TOKEN", "hf_value")
    slurm.answer("sbatch", stdout="42\n")
    done = cli(
        "submit", "-q", *SHARED_LOGS, "--set", "slurm.secrets_via=file", "--", "python", "x.py"
    )
    assert done.code == 0, done.err
    rec = record.load("42", tmp_path / "state")
    secrets = Path(f"{rec.script_path}.secrets")
    assert secrets.exists()
    return secrets


@pytest.mark.parametrize("command", [["status", "42"], ["list"], ["status"]])
@pytest.mark.parametrize(
    ("squeue", "sacct"),
    [
        ("", ""),  # forgotten: neither squeue nor accounting knows it
        ("42|CANCELLED|None|1|\n", ""),
        ("", "42|TIMEOUT|0:0\n"),
    ],
    ids=["forgotten", "cancelled", "timed-out"],
)
def test_the_secrets_file_of_a_job_that_is_over_goes(
    cli: Cli, slurm: FakeSlurm, secrets_file: Path, command: list[str], squeue: str, sacct: str
) -> None:
    slurm.answer("squeue", stdout=squeue)
    slurm.answer("sacct", stdout=sacct)
    slurm.answer("scontrol", stdout="")
    done = cli(*command)
    assert done.code in (0, 1), done.err
    assert not secrets_file.exists()


@pytest.mark.parametrize("state", ["PENDING|BeginTime", "RUNNING|None"])
def test_the_secrets_file_of_a_job_slurm_may_still_run_stays(
    cli: Cli, slurm: FakeSlurm, secrets_file: Path, state: str
) -> None:
    """Pending (a requeued job waiting to run again, or a spare try) or running: its next run
    reads the file."""
    slurm.answer("squeue", stdout=f"42|{state}|1|node0\n")
    assert cli("status", "42").code == 0
    assert secrets_file.exists()
