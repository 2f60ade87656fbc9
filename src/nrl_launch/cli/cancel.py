"""`nrl-launch cancel`: each job's backend cancels it (scancel; SIGTERM for a local job)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from nrl_launch import output, paths


def cancel(
    job_ids: Annotated[list[str], typer.Argument(help="Job ids to cancel.", metavar="JOBID")],
) -> int:
    """Cancel jobs; each job stops Ray on every node and records why it ended."""
    from nrl_launch import backends
    from nrl_launch.jobs import record

    state = paths.state_dir(os.environ)
    # Only jobs this tool submitted: a typo must not cancel someone else's job.
    records = [record.load(job_id, state) for job_id in job_ids]
    for name, group in record.by_backend(records).items():
        for job_id in backends.get(name).cancel(group):
            output.warn(f"job {job_id} had already ended")
    output.emit_text(f"Cancelled {', '.join(job_ids)}")
    return 0
