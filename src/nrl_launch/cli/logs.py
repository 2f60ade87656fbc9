"""`nrl-launch logs`: print or follow one of a job's logs. Ctrl-C stops following, not the job."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.errors import ExitCode, JobNotFoundError, UsageError

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord


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
    job_id: Annotated[str, typer.Argument(help="The job id.", metavar="JOBID")],
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing until the job ends.")
    ] = False,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            help="driver (default), head, or worker index K; a plain job (run, pull) has one "
            "log, job.log.",
        ),
    ] = None,
    tail: Annotated[
        int | None, typer.Option("--tail", help="Start with the last N lines.", min=0)
    ] = None,
) -> int:
    """Print the driver's log (or the head's, or worker K's) from the job's log dir; for a
    plain job (run, pull), its command's output."""
    from nrl_launch import backends
    from nrl_launch.jobs import record
    from nrl_launch.jobs.status import find_log_dir

    rec = record.load(job_id, paths.state_dir(os.environ))
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
        sys.stdout.write(_last_lines(backend.replica_log(rec.job_id, index), tail))
        return 0
    if not follow:
        if not path.is_file():
            raise JobNotFoundError(f"{path} does not exist yet: has job {job_id} started?")
        sys.stdout.write(_last_lines(path.read_text(encoding="utf-8", errors="replace"), tail))
        return 0
    try:
        return _follow(rec, path, tail)
    except KeyboardInterrupt:
        output.warn(f"stopped following; job {job_id} keeps running (nrl-launch cancel {job_id})")
        return ExitCode.INTERRUPTED


def _last_lines(text: str, count: int | None) -> str:
    """The last `count` lines of `text` (all of it for None, nothing for 0)."""
    if count is None:
        return text
    return "".join(text.splitlines(keepends=True)[-count:]) if count else ""


def _follow(rec: JobRecord, path: Path, tail: int | None) -> int:
    import codecs

    from nrl_launch.jobs import query

    poll = query.StatusPoller([rec])
    # Bytes are counted as read; a character split across two reads is decoded whole.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset, last_check, ended = 0, 0.0, False
    log_dir = path.parent
    seen = log_dir.is_dir()  # before the job starts, its log dir is still to come
    if tail is not None:
        data = _read_from(path, 0) or b""
        sys.stdout.write(_last_lines(data.decode("utf-8", errors="replace"), tail))
        offset = len(data)
    while True:
        chunk = _read_from(path, offset)
        if chunk:
            offset += len(chunk)
            sys.stdout.write(decoder.decode(chunk))
            sys.stdout.flush()
            continue
        if log_dir.is_dir():
            seen = True
        elif seen or not log_dir.parent.is_dir():
            raise JobNotFoundError(f"the log dir {log_dir} was removed while following it")
        if ended:
            return 0
        # The job's state is checked every few seconds, not on every read.
        if time.monotonic() - last_check > 3:
            last_check = time.monotonic()
            found = poll()
            ended = found is not None and found[0].over
            continue  # read once more after the job ended, then stop
        time.sleep(0.5)


def _read_from(path: Path, offset: int) -> bytes | None:
    """What `path` holds past `offset`; None while it does not exist (not yet, or no more)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
