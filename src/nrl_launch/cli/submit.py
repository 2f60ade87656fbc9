"""`nrl-launch submit`: render, sbatch --parsable, record the job, print its id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch.cli.options import (
    Account,
    BackendName,
    Constraint,
    Container,
    ContainerRuntime,
    DedicatedHead,
    DriverCommand,
    Envs,
    Exclude,
    Exclusive,
    GpusPerNode,
    Interactive,
    JobFile,
    JobName,
    Json,
    LogDir,
    Mounts,
    NemoConfig,
    NoCheck,
    Nodes,
    Partition,
    Profile,
    Qos,
    Quiet,
    Reservation,
    Retries,
    Secrets,
    Sets,
    Time,
    job_flags_of,
)
from nrl_launch.cli.sweep_options import ExperimentName, MaxRunning, Sweep, SweepFile
from nrl_launch.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.spec import LaunchSpec


EXAMPLES = """\
Examples:
  nrl-launch submit -f examples/grpo-2node.yaml        # prints the job id
  nrl-launch submit --backend local --wait --gpus-per-node 2 \\
      -- python examples/cluster_check.py --nodes 1 --gpus-per-node 2
"""


def submit(
    quiet: Quiet = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit with the driver's exit code."),
    ] = False,
    chain: Annotated[
        int | None,
        typer.Option(
            "--chain",
            help="Submit N jobs that run one after another (Slurm's singleton dependency); "
            "each resumes from the newest checkpoint. --wait follows the last.",
            metavar="N",
        ),
    ] = None,
    profile: Profile = None,
    job: JobFile = None,
    set_: Sets = None,
    backend: BackendName = None,
    nodes: Nodes = None,
    dedicated_head: DedicatedHead = False,
    gpus_per_node: GpusPerNode = None,
    exclusive: Exclusive = None,
    time: Time = None,
    account: Account = None,
    partition: Partition = None,
    job_name: JobName = None,
    qos: Qos = None,
    constraint: Constraint = None,
    reservation: Reservation = None,
    exclude: Exclude = None,
    retries: Retries = None,
    container: Container = None,
    container_runtime: ContainerRuntime = None,
    mount: Mounts = None,
    env: Envs = None,
    secret: Secrets = None,
    log_dir: LogDir = None,
    interactive: Interactive = False,
    config: NemoConfig = None,
    no_check: NoCheck = False,
    no_snapshot: Annotated[
        bool,
        typer.Option(
            "--no-snapshot",
            help="Run the driver's checkout as it is when each job starts, instead of a copy "
            "of it frozen now (driver.snapshot=false).",
        ),
    ] = False,
    sweep: Sweep = None,
    sweep_file: SweepFile = None,
    experiment: ExperimentName = None,
    max_running: MaxRunning = None,
    json: Json = False,
    command: DriverCommand = None,
) -> int:
    """Submit the job to Slurm and record it; prints the job id."""
    flags = job_flags_of(locals())
    from nrl_launch.cli import sweep as sweeps

    grid = sweeps.Grid(tuple(sweep or ()), sweep_file, experiment, max_running)
    if grid.given:  # one job per point of the grid, as one experiment
        from functools import partial

        freeze = partial(_frozen, no_snapshot=no_snapshot)
        return sweeps.submit(flags, grid, chain=chain, wait=wait, quiet=quiet, freeze=freeze)
    from nrl_launch import backends, container_checks
    from nrl_launch.cli import queued
    from nrl_launch.jobs import snapshot
    from nrl_launch.jobs.launch import launch

    if chain is not None and chain < 1:
        raise UsageError(f"--chain {chain}: expected a number of jobs, 1 or more")
    prepared = flags.prepare()
    spec = prepared.spec
    from nrl_launch.jobs import retries as tries

    tries.check(spec, chain)
    if chain is not None:  # the command's own mistakes first, then the machine's
        spec = _chained(spec, prepared.checkpointing)
    # Before anything is written: pyxis would fail these on every node, after the queue.
    container_checks.check(spec, backend=backends.get(spec.backend), on_host=True)
    spec, code = _frozen(spec, prepared.relative_outputs, no_snapshot=no_snapshot)
    records: list[JobRecord] = []
    try:
        if spec.slurm.retries:
            records.append(tries.launch_run(spec))
        else:
            records.extend(launch(spec) for _ in range(chain or 1))
    except BaseException:
        if not records:  # no job was queued with the snapshot: it goes
            snapshot.discard(spec.driver.frozen)
        raise
    rec = records[-1]
    ids = " ".join(r.job_id for r in records)
    if chain is not None:
        text = (
            f"Submitted a chain of {chain} jobs, each starting when the one before ends: {ids}\n"
            f"  nrl-launch list    nrl-launch status {ids}    nrl-launch cancel {ids}"
        )
    else:
        job_id = rec.job_id
        text = (
            f"Submitted job {job_id} ({spec.slurm.nodes} node(s)); logs in {rec.log_dir}\n"
            + queued.next_steps(job_id)
        )
        if rec.tries:
            spares = " ".join(t.job_id for t in rec.tries[1:])
            text = (
                f"Submitted job {job_id} ({spec.slurm.nodes} node(s)), try 1 of "
                f"{len(rec.tries)}; the spare tries {spares} start only if the try before "
                f"fails for a cause another try can fix; logs in {rec.log_dir}\n"
                + queued.next_steps(job_id)
            )
        if spec.interactive:
            attach_script = f"{rec.log_dir}/{job_id}-attach.sh"
            text += (
                f"\n  Once it runs: nrl-launch attach {job_id} [--node K] [-- CMD], or ray.sub's\n"
                f"    bash {attach_script} [K]    COMMAND='ray status' bash {attach_script} [K]\n"
                f"  Stop it with nrl-launch stop {job_id}"
            )
    if code:
        text += f"\n  {code}"
    extra = {"chain": [r.job_id for r in records]} if chain is not None else None
    if rec.tries:
        extra = {"tries": [t.job_id for t in rec.tries]}
    return queued.report(
        "submit", records, text, quiet=quiet, json=flags.json, wait=wait, extra=extra
    )


def _frozen(
    spec: LaunchSpec, outputs: Sequence[tuple[str, str]], *, no_snapshot: bool
) -> tuple[LaunchSpec, str]:
    """`spec` with its driver's code frozen (a copy every link, retry and requeue runs), where
    the job's nodes share this machine's files, and the line submit prints about it."""
    from pathlib import Path

    from nrl_launch import backends, trust
    from nrl_launch.errors import ConfigError
    from nrl_launch.jobs import snapshot

    if no_snapshot or not spec.driver.snapshot:
        driver = spec.driver.model_copy(update={"snapshot": False})
        return spec.model_copy(update={"driver": driver}), ""
    if not backends.get(spec.backend).shares_files:
        return spec, ""  # its nodes see none of this machine's files
    cwd = Path.cwd()
    problem = trust.log_base_problem(spec.logs.base_dir, cwd)
    if problem:  # the snapshot goes where the logs go: refused the same
        raise ConfigError([problem])
    spec, copied, note = snapshot.freeze(spec, cwd, cwd / spec.logs.base_dir, outputs)
    return spec, snapshot.code_line(copied.frozen) if copied else note


def _chained(spec: LaunchSpec, checkpointing: bool | None) -> LaunchSpec:
    """The spec with Slurm's singleton dependency: one job of this name and user at a time."""
    from nrl_launch import backends

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
