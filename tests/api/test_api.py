"""The Python API (nrl_launch.api): the CLI's behaviour as functions. Errors are the CLI's typed
errors with its one-line messages, a job is taken as its record or its id, nothing prints (what
the CLI would warn about is a Python warning), and wait gives up when told to."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from nrl_launch import api
from tests.conftest import EXAMPLES
from tests.fakes import FakeSlurm
from tests.helpers import save

GRPO_TINY = str(EXAMPLES / "tiny-rl/examples/configs/grpo_tiny.yaml")
DRIVER = ["python", "train.py"]
# Logs every node shares: the tests' dirs (under /tmp) would be warned about.
SHARED = {"logs.base_dir": "/lustre/logs"}


def test_load_plan_render_need_no_cluster_and_print_nothing(
    slurm: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = api.load_spec(config=GRPO_TINY, recipe="grpo", settings=SHARED)
    assert spec.launch.slurm.nodes == 1 and spec.launch.slurm.gpus_per_node == 2  # sized
    plan = api.plan(spec)
    assert plan.fits and plan.problems == () and plan.layout is not None
    assert [role.node for role in plan.roles] == [0]
    assert plan.as_dict()["gpus_per_node"] == 2
    script = api.render(spec)
    assert script.startswith("#!/usr/bin/env bash") and "examples/run_grpo.py" in script
    assert capsys.readouterr() == ("", "")
    assert slurm.calls() == []


def test_plan_names_what_does_not_fit_and_render_refuses_it() -> None:
    driver = ["uv", "run", "examples/run_grpo.py", "--config", GRPO_TINY]
    spec = api.load_spec(command=driver, settings={**SHARED, "slurm.nodes": 2})
    plan = api.plan(spec)
    assert not plan.fits and plan.problems == spec.problems
    with pytest.raises(api.ConfigError) as refused:
        api.render(spec)
    assert refused.value.problems == list(plan.problems)
    assert refused.value.exit_code == api.ExitCode.BAD_INPUT == 2


def test_bad_input_raises_the_cli_s_one_line_per_problem() -> None:
    with pytest.raises(api.ConfigError) as bad:
        api.load_spec(settings={"slurm": {"nodes": 0, "nodez": 1}, "driver.command": DRIVER})
    assert bad.value.exit_code == 2
    lines = bad.value.message.splitlines()
    assert len(lines) == len(bad.value.problems) == 2
    assert any(line.startswith("slurm.nodes:") and "settings" in line for line in lines)
    assert any(line.startswith("slurm.nodez:") for line in lines)
    with pytest.raises(api.NrlLaunchError, match=r"^job file .*missing.yaml"):
        api.load_spec("missing.yaml")


def test_a_spec_without_a_driver_plans_but_does_not_render() -> None:
    spec = api.load_spec(settings=SHARED)
    assert api.plan(spec).layout is None  # no NeMo RL config: nothing to lay out
    with pytest.raises(api.ConfigError, match=r"^driver\.command is not set: give the driver"):
        api.render(spec)
    with pytest.raises(api.ConfigError, match=r"^driver\.command is not set"):
        api.submit(spec)


def test_warnings_are_python_warnings_of_the_caller_s_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.warns(api.NrlLaunchWarning, match="logs.base_dir") as said:
        api.load_spec(command=DRIVER, settings={"slurm.nodes": 2})  # under /tmp: node-local
    assert {Path(w.filename).name for w in said} == {"test_api.py"}
    assert capsys.readouterr() == ("", "")


def test_a_job_is_taken_as_its_record_or_its_id_or_name(slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "21", name="grpo-8b")
    save(tmp_path, "22", name="other", at=2.0)
    assert [j.job_id for j in api.jobs()] == ["22", "21"]  # newest first, no scheduler asked
    assert slurm.calls() == []
    job = api.job("grpo-8b")
    assert job.job_id == "21" and job.job_name == "grpo-8b"
    slurm.answer("squeue", "21|PENDING|Priority|2|\n22|RUNNING|None|2|node[0-1]\n")
    assert api.status(job).phase is api.Phase.PENDING
    assert api.status("21").detail == "waiting for resources (Priority)"
    assert [s.phase for s in api.statuses([job, "22"])] == [api.Phase.PENDING, "STARTING"]
    assert len(slurm.calls("squeue")) == 3  # statuses: one squeue for both
    slurm.answer("scancel")
    api.cancel("grpo-8b")
    api.cancel(api.job("22"))
    assert slurm.calls("scancel") == ["scancel 21", "scancel 22"]


def test_an_unknown_job_is_not_found() -> None:
    with pytest.raises(api.JobNotFoundError, match="no job '77' was submitted") as missing:
        api.status("77")
    assert missing.value.exit_code == 4


def test_wait_returns_the_end_or_gives_up_at_its_timeout(slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "31")
    slurm.answer("squeue", "31|PENDING|Priority|2|\n")
    with pytest.raises(TimeoutError, match=r"job 31 has not ended after 0\.2 s"):
        api.wait("31", timeout=0.2, poll=0.1)
    slurm.answer("squeue", "")
    slurm.answer("sacct", "31|FAILED|3:0\n")
    ended = api.wait("31", timeout=30, poll=0.1)
    assert (ended.phase, ended.exit_code) == (api.Phase.FAILED, 3)


def test_logs_and_follow_read_the_job_s_log(
    slurm: FakeSlurm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = save(tmp_path, "41")
    with pytest.raises(api.JobNotFoundError, match="does not exist yet: has job 41 started"):
        api.logs("41")
    log_dir.mkdir(parents=True)
    (log_dir / "ray-driver.log").write_text("step 1\nstep 2\n")
    (log_dir / "ray-head.log").write_text("head up\n")
    assert api.logs("41") == "step 1\nstep 2\n"
    assert api.logs(api.job("41"), tail=1) == "step 2\n"
    assert api.logs("41", node=0) == api.logs("41", node="head") == "head up\n"
    with pytest.raises(api.UsageError, match=r"^--node '5': expected driver, head, or a node"):
        api.logs("41", node=5)
    slurm.answer("squeue", "")
    slurm.answer("sacct", "41|COMPLETED|0:0\n")
    assert "".join(api.follow("41", tail=1)) == "step 2\n"
    assert capsys.readouterr() == ("", "")


def test_cancelling_an_ended_job_warns_how_it_ended(slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "51")
    slurm.answer("squeue", "")
    slurm.answer("sacct", "51|COMPLETED|0:0\n")
    slurm.answer("scancel")
    with pytest.warns(api.NrlLaunchWarning, match=r"job 51 had already ended \(COMPLETED"):
        api.cancel("51")
    assert slurm.calls("scancel") == []


def test_the_promise_is_all_and_it_resolves() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.Job.__name__ == "JobRecord" and api.Status.__name__ == "JobStatus"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert issubclass(api.NrlLaunchWarning, UserWarning)


def test_submit_queues_records_and_prints_nothing(
    slurm: FakeSlurm, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HF_TOKEN", "WANDB_API_KEY"):  # optional secrets: warned about when unset
        monkeypatch.setenv(name, "x")
    slurm.answer("sbatch", stdout="77\n")
    spec = api.load_spec(command=DRIVER, settings={**SHARED, "slurm.gpus_per_node": 2})
    job = api.submit(spec, snapshot=False)
    assert (job.job_id, job.backend, job.log_dir) == ("77", "slurm", "/lustre/logs/77-logs")
    assert [j.job_id for j in api.jobs()] == ["77"]
    assert len(slurm.calls("sbatch")) == 1
    assert capsys.readouterr() == ("", "")
    # A Spec made by hand (a changed launch spec) is planned and queued as one without a config.
    bigger = api.Spec(spec.launch.model_copy(update={"interactive": True}))
    assert api.plan(bigger).as_dict() == {"config": None, "layout": None, "problems": []}
    slurm.answer("sbatch", stdout="78\n")
    assert api.submit(bigger).job_id == "78"


def test_jobs_of_an_experiment_in_the_order_they_were_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nrl_launch.jobs import record

    state = tmp_path / "state"
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(state))
    for job_id, at in (("31", 2.0), ("30", 1.0), ("32", 3.0)):
        save(tmp_path, job_id, at=at)
        rec = record.load(job_id, state)
        point = {"experiment": "lr", "overrides": [f"policy.lr={at}"]} if job_id != "32" else {}
        record.save(rec.model_copy(update=point), state)
    assert [j.job_id for j in api.jobs(experiment="lr")] == ["30", "31"]
    assert [j.overrides for j in api.jobs(experiment="lr")] == [
        ["policy.lr=1.0"],
        ["policy.lr=2.0"],
    ]
    with pytest.raises(api.JobNotFoundError, match=r"^--experiment other: no job of that"):
        api.jobs(experiment="other")
