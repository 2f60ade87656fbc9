"""`nrl-launch status`: Slurm's state, the Ray bring-up and the driver, as one phase per job."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch import output, paths
from nrl_launch.errors import UsageError

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.jobs.status import JobStatus


def status(
    job_ids: Annotated[
        list[str], typer.Argument(help="Job ids, as submit printed them.", metavar="JOBID")
    ],
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Print each change until every job ends.")
    ] = False,
) -> int:
    """Show each job's phase: PENDING (why), STARTING, JOINING k/N, RUNNING, or how it ended."""
    from nrl_launch.jobs import query, record

    if watch and json:
        raise UsageError("--watch and --json cannot be combined: --json prints one object once")
    state = paths.state_dir(os.environ)
    records = [record.load(job_id, state) for job_id in job_ids]
    if watch:
        return follow(records)
    found = query.statuses(records)
    for rec, s in zip(records, found, strict=True):
        if len(s.log_dirs) > 1 and s.log_dirs != rec.runs:
            # A requeued job: its record keeps every run's log dir, not just the first.
            record.save(rec.model_copy(update={"runs": s.log_dirs}), state)
    if json:
        output.emit_json("status", {"jobs": [status_object(s) for s in found]})
    else:
        for s in found:
            output.emit_text(_line(s))
            for line in s.driver_tail:
                output.emit_text(f"    | {line}")
    return 0


def status_object(s: JobStatus) -> dict[str, Any]:
    """One job's status as --json prints it."""
    return dataclasses.asdict(s) | {"phase": s.phase.value}


def _line(s: JobStatus) -> str:
    run = f", run {len(s.log_dirs)} after a requeue" if len(s.log_dirs) > 1 else ""
    return f"{s.job_id}  {s.phase.value:<9}  {s.detail}   (logs: {s.log_dir}{run})"


def follow(records: list[JobRecord], *, quiet: bool = False) -> int:
    """Print each job's phase as it changes until all have ended; the exit code is the first
    job's: its driver's exit code, 0 when it completed, 1 when it was cancelled or timed out."""
    from nrl_launch.jobs import query

    last: dict[str, tuple[str, str]] = {}

    def print_changes(found: list[JobStatus]) -> bool:
        """Print each job whose phase changed; whether all have ended."""
        for s in found:
            if last.get(s.job_id) != (s.phase.value, s.detail):
                last[s.job_id] = (s.phase.value, s.detail)
                if not quiet:
                    output.emit_text(_line(s))
        return bool(found) and all(s.over for s in found)

    # Gentle on slurmctld: one squeue per poll for all jobs, polls growing to 5 s apart.
    waits = query.Backoff(first_s=1.0, most_s=5.0, step_s=1.0)
    found = query.StatusPoller(records).wait_until(print_changes, None, waits)
    assert found  # with no time limit, it returns once every job has ended
    first = found[0]
    if first.phase.value == "COMPLETED":
        return 0
    if first.phase.value == "FAILED" and first.exit_code:
        return first.exit_code
    return 1
