"""Ask Slurm about jobs (through the runner) and join the answers with their log dirs."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from nrl_launch import runner
from nrl_launch.errors import JobNotRunningError, SchedulerError
from nrl_launch.jobs.diagnose import diagnose
from nrl_launch.jobs.record import JobRecord
from nrl_launch.jobs.status import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    JobStatus,
    Phase,
    SchedulerView,
    find_log_dir,
    main_log,
    parse_sacct,
    parse_scontrol_job,
    parse_squeue,
    phase_of,
    read_log_dir,
    run_log_dirs,
    slurm_phase,
)

__all__ = [
    "StatusPoller",
    "head_node",
    "local_job_running",
    "require_running",
    "scheduler_views",
    "statuses",
]


def _sacct(job_ids: Sequence[str]) -> dict[str, SchedulerView]:
    ids = ",".join(job_ids)
    try:
        plain = runner.run(["sacct", "-n", "-P", "-X", "-j", ids, "-o", SACCT_FIELDS], check=False)
        if plain.returncode == 0 and "accounting storage is disabled" not in plain.stdout:
            return parse_sacct(plain.stdout)
        # No accounting database (as on the dev cluster): the job completion log still has
        # one line per finished job.
        comp = runner.run(["sacct", "-c", "-n", "-P", "-j", ids, "-o", SACCT_FIELDS], check=False)
    except SchedulerError:
        return {}
    return parse_sacct(comp.stdout) if comp.returncode == 0 else {}


def scheduler_views(job_ids: Sequence[str]) -> dict[str, SchedulerView]:
    """Slurm's view of each job: one squeue call for all of them, then one sacct call for those
    that have finished (squeue shows no exit code and forgets jobs after MinJobAge)."""
    if not job_ids:
        return {}
    argv = ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT]
    queue = runner.run(argv, check=False)
    if queue.returncode == 0:
        views = parse_squeue(queue.stdout)
    elif "Invalid job id" in queue.stderr:  # none of them is known to squeue any more
        views = {}
    else:
        raise SchedulerError.from_process(argv, queue.returncode, queue.stderr)
    finished = [i for i in job_ids if i not in views or slurm_phase(views[i].state).terminal]
    if finished:
        views.update(_sacct(finished))
    # Neither accounting nor a completion log (many sites keep one or the other, not all):
    # slurmctld still holds a finished job, exit code included, for MinJobAge.
    for job_id in finished:
        if job_id not in views or views[job_id].exit_code is None:
            views.update(_scontrol(job_id))
    return views


def _scontrol(job_id: str) -> dict[str, SchedulerView]:
    try:
        shown = runner.run(["scontrol", "show", "job", "-o", job_id], check=False)
    except SchedulerError:
        return {}
    return parse_scontrol_job(shown.stdout) if shown.returncode == 0 else {}


def _driver_tail(log_dir: Path | None, lines: int, kind: str) -> list[str]:
    if log_dir is None or lines <= 0:
        return []
    try:
        text = (log_dir / main_log(kind)).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def local_view(rec: JobRecord, log_dir: Path) -> SchedulerView:
    """A local job's state, from its exit_code file or, while it runs, its process."""
    try:
        code = int((log_dir / "exit_code").read_text().strip())
    except (OSError, ValueError):
        if local_job_running(rec):
            return SchedulerView(state="RUNNING")
        # Killed too hard to record its end (SIGKILL, a reboot): there is nothing left to wait for.
        return SchedulerView(state="FAILED", reason="the job's process ended without recording how")
    if code == 0:
        return SchedulerView(state="COMPLETED", exit_code=0)
    return SchedulerView(state="CANCELLED" if code == 143 else "FAILED", exit_code=code)


