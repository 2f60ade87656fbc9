"""`nrl-launch stop`: end a job well. The job's nodes watch ENDED: writing it (with the reason
the job script knows as a stop) makes the head stop the driver and Ray, every worker stop Ray,
and the job end COMPLETED."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from nrl_launch import output, paths
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import follow, job_argument
from nrl_launch.errors import JobNotRunningError
from nrl_launch.jobs import query, record
from nrl_launch.jobs.status import find_log_dir

# The job script's stop_requested() looks for this prefix.
STOP_REASON = "stop requested by {user} with nrl-launch stop"

EXAMPLES = """\
Examples:
  nrl-launch stop JOBID           # the driver gets SIGTERM; Ray stops on every node
  nrl-launch stop JOBID --wait    # and follow the job until it has ended
"""


def stop(
    job_ids: Annotated[list[str], job_argument("Job ids or names to stop.")],
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the jobs until they have ended.")
    ] = False,
    json: Json = False,
) -> int:
    """Stop jobs gracefully: a batch job's driver gets SIGTERM (and 30 s), Ray stops on every
    node, and the job ends COMPLETED."""
    state = paths.state_dir(os.environ)
    records = [query.current_try(record.load(job_id, state)) for job_id in job_ids]
    # Every job is checked before any is stopped: all of them, or none and one clear line.
    for rec in records:
        record.require_ray(rec, "stop", f"; nrl-launch cancel {rec.job_id} ends it")
    running = [(rec, query.require_running(rec, "stop")) for rec in records]
    stopping, ending = [], []
    for rec, found in running:
        ended = find_log_dir(Path(rec.log_dir)) / "ENDED"
        try:
            # O_EXCL, as the job's own end_job: the first reason written is the one that counts.
            fd = os.open(ended, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            output.warn(f"job {rec.job_id} is already ending: {found.detail}")
            ending.append(rec.job_id)
            continue
        except OSError as exc:
            raise JobNotRunningError(
                f"cannot write {ended} ({exc.strerror}): has job {rec.job_id} started?"
            ) from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(STOP_REASON.format(user=getpass.getuser()) + "\n")
        stopping.append(rec.job_id)
        if not json:
            output.emit_text(
                f"Stopping job {rec.job_id}: Ray stops on every node "
                f"(nrl-launch status {rec.job_id})"
            )
    code = 0
    if wait:
        code = follow(records, quiet=json)
    if json:
        data: dict[str, Any] = {"stopping": stopping, "already_ending": ending}
        if wait:
            data["jobs"] = [s.as_json() for s in query.statuses(records, tail=0)]
        output.emit_json("stop", data)
    return code
