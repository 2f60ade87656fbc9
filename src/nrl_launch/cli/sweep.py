"""`submit --sweep` and `plan --sweep`: every point of the grid prepared and checked before any
is queued, then the points queued as the jobs of one experiment (jobs/sweep.py: the grid, the
names, the lanes of --max-running)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch import output, paths
from nrl_launch.errors import ConfigError, NrlLaunchError, UsageError
from nrl_launch.jobs import sweep

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from nrl_launch.cli.options import JobFlags
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.nemorl.job import Prepared
    from nrl_launch.spec import LaunchSpec

    Freeze = Callable[[LaunchSpec, Sequence[tuple[str, str]]], tuple[LaunchSpec, str]]

__all__ = ["Grid", "plan", "submit"]


@dataclass(frozen=True)
class Grid:
    """What the sweep options said."""

    sweeps: tuple[str, ...] = ()
    sweep_file: Path | None = None
    experiment: str | None = None
    max_running: int | None = None

    @property
    def given(self) -> bool:
        return bool(self.sweeps or self.sweep_file or self.experiment or self.max_running)

    def points(self) -> list[sweep.Point]:
        if self.max_running is not None and self.max_running < 1:
            raise UsageError(f"--max-running {self.max_running}: expected 1 or more")
        axes = [sweep.parse_axis(text) for text in self.sweeps]
        if self.sweep_file is not None:
            axes += sweep.parse_file(self.sweep_file)
        return sweep.grid(axes)


@dataclass(frozen=True)
class _Checked:
    point: sweep.Point
    prepared: Prepared | None
    problems: tuple[str, ...]
    extra: tuple[str, ...] = ()  # overrides the sweep adds to the point's: its own checkpoints


_CHECKPOINT_DIR = "checkpointing.checkpoint_dir"


def _check_points(
    flags: JobFlags,
    points: list[sweep.Point],
    *,
    check: bool | None,
    need_driver: bool,
    experiment: str | None = None,
) -> list[_Checked]:
    """Each point prepared as `JobFlags.prepare` prepares one job (sized, its overrides read
    with the config), its problems kept; what they all say is printed once. With `experiment`
    and checkpointing on, each point of several saves to (and resumes from) a checkpoint dir
    of its own, <checkpoint_dir>/<its job name>, unless the sweep sets the dir itself."""
    from nrl_launch import backends
    from nrl_launch.backends import rules
    from nrl_launch.nemorl.job import prepare
    from nrl_launch.spec import lint
    from nrl_launch.spec.setting import Resolved

    base = flags.resolve(need_driver=need_driver)
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
                extra = (f"++{_CHECKPOINT_DIR}={own}",)
                ready = prepared(sweep.Point(point.number, (*point.overrides, *extra)))
        except ConfigError as exc:
            checked.append(_Checked(point, None, tuple(exc.problems)))
            continue
        checked.append(_Checked(point, ready, ready.problems, extra))
        if check is not False:  # submit: as flags.prepare says them, once for all points
            for line in (*ready.notes, *ready.warnings):
                if line not in said:
                    said.add(line)
                    (output.note if line in ready.notes else output.warn)(line)
    return checked


def _shares_checkpoints(point: sweep.Point, ready: Prepared) -> bool:
    """Whether the point would save to the checkpoint dir every point saves to (and so resume
    from another point's checkpoints, as NeMo RL resumes from the newest there)."""
    swept = {o.split("=", 1)[0].lstrip("+") for o in point.overrides}
    return bool(ready.checkpointing and ready.checkpoint_dir) and _CHECKPOINT_DIR not in swept


def _lines(checked: list[_Checked]) -> list[str]:
    return [f"point {c.point.number} ({c.point.label}): {p}" for c in checked for p in c.problems]


def plan(flags: JobFlags, grid: Grid) -> None:
    """`plan --sweep`: every point's verdict; exit 2 naming each point that does not fit."""
    checked = _check_points(flags, grid.points(), check=False, need_driver=False)
    if any(c.prepared is not None and c.prepared.layout is None for c in checked):
        raise UsageError(
            "--sweep: plan needs a NeMo RL config to check the points against: give --config "
            "FILE (or a driver command that gives one --config)"
        )
    bad = _lines(checked)
    if flags.json:
        data: dict[str, Any] = {"points": [_point_data(c) for c in checked]}
        if bad:
            data |= {"exit_code": int(ConfigError(bad).exit_code), "errors": bad}
        output.emit_json("plan", data, ok=not bad)
    else:
        text = []
        for c in checked:
            text.append(
                f"Point {c.point.number} ({c.point.label or 'no overrides'}): {_verdict(c)}"
            )
            text += [f"  {problem}" for problem in c.problems]
        fit = sum(not c.problems for c in checked)
        text.append(f"{fit} of {len(checked)} point(s) fit.")
        output.emit_text("\n".join(text))
    if bad:
        raise ConfigError(bad)


def _verdict(c: _Checked) -> str:
    if c.problems:
        return f"{len(c.problems)} problem(s)"
    layout = c.prepared.layout if c.prepared else None
    if layout is None or not layout.cluster_nodes:
        return "fits"
    return f"fits ({layout.nodes} node(s) x {layout.gpus_per_node} GPU(s))"


def _point_data(c: _Checked) -> dict[str, Any]:
    spec = c.prepared.spec if c.prepared else None
    return {
        "point": c.point.number,
        "overrides": list(c.point.overrides),
        "fits": not c.problems,
        "problems": list(c.problems),
        "slurm_nodes": spec.allocated_nodes if spec else None,
        "gpus_per_node": spec.slurm.gpus_per_node if spec else None,
        "driver": list(spec.driver.command or []) if spec else [],
    }


def submit(
    flags: JobFlags, grid: Grid, *, chain: int | None, wait: bool, quiet: bool, freeze: Freeze
) -> int:
    """`submit --sweep`: check every point, then queue them all as one experiment; print the
    experiment's name and its jobs. `freeze`: submit's snapshot of the driver's code (taken
    once, for every point), and the line to print about it."""
    from nrl_launch import backends, container_checks
    from nrl_launch.jobs import record

    if chain is not None:
        raise UsageError(
            "--chain with --sweep: a sweep's points run side by side (--max-running caps how "
            "many); chain one point at a time with submit --chain"
        )
    if wait:
        raise UsageError(
            "--wait with --sweep: follow the sweep with nrl-launch status --experiment NAME --watch"
        )
    points = grid.points()
    state = paths.state_dir(os.environ)
    taken = {r.experiment for r in record.load_all(state)[0] if r.experiment}
    name = sweep.experiment_name(grid.experiment, taken)
    checked = _check_points(flags, points, check=None, need_driver=True, experiment=name)
    bad = _lines(checked)
    if bad:  # nothing is queued or written: the whole sweep is refused
        raise ConfigError(bad)
    first = checked[0].prepared
    assert first is not None
    spec = first.spec
    if spec.interactive:
        raise UsageError("--sweep: an interactive job runs no driver to give the overrides to")
    if spec.slurm.retries:
        raise UsageError(
            "--retries with --sweep: a sweep's points are queued as plain jobs; give --retries "
            "to one job at a time"
        )
    backend = backends.get(spec.backend)
    if grid.max_running is not None and grid.max_running < len(points):
        try:
            backend.check_chain(spec)
        except UsageError as exc:
            raise UsageError(
                "--max-running: " + exc.message.removeprefix("--chain: ") + " (lanes)"
            ) from None
    container_checks.check(spec, backend=backend, on_host=True)
    frozen, code = freeze(spec, first.relative_outputs)
    specs = [_as_point(c, frozen, name) for c in checked]
    records = _queue(specs, [c.point for c in checked], name, grid.max_running, state)
    if checked[0].extra:
        where = posixpath.dirname(checked[0].extra[0].partition("=")[2])
        code = f"checkpoints: each job its own, {where}/<job name> ({_CHECKPOINT_DIR})" + (
            f"\n  {code}" if code else ""
        )
    return _report(records, name, grid, made_up=grid.experiment is None, quiet=quiet,
                   json=flags.json, code=code)  # fmt: skip


def _as_point(c: _Checked, frozen: LaunchSpec, name: str) -> LaunchSpec:
    """The point's spec: its own driver command and job name, and the code frozen once for all
    (the config's relative output dirs given to the frozen driver absolute, as submit does)."""
    from nrl_launch.jobs import snapshot

    assert c.prepared is not None
    spec = c.prepared.spec
    command = spec.driver.command or ()
    if frozen.driver.frozen is not None and command:
        outputs = c.prepared.relative_outputs
        command = (*command, *snapshot.outputs_made_absolute(spec, Path.cwd(), outputs))
    driver = spec.driver.model_copy(
        update={
            "frozen": frozen.driver.frozen,
            "snapshot": frozen.driver.snapshot,
            "command": command,
        }
    )
    slurm = spec.slurm.model_copy(update={"job_name": sweep.job_name(name, c.point)})
    return spec.model_copy(update={"driver": driver, "slurm": slurm})


def _queue(
    specs: list[LaunchSpec],
    points: list[sweep.Point],
    name: str,
    max_running: int | None,
    state: Path,
) -> list[JobRecord]:
    """Queue each point (in lanes of `max_running`); when one cannot be, cancel those queued
    before it and say which: no half sweep is left running."""
    from nrl_launch import backends
    from nrl_launch.jobs import record, snapshot
    from nrl_launch.jobs.launch import launch

    records: list[JobRecord] = []
    try:
        for index, (spec, point) in enumerate(zip(specs, points, strict=True)):
            after = sweep.dependency(index, [r.job_id for r in records], max_running)
            if after is not None:
                old = spec.slurm.dependency
                slurm = spec.slurm.model_copy(
                    update={"dependency": f"{old},{after}" if old else after}
                )
                spec = spec.model_copy(update={"slurm": slurm})
            rec = launch(spec, keep=False, checks=not records).model_copy(
                update={"experiment": name, "overrides": list(point.overrides)}
            )
            record.save(rec, state)
            records.append(rec)
    except BaseException as exc:
        if not records:
            snapshot.discard(specs[0].driver.frozen)
            raise
        ids = " ".join(r.job_id for r in records)
        what = exc.message if isinstance(exc, NrlLaunchError) else type(exc).__name__
        point = points[len(records)]
        try:
            for backend_name, group in record.by_backend(records[::-1]).items():
                backends.get(backend_name).cancel(group)
        except NrlLaunchError as cancel_exc:
            output.error(
                f"point {point.number} ({point.label}) was not queued ({what}); the "
                f"{len(records)} queued before it ({ids}) could not be cancelled "
                f"({cancel_exc.message}): nrl-launch cancel --experiment {name}"
            )
            raise
        output.error(
            f"point {point.number} ({point.label}) was not queued ({what}); cancelled the "
            f"{len(records)} queued before it ({ids}): the sweep is not run by halves"
        )
        raise
    return records


def _report(
    records: list[JobRecord],
    name: str,
    grid: Grid,
    *,
    made_up: bool,
    quiet: bool,
    json: bool,
    code: str,
) -> int:
    jobs = [
        {
            "job_id": r.job_id,
            "job_name": r.job_name,
            "overrides": r.overrides,
            "log_dir": r.log_dir,
        }
        for r in records
    ]
    if json:
        output.emit_json(
            "submit", {"experiment": name, "max_running": grid.max_running, "jobs": jobs}
        )
        return 0
    if quiet:
        output.emit_text("\n".join(r.job_id for r in records))
        return 0
    at_once = (
        f", at most {grid.max_running} running at once"
        if grid.max_running and grid.max_running < len(records)
        else ""
    )
    named = " (a name made up: give your own with --experiment NAME)" if made_up else ""
    lines = [f"Submitted experiment {name}{named}: {len(records)} job(s){at_once}"]
    lines += [f"  {r.job_id}  {r.job_name}  {' '.join(r.overrides)}" for r in records]
    lines.append(f"  logs in {Path(records[0].log_dir).parent}/<JOBID>-logs")
    lines.append(
        f"  nrl-launch status --experiment {name}    nrl-launch list --experiment {name}    "
        f"nrl-launch cancel --experiment {name}"
    )
    if code:
        lines.append(f"  {code}")
    output.emit_text("\n".join(lines))
    return 0
