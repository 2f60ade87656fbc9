"""`nrl-launch report`: one self-contained HTML page of a run, or of an experiment's points side
by side: the metric curves and the timeline (queued, bring-up, steps, saves, tries, requeues,
the end and its cause). plotly draws it (the report extra); nothing else pays for it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.cli import experiment as experiments
from nrl_launch.cli.status import job_argument
from nrl_launch.cli.sweep_options import ExperimentFilter
from nrl_launch.errors import UsageError
from nrl_launch.jobs import cost, history, record
from nrl_launch.jobs.report import page

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord

EXAMPLES = """\
Examples:
  nrl-launch report JOBID                 # writes report-JOBID.html here
  nrl-launch report --experiment NAME -o sweep.html
"""


def report(
    job_ids: Annotated[
        list[str] | None,
        job_argument("Jobs of one run: a job id, or a chain's name (all its jobs)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="The page to write; default report-<JOBID>.html."),
    ] = None,
    experiment: ExperimentFilter = None,
) -> int:
    """Write one HTML page of a run's metric curves and its timeline (plotly: pip install
    'nrl-launch[report]')."""
    if experiment is not None:
        members = experiments.records(experiment, job_ids, "report")
        runs = [(" ".join(r.overrides) or r.job_id, [r]) for r in members]
        title, name = f"Experiment {experiment}", experiment
    elif job_ids:
        links = [r for job in job_ids for r in _run_of(job)]
        runs = [(job_ids[0] if len(job_ids) == 1 else links[0].job_name, links)]
        title, name = f"{links[0].job_name} ({' '.join(r.job_id for r in links)})", job_ids[0]
    else:
        raise UsageError("report: name a JOBID (or a chain's name), or --experiment NAME")
    curves, events = [], []
    for label, recs in runs:
        found = history.history(label, recs)
        curves += found[0]
        events += found[1]
    jobs = [r for _, recs in runs for r in recs]
    used = sum(cost.recorded_used(r, [], over=True) for r in jobs if r.backend == "slurm")
    summary = [
        ("jobs", " ".join(r.job_id for r in jobs)),
        ("written", time.strftime("%Y-%m-%d %H:%M %Z")),
        ("GPU-hours used", cost.hours(used)),
    ]
    target = out or Path(f"report-{name}.html")
    try:
        paths.write_atomically(target, page(title, curves, events, summary=summary))
    except OSError as exc:
        raise UsageError(f"--output {target}: cannot write it ({exc.strerror})") from None
    metrics = sorted({c.metric for c in curves})
    output.emit_text(
        f"Wrote {target}: {len(curves)} curve(s) of {', '.join(metrics) or 'no metric yet'}, "
        f"{len(events)} event(s) on the timeline"
    )
    return 0


def _run_of(job: str) -> list[JobRecord]:
    """The jobs `job` names: a job id, or a name every link of a chain shares (oldest first)."""
    state = paths.state_dir(os.environ)
    named = [r for r in record.load_all(state)[0] if r.job_name == job]
    if len(named) > 1:
        return sorted(named, key=lambda r: r.submitted_at)
    return [record.load(job, state)]
