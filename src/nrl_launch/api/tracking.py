"""Submitted jobs for the API and the CLI alike: find a job's record, ask for its status, wait
for its end, read or follow its logs, cancel it. The CLI's commands call these (and print);
`nrl_launch.api` is their face."""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nrl_launch import backends, output, paths
from nrl_launch.errors import JobNotFoundError, SchedulerError, UsageError
from nrl_launch.jobs import query, record, retries
from nrl_launch.jobs.status import find_log_dir, main_log

if TYPE_CHECKING:
    from collections.abc import Generator

    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.jobs.status import JobStatus

__all__ = [
    "cancel",
    "current_log",
    "follow_log",
    "following",
    "last_lines",
    "log_file",
    "read_log",
    "record_of",
    "records",
    "remember_runs",
    "statuses",
    "wait",
]


def record_of(job: JobRecord | str) -> JobRecord:
    """The record of `job`: itself, or the job a job id (or a name only one job has) names."""
    if not isinstance(job, str):
        return job

    return record.load(job, paths.state_dir(os.environ))


def records() -> list[JobRecord]:
    """Every readable record, newest first; a warning for each unreadable one."""
    found, warnings = record.load_all(paths.state_dir(os.environ))
    for warning in warnings:
        output.warn(warning)
    return found


def statuses(jobs: Sequence[JobRecord]) -> list[JobStatus]:
    """Each job's status (one scheduler query per backend); a requeued job's record keeps
    every run's log dir from then on."""
    found = query.statuses(jobs)
    remember_runs(jobs, found)
    return found


def remember_runs(jobs: Sequence[JobRecord], found: Sequence[JobStatus]) -> None:
    """A requeued job's record keeps every run's log dir, not just the first, once its status
    (`found`, each job's) has shown them."""
    for rec, s in zip(jobs, found, strict=True):
        if len(s.log_dirs) > 1 and s.log_dirs != rec.runs:
            record.save(rec.model_copy(update={"runs": s.log_dirs}), paths.state_dir(os.environ))


def wait(rec: JobRecord, *, timeout: float | None, poll: float) -> JobStatus:
    """The job's status once it has ended (polls `poll` seconds apart at most, one squeue
    each); TimeoutError after `timeout` seconds (None: no limit)."""
    waits = query.Backoff(first_s=min(1.0, poll), most_s=poll, step_s=1.0)
    found = query.StatusPoller([rec]).wait_until(lambda found: found[0].over, timeout, waits)
    if found is None:
        raise TimeoutError(f"job {rec.job_id} has not ended after {timeout} s")
    return statuses([rec])[0]  # with the driver's last lines and a failure's cause


def log_file(log_dir: Path, node: str | None, rec: JobRecord) -> Path:
    """driver (or None) -> ray-driver.log, head (or 0) -> ray-head.log, K -> ray-worker-K.log;
    a pool's NAME -> its balancer's log, NAME.K -> its replica K's; a plain job (run, pull)
    has one log, job.log."""
    if rec.kind == "plain":
        if node is not None:
            raise UsageError(
                f"--node {node!r}: job {rec.job_id} runs a plain command (nrl-launch run or "
                "pull), whose one log, job.log, holds every node's output"
            )
        return log_dir / main_log(rec.kind)
    if node in (None, "driver"):
        return log_dir / main_log(rec.kind)
    pool = record.pool_of(rec, node)
    if pool is not None:
        name, replica = pool
        return log_dir / f"pool-{name}-{'balancer' if replica is None else replica}.log"
    pools = record.pools_named(rec, "a pool's replica; the pool alone: its balancer")
    index = rec.node_index(node, also=f"driver, {pools}")
    return log_dir / ("ray-head.log" if index == 0 else f"ray-worker-{index}.log")


def current_log(rec: JobRecord, node: str | None) -> tuple[JobRecord, Path]:
    """The job a log is read of (a --retries run's current try) and the log's path in its
    newest run's log dir."""
    rec = query.current_try(rec)
    return rec, log_file(find_log_dir(Path(rec.log_dir)), node, rec)


