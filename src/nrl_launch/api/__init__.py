"""The Python API: what the CLI does, as functions a script can call.

    from nrl_launch import api

    spec = api.load_spec("job.yaml", settings={"slurm.nodes": 2})
    print(api.plan(spec).fits, api.render(spec))
    job = api.submit(spec)
    print(api.wait(job).phase, api.logs(job, tail=20))

Every function is the one the CLI's command runs (`load_spec` is the layering of `-f`, the
profile, the environment and `--set`; `submit` is `nrl-launch submit`'s core), so a job queued
here is listed, followed and cancelled by the CLI, and the other way round.

Errors: a problem the user can fix raises an `NrlLaunchError` (the CLI's error tree): its
`message` holds one line per problem, and its `exit_code` is the code the CLI exits with.
Warnings: nothing here prints. What the CLI would warn about is a Python warning of category
`NrlLaunchWarning` (`warnings.catch_warnings`/`filterwarnings` decide what happens to it); what
it would note (a value it derived) is an `NrlLaunchNote`, which Python shows once per place by
default.

Promise: the names in `__all__`, their parameters and the fields of the objects they return
follow semantic versioning (a field may be added in a minor release; none goes or changes
meaning before a major one). `Job` is the job record (`nrl_launch.jobs.record.JobRecord`) and
`Status` the status `nrl-launch status --json` prints (`nrl_launch.jobs.status.JobStatus`).
Importing this module loads neither Ray nor any cloud SDK.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from nrl_launch import output, paths
from nrl_launch.errors import (
    ConfigError,
    ExitCode,
    JobNotFoundError,
    JobNotRunningError,
    NrlLaunchError,
    SchedulerError,
    UsageError,
)

if TYPE_CHECKING:
    from nrl_launch.api.specs import Plan, Spec
    from nrl_launch.backends.base import Phase
    from nrl_launch.jobs.record import JobRecord as Job
    from nrl_launch.jobs.status import JobStatus as Status

__all__ = [
    "ConfigError",
    "ExitCode",
    "Job",
    "JobNotFoundError",
    "JobNotRunningError",
    "NrlLaunchError",
    "NrlLaunchNote",
    "NrlLaunchWarning",
    "Phase",
    "Plan",
    "SchedulerError",
    "Spec",
    "Status",
    "UsageError",
    "cancel",
    "follow",
    "job",
    "jobs",
    "load_spec",
    "logs",
    "plan",
    "render",
    "status",
    "statuses",
    "submit",
    "submit_sweep",
    "wait",
]


class NrlLaunchWarning(UserWarning):
    """What `nrl-launch` would print as `nrl-launch: warning: ...`: one line."""


class NrlLaunchNote(UserWarning):
    """What `nrl-launch` would print as `nrl-launch: note: ...` (a value it derived)."""


_P = ParamSpec("_P")
_T = TypeVar("_T")
# Where nrl_launch's modules are, as their frames name them: a warning is the caller's, outside.
_PACKAGE = str(Path(__file__).parent.parent) + os.sep


def _as_warning(kind: str, message: str) -> None:
    """A warning or note said while an API function runs: a Python warning, attributed to the
    caller's line (the first frame outside nrl_launch)."""
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    category = NrlLaunchNote if kind == "note" else NrlLaunchWarning
    warnings.warn(message, category, stacklevel=level)


def _quiet(function: Callable[_P, _T]) -> Callable[_P, _T]:
    """`function` with nothing printed: warnings and notes reach its caller as Python ones."""

    @functools.wraps(function)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with output.heard_by(_as_warning):
            return function(*args, **kwargs)

    return run


# ---- Specs: load, plan, render (no cluster needed) ----


