"""slurm.secrets_via file, on the node: the batch step reads the file of the secrets' values
and removes it as soon as no run of the job can need it, on every end: at once where Slurm never
requeues the job, and as the batch step ends, by itself or stopped by Slurm (SIGTERM: a scancel,
the time limit), unless Slurm may run it again (a requeue, whose next run reads it). Run in a
real bash from a rendered script, with a fake scontrol, and a real kill -TERM."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from nrl_launch.backends import slurm
from tests.conftest import source_job
from tests.helpers import spec

SCRIPT = slurm.plan(spec(slurm={"secrets_via": "file"})).script


def _start(
    tmp_path: Path, state: str, requeue: int, then: str, trap: str = ""
) -> tuple[subprocess.Popen[str], Path]:
    """A batch step (job 7) that reads its secrets file, sets its own `trap` (or none yet),
    says so, then runs `then`; scontrol shows the job in `state` with Requeue=`requeue`."""
    secrets = tmp_path / "job.sbatch.secrets"
    secrets.write_bytes(b"HF_TOKEN=hf_value\0")
    secrets.chmod(0o600)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        "#!/bin/bash\nprintf 'JobId=7 JobName=j UserId=me(0) JobState=%s Reason=None "
        f"Requeue=%s Restarts=0 BatchFlag=1\\n' {state} {requeue}\n"
    )
    scontrol.chmod(0o755)
    probe = (
        source_job(SCRIPT)
        + f"NRL_SECRETS_FILE={secrets}\nload_secrets\n"
        + trap
        + 'echo "loaded ${HF_TOKEN:-}"\n'
        + then
        + "\n"
    )
    proc = subprocess.Popen(
        ["bash", "-c", probe],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7"},
    )
    assert proc.stdout is not None
    loaded = proc.stdout.readline()
    if loaded != "loaded hf_value\n":
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"the secrets were not loaded: {loaded!r} {err}")
    return proc, secrets


def _stopped(tmp_path: Path, state: str, trap: str = "") -> tuple[int, Path]:
    """Slurm stops the batch step (SIGTERM) while it runs, its own TERM trap set (`trap`) or
    not yet; returns its exit code and the secrets file."""
    proc, secrets = _start(tmp_path, state, 1, "nap 60", trap)
    with proc:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=30)
        finally:
            proc.kill()
    return proc.returncode, secrets


BATCH_TRAP = "trap 'end_job stopped 2>/dev/null; exit 143' TERM\n"


@pytest.mark.parametrize("trap", ["", BATCH_TRAP], ids=["before-its-trap", "its-trap"])
@pytest.mark.parametrize("state", ["CANCELLED", "TIMEOUT"])
def test_a_job_slurm_stops_for_good_removes_its_secrets_file(
    tmp_path: Path, state: str, trap: str
) -> None:
    code, secrets = _stopped(tmp_path, state, trap)
    assert code == 143
    assert not secrets.exists()


@pytest.mark.parametrize("state", ["PENDING", "REQUEUED", "COMPLETING"])
def test_a_job_slurm_may_run_again_keeps_its_secrets_file(tmp_path: Path, state: str) -> None:
    """A requeue (or a preemption that requeues it) reads as these: its next run reads the
    file, and `nrl-launch status` removes it once Slurm says the job is over."""
    code, secrets = _stopped(tmp_path, state, BATCH_TRAP)
    assert code == 143
    assert secrets.exists()


@pytest.mark.parametrize("then", ["exit 0", "exit 1", "forget_secrets; exit 0"])
def test_a_batch_step_that_ends_by_itself_removes_its_secrets_file(
    tmp_path: Path, then: str
) -> None:
    """It ended, or refused to start (a log dir that exists, a try after one that said stop):
    Slurm runs it no more."""
    proc, secrets = _start(tmp_path, "RUNNING", 1, then)
    with proc:
        proc.communicate(timeout=30)
    assert not secrets.exists()


def test_a_job_slurm_never_requeues_removes_its_secrets_file_once_read(tmp_path: Path) -> None:
    """Requeue=0: no later run of the job will read it; gone before the job goes on."""
    then = "[[ -e $NRL_SECRETS_FILE ]] && echo there >&2 || echo gone >&2; nap 60"
    proc, secrets = _start(tmp_path, "RUNNING", 0, then)
    with proc:
        try:
            assert proc.stderr is not None
            assert proc.stderr.readline() == "gone\n"
            assert not secrets.exists()
        finally:
            proc.kill()
            proc.communicate(timeout=30)