def local_job_running(rec: JobRecord) -> bool:
    """Whether the local job's process still runs: its pid is alive *and* runs its script (a
    pid is reused once its process is gone; signalling a stranger must never happen)."""
    if rec.pid is None:
        return False
    for _ in range(20):
        try:
            cmdline = Path(f"/proc/{rec.pid}/cmdline").read_bytes()
        except OSError:
            return False
        if cmdline:
            return os.fsencode(rec.script_path) in cmdline.split(b"\0")
        # Empty while the process execs (the job starts as bash -c, then setsid, then bash):
        # a moment later it reads again. A zombie or kernel thread stays empty: not the job.
        time.sleep(0.01)
    return False


def statuses(records: Sequence[JobRecord], *, tail: int = 3) -> list[JobStatus]:
    views = scheduler_views([r.job_id for r in records if r.backend == "slurm"])
    for rec in records:
        if rec.backend == "local":
            views[rec.job_id] = local_view(rec, find_log_dir(Path(rec.log_dir)))
    result = []
    for rec in records:
        runs = run_log_dirs(Path(rec.log_dir))
        logs = read_log_dir(runs[-1])
        view = views.get(rec.job_id)
        phase, detail = phase_of(view, logs, rec.nodes, rec.kind)
        # Only a failed job's logs are searched: a running job's may be large and growing.
        found = diagnose(logs.log_dir, rec.batch_output) if phase is Phase.FAILED else None
        if found and found.where:  # found in a log: ENDED's reason does not say it yet
            detail = f"{detail}; likely cause: {found}"
        result.append(
            JobStatus(
                job_id=rec.job_id,
                phase=phase,
                detail=detail,
                exit_code=view.exit_code if view and phase.terminal else None,
                slurm_state=view.state if view else None,
                log_dir=str(logs.log_dir or rec.log_dir),
                nodes_joined=logs.nodes,
                nodes_expected=rec.nodes,
                driver_tail=_driver_tail(logs.log_dir, tail, rec.kind),
                log_dirs=[str(p) for p in runs if p.is_dir()],
                cause=str(found) if found else None,
            )
        )
    return result


class StatusPoller:
    """`statuses` for loops that follow jobs (`--wait`, `--watch`, `logs -f`): a scheduler that
    does not answer once (slurmctld restarting, an RPC storm) is not the end of following."""

    MAX_FAILURES = 5

    def __init__(self, records: Sequence[JobRecord]) -> None:
        self.records = records
        self.failures = 0

    def __call__(self) -> list[JobStatus] | None:
        """The statuses, or None when the scheduler did not answer this time."""
        from nrl_launch import output

        try:
            found = statuses(self.records, tail=0)
        except SchedulerError as exc:
            self.failures += 1
            if self.failures >= self.MAX_FAILURES:
                raise
            if self.failures == 1:
                output.warn(f"{exc.message}; trying again")
            return None
        self.failures = 0
        return found


def require_running(rec: JobRecord, action: str) -> JobStatus:
    """The job's status if it has started and not ended; else one line saying why `action`
    cannot be done now (exit 5)."""
    found = statuses([rec], tail=0)[0]
    if found.phase is Phase.PENDING:
        raise JobNotRunningError(
            f"job {rec.job_id} has not started ({found.detail}): nothing to {action} yet"
        )
    if found.over:
        raise JobNotRunningError(
            f"job {rec.job_id} has ended ({found.phase.value}: {found.detail}): nothing to {action}"
        )
    return found


def head_node(rec: JobRecord) -> str:
    """The node the job's Ray head runs on: the first of Slurm's node list (this machine for a
    local job)."""
    if rec.backend == "local":
        import socket

        return socket.gethostname()
    view = scheduler_views([rec.job_id]).get(rec.job_id)
    if view is None or not view.nodes:
        raise JobNotRunningError(f"Slurm gives no nodes for job {rec.job_id}: is it running?")
    names = runner.run(["scontrol", "show", "hostnames", view.nodes]).stdout.split()
    if not names:
        raise SchedulerError(f"scontrol show hostnames {view.nodes} printed no node")
    return names[0]