@_quiet
def load_spec(
    *job_files: str | os.PathLike[str],
    profile: str | os.PathLike[str] | None = None,
    settings: Mapping[str, object] | None = None,
    config: str | None = None,
    recipe: str | None = None,
    overrides: Sequence[str] = (),
    command: Sequence[str] | None = None,
    sets: Sequence[str] = (),
) -> Spec:
    """Read and validate a job spec, layered as the CLI layers it (lowest first): the built-in
    defaults, the profile (None: $NRL_LAUNCH_PROFILE, ./nrl-launch.yaml, then
    ~/.config/nrl-launch/profile.yaml), `job_files` (`-f`; a later one wins), the ray.sub
    variables of the environment, `settings` and `sets` (`--set KEY=VALUE`).

    Args:
        settings: spec keys and values, dotted (`{"slurm.nodes": 2}`) or nested.
        config, recipe, overrides: the NeMo RL config that sizes and checks the job, the recipe
            whose driver runs it (grpo, sft, ...) and Hydra overrides: `--config FILE RECIPE
            OVERRIDES`.
        command: the driver's argv (what follows `--`), e.g. `["uv", "run", "train.py"]`.

    Raises:
        ConfigError, UsageError: one line per problem, naming the key and where it came from.
    """
    from nrl_launch.api import specs
    from nrl_launch.spec.layers import Setting, flatten

    given: list[Setting] = [Setting(k, v, "settings") for k, v in flatten(dict(settings or {}))]
    named = {
        "nemo_rl.config": (config, "config="),
        "nemo_rl.recipe": (recipe, "recipe="),
        "nemo_rl.overrides": (list(overrides) or None, "overrides="),
        "driver.command": (list(command) if command is not None else None, "command="),
    }
    given += [Setting(key, value, label) for key, (value, label) in named.items() if value]
    if recipe or command:
        given.append(Setting("interactive", False, "recipe=" if recipe else "command="))
    inputs = specs.Inputs(
        profile=None if profile is None else Path(profile),
        job_files=tuple(Path(f) for f in job_files),
        settings=tuple(given),
        sets=tuple(sets),
    )
    return specs.load(inputs)


@_quiet
def plan(spec: Spec) -> Plan:
    """The allocation the spec's NeMo RL config needs and where its GPUs go (`nrl-launch
    plan`): `fits`, `problems`, `layout` (None without a config), `roles` per node."""
    from nrl_launch.api import specs

    return specs.plan_of(spec)


@_quiet
def render(spec: Spec) -> str:
    """The job script `submit` would queue (`nrl-launch render`), its header holding the
    sbatch command; on Lepton, the job sent, then the script. Writes nothing.

    Raises:
        ConfigError: the spec names no driver, or its NeMo RL config does not fit.
    """
    from nrl_launch.api import specs

    return specs.shown(specs.request(specs.runnable(spec)))


# ---- Jobs: submit, find, follow, cancel ----


@_quiet
def submit(spec: Spec, *, snapshot: bool = True) -> Job:
    """Queue the job (`nrl-launch submit`) and record it; returns its record. With `snapshot`
    (and driver.snapshot, the default), the driver's git checkout is frozen for the job.

    Raises:
        ConfigError, UsageError: the spec cannot run (nothing is queued).
        SchedulerError: the scheduler refused it.
    """
    from nrl_launch.api import queueing

    return queueing.submit(spec, snapshot=snapshot)


@_quiet
def submit_sweep(
    spec: Spec,
    axes: Mapping[str, Sequence[object]],
    *,
    experiment: str | None = None,
    max_running: int | None = None,
    snapshot: bool = True,
) -> list[Job]:
    """Queue a sweep (`nrl-launch submit --sweep`): one job per point of the grid of `axes`
    (a config key and its values each, the first varying slowest; each point's driver gets
    KEY=VALUE), every point checked before any is queued, as the jobs of `experiment` (a name
    made up when None: each job's `experiment` holds it), `max_running` of them at once.

    Raises:
        ConfigError, UsageError: a point cannot run (each such point named; nothing queued).
        SchedulerError: the scheduler refused a point (those queued before it are cancelled).
    """
    from nrl_launch.api import specs, sweeps
    from nrl_launch.jobs import sweep

    grid = sweep.grid(
        [sweep.axis(k, [str(v) for v in vs], f"axes[{k!r}]") for k, vs in axes.items()]
    )
    _, queued = sweeps.submit(
        specs.base_of(spec),
        grid,
        experiment=experiment,
        max_running=max_running,
        snapshot=snapshot,
    )
    return queued.records


