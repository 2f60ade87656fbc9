"""submit --retries N on the login side (fake Slurm): the tries it queues, the one record of the
run, and what status, list and cancel say of it."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from nrl_launch import paths
from tests.conftest import Cli
from tests.fakes import FakeSlurm

DRIVER = ["--", "python", "train.py"]


def _sbatch_keeps_nrl_retry(
    slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, kept: Path, inherited: str
) -> None:
    """From a shell whose NRL_RETRY is `inherited`, each sbatch appends the NRL_RETRY its job
    gets to `kept` and answers job id 100, 101, ..."""
    monkeypatch.setenv("HF_TOKEN", "hf-test")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-test")
    monkeypatch.setenv("NRL_RETRY", inherited)
    env = shlex.quote(str(kept))
    slurm.script(
        "sbatch",
        f"n=$(( $(wc -l <{env} 2>/dev/null || echo 0) + 100 ))\n"
        f'printf "%s\\n" "${{NRL_RETRY-none}}" >>{env}\necho "$n"',
    )


@pytest.fixture
def queued(
    cli: Cli, slurm: FakeSlurm, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> FakeSlurm:
    """`submit --retries 2` done: jobs 100 (try 1), 101 and 102 (spares)."""
    # A shell that is itself inside a try must not pass its marker on to a new job.
    _sbatch_keeps_nrl_retry(slurm, monkeypatch, isolated / "sbatch-env", "9 9 9 9")
    result = cli("submit", "--retries", "2", "--nodes", "2", *DRIVER)
    assert result.code == 0, result.err
    assert "Submitted job 100 (2 node(s)), try 1 of 3; the spare tries 101 102" in result.out
    return slurm


def test_submit_queues_the_spares_each_after_the_try_before(
    queued: FakeSlurm, isolated: Path
) -> None:
    calls = queued.calls("sbatch")
    assert len(calls) == 3
    assert not any("--dependency" in word for word in calls[0].split())
    assert "--dependency=afternotok:100" in calls[1].split()
    assert "--dependency=afternotok:101" in calls[2].split()
    # Each knows which try it is, of how many, the try before, and the default 600 s.
    tries = (isolated / "sbatch-env").read_text().splitlines()
    assert tries == ["1 3 - 600", "2 3 100 600", "3 3 101 600"]
    # One record for the run, under try 1's id; a later try's id finds it too.
    state = paths.state_dir(os.environ)
    assert sorted(p.name for p in (state / "jobs").glob("*.json")) == ["100.json"]


def test_a_plain_job_is_no_try_even_from_a_shell_inside_one(
    cli: Cli, slurm: FakeSlurm, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sbatch_keeps_nrl_retry(slurm, monkeypatch, isolated / "sbatch-env", "2 3 100 600")
    assert cli("submit", "-q", *DRIVER).code == 0
    assert (isolated / "sbatch-env").read_text() == "none\n"


def _ended(log_dir: Path, ended: str, verdict: str | None) -> None:
    log_dir.mkdir()
    (log_dir / "ENDED").write_text(ended + "\n")
    if verdict is not None:
        (log_dir / "RETRY").write_text(verdict + "\n")


def test_status_shows_the_current_try_and_each_earlier_try_s_cause(
    cli: Cli, queued: FakeSlurm, isolated: Path
) -> None:
    _ended(
        isolated / "100-logs",
        "Ray on node node1 exited (code 1) while the job was running",
        "retry|node1|Ray on node node1 exited (code 1) while the job was running",
    )
    (isolated / "101-logs").mkdir()
    queued.answer(
        "squeue",
        stdout="100|FAILED|NonZeroExitCode|2|node[0-1]\n101|RUNNING|None|2|node[0,2]\n"
        "102|PENDING|Dependency|2|\n",
    )
    queued.answer("sacct", stdout="100|FAILED|1:0\n")
    for job in ("100", "101", "102"):  # any try's id names the run
        result = cli("status", job)
        assert result.code == 0, result.err
        lines = result.out.splitlines()
        assert lines[0].split()[:2] == ["100", "STARTING"]  # try 2's Ray is not up yet
        assert "try 2/3: " in lines[0]
        assert lines[1].strip() == (
            "try 1 (job 100): FAILED: exit code 1: Ray on node node1 exited (code 1) while the "
            "job was running; retried; the next try runs without node1"
        )
    found = json.loads(cli("status", "100", "--json").out)["jobs"][0]
    assert (found["try_index"], found["try_count"]) == (2, 3)
    # list: the run is one line, in its current try's state.
    result = cli("list")
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines() if line.split()[:1] in (["100"], ["101"])]
    assert len(rows) == 1 and "STARTING" in rows[0] and "try 2/3" in rows[0]


def test_status_says_why_a_failed_try_was_not_retried(
    cli: Cli, queued: FakeSlurm, isolated: Path
) -> None:
    why = "not retried: the driver failed 3s after it started (exit 3), within the 600s"
    _ended(isolated / "100-logs", "driver exited with code 3", f"stop||{why}")
    queued.answer(
        "squeue",
        stdout="100|FAILED|NonZeroExitCode|2|node[0-1]\n101|CANCELLED|None|2|\n"
        "102|CANCELLED|None|2|\n",
    )
    queued.answer("sacct", stdout="100|FAILED|3:0\n101|CANCELLED|0:0\n102|CANCELLED|0:0\n")
    line = cli("status", "100").out.splitlines()[0]
    assert line.split()[:2] == ["100", "FAILED"]
    assert "try 1/3: exit code 3: driver exited with code 3; " + why in line


def test_a_spare_that_slurm_starts_after_a_silent_failure_is_the_current_try(
    cli: Cli, queued: FakeSlurm, isolated: Path
) -> None:
    """Try 1's first node died with it (NODE_FAIL): no verdict; Slurm starts try 2."""
    (isolated / "100-logs").mkdir()
    queued.answer(
        "squeue",
        stdout="100|NODE_FAIL|None|2|\n101|PENDING|Resources|2|\n102|PENDING|Dependency|2|\n",
    )
    queued.answer("sacct", stdout="100|NODE_FAIL|0:0\n")
    result = cli("status", "100")
    lines = result.out.splitlines()
    assert lines[0].split()[:2] == ["100", "PENDING"] and "try 2/3" in lines[0]
    assert lines[1].strip().startswith("try 1 (job 100): FAILED")


