"""The one way a Ray job is queued.

Every door that queues one describes what it wants as an `Order` and calls `queue`: `submit`
(one job, `--chain N`, `--retries N`), a sweep's points (`submit --sweep`, `api.submit_sweep`),
the cluster side of a remote submit (it runs `submit` there) and `api.submit`. Every check made
before the queue is in one place, `checks.checks`: `queue` refuses its errors; `plan` and
`doctor` report every one of them. When nothing could be queued, `queue` removes only what it made
itself (the code snapshot), and every job that was queued keeps its record and its snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nrl_launch import backends, output, paths
from nrl_launch.api.checks import findings, refuse, shape_checks
from nrl_launch.api.specs import Spec, prepared_of
from nrl_launch.errors import ConfigError, NrlLaunchError, UsageError
from nrl_launch.jobs import record, retries, sweep
from nrl_launch.jobs import snapshot as snapshots
from nrl_launch.jobs.launch import launch
from nrl_launch.nemorl.job import Prepared
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.models import FrozenCode

__all__ = ["Order", "Point", "Queued", "chained", "order_of", "queue", "submit"]


@dataclass(frozen=True)
class Point:
    """One job of an order: its spec read with its NeMo RL config, and, in a sweep, the
    overrides that make it this point (kept in its record)."""

    prepared: Prepared
    overrides: tuple[str, ...] = ()
    number: int = 1  # its number in the sweep, from 1
    label: str = ""  # how errors name it ("point 2 (lr=1e-5)"); "" for a lone job


@dataclass(frozen=True)
class Order:
    """What to queue: one job (`points` of one), or a sweep's points as the jobs of
    `experiment` (`max_running` of them at once); a job as a `chain` of that many jobs, or as a
    run of tries (its spec's slurm.retries). `snapshot`: freeze the driver's code (and
    driver.snapshot, the default)."""

    points: tuple[Point, ...]
    chain: int | None = None
    snapshot: bool = True
    experiment: str | None = None
    max_running: int | None = None


@dataclass(frozen=True)
class Queued:
    """What was queued: each job's record (a run of tries is one), and the line about the code
    they run (the snapshot's, or why none was frozen; "" for none)."""

    records: list[record.JobRecord]
    code: str


def queue(order: Order) -> Queued:
    """Check every point, then freeze the driver's code once and queue the order's jobs.

    Raises:
        UsageError: the order's options do not go together (nothing is queued or written).
        ConfigError: a point fails a check; every point's errors, one line each.
        SchedulerError and the like: the scheduler refused a job. A job queued before it keeps
            its record (a sweep's are cancelled first: it is not run by halves).
    """
    first = order.points[0].prepared
    spec = _combined(order, first.spec, first.checkpointing)
    errors: list[str] = []
    said: set[str] = set()
    for point in order.points:
        # What the spec itself says wrong first, alone, as loading it says it (specs.resolve).
        shape = [f for _, group in shape_checks(point.prepared.spec, Path.cwd()) for f in group]
        found = shape or findings(point.prepared.spec, point.prepared.problems)
        lines = refuse([f for f in found if f.error], point.label)
        errors += lines
        if not errors:  # warnings once for every point: they differ only in overrides
            fresh = [f for f in found if f.message not in said]
            said.update(f.message for f in fresh)
            refuse(fresh)
    if errors:
        raise ConfigError(errors)
    spec, made, code = _frozen(spec, first.relative_outputs, snapshot=order.snapshot)
    queued: list[record.JobRecord] = []
    try:
        if order.experiment is not None:
            queued = _sweep(order, spec)
        elif spec.slurm.retries:
            run, failed = retries.launch_run(spec)
            queued.append(run)
            if failed is not None:
                raise failed
        else:
            for _ in range(order.chain or 1):
                queued.append(launch(spec, checks=False))
    except BaseException:
        if not queued and made is not None:  # no job runs the copy this call made: it goes
            snapshots.discard(made)
        raise
    return Queued(queued, code)


def _combined(order: Order, spec: LaunchSpec, checkpointing: bool | None) -> LaunchSpec:
    """The first point's spec as the order's options make it (a chain's dependency), once they
    are known to go together: one line (exit 2) for those that do not."""
    if order.experiment is not None:
        _sweep_options(order, spec)
    retries.check(spec, order.chain)
    if order.chain is None:
        return spec
    if order.chain < 1:
        raise UsageError(f"--chain {order.chain}: expected a number of jobs, 1 or more")
    return chained(spec, checkpointing)


def _sweep_options(order: Order, spec: LaunchSpec) -> None:
    if order.chain is not None:
        raise UsageError("--chain with --sweep: a sweep's points run side by side")
    if spec.interactive:
        raise UsageError("--sweep: an interactive job runs no driver to give the overrides to")
    if spec.slurm.retries:
        raise UsageError(
            "--retries with --sweep: a sweep's points are queued as plain jobs; give --retries "
            "to one job at a time"
        )
    if order.max_running is not None and order.max_running < 1:
        raise UsageError(f"--max-running {order.max_running}: expected 1 or more")
    if order.max_running is not None and order.max_running < len(order.points):
        try:
            backends.get(spec.backend).check_chain(spec)
        except UsageError as exc:
            raise UsageError(
                "--max-running: " + exc.message.removeprefix("--chain: ") + " (lanes)"
            ) from None


def chained(spec: LaunchSpec, checkpointing: bool | None) -> LaunchSpec:
    """The spec with Slurm's singleton dependency: one job of this name and user at a time."""
    backends.get(spec.backend).check_chain(spec)
    if checkpointing is False:
        raise UsageError(
            "--chain: checkpointing.enabled is false in the config, so every job of the chain "
            "would start over; pass checkpointing.enabled=true"
        )
    if spec.interactive:
        raise UsageError("--chain: an interactive job runs no driver to continue")
    dependency = spec.slurm.dependency
    if dependency is None or "singleton" not in dependency.split(","):
        dependency = f"{dependency},singleton" if dependency else "singleton"
    return spec.model_copy(
        update={"slurm": spec.slurm.model_copy(update={"dependency": dependency})}
    )


def _frozen(
    spec: LaunchSpec, outputs: Sequence[tuple[str, str]], *, snapshot: bool
) -> tuple[LaunchSpec, FrozenCode | None, str]:
    """`spec` with its driver's code frozen (a copy every link, retry and requeue runs), where
    the job's nodes share this machine's files; the copy this call made (None: none); and the
    line submit prints about it."""
    if not snapshot or not spec.driver.snapshot:
        driver = spec.driver.model_copy(update={"snapshot": False})
        return spec.model_copy(update={"driver": driver}), None, ""
    if not backends.get(spec.backend).shares_files:
        return spec, None, ""  # its nodes see none of this machine's files
    cwd = Path.cwd()
    spec, copied, note = snapshots.freeze(spec, cwd, cwd / spec.logs.base_dir, outputs)
    if copied is None:
        return spec, None, note
    return spec, copied.frozen, snapshots.code_line(copied.frozen)


def _sweep(order: Order, frozen: LaunchSpec) -> list[record.JobRecord]:
    """Queue each point as a job of the experiment, in lanes of max_running; when one cannot
    be, cancel those queued before it and say which: no half sweep is left running."""
    name = order.experiment
    assert name is not None
    state = paths.state_dir(os.environ)
    records: list[record.JobRecord] = []
    try:
        for index, point in enumerate(order.points):
            spec = _as_point(point, frozen, name)
            after = sweep.dependency(index, [r.job_id for r in records], order.max_running)
            if after is not None:
                old = spec.slurm.dependency
                slurm = spec.slurm.model_copy(
                    update={"dependency": f"{old},{after}" if old else after}
                )
                spec = spec.model_copy(update={"slurm": slurm})
            rec = launch(spec, keep=False, checks=False).model_copy(
                update={"experiment": name, "overrides": list(point.overrides)}
            )
            record.save(rec, state)
            records.append(rec)
    except BaseException as exc:
        if records:
            _cancel_half(records, order.points[len(records)], name, exc)
        raise
    return records


def _as_point(point: Point, frozen: LaunchSpec, name: str) -> LaunchSpec:
    """The point's spec: its own driver command and job name, and the code frozen once for all
    (the config's relative output dirs given to the frozen driver absolute, as submit does)."""
    spec = point.prepared.spec
    command = spec.driver.command or ()
    if frozen.driver.frozen is not None and command:
        outputs = point.prepared.relative_outputs
        command = (*command, *snapshots.outputs_made_absolute(spec, Path.cwd(), outputs))
    driver = spec.driver.model_copy(
        update={
            "frozen": frozen.driver.frozen,
            "snapshot": frozen.driver.snapshot,
            "command": command,
        }
    )
    job_name = sweep.job_name(name, sweep.Point(point.number, point.overrides))
    slurm = spec.slurm.model_copy(update={"job_name": job_name})
    return spec.model_copy(update={"driver": driver, "slurm": slurm})


def _cancel_half(
    records: list[record.JobRecord], point: Point, name: str, exc: BaseException
) -> None:
    """Cancel the points queued before `point`, which could not be, and say so."""
    ids = " ".join(r.job_id for r in records)
    what = exc.message if isinstance(exc, NrlLaunchError) else type(exc).__name__
    try:
        for backend_name, group in record.by_backend(records[::-1]).items():
            backends.get(backend_name).cancel(group)
    except NrlLaunchError as cancel_exc:
        output.error(
            f"{point.label} was not queued ({what}); the {len(records)} queued before it "
            f"({ids}) could not be cancelled ({cancel_exc.message}): nrl-launch cancel "
            f"--experiment {name}"
        )
        return
    output.error(
        f"{point.label} was not queued ({what}); cancelled the {len(records)} queued before "
        f"it ({ids}): the sweep is not run by halves"
    )


def order_of(spec: Spec, *, snapshot: bool = True) -> Order:
    """The order that queues `spec` once it names a driver (or is interactive): one job, or a
    --retries run. Its config's problems, like every other check, are `queue`'s."""
    if spec._no_driver is not None:
        raise ConfigError([spec._no_driver])
    prepared = replace(prepared_of(spec), spec=spec.launch, problems=spec.problems)
    return Order((Point(prepared),), snapshot=snapshot)


def submit(spec: Spec, *, snapshot: bool = True) -> record.JobRecord:
    """Queue `spec` (the one queueing core, `queue`): one job, or a --retries run;
    its record."""
    return queue(order_of(spec, snapshot=snapshot)).records[-1]
