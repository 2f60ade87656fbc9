"""Job records and status, against output captured from the dev cluster's Slurm 22.05."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nrl_launch.backends.slurm import parse_sacct, parse_scontrol_job, parse_squeue
from nrl_launch.errors import JobNotFoundError, UnreadableRecordError
from nrl_launch.jobs import record
from nrl_launch.jobs.status import (
    PREEMPTED,
    TIME_LIMIT,
    LogView,
    Phase,
    SchedulerView,
    find_log_dir,
    phase_of,
    read_log_dir,
)
from tests.helpers import TEST_DATA, make_record

DATA = TEST_DATA / "slurm-22.05"


def test_parse_squeue_running_and_pending() -> None:
    views = parse_squeue((DATA / "squeue-pending-running.txt").read_text())
    assert views["12"] == SchedulerView(state="PENDING", reason="Resources")
    assert views["11"] == SchedulerView(state="RUNNING", reason=None, nodes="node[0-1]")


def test_parse_sacct_completion_log() -> None:
    views = parse_sacct((DATA / "sacct-c.txt").read_text())
    assert views["3"].state == "COMPLETED" and views["3"].exit_code == 0
    assert views["7"].state == "FAILED" and views["7"].exit_code == 3
    assert views["9"].state == "CANCELLED"


def test_parse_sacct_skips_steps_and_noise() -> None:
    text = (
        "42|CANCELLED by 0|0:15\n42.batch|CANCELLED|0:15\n42.0|COMPLETED|0:0\n"
        # sacct -c on a job named 'two words': its completion log line read by spaces.
        "43||0:0\n" + (DATA / "sacct-disabled.txt").read_text()
    )
    views = parse_sacct(text)
    assert list(views) == ["42"]
    assert views["42"] == SchedulerView(state="CANCELLED", exit_code=0, signal=15)


LOGS_UP = LogView(
    log_dir=Path("/l"), head_up=True, nodes=1, nodes_expected=2, gpus=8, gpus_expected=16
)


@pytest.mark.parametrize(
    ("slurm", "logs", "phase", "detail"),
    [
        (
            SchedulerView("PENDING", reason="Resources"),
            LogView(None),
            Phase.PENDING,
            "waiting for resources (Resources)",
        ),
        (SchedulerView("RUNNING"), LogView(Path("/l")), Phase.STARTING, "starting the Ray head"),
        (SchedulerView("RUNNING"), LOGS_UP, Phase.JOINING, "1/2 nodes joined, 8/16 GPUs"),
        (
            SchedulerView("RUNNING"),
            LogView(Path("/l"), head_up=True, nodes=2, nodes_expected=2, driver_started=True),
            Phase.RUNNING,
            "driver running on 2 node(s)",
        ),
        (
            SchedulerView("RUNNING"),
            LogView(Path("/l"), head_up=True, ended="driver exited with code 0"),
            Phase.RUNNING,
            "stopping: driver exited with code 0",
        ),
        (
            SchedulerView("FAILED", exit_code=3),
            LogView(Path("/l"), ended="driver exited with code 3"),
            Phase.FAILED,
            "exit code 3: driver exited with code 3",
        ),
        (
            SchedulerView("COMPLETED", exit_code=0),
            LogView(Path("/l"), ended="driver exited with code 0"),
            Phase.COMPLETED,
            "driver exited with code 0",
        ),
        (SchedulerView("CANCELLED"), LogView(Path("/l")), Phase.CANCELLED, "cancelled"),
        (  # at its time limit: said so whether or not its trap has written ENDED yet
            SchedulerView("TIMEOUT"),
            LogView(Path("/l"), ended="Slurm stopped the job (cancelled, time limit, ...)"),
            Phase.TIMEOUT,
            TIME_LIMIT,
        ),
        (SchedulerView("TIMEOUT"), LogView(Path("/l")), Phase.TIMEOUT, TIME_LIMIT),
        (SchedulerView("REQUEUED"), LogView(Path("/l")), Phase.PENDING, "waiting"),
        (  # preempted and not requeued: over (a requeued job is PENDING), and why
            SchedulerView("PREEMPTED"),
            LogView(Path("/l"), ended="Slurm stopped node node0 (job cancelled, ...)"),
            Phase.CANCELLED,
            PREEMPTED,
        ),
        (
            None,
            LogView(Path("/l"), ended="driver exited with code 0"),
            Phase.COMPLETED,
            "driver exited with code 0 (as its log dir records; the scheduler no longer knows "
            "this job)",
        ),
        (
            None,
            LogView(Path("/l"), ended="driver exited with code 3"),
            Phase.FAILED,
            "driver exited with code 3 (as its log dir records; the scheduler no longer knows "
            "this job)",
        ),
        (
            None,
            LogView(Path("/l"), ended="Slurm stopped the job (cancelled, time limit, ...)"),
            Phase.UNKNOWN,
            "Slurm no longer knows this job; it ended: Slurm stopped the job (cancelled, time "
            "limit, ...)",
        ),
        (
            None,
            LogView(Path("/l")),
            Phase.UNKNOWN,
            "Slurm no longer knows this job and its log dir has no ENDED",
        ),
    ],
)
def test_phase_of(slurm: SchedulerView | None, logs: LogView, phase: Phase, detail: str) -> None:
    assert phase_of(slurm, logs, nodes=2) == (phase, detail)


def test_read_log_dir_and_restarts(tmp_path: Path) -> None:
    first = tmp_path / "7-logs"
    first.mkdir()
    assert find_log_dir(first) == first
    (first / "STARTED_RAY_HEAD").touch()
    (first / "readiness.json").write_text(
        json.dumps({"nodes": 2, "nodes_expected": 2, "gpus": 16, "gpus_expected": 16})
    )
    (first / "timeline").write_text("submitted 1.0\nstarted 2.0\ndriver_started 3.0\n")
    view = read_log_dir(first)
    assert (view.head_up, view.nodes, view.driver_started, view.ended) == (True, 2, True, None)
    (first / "readiness.json").write_text("{half")  # a torn write reads as absent, not a crash
    assert read_log_dir(first).nodes is None
    for n in (1, 2, 10):
        (tmp_path / f"7-{n}-logs").mkdir()
    assert find_log_dir(first) == tmp_path / "7-10-logs"


def test_records_round_trip_and_list_newest_first(tmp_path: Path) -> None:
    for i in range(3):
        record.save(make_record(str(10 + i), submitted_at=float(i)), tmp_path)
    assert record.load("11", tmp_path) == make_record("11", 1.0)
    records, warnings = record.load_all(tmp_path)
    assert [r.job_id for r in records] == ["12", "11", "10"] and warnings == []
    assert not list((tmp_path / "jobs").glob(".*"))  # no temp file left behind


def test_corrupt_record_warns_and_others_still_list(tmp_path: Path) -> None:
    record.save(make_record("1"), tmp_path)
    (tmp_path / "jobs" / "2.json").write_text("{not json")
    (tmp_path / "jobs" / "3.json").write_text(json.dumps({"schema_version": 99}))
    records, warnings = record.load_all(tmp_path)
    assert [r.job_id for r in records] == ["1"]
    assert len(warnings) == 2 and "written by a newer nrl-launch" in " ".join(warnings)
    with pytest.raises(UnreadableRecordError, match=r"2\.json is unreadable"):
        record.load("2", tmp_path)
    with pytest.raises(JobNotFoundError, match="no job '4'"):
        record.load("4", tmp_path)


def test_parse_scontrol_job_finished_jobs() -> None:
    failed = parse_scontrol_job((DATA / "scontrol-show-job-failed.txt").read_text())
    assert failed == {
        "4": SchedulerView(state="FAILED", reason="NonZeroExitCode", exit_code=3, signal=0)
    }
    done = parse_scontrol_job((DATA / "scontrol-show-job-completed.txt").read_text())
    assert done["1"] == SchedulerView(state="COMPLETED", exit_code=0, signal=0)
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified\n") == {}


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"], ids=repr)
def test_a_job_name_with_a_unicode_line_separator_is_one_line(separator: str) -> None:
    """The spec takes these in a job name, and `scontrol show job -o` prints them raw:
    str.splitlines() split the job's line there and lost its state."""
    line = f"JobId=5 JobName=a{separator}b UserId=me(1) JobState=COMPLETED ExitCode=0:0\n"
    assert parse_scontrol_job(line)["5"].state == "COMPLETED"


