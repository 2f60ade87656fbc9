"""`nrl-launch cancel`: each job's backend cancels it (scancel; SIGTERM for a local job). A job
that has already ended is left be, and said to have ended, with how."""

from __future__ import annotations

import os
from typing import Annotated

from nrl_launch import output, paths
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import job_argument
from nrl_launch.cli.sweep_options import ExperimentFilter
from nrl_launch.errors import SchedulerError, UsageError

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
    from nrl_launch import backends
    from nrl_launch.jobs import query, record

    state = paths.state_dir(os.environ)
    # Only jobs this tool submitted: a typo must not cancel someone else's job.
    if experiment is not None:  # the later points first: none starts as its lane's ends
        from nrl_launch.cli.experiment import records as of_experiment

        records = of_experiment(experiment, job_ids, "cancel")[::-1]
    elif job_ids:
        records = [record.load(job_id, state) for job_id in job_ids]
    else:
        raise UsageError("cancel: give the JOBIDs to cancel, or --experiment NAME")
    ended: dict[str, str] = {}  # job id -> how it ended
    try:
        for rec, found in zip(records, query.statuses(records, tail=0, causes=False), strict=True):
            if found.over:
                ended[rec.job_id] = f"{found.phase.value}: {found.detail}"
    except SchedulerError as exc:  # cancelling matters more than knowing which have ended
        output.warn(f"{exc.message}; cancelling without knowing which jobs have ended")
    live = [rec for rec in records if rec.job_id not in ended]
    from nrl_launch.jobs import retries

    # A --retries run: every try, the pending spares too (else Slurm would start the next).
    for name, group in record.by_backend(retries.expand(live)).items():
        for job_id in backends.get(name).cancel(group):  # it ended since it was asked
            ended[job_id] = "ended just now"
    cancelled = [rec.job_id for rec in live if rec.job_id not in ended]
    for job_id, how in ended.items():
        output.warn(f"job {job_id} had already ended ({how}): nothing to cancel")
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
