"""What `run` and `pull` print once their job is queued, and their --wait: as `submit` does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nrl_launch import output

if TYPE_CHECKING:
    from nrl_launch.backends import Request
    from nrl_launch.jobs.record import JobRecord


def dry_run(
    command: str, request: Request, *, json: bool, extra: Mapping[str, Any] | None = None
) -> int:
    """Print what would be submitted: the job script, whose header holds the sbatch command
    (with --json: both, and `extra`)."""
    if json:
        output.emit_json(
            command, {"argv": list(request.argv), "script": request.script, **(extra or {})}
        )
    else:
        output.emit_text(request.script)
    return 0


def report(
    command: str,
    rec: JobRecord,
    what: str,
    *,
    quiet: bool,
    json: bool,
    wait: bool,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Print the job id (and how to follow it; with --json, `extra` too); with `wait`, follow
    the job to its end and return its exit code."""
    submitted = {"job_id": rec.job_id, "log_dir": rec.log_dir, "argv": rec.argv, **(extra or {})}
    if json and not wait:
        output.emit_json(command, submitted)
    elif json:
        pass  # one object, printed once the job has ended
    elif quiet:
        output.emit_text(rec.job_id)
    else:
        output.emit_text(
            f"Submitted job {rec.job_id}: {what}; logs in {rec.log_dir}\n"
            f"  nrl-launch status {rec.job_id}    nrl-launch logs {rec.job_id} -f    "
            f"nrl-launch cancel {rec.job_id}"
        )
    if not wait:
        return 0
    from nrl_launch.cli.status import follow, status_object

    code = follow([rec], quiet=quiet or json)
    if json:
        from nrl_launch.jobs import query

        output.emit_json(command, submitted | {"status": status_object(query.statuses([rec])[0])})
    return code
