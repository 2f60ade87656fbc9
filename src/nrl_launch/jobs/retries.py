"""submit --retries N: one run of up to N + 1 tries, each a Slurm job of its own.

Submit queues try 1 and N spares; each spare waits on the try before it with
`--dependency=afternotok:<id>`, so Slurm itself starts the next try when one fails (no process
on the login node), and each try knows which it is from NRL_RETRY in its environment. The batch
step of each try classifies why it ended (node/retries.sh, the one place that does) and writes
the verdict to its log dir's RETRY file: the next try is kept off the node that failed, or the
tries after it are cancelled. Here, on the login side, the run has one record (under try 1's
id, listing every try), and its status is its current try's, with each earlier try's cause.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from nrl_launch import paths
from nrl_launch.errors import NrlLaunchError, SchedulerError, UsageError
from nrl_launch.jobs.launch import launch
from nrl_launch.jobs.record import JobRecord, Try, save
from nrl_launch.jobs.status import JobStatus
from nrl_launch.spec import LaunchSpec

__all__ = [
    "RETRY_VAR",
    "Verdict",
    "check",
    "expand",
    "launch_run",
    "merged",
    "read_verdict",
]

RETRY_VAR = "NRL_RETRY"
VERDICT_FILE = "RETRY"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a try's batch step decided as it ended (its log dir's RETRY)."""

    verdict: str  # retry, done or stop
    node: str  # the node the next try is kept off, or ""
    why: str


def check(spec: LaunchSpec, chain: int | None) -> None:
    """One line (exit 2) for what --retries cannot be combined with."""
    if not spec.slurm.retries:
        return
    if chain is not None:
        raise UsageError(
            "--retries with --chain: a chain's jobs already run one after another; give one "
            "of them (--chain N runs N jobs whatever happens, --retries N only after a failure)"
        )
    if spec.interactive:
        raise UsageError("slurm.retries: an interactive job runs no driver to try again")


def launch_run(spec: LaunchSpec) -> tuple[JobRecord, SchedulerError | None]:
    """Queue try 1 and the spare tries of `spec` (slurm.retries of them), each waiting on the
    one before; return the run's record, saved under try 1's id. When a spare cannot be
    queued, the run keeps the tries queued before it (its record is saved with them, and they
    keep the code they run): the error that says so comes back beside it, to be raised."""
    tries = spec.slurm.retries + 1
    min_s = spec.slurm.retry_min_runtime_s
    first = launch(spec, environment={RETRY_VAR: f"1 {tries} - {min_s}"}, keep=False, checks=False)
    queued = [Try(job_id=first.job_id, script_path=first.script_path)]
    failed = None
    for k in range(2, tries + 1):
        prev = queued[-1].job_id
        # afternotok: Slurm starts it only when the try before ends in a failed state
        # (FAILED, NODE_FAIL, TIMEOUT, PREEMPTED, CANCELLED); a success leaves it pending
        # until that try's batch step cancels it.
        slurm = spec.slurm.model_copy(update={"dependency": f"afternotok:{prev}"})
        spare = spec.model_copy(update={"slurm": slurm})
        env = {RETRY_VAR: f"{k} {tries} {prev} {min_s}"}
        try:
            rec = launch(spare, environment=env, keep=False, checks=False)
        except NrlLaunchError as exc:
            ids = " ".join(t.job_id for t in queued)
            failed = SchedulerError(
                f"try {k} of {tries} was not queued ({exc.message}): the run {first.job_id} "
                f"has {len(queued)} of its tries queued ({ids}), recorded, with the code they "
                f"run; nrl-launch status {first.job_id}, or nrl-launch cancel {first.job_id}"
            )
            break
        queued.append(Try(job_id=rec.job_id, script_path=rec.script_path))
    run = first.model_copy(update={"tries": queued})
    save(run, paths.state_dir(os.environ))
    return run, failed


def expand(records: Sequence[JobRecord]) -> list[JobRecord]:
    """Every job of `records`: a run's tries, each as a record of its own (its id, script and
    log dir), in place of the run."""
    found: list[JobRecord] = []
    for rec in records:
        if not rec.tries:
            found.append(rec)
            continue
        base = Path(rec.log_dir).parent
        found += [
            rec.model_copy(
                update={
                    "job_id": t.job_id,
                    "script_path": t.script_path,
                    "log_dir": str(base / f"{t.job_id}-logs"),
                    "runs": [],
                    "tries": [],
                }
            )
            for t in rec.tries
        ]
    return found


def read_verdict(log_dir: str | Path | None) -> Verdict | None:
    """A try's verdict, from its log dir's RETRY; None where it wrote none (it has not ended,
    or its first node died with it)."""
    if log_dir is None:
        return None
    try:
        text = (Path(log_dir) / VERDICT_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parts = text.rstrip("\n").split("|", 2)
    if len(parts) != 3 or parts[0] not in ("retry", "done", "stop"):
        return None
    return Verdict(*parts)


def _about(k: int, s: JobStatus, verdict: Verdict | None) -> str:
    """One line on an earlier try: how it ended and what its batch step decided."""
    line = f"try {k} (job {s.job_id}): {s.phase.value}: {s.detail}"
    if verdict is None:
        return line
    if verdict.verdict == "retry":
        kept_off = f"; the next try runs without {verdict.node}" if verdict.node else ""
        return f"{line}; retried{kept_off}"
    return f"{line}; {verdict.why}"


def merged(rec: JobRecord, each: Mapping[str, JobStatus]) -> JobStatus:
    """The run's status: its current try's (the newest that has started, or that Slurm will
    start: the one after a try that ended retryable or said nothing), with "try k/N" and each
    earlier try's cause. A job that is not a run: its own status."""
    if not rec.tries:
        return each[rec.job_id]
    found = [each[t.job_id] for t in rec.tries]
    verdicts = [read_verdict(s.log_dir) for s in found]
    current = 0
    for k in range(1, len(found)):
        before, this, said = found[k - 1], found[k], verdicts[k - 1]
        if Path(this.log_dir or "").is_dir():
            current = k  # it started
        elif before.over and not this.over and (said is None or said.verdict == "retry"):
            current = k  # Slurm starts it next
    now, verdict = found[current], verdicts[current]
    detail = f"try {current + 1}/{len(found)}: {now.detail}"
    if verdict is not None and verdict.verdict != "done" and now.over:
        detail += f"; {verdict.why}"
    earlier = [_about(k + 1, found[k], verdicts[k]) for k in range(current)]
    return dataclasses.replace(
        now,
        job_id=rec.job_id,
        detail=detail,
        try_index=current + 1,
        try_count=len(found),
        earlier_tries=earlier,
    )
