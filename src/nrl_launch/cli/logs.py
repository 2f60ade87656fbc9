"""`nrl-launch logs`: print or follow one of a job's logs. Ctrl-C stops following, not the job."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import backends, output
from nrl_launch.api import tracking
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import job_argument
from nrl_launch.errors import ExitCode, JobNotFoundError, UsageError
from nrl_launch.jobs import query
from nrl_launch.jobs.status import Phase, read_log_dir

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.jobs.status import JobStatus

EXAMPLES = """\
Examples:
  nrl-launch logs JOBID -f                 # follow the driver; exits with the job's exit code
  nrl-launch logs JOBID --node 1 --tail 50 # the end of worker 1's Ray log
"""


def logs(
    job_id: Annotated[str, job_argument("The job id or name.")],
    follow: Annotated[
        bool,
        typer.Option(
            "-f",
            "--follow",
            help="Keep printing until the job ends; exit with its exit code, as submit --wait.",
        ),
    ] = False,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            metavar="NODE",
            help="driver (default), head, or worker index K; a pool's NAME (its balancer) or "
            "NAME.K (its replica K); a plain job (run, pull) has one log, job.log.",
        ),
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option("--tail", metavar="N", help="Start with the last N lines.", min=0),
    ] = None,
    from_byte: Annotated[
        int | None,
        typer.Option(
            "--from-byte",
            metavar="N",
            min=0,
            help="Start at byte N of the log (nrl-launch over --remote resumes -f with it "
            "after a dropped connection).",
        ),
    ] = None,
    json: Json = False,
) -> int:
    """Print the driver's log (or the head's, or worker K's) from the job's log dir; for a
    plain job (run, pull), its command's output. With -f, follow it to the job's end and exit
    with the job's exit code: the driver's when it failed, 0 when it completed, 1 when it was
    cancelled or timed out. For a job Slurm no longer knows (its accounting purged), the exit
    code its log dir records (ENDED, exit_code); with none recorded, one line and exit 4."""
    if follow and json:
        raise UsageError("--follow and --json cannot be combined: --json prints one object once")
    if from_byte is not None and tail is not None:
        raise UsageError("--from-byte and --tail cannot be combined: each says where to start")
    rec = tracking.record_of(job_id)
    if not follow:
        path, text, size = tracking.read_log(rec, node, tail, from_byte or 0)
        _print(rec.job_id, path, text, json, size)
        return 0
    try:
        return _follow(rec, node, tail, from_byte or 0)
    except KeyboardInterrupt:
        output.warn(
            f"stopped following; job {rec.job_id} keeps running (nrl-launch cancel {rec.job_id})"
        )
        return ExitCode.INTERRUPTED


def _print(job_id: str, path: str | None, text: str, json: bool, size: int | None) -> None:
    """The log as it is: its text, or with --json one object (`path` None: the scheduler's log
    store; `bytes`: the log's size as read, where a follow would go on from)."""
    if json:
        output.emit_json("logs", {"job_id": job_id, "path": path, "text": text, "bytes": size})
    else:
        output.write(text)


def _follow(rec: JobRecord, node: str | None, tail: int | None, start: int) -> int:
    """Print the log as it grows (from byte `start`) until the job ends; the job's exit code
    (`_exit_code`)."""
    rec, path = tracking.current_log(rec, node)
    chunks = tracking.follow_log(rec, path, tail, start)
    while True:
        try:
            output.write(next(chunks))
        except StopIteration as ended:  # noqa: PERF203 - how the job's status comes back
            return _exit_code(rec, ended.value)


def _exit_code(rec: JobRecord, ended: JobStatus) -> int:
    """The exit code of `logs -f` once the job is over: the job's, as its scheduler tells it;
    for a job the scheduler no longer knows (sacct purged it, or the site keeps no accounting),
    as the job's log dir records it (ENDED, exit_code). With no such record either, how it
    ended cannot be known: one line, exit 4, rather than passing off a guess as its code."""
    if ended.phase is not Phase.UNKNOWN:
        code = query.exit_code_of(ended)
        if code:
            output.note(f"job {rec.job_id} ended {ended.phase.value}: {ended.detail}")
        return code
    scheduler = backends.get(rec.backend).scheduler
    log_dir = Path(ended.log_dir or rec.log_dir)
    end = read_log_dir(log_dir).end
    if end is None:
        raise JobNotFoundError(
            f"{scheduler} no longer knows job {rec.job_id} (its accounting may have been purged) "
            f"and its log dir {log_dir} records no end (no ENDED): how it ended is unknown"
        )
    code, reason = end
    output.note(
        f"{scheduler} no longer knows job {rec.job_id}; its log dir says it ended: {reason} "
        f"(exit code {code})"
    )
    return code