def test_cancel_cancels_every_try_of_the_run(cli: Cli, queued: FakeSlurm) -> None:
    queued.answer(
        "squeue",
        stdout="100|RUNNING|None|2|node[0-1]\n101|PENDING|Dependency|2|\n"
        "102|PENDING|Dependency|2|\n",
    )
    queued.answer("scancel")
    result = cli("cancel", "100")
    assert result.code == 0, result.err
    assert queued.calls("scancel") == ["scancel 100 101 102"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retries", "-1"], "slurm.retries"),
        (["--backend", "local", "--nodes", "1", "--retries", "1"], "slurm.retries: backend local"),
        (["--retries", "1", "--chain", "2"], "--retries with --chain"),
        (["--retries", "1", "--interactive"], "slurm.retries: an interactive job"),
    ],
)
@pytest.mark.usefixtures("isolated")
def test_retries_that_cannot_be_are_refused(
    cli: Cli, slurm: FakeSlurm, args: list[str], message: str
) -> None:
    driver = [] if "--interactive" in args else DRIVER
    result = cli("submit", *args, *driver)
    assert result.code == 2, result.err
    assert len(result.err.strip().splitlines()) == 1
    assert message in result.err
    assert not slurm.calls("sbatch")


def test_logs_of_the_run_are_its_current_try_s(cli: Cli, queued: FakeSlurm, isolated: Path) -> None:
    _ended(isolated / "100-logs", "stalled: no step in 1800 s", "retry||stalled: no step")
    (isolated / "100-logs" / "ray-driver.log").write_text("try one\n")
    (isolated / "101-logs").mkdir()
    (isolated / "101-logs" / "ray-driver.log").write_text("try two\n")
    queued.answer(
        "squeue",
        stdout="100|FAILED|NonZeroExitCode|2|node[0-1]\n101|RUNNING|None|2|node[0,2]\n"
        "102|PENDING|Dependency|2|\n",
    )
    queued.answer("sacct", stdout="100|FAILED|1:0\n")
    result = cli("logs", "100")
    assert result.code == 0, result.err
    assert "try two" in result.out and "try one" not in result.out