@_quiet
def jobs(*, experiment: str | None = None) -> list[Job]:
    """Every job submitted with nrl-launch by this user here (its state dir), newest first;
    no scheduler is asked. An unreadable record is skipped with a warning. With `experiment`,
    the jobs of that sweep (`submit --sweep --experiment NAME`), in the order they were queued.

    Raises:
        JobNotFoundError: no job of that experiment was submitted here.
    """
    from nrl_launch.api import tracking as found

    if experiment is not None:
        from nrl_launch.jobs import sweep

        return sweep.members(experiment, paths.state_dir(os.environ))
    return found.records()


@_quiet
def job(job_id: str) -> Job:
    """The job with this id (or the one job with this name).

    Raises:
        JobNotFoundError: no job was submitted here by that id or name.
    """
    from nrl_launch.api import tracking as found

    return found.record_of(job_id)


@_quiet
def status(job: Job | str) -> Status:
    """The job's status now (`nrl-launch status JOBID --json`): `phase`, `detail`,
    `exit_code` once it has ended, `slurm_state`, nodes joined, the driver's last lines."""
    from nrl_launch.api import tracking as found

    return found.statuses([found.record_of(job)])[0]


@_quiet
def statuses(jobs: Iterable[Job | str]) -> list[Status]:
    """Each job's status, with one scheduler query for them all (one squeue)."""
    from nrl_launch.api import tracking as found

    return found.statuses([found.record_of(j) for j in jobs])


@_quiet
def wait(job: Job | str, *, timeout: float | None = None, poll: float = 5.0) -> Status:
    """Wait for the job to end (COMPLETED, FAILED, CANCELLED, TIMEOUT, or forgotten by the
    scheduler) and return its status; polls at most `poll` seconds apart.

    Raises:
        TimeoutError: it has not ended after `timeout` seconds (the job keeps running).
    """
    from nrl_launch.api import tracking as found

    return found.wait(found.record_of(job), timeout=timeout, poll=poll)


@_quiet
def logs(job: Job | str, *, node: str | int | None = None, tail: int | None = None) -> str:
    """One of the job's logs as it is now (`nrl-launch logs`): the driver's (`node` None or
    "driver"), the Ray head's ("head" or 0) or worker K's; a plain job has one. `tail`: only
    its last lines.

    Raises:
        JobNotFoundError: the log does not exist yet (the job has not started).
    """
    from nrl_launch.api import tracking as found

    return found.read_log(found.record_of(job), _node(node), tail)[1]


def follow(
    job: Job | str, *, node: str | int | None = None, tail: int | None = None
) -> Iterator[str]:
    """One of the job's logs as it grows (`nrl-launch logs -f`), chunk by chunk, until the job
    has ended and all of the log was read; `tail`: start with its last lines, not its start."""
    from nrl_launch.api import tracking as found

    with output.heard_by(_as_warning):
        rec, path = found.current_log(found.record_of(job), _node(node))
        chunks = found.follow_log(rec, path, tail)
    while True:
        with output.heard_by(_as_warning):  # what each read says, not what the caller does
            chunk = next(chunks, None)
        if chunk is None:
            return
        yield chunk


def _node(node: str | int | None) -> str | None:
    return None if node is None else str(node)


@_quiet
def cancel(job: Job | str) -> None:
    """Cancel the job (scancel; every try of a --retries run). A job that has already ended is
    left be, with a warning saying how it ended."""
    from nrl_launch.api import tracking as found

    found.cancel([found.record_of(job)])


def __getattr__(name: str) -> Any:
    """The classes, loaded when first asked for (pydantic loads with them)."""
    if name in ("Spec", "Plan"):
        from nrl_launch.api import specs

        return getattr(specs, name)
    if name == "Job":
        from nrl_launch.jobs.record import JobRecord

        return JobRecord
    if name == "Status":
        from nrl_launch.jobs.status import JobStatus

        return JobStatus
    if name == "Phase":
        from nrl_launch.backends.base import Phase

        return Phase
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
