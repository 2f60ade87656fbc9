"""Job specs for the API and the CLI alike: read the layers (profile, job files, environment,
values, --set), apply the NeMo RL config, plan the allocation, render the job script, and queue
it (the core of `submit`). The CLI's commands call these; `nrl_launch.api` is their face.

What the user should hear about (a warning, a note) is said through `output.warn`/`note`: a
command prints it, the API hands it to its caller as a Python warning (`nrl_launch.api`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch import backends, output, trust
from nrl_launch.api import checks
from nrl_launch.backends import rules
from nrl_launch.errors import ConfigError
from nrl_launch.jobs import snapshot
from nrl_launch.nemorl import job as nemorl_job
from nrl_launch.nemorl.job import Prepared
from nrl_launch.spec import layers, lint, pools
from nrl_launch.spec.setting import Resolved

if TYPE_CHECKING:
    from nrl_launch.backends import Request
    from nrl_launch.nemorl.layout import Layout, NodeRole
    from nrl_launch.spec import LaunchSpec
    from nrl_launch.spec.layers import Setting

__all__ = [
    "Inputs",
    "Plan",
    "Spec",
    "base_of",
    "load",
    "plan_of",
    "prepare",
    "prepared_of",
    "request",
    "resolve",
    "runnable",
    "shown",
    "spec_of",
]

# The first words of the one problem a spec that names no driver has (an interactive job runs
# none): plan and doctor read such a spec as interactive, render and submit refuse it.
_NO_DRIVER = "driver.command is not set"


@dataclass(frozen=True)
class Inputs:
    """Where a spec's values come from, above the built-in defaults: the profile (None: the
    default one, if any), job files (a later one wins), then the environment, `settings` (each
    labelled with where it was given: a flag) and `sets` (KEY=VALUE, last and highest)."""

    profile: Path | None = None
    job_files: tuple[Path, ...] = ()
    settings: tuple[Setting, ...] = ()
    sets: tuple[str, ...] = ()


def resolve(
    inputs: Inputs, base: Sequence[Setting] = (), *, need_driver: bool = True, ray: bool = True
) -> Resolved:
    """The validated spec `inputs` describe, layered over the files and environment (and over
    `base`, a command's own defaults). Without `need_driver`, a spec that names no driver is
    read as an interactive job (doctor and plan run none). Without `ray`, the job starts no Ray
    (run, pull): no warning about what only Ray reads."""

    def load(base: Sequence[Setting]) -> Resolved:
        return layers.load(
            base=base,
            profile=inputs.profile,
            job_files=inputs.job_files,
            environ=os.environ,
            cwd=Path.cwd(),
            flags=inputs.settings,
            sets=inputs.sets,
            backend_rules=rules.check,
        )

    try:
        resolved = load(base)
    except ConfigError as exc:
        if need_driver or not any(p.startswith(_NO_DRIVER) for p in exc.problems):
            raise
        resolved = load([*base, layers.Setting("interactive", True, "no driver needed")])
    shape = [f for _, group in checks.shape_checks(resolved.spec, Path.cwd()) for f in group]
    if shape:  # refused first: nothing is said about a spec that cannot run
        raise ConfigError([f.message for f in shape])
    containers = backends.containers(resolved.spec.backend)
    for warning in lint.warnings(resolved, cwd=Path.cwd(), ray=ray, containers=containers):
        output.warn(warning)
    return resolved


def prepare(
    inputs: Inputs, *, check: bool | None = None, need_driver: bool = True, notes: bool = True
) -> Prepared:
    """The spec with its NeMo RL config applied (sized, checked, driver command built); the
    warnings (and with `notes`, what was derived) are said. `check` None: refuse a config that
    does not fit unless nemo_rl.check is false (--no-check), and then warn about its problems."""
    resolved = resolve(inputs, need_driver=need_driver)
    time_limited = backends.time_limited(resolved.spec.backend)
    prepared = nemorl_job.prepare(
        resolved, time_limited=time_limited, backend_rules=rules.check, check=check
    )
    for warning in lint.training_warnings(resolved):
        output.warn(warning)
    for note in prepared.notes if notes else ():
        output.note(note)
    for warning in prepared.warnings:
        output.warn(warning)
    if check is None:  # problems left here were let through by --no-check: still say them
        for problem in prepared.problems:
            output.warn(problem)
    return prepared


@dataclass(frozen=True)
class Spec:
    """A job spec, validated once: its layers resolved and its NeMo RL config applied.

    Attributes:
        launch: the whole spec (the job file schema, `nrl-launch config show`), sized by the
            NeMo RL config: what `render` renders and `submit` queues.
        problems: where the NeMo RL config does not fit the job, one line each (`plan` shows
            them; `render` and `submit` refuse the spec while there are any, unless
            nemo_rl.check is false).
        notes: what nrl-launch derived for the job (nodes from the config, overrides passed to
            the driver), one line each.
    """

    launch: LaunchSpec
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # What nrl-launch needs beside them: the prepared spec, and why it cannot run (no driver).
    _prepared: Prepared | None = field(default=None, repr=False, compare=False)
    _no_driver: str | None = field(default=None, repr=False, compare=False)
    _inputs: Inputs | None = field(default=None, repr=False, compare=False)


def load(inputs: Inputs) -> Spec:
    """The `Spec` of `inputs`; one that names no driver is kept, for plan, as an interactive
    job that render and submit refuse (with the line a command would have said)."""
    no_driver = None
    try:
        prepared = prepare(inputs, check=False, notes=False)
    except ConfigError as exc:
        no_driver = next((p for p in exc.problems if p.startswith(_NO_DRIVER)), None)
        if no_driver is None:
            raise
        prepared = prepare(inputs, check=False, need_driver=False, notes=False)
    return replace(spec_of(prepared, no_driver), _inputs=inputs)


def base_of(spec: Spec) -> Resolved:
    """`spec` before its NeMo RL config was applied, to read a sweep's points from: read again
    from what `load` read it from, or, for a Spec made by hand, its launch spec as it is."""
    inputs, prepared = spec._inputs, spec._prepared
    if inputs is not None and prepared is not None and prepared.spec == spec.launch:
        return resolve(inputs)  # not changed since it was loaded

    return Resolved(spec.launch, {})


def spec_of(prepared: Prepared, no_driver: str | None = None) -> Spec:
    """The `Spec` of a prepared spec (`prepare`); `no_driver`: why it cannot run."""
    return Spec(prepared.spec, prepared.problems, prepared.notes, prepared, no_driver)


def runnable(spec: Spec) -> LaunchSpec:
    """`spec`'s launch spec, once it may run: it names a driver (or is interactive), and its
    NeMo RL config fits (or nemo_rl.check is false, and its problems are warned about)."""
    if spec._no_driver is not None:
        raise ConfigError([spec._no_driver])
    if spec.problems and spec.launch.nemo_rl.check:
        raise ConfigError(list(spec.problems))
    for problem in spec.problems:
        output.warn(problem)
    return spec.launch


@dataclass(frozen=True)
class Plan:
    """The allocation a spec's NeMo RL config needs, and where its GPUs go (`nrl-launch plan`).

    Attributes:
        spec: the spec planned.
        layout: the config's layout (nodes, GPUs, training and generation); None when there is
            no NeMo RL config to read (`unchecked` may say why).
        problems: where the config does not fit the job, one line each.
        roles: what each Slurm node of the job does, by its index (as `logs --node` names it).
        config, overrides: the config checked, as written, and the overrides it was read with.
        injected: the overrides nrl-launch adds to the driver's command (cluster.num_nodes...).
        unchecked: why the config the driver names was not read, if it was not.
        refused: every other reason submit would refuse the job here, one line each (its
            checks before the queue: driver, sandbox mounts, container, log dir, secrets).
        steps: the config's step count (`grpo.max_num_steps`) as its overrides leave it, and
            its key; None where the config sets none.
    """

    spec: Spec
    layout: Layout | None
    problems: tuple[str, ...]
    roles: tuple[NodeRole, ...]
    config: str | None
    overrides: tuple[str, ...]
    injected: tuple[str, ...]
    unchecked: str | None
    refused: tuple[str, ...] = ()
    steps: tuple[str, int] | None = None

    @property
    def time_limit(self) -> str | None:
        """slurm.time where the backend ends jobs at it; None: none (a local job runs to its
        end; a Slurm job without one gets the partition's default)."""
        spec = self.spec.launch
        return spec.slurm.time if backends.time_limited(spec.backend) else None

    @property
    def fits(self) -> bool:
        """Whether the job can run as specified: no problems."""
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain data: what `nrl-launch plan --json` prints."""
        layout, prepared, spec = self.layout, prepared_of(self.spec), self.spec.launch
        if layout is None:  # no NeMo RL config was read: nothing laid out
            return {"config": None, "layout": None, "problems": list(self.problems)}
        return {
            "config": self.config,
            "overrides": list(self.overrides),
            "injected_overrides": list(self.injected),
            "nodes": layout.nodes,
            "dedicated_head": spec.ray.dedicated_head,
            "slurm_nodes": spec.allocated_nodes,
            "gpus_per_node": layout.gpus_per_node,
            "cluster_nodes": layout.cluster_nodes,
            "extra_nodes": [{"count": n, "why": why} for n, why in layout.extra_nodes],
            "time_limit": self.time_limit,
            "max_num_steps": self.steps[1] if self.steps else None,
            "max_num_steps_key": self.steps[0] if self.steps else None,
            "training_gpus": layout.training_gpus,
            "generation_gpus": layout.generation_gpus,
            "training": asdict(layout.training) if layout.training else None,
            "generation": asdict(layout.generation) if layout.generation else None,
            "teachers": [asdict(teacher) for teacher in layout.teachers],
            "reward_model": asdict(layout.reward_model) if layout.reward_model else None,
            "layout": [asdict(role) for role in self.roles],
            "problems": list(self.problems),
            **({"refused_at_submit": list(self.refused)} if self.refused else {}),
            "notes": list(self.spec.notes),
            "warnings": list(prepared.warnings),
            "driver": list(spec.driver.command or []),
            "sandbox": sandbox.model_dump(mode="json") if (sandbox := spec.sandbox) else None,
            "pool_nodes": spec.pool_nodes,
            "pools": [
                {
                    "name": name,
                    **pool.model_dump(mode="json"),
                    "nodes_per_replica": pool.nodes_per_replica(spec.slurm.gpus_per_node),
                    "slices": [list(s.indices) for s in pools.slices(spec) if s.pool == name],
                    "placeholder": pool.placeholder(name),
                }
                for name, pool in spec.pools.items()
            ],
        }


def plan_of(spec: Spec) -> Plan:
    """The plan of `spec`: its config was read when it was loaded; beside the config's
    problems, every other reason submit would refuse it (`checks.checks`)."""
    prepared = prepared_of(spec)
    layout = prepared.layout
    return Plan(
        spec=spec,
        layout=layout,
        problems=prepared.problems,
        refused=tuple(f.message for f in checks.findings(spec.launch) if f.error),
        roles=tuple(layout.node_roles(spec.launch.ray.dedicated_head)) if layout else (),
        config=prepared.config,
        overrides=prepared.overrides,
        injected=prepared.injected,
        unchecked=prepared.unchecked,
        steps=prepared.steps,
    )


def prepared_of(spec: Spec) -> Prepared:
    """How `spec` was read with its NeMo RL config; for a Spec made by hand, as one without."""
    if spec._prepared is not None:
        return spec._prepared

    return Prepared(spec=spec.launch, problems=spec.problems, notes=spec.notes)


def request(spec: LaunchSpec, script_path: str | None = None) -> Request:
    """What `render` shows for `spec`, a dry run (in CI too: the checks that need the cluster's
    filesystem wait for submit); `script_path`: where the script will be written."""
    backend = backends.get(spec.backend)
    errors = checks.refuse(checks.findings(spec, on_host=False))  # as submit's, bar files
    if errors:
        raise ConfigError(errors)
    if backend.shares_files:
        problem = trust.log_base_problem(spec.logs.base_dir, Path.cwd())
        if problem:
            output.warn(f"{problem} (submit refuses it)")
        if spec.driver.snapshot and spec.driver.command and not spec.interactive:
            # What submit would freeze, read (git), not copied; silent outside a checkout.
            line = snapshot.describe(spec, Path.cwd())
            if line.startswith("submit freezes"):
                output.note(line)
    return backends.plan(spec, script_path)


def shown(request: Request) -> str:
    """The request as `render` shows it: the job script; on a backend with an API (Lepton),
    the job sent first, then its script."""
    return f"{request.job_spec}\n\n{request.script}" if request.job_spec else request.script
