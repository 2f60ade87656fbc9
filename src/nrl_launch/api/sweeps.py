"""A sweep's points, each read with its NeMo RL config and checked before any is queued, and the
order that queues them (`queueing.queue`) as the jobs of one experiment. `submit --sweep`,
`plan --sweep` and `api.submit_sweep` read them here; jobs/sweep.py has the grid, the names
and the lanes of --max-running."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from nrl_launch import backends, output, paths
from nrl_launch.api.queueing import Order, Point, Queued, queue
from nrl_launch.backends import rules
from nrl_launch.errors import ConfigError
from nrl_launch.jobs import record, sweep
from nrl_launch.nemorl.job import Prepared, prepare
from nrl_launch.spec import lint
from nrl_launch.spec.setting import Resolved

__all__ = [
    "CHECKPOINT_DIR",
    "Checked",
    "check_points",
    "experiment_of",
    "order_of",
    "problems",
    "submit",
]

CHECKPOINT_DIR = "checkpointing.checkpoint_dir"


@dataclass(frozen=True)
class Checked:
    """A point read with its config: its spec (None when it could not be read), its problems,
    and the overrides the sweep adds to the point's own (a checkpoint dir of its own)."""

    point: sweep.Point
    prepared: Prepared | None
    problems: tuple[str, ...]
    extra: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"point {self.point.number} ({self.point.label})"


def experiment_of(given: str | None) -> str:
    """The experiment's name: `given` (checked), or one made up that no job here has."""
    state = paths.state_dir(os.environ)
    taken = {r.experiment for r in record.load_all(state)[0] if r.experiment}
    return sweep.experiment_name(given, taken)


def check_points(
    base: Resolved,
    points: list[sweep.Point],
    *,
    check: bool | None,
    experiment: str | None = None,
) -> list[Checked]:
    """Each point of `base` read with its config (sized, its overrides checked), its problems
    kept; what they all say is said once (unless `check` is False: plan says nothing). With
    `experiment` and checkpointing on, each point of several saves to (and resumes from) a
    checkpoint dir of its own, <checkpoint_dir>/<its job name>, unless the sweep sets it."""
    for warning in lint.training_warnings(base):
        output.warn(warning)
    time_limited = backends.time_limited(base.spec.backend)

    def prepared(point: sweep.Point) -> Prepared:
        spec, key = sweep.with_overrides(base.spec, point)
        resolved = Resolved(spec, {**base.sources, key: "--sweep"})
        return prepare(resolved, time_limited=time_limited, backend_rules=rules.check, check=check)

    checked, said = [], set()
    for point in points:
        extra: tuple[str, ...] = ()
        try:
            ready = prepared(point)
            if experiment is not None and len(points) > 1 and _shares_checkpoints(point, ready):
                own = posixpath.join(str(ready.checkpoint_dir), sweep.job_name(experiment, point))
                extra = (f"++{CHECKPOINT_DIR}={own}",)
                ready = prepared(sweep.Point(point.number, (*point.overrides, *extra)))
        except ConfigError as exc:
            checked.append(Checked(point, None, tuple(exc.problems)))
            continue
        checked.append(Checked(point, ready, ready.problems, extra))
        if check is not False:  # as submit says them, once for all points
            for line in (*ready.notes, *ready.warnings):
                if line not in said:
                    said.add(line)
                    (output.note if line in ready.notes else output.warn)(line)
    return checked


def _shares_checkpoints(point: sweep.Point, ready: Prepared) -> bool:
    """Whether the point would save to the checkpoint dir every point saves to (and so resume
    from another point's checkpoints, as NeMo RL resumes from the newest there)."""
    swept = {o.split("=", 1)[0].lstrip("+") for o in point.overrides}
    return bool(ready.checkpointing and ready.checkpoint_dir) and CHECKPOINT_DIR not in swept


def problems(checked: list[Checked]) -> list[str]:
    """Every point's problems, one line each, naming the point."""
    return [f"{c.label}: {p}" for c in checked for p in c.problems]


def order_of(
    checked: list[Checked], experiment: str, *, max_running: int | None, snapshot: bool
) -> Order:
    """The order that queues the points as the jobs of `experiment`; refused (ConfigError,
    nothing queued or written) while any point cannot be read."""
    if any(c.prepared is None for c in checked):
        raise ConfigError(problems(checked))
    return Order(
        tuple(
            Point(c.prepared, c.point.overrides, c.point.number, c.label)
            for c in checked
            if c.prepared is not None
        ),
        snapshot=snapshot,
        experiment=experiment,
        max_running=max_running,
    )


def submit(
    base: Resolved,
    points: list[sweep.Point],
    *,
    experiment: str | None,
    max_running: int | None,
    snapshot: bool,
) -> tuple[str, Queued]:
    """Check every point of `base`, then queue them all as the jobs of `experiment` (a name
    made up when None); the experiment's name and what was queued, whose code line says first
    where each point saves its checkpoints when each has its own."""
    name = experiment_of(experiment)
    checked = check_points(base, points, check=None, experiment=name)
    queued = queue(order_of(checked, name, max_running=max_running, snapshot=snapshot))
    if not checked[0].extra:
        return name, queued
    where = posixpath.dirname(checked[0].extra[0].partition("=")[2])
    line = f"checkpoints: each job its own, {where}/<job name> ({CHECKPOINT_DIR})"
    return name, Queued(queued.records, line + (f"\n  {queued.code}" if queued.code else ""))
