"""A run's history for `nrl-launch report`: its metric curves and its timeline, read from the
log dirs of every job it took (a chain's links, a --retries run's tries, a requeue's runs).

The timeline's times are the job scripts' own (each run's `timeline`: submitted, started, the
bring-up phases, the driver, the end). A step's or a save's time is not in the driver's log:
it is placed at the driver's start plus the step times the driver printed before it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from nrl_launch import trust
from nrl_launch.jobs.progress import Progress, read_log_progress
from nrl_launch.jobs.record import JobRecord
from nrl_launch.jobs.report import Curve, Event
from nrl_launch.jobs.status import printable, read_timeline, run_log_dirs

__all__ = ["history"]

# The timeline's phases that report shows, and how it names them.
_BRINGUP = {
    "started": "started",
    "head_up": "Ray head up",
    "all_joined": "all nodes joined",
    "driver_started": "driver started",
}
# How many of a run's steps get a marker: every step of a long run would hide the rest.
_STEP_MARKERS = 10


def _timeline(log_dir: Path) -> dict[str, float]:
    """A run's timeline (name -> epoch seconds; the first of each name)."""
    found: dict[str, float] = {}
    for name, at in read_timeline(log_dir):
        found.setdefault(name, at)
    return found


def _ended(log_dir: Path) -> str:
    try:
        text = (log_dir / "ENDED").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""
    return printable(text.strip().splitlines()[0]) if text.strip() else ""


def _run_dirs(rec: JobRecord) -> list[tuple[str, Path]]:
    """Each run of the job, as (how it was queued, its log dir), first first: its tries (each a
    job of its own) and each one's requeued runs."""
    base = Path(rec.log_dir).parent
    tries = [t.job_id for t in rec.tries] or [rec.job_id]
    found = []
    for k, job_id in enumerate(tries, start=1):
        for n, log_dir in enumerate(run_log_dirs(base / f"{job_id}-logs")):
            if trust.not_mine(log_dir):  # another user's: nothing in it is read
                continue
            how = "queued" if k == 1 and n == 0 else f"try {k}" if n == 0 else "requeued"
            found.append((how, log_dir))
    return found


def _step_events(label: str, progress: Progress, start: float) -> list[Event]:
    """Markers for some steps and every save, at the driver's start plus the step times."""
    steps = sorted({s for series in progress.metrics.values() for s, _ in series})
    if not steps or not progress.step_seconds:
        return []
    times = dict(zip(steps, itertools.accumulate(progress.step_seconds), strict=False))
    every = max(1, len(steps) // _STEP_MARKERS)
    events = [
        Event(label, start + times[s], f"step {s}", "step")
        for i, s in enumerate(steps)
        if s in times and (i % every == 0 or s == steps[-1])
    ]
    events += [
        Event(label, start + times[save.step], f"saved step {save.step}", "save")
        for save in progress.saves
        if save.step in times
    ]
    return events


def history(label: str, records: Sequence[JobRecord]) -> tuple[list[Curve], list[Event]]:
    """The curves of the run `records` made (a chain's links, oldest first: one run) under
    `label`, and its timeline's events."""
    series: dict[str, dict[int, float]] = {}
    main: list[str] = []
    events: list[Event] = []
    for rec in records:
        for how, log_dir in _run_dirs(rec):
            timeline = _timeline(log_dir)
            if "submitted" in timeline:
                kind = {"queued": "queue", "requeued": "requeue"}.get(how, "try")
                events.append(Event(label, timeline["submitted"], f"{rec.job_id} {how}", kind))
            events += [
                Event(label, timeline[name], what, "bringup")
                for name, what in _BRINGUP.items()
                if name in timeline
            ]
            progress = read_log_progress(log_dir / "ray-driver.log")
            if progress is not None:
                main += [name for name in progress.main if name not in main]
                for name, points in progress.metrics.items():
                    series.setdefault(name, {}).update(points)  # a later run's step wins
                if "driver_started" in timeline:
                    events += _step_events(label, progress, timeline["driver_started"])
            if "ended" in timeline:
                cause = _ended(log_dir) or "ended"
                events.append(Event(label, timeline["ended"], f"ended: {cause}", "end"))
    curves = [
        Curve(label, name, tuple(sorted(series[name].items()))) for name in main if series[name]
    ]
    return curves, sorted(events, key=lambda e: e.at)
