"""`nrl-launch cancel`: scancel (or, for a local job, SIGTERM to its process), by job id."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Annotated

import typer

from nrl_launch import output, paths


def cancel(
    job_ids: Annotated[list[str], typer.Argument(help="Job ids to cancel.", metavar="JOBID")],
) -> int:
    """Cancel jobs; each job stops Ray on every node and records why it ended."""
    from nrl_launch import runner
    from nrl_launch.jobs import query, record

    state = paths.state_dir(os.environ)
    # Only jobs this tool submitted: a typo must not cancel someone else's job.
    records = [record.load(job_id, state) for job_id in job_ids]
    slurm_ids = [r.job_id for r in records if r.backend == "slurm"]
    if slurm_ids:
        runner.run(["scancel", *slurm_ids])
    for r in records:
        if r.backend != "local":
            continue
        if not query.local_job_running(r):
            output.warn(f"job {r.job_id} had already ended")
            continue
        # The job's own trap stops the driver and Ray and records the cancel.
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.pid, signal.SIGTERM)  # type: ignore[arg-type]  # running: it has a pid
    output.emit_text(f"Cancelled {', '.join(job_ids)}")
    return 0
