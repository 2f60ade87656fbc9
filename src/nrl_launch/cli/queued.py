"""What `submit`, `run` and `pull` print once their jobs are queued, and their --wait."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nrl_launch import output
from nrl_launch.cli.status import follow
from nrl_launch.jobs import query

if TYPE_CHECKING:
    from nrl_launch.backends import Request
    from nrl_launch.jobs.record import JobRecord


def dry_run(
    command: str, request: Request, *, json: bool, extra: Mapping[str, Any] | None = None
) -> int:
    """Print what would be submitted: the job script, whose header holds the sbatch command
    (with --json: both, the variables the job is started with (its spec), and `extra`)."""
    if json:
        shown = {
            "argv": list(request.argv),
            "script": request.script,
            "environment": dict(request.environment),
        }
        output.emit_json(command, {**shown, **(extra or {})})
    else:
        output.emit_text(request.script)
    return 0


def next_steps(job_id: str) -> str:
    """The line under "Submitted job ...": how to follow the job."""
    return (
        f"  nrl-launch status {job_id}    nrl-launch logs {job_id} -f    nrl-launch cancel {job_id}"
    )


def report(
    command: str,
    records: Sequence[JobRecord],
    text: str,
    *,
    quiet: bool,
    json: bool,
    wait: bool,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Print what was queued: `text`, or with `quiet` the job ids, or with `json` one object
    for the last job (and `extra`); with `wait`, follow the last job to its end, print its
    status (with --json, in the same object) and return its exit code."""
    rec = records[-1]
    submitted = {"job_id": rec.job_id, "log_dir": rec.log_dir, "argv": rec.argv, **(extra or {})}
    if json and not wait:
        output.emit_json(command, submitted)
    elif json:
        pass  # one object, printed once the job has ended
    elif quiet:
        output.emit_text("\n".join(r.job_id for r in records))
    else:
        output.emit_text(text)
    if not wait:
        return 0

    code = follow([rec], quiet=quiet or json)
    if json:
        output.emit_json(command, submitted | {"status": query.statuses([rec])[0].as_json()})
    return code
