"""submit, status and cancel against fake Slurm commands that answer with output captured from
the dev cluster's Slurm 22.05: the calls nrl-launch makes, and what it does with the answers.
The same commands run for real in tests/cluster/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import TEST_DATA, imported, roots

DATA = TEST_DATA / "slurm-22.05"
JOB = ["--nodes", "2", "--container-runtime", "none", "--", "python", "train.py"]


def test_submit_prints_the_id_and_writes_a_record(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="42;sandbox\n")
    result = cli("submit", "--json", *JOB)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["job_id"] == "42" and data["log_dir"].endswith("/42-logs")
    (call,) = slurm.calls()
    assert call.startswith("sbatch --parsable ") and "--nodes=2" in call
    assert cli("submit", "-q", *JOB).out == "42\n"
    listed = json.loads(cli("list", "--json").out)["jobs"]
    assert [j["job_id"] for j in listed] == ["42"]  # the second submit replaced the record


def test_submit_reports_sbatch_s_error_and_records_nothing(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HF_TOKEN", "WANDB_API_KEY"):  # set: no warning about them either
        monkeypatch.setenv(name, "x")
    slurm.answer(
        "sbatch", stderr="sbatch: error: Invalid account or account/partition combination\n", code=1
    )
    result = cli("submit", "--nodes", "1", *JOB[2:])  # one node: a log dir in /tmp is fine
    assert result.code == 3
    assert result.err.strip().splitlines() == [
        "nrl-launch: error: sbatch failed (exit 1): sbatch: error: Invalid account or "
        "account/partition combination"
    ]
    assert not list((tmp_path / "state").glob("jobs/*.json"))
    assert not list((tmp_path / "state").glob("scripts/*"))  # nor the script it would have run


def test_status_asks_squeue_once_with_an_explicit_format(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="11\n")
    cli("submit", "-q", *JOB)
    slurm.answer("sbatch", stdout="12\n")
    cli("submit", "-q", *JOB)
    slurm.answer("squeue", stdout=(DATA / "squeue-pending-running.txt").read_text())
    result = cli("status", "11", "12", "--json")
    assert result.code == 0, result.err
    jobs = {j["job_id"]: j for j in json.loads(result.out)["jobs"]}
    assert jobs["12"]["phase"] == "PENDING" and "Resources" in jobs["12"]["detail"]
    assert jobs["11"]["phase"] == "STARTING"  # running, but no log dir yet
    (call,) = [c for c in slurm.calls() if not c.startswith("sbatch")]
    assert call == "squeue -h --states=all -j 11,12 -o %i|%T|%r|%D|%N"


def test_status_without_accounting_falls_back_to_scontrol(cli: Cli, slurm: FakeSlurm) -> None:
    """A site with neither slurmdbd nor a job completion log: slurmctld still knows the exit
    code of a job that ended less than MinJobAge ago."""
    slurm.answer("sbatch", stdout="4\n")  # the job captured in scontrol-show-job-failed.txt
    cli("submit", "-q", *JOB)
    slurm.answer("squeue", stdout="4|FAILED|NonZeroExitCode|2|node[0-1]\n")  # no exit code
    slurm.answer("sacct", stdout=(DATA / "sacct-disabled.txt").read_text(), code=1)
    slurm.answer("scontrol", stdout=(DATA / "scontrol-show-job-failed.txt").read_text())
    job = json.loads(cli("status", "4", "--json").out)["jobs"][0]
    assert (job["phase"], job["exit_code"]) == ("FAILED", 3)
    assert "scontrol show job -o 4" in slurm.calls()


def test_jobs_slurm_has_forgotten_cost_no_query_each(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Past MinJobAge neither squeue nor scontrol knows a job (both read slurmctld's memory): a
    listing of many old jobs on a site without accounting asks squeue once, and sacct once for
    the accounting and once for the completion log, not scontrol for each job."""
    from tests.helpers import save

    for job_id in ("5", "6", "7"):
        save(tmp_path, job_id)
    slurm.answer("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    slurm.answer("sacct", stdout=(DATA / "sacct-disabled.txt").read_text(), code=1)
    assert cli("status").code == 0
    assert [call.split()[0] for call in slurm.calls()] == ["squeue", "sacct", "sacct"]


def test_status_of_a_job_nrl_launch_did_not_submit_is_exit_4(cli: Cli, slurm: FakeSlurm) -> None:
    result = cli("status", "777")
    assert result.code == 4
    assert "no job '777' was submitted with nrl-launch here" in result.err
    assert slurm.calls() == []  # nothing was asked of Slurm


def test_cancel_calls_scancel_with_every_id(cli: Cli, slurm: FakeSlurm) -> None:
    for job_id in ("5", "6"):
        slurm.answer("sbatch", stdout=f"{job_id}\n")
        cli("submit", "-q", *JOB)
    slurm.answer("scancel")
    assert cli("cancel", "5", "6").code == 0
    assert slurm.calls()[-1] == "scancel 5 6"


def test_submit_status_logs_list_never_import_ray(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.answer("sbatch", stdout="8\n")
    slurm.answer("squeue", stdout="8|RUNNING|None|2|node[0-1]\n")
    submit = imported("submit", "--log-dir", str(tmp_path / "logs"), *JOB)
    assert "nrl_launch.cli.submit" in submit and "ray" not in roots(submit)
    (tmp_path / "logs" / "8-logs").mkdir()
    (tmp_path / "logs" / "8-logs" / "ray-driver.log").write_text("step 1\n")
    for args in (["status", "8"], ["list"], ["logs", "8"], ["stop", "8"], ["cancel", "8"]):
        slurm.answer("scancel")
        assert "ray" not in roots(imported(*args)), args


def test_wait_ends_when_slurm_has_forgotten_the_job(cli: Cli, slurm: FakeSlurm) -> None:
    """No accounting, and the job is older than MinJobAge: nothing more can be learnt, so
    following it stops (exit 1) instead of polling forever."""
    slurm.answer("sbatch", stdout="9\n")
    slurm.answer("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    slurm.answer("sacct", stdout=(DATA / "sacct-disabled.txt").read_text(), code=1)
    slurm.answer("scontrol", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    result = cli("submit", "--wait", *JOB)
    assert result.code == 1, result.err
    assert "UNKNOWN" in result.out and "Slurm no longer knows this job" in result.out


def test_wait_survives_one_squeue_failure(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    """slurmctld not answering once does not end `submit --wait`: it warns and polls again."""
    slurm.answer("sbatch", stdout="10\n")
    flag = tmp_path / "failed-once"
    script = slurm.bin_dir / "squeue"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"if [[ ! -e {flag} ]]; then touch {flag}; echo 'squeue: error: timeout' >&2; exit 1; fi\n"
        "echo '10|COMPLETED|None|2|node[0-1]'\n"
    )
    slurm.answer("sacct", stdout="10|COMPLETED|0:0\n")
    result = cli("submit", "--wait", "--json", *JOB)
    assert result.code == 0, result.err
    assert "squeue failed (exit 1): squeue: error: timeout; trying again" in result.err
    data = json.loads(result.out)  # one object: the submission and how the job ended
    assert data["job_id"] == "10" and data["status"]["phase"] == "COMPLETED"


@pytest.mark.parametrize("job_id", ["../../etc/passwd", "12/..", ".hidden", "12; rm"])
def test_a_job_id_that_is_not_one_is_refused(cli: Cli, slurm: FakeSlurm, job_id: str) -> None:
    result = cli("status", job_id)
    assert result.code == 2
    assert result.err.startswith(f"nrl-launch: error: JOBID {job_id!r}: expected a Slurm job id")
    assert slurm.calls() == []


def test_status_watch_and_json_together_are_refused(cli: Cli, slurm: FakeSlurm) -> None:
    result = cli("status", "--watch", "--json", "1")
    assert result.code == 2
    assert "--watch and --json cannot be combined" in result.err
    assert slurm.calls() == []


@pytest.mark.parametrize(
    ("tail", "expected"), [([], "a\nb\nc\n"), (["--tail", "2"], "b\nc\n"), (["--tail", "0"], "")]
)
def test_logs_tail(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, tail: list[str], expected: str
) -> None:
    slurm.answer("sbatch", stdout="13\n")
    cli("submit", "-q", "--log-dir", str(tmp_path / "logs"), *JOB)
    (tmp_path / "logs" / "13-logs").mkdir()
    (tmp_path / "logs" / "13-logs" / "ray-driver.log").write_text("a\nb\nc\n")
    result = cli("logs", "13", *tail)
    assert (result.code, result.out) == (0, expected)


def test_attach_stop_dashboard_refuse_a_pending_job(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="12\n")
    cli("submit", "-q", *JOB)
    slurm.answer("squeue", stdout=(DATA / "squeue-pending-running.txt").read_text())
    for command in (["attach", "12", "--", "hostname"], ["stop", "12"], ["dashboard", "12"]):
        result = cli(*command)
        assert result.code == 5, (command, result.err)
        assert "job 12 has not started (waiting for resources (Resources))" in result.err
    assert not [c for c in slurm.calls() if c.startswith(("srun", "scancel"))]


def test_attach_refuses_a_node_the_job_does_not_have(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="11\n")
    cli("submit", "-q", *JOB)
    result = cli("attach", "11", "--node", "2", "--", "hostname")
    assert result.code == 2
    assert result.err == "nrl-launch: error: --node '2': expected head, or a node index 0..1\n"
    assert [c for c in slurm.calls() if not c.startswith("sbatch")] == []  # asked nothing


def test_stop_writes_the_reason_the_job_script_stops_on(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    slurm.answer("sbatch", stdout="11\n")
    cli("submit", "-q", "--log-dir", str(tmp_path / "logs"), *JOB)
    (tmp_path / "logs" / "11-logs").mkdir()
    slurm.answer("squeue", stdout="11|RUNNING|None|2|node[0-1]\n")
    assert cli("stop", "11").code == 0
    ended = (tmp_path / "logs" / "11-logs" / "ENDED").read_text()
    # What the rendered script's stop_requested() greps for.
    rendered = cli("render", *JOB).out
    assert "grep -qs '^stop requested'" in rendered and ended.startswith("stop requested by ")
    second = cli("stop", "11")  # the first reason stays; the second stop only says so
    assert second.code == 0 and "job 11 is already ending" in second.err
    assert (tmp_path / "logs" / "11-logs" / "ENDED").read_text() == ended


def test_dashboard_prints_the_tunnel_to_the_head(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="11\n")
    cli("submit", "-q", "--set", "ray.ports.dashboard=9265", *JOB)
    slurm.answer("squeue", stdout="11|RUNNING|None|2|gpu[007-008]\n")
    slurm.answer("scontrol", stdout="gpu007\ngpu008\n")
    result = cli("dashboard", "11")
    assert result.code == 0, result.err
    assert "Job 11's Ray dashboard: gpu007:9265 (the head node)" in result.out
    assert "ssh -N -L 9265:gpu007:9265 " in result.out
    assert "scontrol show hostnames gpu[007-008]" in slurm.calls()


def test_a_job_without_a_dashboard_starts_its_head_without_one_and_says_so(
    cli: Cli, slurm: FakeSlurm
) -> None:
    slurm.answer("sbatch", stdout="11\n")
    rendered = cli("render", "--set", "ray.dashboard=false", *JOB)
    assert "\nNRL_RAY_DASHBOARD=0\n" in rendered.out
    assert "NRL_HEAD_ARGS=(--include-dashboard=false)" in rendered.out
    cli("submit", "-q", "--set", "ray.dashboard=false", *JOB)
    slurm.answer("squeue", stdout="11|RUNNING|None|2|gpu[007-008]\n")
    result = cli("dashboard", "11")
    assert result.code == 2
    assert result.err.startswith("nrl-launch: error: job 11 runs no Ray dashboard (ray.dashboard")


@pytest.mark.parametrize("name", ["my_run", "grpo-8b.v2", "Run1"])
def test_a_job_name_no_job_has_is_not_found(cli: Cli, slurm: FakeSlurm, name: str) -> None:
    """A name like a job's (underscores, dots, capitals) is looked up, and not found: exit 4."""
    result = cli("status", name)
    assert result.code == 4, result.err
    assert f"no job {name!r} was submitted with nrl-launch here" in result.err
    assert slurm.calls() == []
