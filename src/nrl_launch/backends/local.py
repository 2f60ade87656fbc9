"""The local backend: the same bring-up on this machine, as a one-node cluster.

`plan` is pure; the job runs as a process of its own (`runner.spawn`), its state is its
`exit_code` file or, while it runs, its process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from nrl_launch import __version__, runner
from nrl_launch.backends.base import (
    JobRef,
    Request,
    SchedulerView,
    Submitted,
    pool_values,
    spec_environment,
)
from nrl_launch.errors import UsageError
from nrl_launch.node import job_script
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["BACKEND", "DEFAULT_SCRIPT_NAME", "LocalBackend", "job_running", "plan"]

DEFAULT_SCRIPT_NAME = "nrl-launch.sh"
TEMPLATE = "local.sh.j2"


def plan(
    spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME, job_id: str = "JOBID"
) -> Request:
    argv = ("bash", script_path, job_id)
    header = render(
        TEMPLATE,
        spec=spec,
        ray=True,
        version=__version__,
        run_command=join(argv),
        pools=pool_values(spec),
    )
    script = job_script(header, "local", pools=bool(spec.pools))
    return Request(argv=argv, script=script, environment=spec_environment(spec))


def job_running(job: JobRef) -> bool:
    """Whether the local job's process still runs: its pid is alive *and* runs its script (a
    pid is reused once its process is gone; signalling a stranger must never happen)."""
    if job.pid is None:
        return False
    for _ in range(20):
        try:
            cmdline = Path(f"/proc/{job.pid}/cmdline").read_bytes()
        except OSError:
            return False
        if cmdline:
            return os.fsencode(job.script_path) in cmdline.split(b"\0")
        # Empty while the process execs (the job starts as bash -c, then setsid, then bash):
        # a moment later it reads again. A zombie or kernel thread stays empty: not the job.
        time.sleep(0.01)
    return False


def view(job: JobRef) -> SchedulerView:
    """A local job's state, from its exit_code file or, while it runs, its process (a local
    job is never requeued: its one log dir is the record's)."""
    try:
        code = int((Path(job.log_dir) / "exit_code").read_text().strip())
    except (OSError, ValueError):
        if job_running(job):
            return SchedulerView(state="RUNNING")
        # Killed too hard to record its end (SIGKILL, a reboot): there is nothing left to wait for.
        return SchedulerView(state="FAILED", reason="the job's process ended without recording how")
    if code == 0:
        return SchedulerView(state="COMPLETED", exit_code=0)
    return SchedulerView(state="CANCELLED" if code == 143 else "FAILED", exit_code=code)


class LocalBackend:
    """A job on this machine, in a session of its own that outlives the CLI."""

    name = "local"
    slurm_cluster = False
    shares_files = True
    secrets_from_shell = True
    scheduler = "the local backend"

    def plan(
        self, spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID"
    ) -> Request:
        return plan(spec, script_path or DEFAULT_SCRIPT_NAME, job_id)

    def plan_plain(
        self, spec: LaunchSpec, script_path: str | None = None, *, remove_first: str | None = None
    ) -> Request:
        raise UsageError("backend: local runs Ray jobs only; run the command itself")

    def check_chain(self, spec: LaunchSpec) -> None:
        raise UsageError("--chain: the local backend has no scheduler to chain jobs on")

    def new_job_id(self) -> str:
        # No scheduler numbers a local job: its id is its start time (ms).
        return f"local-{time.time_ns() // 1_000_000}"

    def batch_output(self, job_id: str) -> str:
        return f"{job_id}.out"

    def submit(self, request: Request, *, job_id: str, cwd: Path, output: Path) -> Submitted:
        # The job's bash gets this environment and the request's own variables (the spec).
        env = {**os.environ, **dict(request.environment)}
        pid = runner.spawn(list(request.argv), cwd=cwd, output=output, env=env)
        return Submitted(job_id, pid=pid)

    def describe(self, jobs: Sequence[JobRef]) -> dict[str, SchedulerView]:
        return {job.job_id: view(job) for job in jobs}

    def cancel(self, jobs: Sequence[JobRef]) -> list[str]:
        ended = []
        for job in jobs:
            if not job_running(job):
                ended.append(job.job_id)
                continue
            # The job's own trap stops the driver and Ray and records the cancel.
            with contextlib.suppress(ProcessLookupError):
                os.kill(job.pid, signal.SIGTERM)  # type: ignore[arg-type]  # running: has a pid
        return ended

    def head_node(self, job: JobRef) -> str:
        return socket.gethostname()

    def dashboard_host(self, job: JobRef, head: str) -> str:
        return "localhost"  # a local job's dashboard listens on this machine's loopback only

    def replica_log(self, job_id: str, worker: int) -> str:
        raise UsageError(f"job {job_id}'s logs are in its log dir, on this machine")


BACKEND = LocalBackend()
