"""Ask each job's backend about it and join the answers with the job's log dirs; `Poller` is the
one loop that asks a scheduler again and again (following jobs, waiting for doctor's probe job)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from nrl_launch import backends, output
from nrl_launch.errors import JobNotRunningError, NrlLaunchError, SchedulerError, UsageError
from nrl_launch.jobs import cost, retries
from nrl_launch.jobs.diagnose import diagnose
from nrl_launch.jobs.record import JobRecord, by_backend
from nrl_launch.jobs.requeue import requeue_note
from nrl_launch.jobs.status import (
    JobStatus,
    Phase,
    SchedulerView,
    main_log,
    phase_of,
    printable,
    read_log_dir,
    run_log_dirs,
)

__all__ = [
    "Backoff",
    "Poller",
    "StatusPoller",
    "current_try",
    "exit_code_of",
    "head_node",
    "overview",
    "require_running",
    "statuses",
]


def _driver_tail(log_dir: Path | None, lines: int, kind: str) -> list[str]:
    if log_dir is None or lines <= 0:
        return []
    try:
        text = (log_dir / main_log(kind)).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [printable(line) for line in text.splitlines()[-lines:]]


def statuses(
    records: Sequence[JobRecord], *, tail: int = 3, causes: bool = True
) -> list[JobStatus]:
    """Each job's status: one query per backend (one squeue for every Slurm job), joined with
    its log dir; with `causes`, a failed job's logs are searched for a known cause. Raises
    SchedulerError when a backend does not answer."""
    jobs = retries.expand(records)  # a --retries run: every try, in the same one query
    views: dict[str, SchedulerView] = {}
    for name, group in by_backend(jobs).items():
        views |= backends.get(name).describe(group)
    each = {rec.job_id: _status(rec, views.get(rec.job_id), tail, causes) for rec in jobs}
    return [retries.merged(rec, each) for rec in records]


def overview(records: Sequence[JobRecord]) -> list[JobStatus]:
    """Every job's status for a listing (`status` or `list` with no job id), as `statuses`
    without the logs' tails and causes. A backend that does not answer leaves its jobs
    UNKNOWN, with one warning, instead of hiding the others' states."""
    found: dict[str, JobStatus] = {}
    for name, group in by_backend(retries.expand(records)).items():
        try:
            views = backends.get(name).describe(group)
        except NrlLaunchError as exc:  # its scheduler failed, or its SDK is not installed here
            output.warn(f"{exc.message}; the state of its {len(group)} job(s) is unknown")
            found |= {r.job_id: _unanswered(r, name) for r in group}
            continue
        found |= {r.job_id: _status(r, views.get(r.job_id), 0, False) for r in group}
    return [retries.merged(rec, found) for rec in records]


def _unanswered(rec: JobRecord, backend: str) -> JobStatus:
    return JobStatus(
        job_id=rec.job_id,
        phase=Phase.UNKNOWN,
        detail=f"{backend} did not answer",
        log_dir=rec.log_dir,
        nodes_expected=rec.nodes,
    )


def _status(rec: JobRecord, view: SchedulerView | None, tail: int, causes: bool) -> JobStatus:
    runs = run_log_dirs(Path(rec.log_dir))
    logs = read_log_dir(runs[-1])
    phase, detail = phase_of(view, logs, rec.nodes, rec.kind)
    # Requeued (run again, or PENDING again after a run ended): how that run ended.
    waiting = phase is Phase.PENDING and logs.ended is not None
    note = requeue_note(runs, rec.batch_output, waiting=waiting)
    if note:
        detail = f"{detail}; {note}"
    if phase.terminal or view is None:
        # Over for the scheduler, or forgotten by it (a cancelled or timed-out job, whose own
        # trap may have kept the file for a requeue): it will not run again. Its secrets file goes.
        Path(f"{rec.script_path}.secrets").unlink(missing_ok=True)
    code = None
    if phase.terminal and view is not None:
        code = view.exit_code
    elif phase.terminal and logs.end is not None:  # Slurm forgot the job: its log dir's record
        code = logs.end[0]
    # Only a failed job's logs are searched: a running job's may be large and growing.
    found = diagnose(logs.log_dir, rec.batch_output) if causes and phase is Phase.FAILED else None
    if found and found.where:  # found in a log: ENDED's reason does not say it yet
        detail = f"{detail}; likely cause: {found}"
    log_dirs = [str(p) for p in runs if p.is_dir()]
    used = None
    if rec.backend == "slurm":
        over = phase.terminal or view is None
        used = round(cost.recorded_used(rec, log_dirs, over=over), 3)
    return JobStatus(
        job_id=rec.job_id,
        phase=phase,
        detail=detail,
        exit_code=code,
        slurm_state=view.state if view else None,
        log_dir=str(logs.log_dir or rec.log_dir),
        nodes_joined=logs.nodes,
        nodes_expected=rec.nodes,
        driver_tail=_driver_tail(logs.log_dir, tail, rec.kind),
        log_dirs=log_dirs,
        cause=str(found) if found else None,
        pools=[dataclasses.asdict(pool) for pool in logs.pools],
        gpu_hours_used=used,
    )


