"""Lepton's view of a job, in Slurm's words (pure): its state, its worker counts, and the
names of its workers' replicas. `lepton` is the backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nrl_launch.backends.base import SchedulerView

if TYPE_CHECKING:
    from leptonai.api.v2.types.job import LeptonJob

__all__ = ["LEPTON_STATES", "head_name", "job_view", "worker_of"]


# ---- Lepton's view of a job (pure) ----

# Lepton's job states in Slurm's words (`backends.state_phase` maps those to phases). A job
# stopped (nrl-launch cancel, `lep job stop`) or deleted did not run to its end: CANCELLED.
# Stopping and Terminating still have workers to stop: COMPLETING, as Slurm says it.
LEPTON_STATES: Mapping[str, str] = {
    "Queueing": "PENDING",
    "Awaiting": "PENDING",
    "Starting": "CONFIGURING",
    "Running": "RUNNING",
    "Restarting": "REQUEUED",
    "PendingRetry": "REQUEUED",
    "Stopping": "COMPLETING",
    "Terminating": "COMPLETING",
    "Completed": "COMPLETED",
    "Failed": "FAILED",
    "Stopped": "CANCELLED",
    "Deleting": "CANCELLED",
    "Deleted": "CANCELLED",
}


def job_view(job: LeptonJob) -> SchedulerView:
    """What Lepton says of `job`, in Slurm's words; the reason from its worker counts."""
    status = job.status
    workers = job.spec.parallelism or job.spec.completions or 1
    if status is None or status.state is None:
        return SchedulerView(state="PENDING", reason="Lepton gives no state yet")
    name = status.state.value
    ready, failed, succeeded = status.ready or 0, status.failed or 0, status.succeeded or 0
    if name == "Archived":
        # Archived: a finished job moved out of the live list; its counts say how it ended.
        if failed:
            state = "FAILED"
        elif succeeded >= (job.spec.completions or workers):
            state = "COMPLETED"
        else:
            state = "CANCELLED"
        return SchedulerView(state=state, reason=f"archived by Lepton; {_counts(status, workers)}")
    state = LEPTON_STATES.get(name, "UNKNOWN")
    if state == "RUNNING" and ready < (status.active or 0):
        # Lepton says Running once one worker runs; the others may still pull the image.
        state = "CONFIGURING"
    if state == "UNKNOWN":
        return SchedulerView(state=state, reason=f"Lepton's state: {name}")
    return SchedulerView(state=state, reason=_counts(status, workers) if ready or failed else None)


def _counts(status: Any, workers: int) -> str:
    parts = [f"{status.ready or 0} of {workers} workers ready"]
    if status.failed:
        parts.append(f"{status.failed} failed")
    if status.succeeded:
        parts.append(f"{status.succeeded} succeeded")
    return ", ".join(parts)


def worker_of(job_id: str, replica_id: str) -> int | None:
    """The worker index of a replica: Lepton names worker K's replica <job id>-K-<suffix>."""
    rest = replica_id.removeprefix(f"{job_id}-")
    index = rest.split("-", 1)[0]
    if rest == replica_id or not index.isdigit():
        return None
    return int(index)


def head_name(job_id: str) -> str:
    """Worker 0's name on the job's network, with Lepton's defaults for its service prefix and
    subdomain (LEPTON_JOB_SERVICE_PREFIX, LEPTON_SUBDOMAIN; seed 004): reachable from the
    job's workers, not from this machine."""
    return f"{job_id}-0.{job_id}-job-svc"