def test_a_local_job_mid_exec_still_counts_as_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/PID/cmdline reads empty while the job's process execs (bash -c, setsid, bash):
    seen on every start, it once made `submit --wait` report a just-started job as ended."""
    from nrl_launch.backends import local

    rec = make_record("local-1").model_copy(update={"pid": 4242, "script_path": "/s/job.sh"})
    reads = iter([b"", b"", b"bash\0/s/job.sh\0local-1\0"])
    monkeypatch.setattr(Path, "read_bytes", lambda _self: next(reads))
    assert local.job_running(rec)
    monkeypatch.setattr(Path, "read_bytes", lambda _self: b"")  # a zombie, or a kernel thread
    assert not local.job_running(rec)


# ---- phase_of for a dedicated head, a sandbox and a plain (Ray-less) job ----


def test_status_counts_the_head_among_the_nodes(tmp_path: Path) -> None:
    running = SchedulerView(state="RUNNING")
    joining = LogView(
        log_dir=tmp_path, head_up=True, nodes=1, nodes_expected=3, gpus=0, gpus_expected=16,
        dedicated_head=True,
    )  # fmt: skip
    assert phase_of(running, joining, 3) == (
        Phase.JOINING,
        "1/3 nodes joined (1 CPU head + 2 GPU nodes), 0/16 GPUs",
    )
    up = LogView(
        log_dir=tmp_path, head_up=True, nodes=3, nodes_expected=3, gpus=16, gpus_expected=16,
        dedicated_head=True, driver_started=True,
    )  # fmt: skip
    assert phase_of(running, up, 3) == (
        Phase.RUNNING,
        "driver running on 3 node(s) (1 CPU head + 2 GPU nodes)",
    )


def test_status_says_the_driver_waits_for_the_sandboxes(tmp_path: Path) -> None:
    """Every node joined, the driver not yet started (the head waits up to
    sandbox.ready_timeout_s): status says how many nodes' sandboxes answer, not just RUNNING."""
    (tmp_path / "STARTED_RAY_HEAD").touch()
    (tmp_path / "readiness.json").write_text(
        json.dumps({"nodes": 2, "nodes_expected": 2, "gpus": 16, "gpus_expected": 16})
    )
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "STARTED.node0").write_text("1.0\n")
    (tmp_path / "sandbox" / "READY.node0").write_text("2.0\n")
    running = SchedulerView("RUNNING")
    assert phase_of(running, read_log_dir(tmp_path), 2) == (
        Phase.RUNNING,
        "all 2 nodes joined, 16/16 GPUs; waiting for the sandbox: 1/2 nodes answer",
    )
    (tmp_path / "sandbox" / "READY.node1").write_text("3.0\n")
    (tmp_path / "timeline").write_text("submitted 0\ndriver_started 4\n")
    assert phase_of(running, read_log_dir(tmp_path), 2) == (
        Phase.RUNNING,
        "driver running on 2 node(s)",
    )
    # A job without a sandbox keeps the line it had.
    (tmp_path / "timeline").write_text("submitted 0\n")
    shutil.rmtree(tmp_path / "sandbox")
    assert phase_of(running, read_log_dir(tmp_path), 2)[1] == "all 2 nodes joined, 16/16 GPUs"


