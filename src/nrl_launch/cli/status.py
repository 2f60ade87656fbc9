"""`nrl-launch status`: Slurm's state, the Ray bring-up and the driver, as one phase per job;
with no job id, every recorded job (one batched query), as `squeue --me` lists a user's jobs.

Also the JOBID argument every command takes: a job id or name, completed from the records."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch import output, paths
from nrl_launch.api import tracking
from nrl_launch.api import tracking as found_jobs
from nrl_launch.backends.base import Phase
from nrl_launch.cli import experiment as experiments
from nrl_launch.cli.sweep_options import ExperimentFilter
from nrl_launch.errors import UsageError
from nrl_launch.jobs import cost, query, record, snapshot
from nrl_launch.jobs.status import PoolView
from nrl_launch.jobs.sweep import summary as sweep_summary
from nrl_launch.jobs.training import Training, read_training
from nrl_launch.spec.models import FrozenCode

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.jobs.status import JobStatus

EXAMPLES = """\
Examples:
  nrl-launch status                 # every job submitted from here, with its state
  nrl-launch status JOBID --watch   # follow one job (its id or name) until it ends
"""


def complete_job_ids(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of a JOBID: the recorded ids (and the names only one job has), newest
    first, each with the other as its help. Reads the records only: no scheduler query."""
    records, _ = record.load_all(paths.state_dir(os.environ))
    names = [r.job_name for r in records]
    found = [(r.job_id, r.job_name) for r in records]
    found += [(r.job_name, f"job {r.job_id}") for r in records if names.count(r.job_name) == 1]
    return [(word, about) for word, about in found if word.startswith(incomplete)]


def job_argument(help: str) -> Any:
    """A JOBID argument: a job id or the name of one job, completed from the records."""
    return typer.Argument(help=help, metavar="JOBID", autocompletion=complete_job_ids)


def status(
    job_ids: Annotated[
        list[str] | None,
        job_argument("Job ids or names, as submit printed them; none: every recorded job."),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Redraw a table of the jobs (no JOBID: every one not ended) until all end.",
        ),
    ] = False,
    experiment: ExperimentFilter = None,
) -> int:
    """Show each job's phase: PENDING (why), STARTING, JOINING k/N, RUNNING, or how it ended;
    with no JOBID, every job submitted from here."""
    if watch and json:
        raise UsageError("--watch and --json cannot be combined: --json prints one object once")
    if experiment is not None:
        members = experiments.records(experiment, job_ids, "status")
        if watch:
            return watch_table(members, experiment)
        return experiments.show("status", experiment, json=json)
    if not job_ids:
        records = all_records()
        found = query.overview(records)
        if watch:  # every job that has not ended yet
            live = [r for r, s in zip(records, found, strict=True) if not s.over]
            if not live:
                raise UsageError("--watch: no job submitted from here is queued or running")
            return watch_table(live)
        found_jobs.remember_runs(records, found)
    else:
        records = [found_jobs.record_of(job_id) for job_id in job_ids]
        if watch:
            return watch_table(records)
        found = found_jobs.statuses(records)
    if json:
        jobs = [
            s.as_json() | code_object(r) | {"training": _training_json(r, s) if job_ids else None}
            for r, s in zip(records, found, strict=True)
        ]
        output.emit_json("status", {"jobs": jobs})
    elif not job_ids:
        show_table(records, found)
    else:
        for r, s in zip(records, found, strict=True):
            output.emit_text(_details(r, s))
    return 0


def _details(rec: JobRecord, s: JobStatus) -> str:
    """One job's status line, then its code, its earlier tries and the driver's last lines."""
    code = code_object(rec)["code"]
    lines = [
        _line(s),
        *([f"    {code['line']}"] if code else []),
        *(f"    {line}" for line in s.earlier_tries),
        # Not while it waits in the queue (requeued): that is its last run's.
        *(
            f"    {PoolView(**pool).line(over=s.over)}"
            for pool in s.pools
            if s.phase is not Phase.PENDING
        ),
        *(f"    {line}" for line in _training_lines(rec, s)),
        *([f"    {used}"] if (used := _used_line(rec, s)) else []),
        *(f"    | {line}" for line in s.driver_tail),
    ]
    return "\n".join(lines)


def _used_line(rec: JobRecord, s: JobStatus) -> str:
    used = s.gpu_hours_used
    if not used:
        return ""
    asked = cost.recorded_asked(rec)
    of = f" of the {cost.hours(asked)} its time limit allows" if asked else ""
    return f"GPU-hours: {cost.hours(used)} used{of} ({cost.recorded_gpus(rec)} GPU(s) held)"


def all_records() -> list[JobRecord]:
    """Every readable record, newest first; one warning per unreadable one."""
    return tracking.records()


