"""A plain command's Slurm script (`run`, `pull`: node/plain.sh, with node/batch.sh, the batch
step's opening that a Ray job's batch_main calls too, and pull --force's node/remove_first.sh), run
in a real bash: the batch step against fake srun and scontrol, its task on every node."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nrl_launch.backends import Request, slurm
from nrl_launch.spec import LaunchSpec
from tests.fakes import FakeSlurm
from tests.helpers import bash_values, spec

PYXIS = {"image": "/shared/images/nemo-rl.sqsh"}
SUBMITTED = "2026-01-02T03:04:05"


def _opened(script: str, probe: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """open_batch in the sourced `script`, with Slurm's variables, then `probe`."""
    values = {"SLURM_JOB_ID": "42", "SLURM_SUBMIT_DIR": "/submit", **env}
    code = (
        'source /dev/stdin <<<"$1"\nset -u\n'
        + "".join(f"{name}={value}\n" for name, value in values.items())
        + "open_batch\n"
        + probe
    )
    return subprocess.run(
        ["bash", "-c", code, "bash", script],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize("plan", [slurm.plan, slurm.plan_plain], ids=["ray", "plain"])
@pytest.mark.parametrize(
    ("restarts", "expected"),
    [("0", "/submit/nrl logs/42-logs"), ("2", "/submit/nrl logs/42-2-logs")],
)
def test_open_batch_names_this_run_s_log_dir_the_same_for_both_kinds(
    plan: Callable[[LaunchSpec], Request], restarts: str, expected: str
) -> None:
    """A relative logs.base_dir is the submit dir's; a requeued run gets a dir of its own."""
    script = plan(spec(logs={"base_dir": "nrl logs"})).script
    probe = 'printf "%s|%s|%s\\n" "$NRL_LOG_DIR" "$NRL_RUN_NAME" "$(printenv NRL_LOG_DIR)"'
    done = _opened(script, probe, SLURM_RESTART_COUNT=restarts)
    assert done.returncode == 0, done.stderr
    run = "42" if restarts == "0" else f"42-{restarts}"
    assert done.stdout == f"{expected}|{run}|{expected}\n"


@pytest.mark.parametrize("plan", [slurm.plan, slurm.plan_plain], ids=["ray", "plain"])
def test_open_batch_ends_a_pyxis_job_whose_log_dir_pyxis_cannot_mount(
    plan: Callable[[LaunchSpec], Request],
) -> None:
    """A relative logs.base_dir under a submit dir that pyxis cannot mount (submit refuses such
    a base_dir when it is given whole)."""
    with_pyxis = plan(spec(container=PYXIS, logs={"base_dir": "logs"})).script
    done = _opened(with_pyxis, "echo started", SLURM_SUBMIT_DIR="/shared/a,b")
    assert done.returncode == 1
    assert "the log dir /shared/a,b/logs/42-logs holds ',' or ':', which pyxis cannot mount" in (
        done.stdout
    )
    assert "started" not in done.stdout
    # Without a container nothing is mounted: the same dir is fine.
    bare = plan(spec(logs={"base_dir": "logs"})).script
    assert _opened(bare, "echo started", SLURM_SUBMIT_DIR="/shared/a,b").stdout == "started\n"


def test_open_batch_reads_the_job_s_secrets_from_its_file(tmp_path: Path) -> None:
    """slurm.secrets_via file: the batch step's environment has the job's secrets (its steps
    inherit them), read before anything else."""
    secrets = tmp_path / "job.sbatch.secrets"
    secrets.write_bytes(b"HF_TOKEN=hf_value\0OTHER=not-named\0")
    secrets.chmod(0o600)
    job = spec(slurm={"secrets_via": "file"}, secrets={"HF_TOKEN": "required"})
    script = slurm.plan_plain(job, str(tmp_path / "job.sbatch")).script
    done = _opened(script, 'printf "%s|%s\\n" "$(printenv HF_TOKEN)" "${OTHER-unset}"')
    assert done.stdout == "hf_value|unset\n", done.stderr


def test_submitted_epoch_is_slurm_s_submit_time_or_now() -> None:
    script = slurm.plan_plain(spec()).script
    line = f"JobId=42 JobName=x UserId=a(1) SubmitTime={SUBMITTED} EligibleTime=Unknown"
    probe = f'printf "%s\\0" "$(submitted_epoch "{line}")" "$(submitted_epoch "")"'
    before = int(time.time())
    stated, now = bash_values(script, probe)
    expected = subprocess.run(
        ["date", "-d", SUBMITTED, "+%s"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert stated == expected
    assert before <= int(now) <= int(time.time())


# ---- The whole job: the batch step, then its task on every node ----


class Cluster:
    """Fake srun and scontrol: srun runs the step's `bash ...` once per node, here, as Slurm's
    task on that node would be (SLURM_NODEID, SLURMD_NODENAME)."""

    def __init__(self, tmp_path: Path, nodes: int = 2) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        fake = FakeSlurm(self.bin)
        fake.script(
            "scontrol",
            f'[[ "$*" == "show job -o 5" ]] && echo "JobId=5 UserId=a(1) SubmitTime={SUBMITTED} '
            'EndTime=Unknown"',
        )
        fake.script(
            "srun",
            "while [[ $1 != bash ]]; do shift; done\nrc=0\n"
            f"for ((i = 0; i < {nodes}; i++)); do\n"
            '  SLURM_NODEID=$i SLURMD_NODENAME=node$i "$@" || rc=$?\n'
            "done\nexit $rc",
        )
        self.calls = fake.calls
        self.submit = tmp_path / "submit"
        self.submit.mkdir()
        self.logs = tmp_path / "logs"

    def run(self, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        path = self.submit / "job.sbatch"
        path.write_text(script)
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "SLURM_JOB_ID": "5",
            "SLURM_SUBMIT_DIR": str(self.submit),
            "HOME": os.environ.get("HOME", "/root"),
        }
        return subprocess.run(
            ["bash", str(path), *args],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=self.submit,
        )

    def script(self, *command: str, **values: object) -> str:
        job = spec(driver={"command": list(command)}, logs={"base_dir": str(self.logs)}, **values)
        return slurm.plan_plain(job).script


def test_a_plain_job_runs_its_command_on_every_node_and_records_how_it_ended(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    command = 'echo "hello from $SLURMD_NODENAME in $PWD"'
    done = cluster.run(cluster.script("bash", "-c", command, slurm={"nodes": 2}))
    assert done.returncode == 0, done.stdout + done.stderr
    logs = cluster.logs / "5-logs"
    assert f"job 5: bash -c {command} on 2 node(s), logs in {logs}" in done.stdout
    assert (logs / "job.log").read_text().splitlines() == [
        f"hello from node0 in {cluster.submit}",
        f"hello from node1 in {cluster.submit}",
    ]
    assert (logs / "ENDED").read_text() == "the command exited with code 0 on 2 node(s)\n"
    assert (logs / "exit_code").read_text() == "0\n"
    assert (logs / "job.sbatch").read_text() == (cluster.submit / "job.sbatch").read_text()
    timeline = (logs / "timeline").read_text().splitlines()
    submitted = subprocess.run(
        ["date", "-d", SUBMITTED, "+%s"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert timeline[0] == f"submitted {submitted}"
    assert [line.split()[0] for line in timeline[1:]] == [
        "started", "command_started", "command_ended", "ended"
    ]  # fmt: skip
    (step,) = cluster.calls("srun")
    assert "--kill-on-bad-exit=1" in step.split() and step.endswith(f"bash {logs}/job.sbatch task")


def test_the_first_failing_node_names_the_plain_job_s_end(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    command = '[[ $SLURMD_NODENAME == node0 ]] || exit 3; echo "node0 is fine"'
    done = cluster.run(cluster.script("bash", "-c", command, slurm={"nodes": 2}))
    assert done.returncode == 3
    logs = cluster.logs / "5-logs"
    assert (logs / "ENDED").read_text() == "the command exited with code 3 on node 1 (node1)\n"
    assert (logs / "exit_code").read_text() == "3\n"
    assert "job ended with exit code 3: the command exited with code 3 on node 1" in done.stdout


# ---- pull --force: the old file goes just before the command replaces it ----


def test_pull_force_removes_the_old_file_on_the_node_just_before_the_command(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, nodes=1)
    target = tmp_path / "images" / "nemo rl.sqsh"
    target.parent.mkdir()
    target.write_text("the old image")
    # A command that says whether the old file was still there when it started.
    tool = cluster.bin / "import-image"
    tool.write_text(f'#!/bin/bash\n[[ -e "{target}" ]] && echo present || echo gone\n')
    tool.chmod(0o755)
    job = spec(driver={"command": [str(tool)]}, logs={"base_dir": str(cluster.logs)})
    script = slurm.plan_plain(job, remove_first=str(target)).script
    done = cluster.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (cluster.logs / "5-logs" / "job.log").read_text() == "gone\n"
    # Only a script that names a file carries the function that removes it.
    defined = 'declare -F remove_first >/dev/null && printf "yes\\0" || printf "no\\0"'
    assert bash_values(script, defined) == ["yes"]
    assert bash_values(slurm.plan_plain(job).script, defined) == ["no"]


def test_pull_force_keeps_the_old_file_when_the_command_is_not_there(tmp_path: Path) -> None:
    """The removal comes after the missing-program check: no enroot, no harm done."""
    cluster = Cluster(tmp_path, nodes=1)
    target = tmp_path / "old.sqsh"
    target.write_text("the old image")
    job = spec(driver={"command": ["enroot-is-not-here"]}, logs={"base_dir": str(cluster.logs)})
    done = cluster.run(slurm.plan_plain(job, remove_first=str(target)).script)
    assert done.returncode == 127
    assert target.read_text() == "the old image"
