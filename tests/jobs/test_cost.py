"""GPU-hours (jobs/cost.py): what plan and submit say a job asks for, and what status, list and
an experiment say it has used, from the runs' timelines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nrl_launch.jobs import cost
from nrl_launch.jobs.record import JobRecord, Try
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import save


def spec(**slurm: object) -> LaunchSpec:
    return LaunchSpec.model_validate(
        {"slurm": {"nodes": 4, "gpus_per_node": 8, **slurm}, "driver": {"command": ["true"]}}
    )


def test_a_job_asks_for_its_gpus_times_its_limit() -> None:
    assert cost.gpu_hours_asked(spec(time="4:00:00")) == 4 * 8 * 4
    assert cost.gpu_hours_asked(spec(time="1-00:00:00"), jobs=3) == 4 * 8 * 24 * 3
    assert cost.asked_line(spec(time="30"), jobs=2, what="jobs") == (
        "GPU-hours:   4 node(s) x 8 GPU(s) x 30 x 2 jobs = 32.0 GPU-hours at most"
    )


def test_without_a_limit_the_partition_decides_and_nothing_is_invented() -> None:
    assert cost.gpu_hours_asked(spec()) is None
    assert "the partition's default time limit" in cost.asked_line(spec())
    assert "unknown" in cost.total_line([1.0, None])


def test_a_dedicated_head_and_pool_nodes_are_held_too() -> None:
    pooled = LaunchSpec.model_validate(
        {
            "slurm": {"nodes": 2, "gpus_per_node": 8, "time": "1:00:00"},
            "ray": {"dedicated_head": True},
            "pools": {"judge": {"replicas": 2, "command": ["serve"], "balancer_port": 8100}},
            "driver": {"command": ["run", "__JUDGE_URL__"]},
        }
    )
    # 2 GPU nodes + the head + 2 replicas of one node each
    assert cost.gpus_held(pooled) == 5 * 8


def _timeline(log_dir: Path, *lines: str) -> None:
    log_dir.mkdir(parents=True)
    (log_dir / "timeline").write_text("".join(f"{line}\n" for line in lines))


def test_used_counts_each_run_from_start_to_end_or_now(tmp_path: Path) -> None:
    _timeline(tmp_path / "1-logs", "submitted 900", "started 1000", "ended 4600")
    _timeline(tmp_path / "1-1-logs", "submitted 5000", "started 5000", "driver_started 5010")
    runs = [tmp_path / "1-logs", tmp_path / "1-1-logs"]
    # the first run 1 h; the requeued one running for 1 h by "now"
    assert cost.used(16, runs, over=False, now=8600) == pytest.approx(32.0)
    # over, but killed before it wrote `ended`: up to the last thing it recorded
    assert cost.used(16, runs, over=True, now=99999) == pytest.approx(16 + 16 * 10 / 3600)
    # a run that never started, or wrote nothing, used nothing
    assert cost.used(16, [tmp_path / "none-logs"], over=True) == 0.0


def test_a_run_of_tries_counts_every_try(tmp_path: Path) -> None:
    _timeline(tmp_path / "10-logs", "started 0", "ended 1800")
    _timeline(tmp_path / "11-logs", "started 2000", "ended 3800")
    rec = JobRecord(
        job_id="10", backend="slurm", job_name="j", nodes=1, submitted_at=0, submit_dir="/",
        log_dir=str(tmp_path / "10-logs"), script_path="/x", argv=[], spec={}, gpus=8,
        tries=[Try(job_id="10", script_path="/x"), Try(job_id="11", script_path="/y")],
    )  # fmt: skip
    # the status of a run of tries is its current try's: 11
    assert cost.recorded_used(rec, [str(tmp_path / "11-logs")], over=True) == pytest.approx(8.0)


def test_status_and_list_show_the_gpu_hours_used(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    started = time.time() - 1800  # half an hour ago, on 2 nodes x 8 GPUs
    log_dir = save(tmp_path, "21", spec={"slurm": {"gpus_per_node": 8, "time": "2:00:00"}})
    _timeline(log_dir, f"submitted {started}", f"started {started}")
    slurm.answer("squeue", "21|RUNNING|None|2|node[0-1]\n")
    (job,) = json.loads(cli("status", "21", "--json").out)["jobs"]
    assert job["gpu_hours_used"] == pytest.approx(8.0, abs=0.1)
    shown = cli("status", "21").out
    assert "GPU-hours: 8.00 used of the 32.0 its time limit allows (16 GPU(s) held)" in shown
    (row,) = cli("list").out.splitlines()
    assert row.split("\t")[5] == "8.00"
