"""The Python API's functions (`nrl_launch.api` is their face and loads them when first used):
each is what the CLI's command does, with nothing printed (`quiet`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from nrl_launch import output, paths
from nrl_launch.api import queueing, specs, sweeps
from nrl_launch.api import tracking as found
from nrl_launch.api.quiet import as_warning, quiet
from nrl_launch.api.specs import Plan, Spec
from nrl_launch.jobs import sweep
from nrl_launch.jobs.record import JobRecord as Job
from nrl_launch.jobs.status import JobStatus as Status
from nrl_launch.spec.layers import Setting, flatten

# ---- Specs: load, plan, render (no cluster needed) ----


@quiet
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


@quiet
def plan(spec: Spec) -> Plan:
    """The allocation the spec's NeMo RL config needs and where its GPUs go (`nrl-launch
    plan`): `fits`, `problems`, `layout` (None without a config), `roles` per node."""
    return specs.plan_of(spec)


@quiet
def render(spec: Spec) -> str:
    """The job script `submit` would queue (`nrl-launch render`), its header holding the
    sbatch command; on Lepton, the job sent, then the script. Writes nothing.

    Raises:
        ConfigError: the spec names no driver, or its NeMo RL config does not fit.
    """
    return specs.shown(specs.request(specs.runnable(spec)))


# ---- Jobs: submit, find, follow, cancel ----


@quiet
def submit(spec: Spec, *, snapshot: bool = True) -> Job:
    """Queue the job (`nrl-launch submit`) and record it; returns its record. With `snapshot`
    (and driver.snapshot, the default), the driver's git checkout is frozen for the job.

    Raises:
        ConfigError, UsageError: the spec cannot run (nothing is queued).
        SchedulerError: the scheduler refused it.
    """
    return queueing.submit(spec, snapshot=snapshot)


@quiet
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


@quiet
def jobs(*, experiment: str | None = None) -> list[Job]:
    """Every job submitted with nrl-launch by this user here (its state dir), newest first;
    no scheduler is asked. An unreadable record is skipped with a warning. With `experiment`,
    the jobs of that sweep (`submit --sweep --experiment NAME`), in the order they were queued.

    Raises:
        JobNotFoundError: no job of that experiment was submitted here.
    """
    if experiment is not None:
        return sweep.members(experiment, paths.state_dir(os.environ))
    return found.records()


@quiet
def job(job_id: str) -> Job:
    """The job with this id (or the one job with this name).

    Raises:
        JobNotFoundError: no job was submitted here by that id or name.
    """
    return found.record_of(job_id)


@quiet
def status(job: Job | str) -> Status:
    """The job's status now (`nrl-launch status JOBID --json`): `phase`, `detail`,
    `exit_code` once it has ended, `slurm_state`, nodes joined, the driver's last lines."""
    return found.statuses([found.record_of(job)])[0]


@quiet
def statuses(jobs: Iterable[Job | str]) -> list[Status]:
    """Each job's status, with one scheduler query for them all (one squeue)."""
    return found.statuses([found.record_of(j) for j in jobs])


@quiet
def wait(job: Job | str, *, timeout: float | None = None, poll: float = 5.0) -> Status:
    """Wait for the job to end (COMPLETED, FAILED, CANCELLED, TIMEOUT, or forgotten by the
    scheduler) and return its status; polls at most `poll` seconds apart.

    Raises:
        TimeoutError: it has not ended after `timeout` seconds (the job keeps running).
    """
    return found.wait(found.record_of(job), timeout=timeout, poll=poll)


@quiet
def logs(job: Job | str, *, node: str | int | None = None, tail: int | None = None) -> str:
    """One of the job's logs as it is now (`nrl-launch logs`): the driver's (`node` None or
    "driver"), the Ray head's ("head" or 0) or worker K's; a plain job has one. `tail`: only
    its last lines.

    Raises:
        JobNotFoundError: the log does not exist yet (the job has not started).
    """
    return found.read_log(found.record_of(job), _node(node), tail)[1]


def follow(
    job: Job | str, *, node: str | int | None = None, tail: int | None = None
) -> Iterator[str]:
    """One of the job's logs as it grows (`nrl-launch logs -f`), chunk by chunk, until the job
    has ended and all of the log was read; `tail`: start with its last lines, not its start."""
    with output.heard_by(as_warning):
        rec, path = found.current_log(found.record_of(job), _node(node))
        chunks = found.follow_log(rec, path, tail)
    while True:
        with output.heard_by(as_warning):  # what each read says, not what the caller does
            chunk = next(chunks, None)
        if chunk is None:
            return
        yield chunk


def _node(node: str | int | None) -> str | None:
    return None if node is None else str(node)


@quiet
def cancel(job: Job | str) -> None:
    """Cancel the job (scancel; every try of a --retries run). A job that has already ended is
    left be, with a warning saying how it ended."""
    found.cancel([found.record_of(job)])