def read_log(
    rec: JobRecord, node: str | None, tail: int | None, start: int = 0
) -> tuple[str | None, str, int | None]:
    """Where one of the job's logs is (None: its scheduler's log store), its text from byte
    `start` (the last `tail` lines of that), and its size as read (None: not a file here),
    where a follow would go on from."""
    rec, path = current_log(rec, node)
    backend = backends.get(rec.backend)
    if not backend.shares_files and not path.is_file():
        # The log dir is on the scheduler's storage, not here: ask its log store. The driver
        # runs on worker 0, so its output is worker 0's.
        index = 0 if node in (None, "driver") else rec.node_index(node, also="driver, ")
        return None, last_lines(backend.replica_log(rec.job_id, index), tail), None
    if not path.is_file():
        raise JobNotFoundError(f"{path} does not exist yet: has job {rec.job_id} started?")
    data = path.read_bytes()
    text = data[start:].decode("utf-8", errors="replace")
    return str(path), last_lines(text, tail), len(data)


def last_lines(text: str, count: int | None) -> str:
    """The last `count` lines of `text` (all of it for None, nothing for 0)."""
    if count is None:
        return text
    return "".join(text.splitlines(keepends=True)[-count:]) if count else ""


def following(
    rec: JobRecord, path: Path, tail: int | None, start: int = 0
) -> Generator[str, None, JobStatus]:
    """The log at `path` as it grows (from its last `tail` lines, or from byte `start`), chunk
    by chunk, until the job has ended and all it wrote was read; returns the job's status."""
    poll = query.StatusPoller([rec])
    # Bytes are counted as read; a character split across two reads is decoded whole.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset, last_check = start, 0.0
    ended: JobStatus | None = None  # the job's status once it has ended
    log_dir = path.parent
    seen = log_dir.is_dir()  # before the job starts, its log dir is still to come
    if tail is not None:
        data = _read_from(path, 0) or b""
        yield last_lines(data.decode("utf-8", errors="replace"), tail)
        offset = len(data)
    while True:
        chunk = _read_from(path, offset)
        if chunk:
            offset += len(chunk)
            yield decoder.decode(chunk)
            continue
        if log_dir.is_dir():
            seen = True
        elif seen or not log_dir.parent.is_dir():
            raise JobNotFoundError(f"the log dir {log_dir} was removed while following it")
        if ended is not None:
            return ended
        # The job's state is checked every few seconds, not on every read.
        if time.monotonic() - last_check > 3:
            last_check = time.monotonic()
            found = poll()
            if found is not None and found[0].over:
                ended = found[0]
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


def cancel(jobs: Sequence[JobRecord]) -> tuple[list[str], dict[str, str]]:
    """Cancel the jobs (a --retries run: every try, the pending spares too). Returns the ids
    cancelled, and those that had already ended with how; each of those is warned about."""
    ended: dict[str, str] = {}  # job id -> how it ended
    try:
        for rec, found in zip(jobs, query.statuses(jobs, tail=0, causes=False), strict=True):
            if found.over:
                ended[rec.job_id] = f"{found.phase.value}: {found.detail}"
    except SchedulerError as exc:  # cancelling matters more than knowing which have ended
        output.warn(f"{exc.message}; cancelling without knowing which jobs have ended")
    live = [rec for rec in jobs if rec.job_id not in ended]
    # A --retries run: every try, the pending spares too (else Slurm would start the next).
    for name, group in record.by_backend(retries.expand(live)).items():
        for job_id in backends.get(name).cancel(group):  # it ended since it was asked
            ended[job_id] = "ended just now"
    for job_id, how in ended.items():
        output.warn(f"job {job_id} had already ended ({how}): nothing to cancel")
    return [rec.job_id for rec in live if rec.job_id not in ended], ended


def follow_log(
    rec: JobRecord, path: Path, tail: int | None, start: int = 0
) -> Generator[str, None, JobStatus]:
    """`following` the log at `path` of `rec` (a current try: `current_log`); a backend whose
    logs are not on this machine cannot be followed (one line)."""
    if not backends.get(rec.backend).shares_files and not path.is_file():
        raise UsageError(
            f"--follow: job {rec.job_id} runs on {rec.backend}, whose logs this machine reads "
            "only as they stand; run `nrl-launch logs` again, or mount its log dir here"
        )
    return (yield from following(rec, path, tail, start))
