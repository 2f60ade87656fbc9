"""`nrl-launch cancel`: each job's backend cancels it (scancel; SIGTERM for a local job). A job
that has already ended is left be, and said to have ended, with how."""

from __future__ import annotations

from typing import Annotated

from nrl_launch import output
from nrl_launch.api import tracking
from nrl_launch.cli.experiment import records as of_experiment
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import job_argument
from nrl_launch.cli.sweep_options import ExperimentFilter
from nrl_launch.errors import UsageError

EXAMPLES = """\
Examples:
  nrl-launch cancel JOBID
  nrl-launch cancel JOBID JOBID --json
"""


def cancel(
    job_ids: Annotated[list[str] | None, job_argument("Job ids or names to cancel.")] = None,
    json: Json = False,
    experiment: ExperimentFilter = None,
) -> int:
    """Cancel jobs; each job stops Ray on every node and records why it ended. A job that has
    already ended is not cancelled: a warning says how it ended (exit 0)."""
    # Only jobs this tool submitted: a typo must not cancel someone else's job.
    if experiment is not None:  # the later points first: none starts as its lane's ends
        records = of_experiment(experiment, job_ids, "cancel")[::-1]
    elif job_ids:
        records = [tracking.record_of(job_id) for job_id in job_ids]
    else:
        raise UsageError("cancel: give the JOBIDs to cancel, or --experiment NAME")
    cancelled, ended = tracking.cancel(records)
    if json:
        output.emit_json("cancel", {"cancelled": cancelled, "ended": ended})
    elif experiment is not None:
        output.emit_text(
            f"Cancelled {len(cancelled)} of the {len(records)} jobs of experiment {experiment}"
            + (f": {', '.join(cancelled)}" if cancelled else "")
        )
    elif cancelled:
        output.emit_text(f"Cancelled {', '.join(cancelled)}")
    return 0