def exit_code_of(found: JobStatus) -> int:
    """The exit code of a command that followed a job to its end (`submit --wait`, `status
    --watch`, `logs -f`): the driver's when it failed, 0 when it completed, 1 when it was
    cancelled, timed out or was forgotten by the scheduler."""
    if found.phase is Phase.COMPLETED:
        return 0
    if found.phase is Phase.FAILED and found.exit_code:
        return found.exit_code
    return 1


T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """The waits between one poll and the next: `first_s`, then each `factor` times the one
    before plus `step_s`, never longer than `most_s`."""

    first_s: float
    most_s: float
    factor: float = 1.0
    step_s: float = 0.0

    def waits(self) -> Iterator[float]:
        wait = self.first_s
        while True:
            yield wait
            wait = min(wait * self.factor + self.step_s, self.most_s)


class Poller(Generic[T]):
    """The one loop that asks a scheduler the same question again and again (`ask`: e.g. a
    backend's `describe` of some jobs). A scheduler that does not answer once (slurmctld
    restarting, an RPC storm) is not the end of asking: a poll that raises SchedulerError gives
    None, until `give_up_after` of them in a row (None: never) raise the last one. The first of
    a row is warned about, unless `quiet`."""

    MAX_FAILURES = 5

    def __init__(
        self,
        ask: Callable[[], T],
        *,
        give_up_after: int | None = MAX_FAILURES,
        quiet: bool = False,
    ) -> None:
        self.ask = ask
        self.give_up_after = give_up_after
        self.quiet = quiet
        self.failures = 0

    def __call__(self) -> T | None:
        """The answer, or None when the scheduler did not answer this time."""
        try:
            found = self.ask()
        except SchedulerError as exc:
            self.failures += 1
            if self.give_up_after is not None and self.failures >= self.give_up_after:
                raise
            if self.failures == 1 and not self.quiet:
                output.warn(f"{exc.message}; trying again")
            return None
        self.failures = 0
        return found

    def wait_until(
        self, done: Callable[[T], bool], timeout_s: float | None, backoff: Backoff
    ) -> T | None:
        """Poll until `done` holds for an answer, waiting longer and longer between polls (gentle
        on slurmctld while a job waits in the queue): that answer, or None once `timeout_s`
        (None: no limit) have passed; the last poll is the first one at or after that."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        waits = backoff.waits()
        while True:
            found = self()
            if found is not None and done(found):
                return found
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(next(waits))


class StatusPoller(Poller[list[JobStatus]]):
    """`statuses` for loops that follow jobs (`--wait`, `--watch`, `logs -f`): a scheduler that
    does not answer once is not the end of following (`Poller`)."""

    def __init__(self, records: Sequence[JobRecord]) -> None:
        super().__init__(lambda: statuses(records, tail=0))
        self.records = records


def require_network(rec: JobRecord, command: str) -> None:
    """One line (exit 2) when `command` needs a shell in the job's own network and this machine
    is not in it (a backend whose log dirs are not shared here: Lepton)."""
    if not backends.get(rec.backend).shares_files:
        raise UsageError(
            f"{command}: job {rec.job_id} runs on {rec.backend}, whose network this machine is "
            "not in: use the scheduler's own console (for Lepton: its web console or `lep job`)"
        )


def current_try(rec: JobRecord) -> JobRecord:
    """The job a command that acts on a running job (attach, logs, stop, dashboard) means: a
    --retries run's current try (one scheduler query); any other job is itself."""
    if not rec.tries:
        return rec
    found = statuses([rec], tail=0, causes=False)[0]
    return retries.expand([rec])[(found.try_index or 1) - 1]


def require_running(rec: JobRecord, action: str) -> JobStatus:
    """The job's status if it has started and not ended; else one line saying why `action`
    cannot be done now (exit 5)."""
    found = statuses([rec], tail=0)[0]
    if found.phase is Phase.PENDING:
        raise JobNotRunningError(
            f"job {rec.job_id} has not started ({found.detail}): nothing to {action} yet"
        )
    if found.over:
        raise JobNotRunningError(
            f"job {rec.job_id} has ended ({found.phase.value}: {found.detail}): nothing to {action}"
        )
    return found


def head_node(rec: JobRecord) -> str:
    """The node the job's Ray head runs on, as its backend knows it."""
    return backends.get(rec.backend).head_node(rec)