def show_table(records: Sequence[JobRecord], found: Sequence[JobStatus]) -> None:
    """One row per job, as `status` and `list` with no job id print them; with none, a line
    that says so and how to submit one (on stderr, as the table's rows go to grep and cut)."""
    if not records:
        state = paths.state_dir(os.environ)
        output.note(
            f"no jobs submitted from here (state dir {state}); nrl-launch submit -f JOB.yaml "
            "starts one"
        )
        return
    rows = [
        [
            r.job_id,
            r.job_name,
            str(r.nodes),
            s.phase.value,
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.submitted_at)),
            _hours(s.gpu_hours_used),
            s.detail,
        ]
        for r, s in zip(records, found, strict=True)
    ]
    output.table(["JOBID", "NAME", "NODES", "STATE", "SUBMITTED", "GPU-H", "DETAIL"], rows)
    # A chain's jobs (one name, Slurm's singleton dependency) summed.
    chains: dict[str, list[float]] = {}
    for r, s in zip(records, found, strict=True):
        if (r.spec.get("slurm") or {}).get("dependency") == "singleton":
            chains.setdefault(r.job_name, []).append(s.gpu_hours_used or 0.0)
    for name, used in chains.items():
        if len(used) > 1:
            output.emit_text(
                f"Chain {name}: {len(used)} jobs, {cost.hours(sum(used))} GPU-hours used"
            )


def _hours(value: float | None) -> str:
    return "" if value is None else cost.hours(value)


def code_object(rec: JobRecord) -> dict[str, Any]:
    """The code the job runs (driver.snapshot), from its recorded spec: commit, whether
    uncommitted changes were frozen too, and the snapshot's dir; None where nothing was frozen."""
    frozen = (rec.spec.get("driver") or {}).get("frozen")
    if not frozen:
        return {"code": None}
    code = FrozenCode.model_validate(frozen)
    return {
        "code": {
            "commit": code.commit,
            "dirty": code.dirty,
            "snapshot": code.dir,
            "source": code.source,
            "line": snapshot.code_line(code),
        }
    }


def _line(s: JobStatus) -> str:
    run = f", run {len(s.log_dirs)} after a requeue" if len(s.log_dirs) > 1 else ""
    return f"{s.job_id}  {s.phase.value:<9}  {s.detail}   (logs: {s.log_dir}{run})"


def follow(records: list[JobRecord], *, quiet: bool = False) -> int:
    """Print each job's phase as it changes until all have ended; the exit code is the first
    job's (`query.exit_code_of`)."""
    last: dict[str, tuple[str, str]] = {}

    def print_changes(found: list[JobStatus]) -> bool:
        """Print each job whose phase changed; whether all have ended."""
        for s in found:
            if last.get(s.job_id) != (s.phase.value, s.detail):
                last[s.job_id] = (s.phase.value, s.detail)
                if not quiet:
                    output.emit_text(_line(s))
        return bool(found) and all(s.over for s in found)

    # Gentle on slurmctld: one squeue per poll for all jobs, polls growing to 5 s apart.
    waits = query.Backoff(first_s=1.0, most_s=5.0, step_s=1.0)
    found = query.StatusPoller(records).wait_until(print_changes, None, waits)
    assert found  # with no time limit, it returns once every job has ended
    return query.exit_code_of(found[0])


def training_of(rec: JobRecord, s: JobStatus) -> Training | None:
    """The job's training (step, pace, the verdict against its limit), once its driver runs."""
    if s.log_dir is None or s.phase in (Phase.PENDING, Phase.UNKNOWN):
        return None
    return read_training(rec, Path(s.log_dir))


def _training_lines(rec: JobRecord, s: JobStatus) -> list[str]:
    found = training_of(rec, s)
    return found.lines(over=s.over) if found else []


def _training_json(rec: JobRecord, s: JobStatus) -> dict[str, Any] | None:
    found = training_of(rec, s)
    return found.as_json() if found else None


def progress_bar(step: int | None, total: int | None, width: int = 12) -> str:
    """A text bar of the steps done, 42/100 beside it; empty without a step."""
    if step is None:
        return ""
    if not total:
        return str(step)
    filled = round(width * min(step, total) / total)
    return f"{'█' * filled}{'░' * (width - filled)} {step}/{total}"


def watch_table(records: list[JobRecord], experiment: str | None = None) -> int:
    """`status --watch`: a table of the jobs (an experiment's points side by side: overrides,
    step, the main metric), redrawn when one changes, until all have ended; the exit code is
    the first job's (`query.exit_code_of`)."""
    last: list[list[str]] = []
    title = f"Experiment {experiment}" if experiment else "Jobs"
    headers = ["JOBID", "OVERRIDES" if experiment else "NAME", "STATE", "STEP", "METRIC"]

    def redraw(found: list[JobStatus]) -> bool:
        rows = []
        for r, s in zip(records, found, strict=True):
            t = training_of(r, s)
            p = t.progress if t else None
            main = p.main[0] if p and p.main else None
            value = p.latest(main) if p and main else None
            rows.append(
                [
                    r.job_id,
                    " ".join(r.overrides) if experiment else r.job_name,
                    s.phase.value,
                    progress_bar(p.step, p.total) if p else "",
                    "" if value is None else f"{main} {value:.4g}",
                    _hours(s.gpu_hours_used),
                    s.detail,
                ]
            )
        if rows != last:
            last[:] = rows
            summary = sweep_summary([s.phase.value for s in found])
            output.redraw(f"{title}: {summary}", [*headers, "GPU-H", "DETAIL"], rows)
        return bool(found) and all(s.over for s in found)

    # Gentle on slurmctld: one squeue per poll for all jobs, polls growing to 5 s apart.
    waits = query.Backoff(first_s=1.0, most_s=5.0, step_s=1.0)
    found = query.StatusPoller(records).wait_until(redraw, None, waits)
    assert found  # with no time limit, it returns once every job has ended
    return query.exit_code_of(found[0])