@pytest.mark.parametrize(
    ("slurm_view", "logs", "phase", "detail"),
    [
        (SchedulerView("PENDING", reason="Priority"), LogView(None), Phase.PENDING, "waiting for"),
        (
            SchedulerView("RUNNING"),
            LogView(Path("/l")),
            Phase.STARTING,
            "starting the command (the job's environment and setup)",
        ),
        (
            SchedulerView("RUNNING"),
            LogView(Path("/l"), command_started=True),
            Phase.RUNNING,
            "command running on 2 node(s)",
        ),
        (
            SchedulerView("RUNNING"),
            LogView(Path("/l"), command_started=True, ended="the command exited with code 0 on 2"),
            Phase.RUNNING,
            "stopping: the command exited with code 0 on 2",
        ),
        (
            SchedulerView("COMPLETED", exit_code=0),
            LogView(Path("/l"), ended="the command exited with code 0 on 2 node(s)"),
            Phase.COMPLETED,
            "the command exited with code 0 on 2 node(s)",
        ),
        (
            SchedulerView("FAILED", exit_code=4),
            LogView(Path("/l"), ended="the command exited with code 4 on node 1 (node1)"),
            Phase.FAILED,
            "exit code 4: the command exited with code 4 on node 1 (node1)",
        ),
        (SchedulerView("CANCELLED"), LogView(Path("/l")), Phase.CANCELLED, "cancelled"),
    ],
)
def test_phase_of_a_plain_job_never_waits_for_ray(
    slurm_view: SchedulerView, logs: LogView, phase: Phase, detail: str
) -> None:
    found, text = phase_of(slurm_view, logs, nodes=2, kind="plain")
    assert (found, text.startswith(detail)) == (phase, True), text
