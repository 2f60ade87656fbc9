"""`nrl-launch cancel`: each job's backend cancels it (scancel; SIGTERM for a local job). A job
that has already ended is left be, and said to have ended, with how."""

from __future__ import annotations

from typing import Annotated

from nrl_launch import output
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import job_argument

EXAMPLES = """\
Examples:
  nrl-launch cancel JOBID
  nrl-launch cancel JOBID JOBID --json
"""


def cancel(
    job_ids: Annotated[list[str], job_argument("Job ids or names to cancel.")],
    json: Json = False,
) -> int:
    """Cancel jobs; each job stops Ray on every node and records why it ended. A job that has
    already ended is not cancelled: a warning says how it ended (exit 0)."""
    from nrl_launch.api import tracking

    # Only jobs this tool submitted: a typo must not cancel someone else's job.
    cancelled, ended = tracking.cancel([tracking.record_of(job_id) for job_id in job_ids])
    if json:
        output.emit_json("cancel", {"cancelled": cancelled, "ended": ended})
    elif cancelled:
        output.emit_text(f"Cancelled {', '.join(cancelled)}")
    return 0
