"""`nrl-launch cancel`: scancel, by job id."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from nrl_launch import output, paths


def cancel(
    job_ids: Annotated[list[str], typer.Argument(help="Job ids to cancel.", metavar="JOBID")],
) -> int:
    """Cancel jobs; each job stops Ray on every node and records why it ended."""
    from nrl_launch import runner
    from nrl_launch.jobs import record

    state = paths.state_dir(os.environ)
    for job_id in job_ids:
        record.load(job_id, state)  # only jobs this tool submitted: a typo must not cancel another
    runner.run(["scancel", *job_ids])
    output.emit_text(f"Cancelled {', '.join(job_ids)}")
    return 0
