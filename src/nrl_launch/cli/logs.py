"""`nrl-launch logs`: print or follow one of a job's logs. Ctrl-C stops following, not the job."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.cli.options import Json
from nrl_launch.cli.status import job_argument
from nrl_launch.errors import ExitCode, JobNotFoundError, UsageError

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.jobs.status import JobStatus

EXAMPLES = """\
Examples:
  nrl-launch logs JOBID -f                 # follow the driver; exits with the job's exit code
  nrl-launch logs JOBID --node 1 --tail 50 # the end of worker 1's Ray log
"""


def log_file(log_dir: Path, node: str | None, rec: JobRecord) -> Path:
    """driver (or None) -> ray-driver.log, head (or 0) -> ray-head.log, K -> ray-worker-K.log;
    a plain job (run, pull) has one log, job.log."""
    from nrl_launch.jobs.status import main_log

    if rec.kind == "plain":
        if node is not None:
            raise UsageError(
                f"--node {node!r}: job {rec.job_id} runs a plain command (nrl-launch run or "
                "pull), whose one log, job.log, holds every node's output"
            )
        return log_dir / main_log(rec.kind)
    if node in (None, "driver"):
        return log_dir / main_log(rec.kind)
    index = rec.node_index(node, also="driver, ")
    return log_dir / ("ray-head.log" if index == 0 else f"ray-worker-{index}.log")


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
            help="driver (default), head, or worker index K; a plain job (run, pull) has one "
            "log, job.log.",
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
    from nrl_launch import backends
    from nrl_launch.jobs import query, record
    from nrl_launch.jobs.status import find_log_dir

    if follow and json:
        raise UsageError("--follow and --json cannot be combined: --json prints one object once")
    if from_byte is not None and tail is not None:
        raise UsageError("--from-byte and --tail cannot be combined: each says where to start")
    rec = query.current_try(record.load(job_id, paths.state_dir(os.environ)))
    job_id = rec.job_id  # a name was given, maybe
    path = log_file(find_log_dir(Path(rec.log_dir)), node, rec)
    backend = backends.get(rec.backend)
    if not backend.shares_files and not path.is_file():
        # The log dir is on the scheduler's storage, not here: ask its log store. The driver
        # runs on worker 0, so its output is worker 0's.
        if follow:
            raise UsageError(
                f"--follow: job {job_id} runs on {rec.backend}, whose logs this machine reads "
                "only as they stand; run `nrl-launch logs` again, or mount its log dir here"
            )
        index = 0 if node in (None, "driver") else rec.node_index(node, also="driver, ")
        _print(job_id, None, _last_lines(backend.replica_log(rec.job_id, index), tail), json)
        return 0
    if not follow:
        if not path.is_file():
            raise JobNotFoundError(f"{path} does not exist yet: has job {job_id} started?")
        data = path.read_bytes()
        text = data[from_byte or 0 :].decode("utf-8", errors="replace")
        _print(job_id, str(path), _last_lines(text, tail), json, size=len(data))
        return 0
    try:
        return _follow(rec, path, tail, from_byte or 0)
    except KeyboardInterrupt:
        output.warn(f"stopped following; job {job_id} keeps running (nrl-launch cancel {job_id})")
        return ExitCode.INTERRUPTED


def _print(job_id: str, path: str | None, text: str, json: bool, size: int | None = None) -> None:
    """The log as it is: its text, or with --json one object (`path` None: the scheduler's log
    store; `bytes`: the log's size as read, where a follow would go on from)."""
    if json:
        output.emit_json("logs", {"job_id": job_id, "path": path, "text": text, "bytes": size})
    else:
        output.write(text)


def _last_lines(text: str, count: int | None) -> str:
    """The last `count` lines of `text` (all of it for None, nothing for 0)."""
    if count is None:
        return text
    return "".join(text.splitlines(keepends=True)[-count:]) if count else ""


def _follow(rec: JobRecord, path: Path, tail: int | None, start: int) -> int:
    import codecs

    from nrl_launch.jobs import query

    poll = query.StatusPoller([rec])
    # Bytes are counted as read; a character split across two reads is decoded whole.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset, last_check = start, 0.0
    ended: JobStatus | None = None  # the job's status once it has ended
    log_dir = path.parent
    seen = log_dir.is_dir()  # before the job starts, its log dir is still to come
    if tail is not None:
        data = _read_from(path, 0) or b""
        output.write(_last_lines(data.decode("utf-8", errors="replace"), tail))
        offset = len(data)
    while True:
        chunk = _read_from(path, offset)
        if chunk:
            offset += len(chunk)
            output.write(decoder.decode(chunk))
            continue
        if log_dir.is_dir():
            seen = True
        elif seen or not log_dir.parent.is_dir():
            raise JobNotFoundError(f"the log dir {log_dir} was removed while following it")
        if ended is not None:
            return _exit_code(rec, ended)
        # The job's state is checked every few seconds, not on every read.
        if time.monotonic() - last_check > 3:
            last_check = time.monotonic()
            found = poll()
            if found is not None and found[0].over:
                ended = found[0]
            continue  # read once more after the job ended, then stop
        time.sleep(0.5)


def _exit_code(rec: JobRecord, ended: JobStatus) -> int:
    """The exit code of `logs -f` once the job is over: the job's, as its scheduler tells it;
    for a job the scheduler no longer knows (sacct purged it, or the site keeps no accounting),
    as the job's log dir records it (ENDED, exit_code). With no such record either, how it
    ended cannot be known: one line, exit 4, rather than passing off a guess as its code."""
    from nrl_launch import backends
    from nrl_launch.jobs import query
    from nrl_launch.jobs.status import Phase, read_log_dir

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


def _read_from(path: Path, offset: int) -> bytes | None:
    """What `path` holds past `offset`; None while it does not exist (not yet, or no more)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
