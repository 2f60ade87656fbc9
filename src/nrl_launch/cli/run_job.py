"""`nrl-launch run`: one command on every node of a Slurm job, without Ray (data preparation, a
check on each node), in the job's container, environment and setup, with the same records,
status, logs and cancel as a Ray job."""

from __future__ import annotations

from typing import Annotated

import typer

from nrl_launch.cli.options import DryRun, JobFlags, Quiet, some_job_options
from nrl_launch.errors import UsageError

# Every job option but --backend (the job is Slurm's: srun starts the command on each node)
# and --interactive (there is no cluster to keep up), which run refuses by name.
_OPTIONS = (
    "profile",
    "job",
    "set_",
    "nodes",
    "gpus_per_node",
    "time",
    "account",
    "partition",
    "job_name",
    "container",
    "container_runtime",
    "mount",
    "env",
    "secret",
    "log_dir",
    "no_check",
    "json",
    "command",
)


@some_job_options(
    *_OPTIONS,
    helps={
        "command": "The command, after --: -- python prepare_data.py --out /shared/data",
        "no_check": "Do not refuse the job when a container check fails (errors become warnings).",
    },
)
def run(
    flags: JobFlags,
    quiet: Quiet = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit with the command's code."),
    ] = False,
    dry_run: DryRun = False,
    interactive: Annotated[bool, typer.Option("--interactive", hidden=True)] = False,
) -> int:
    """Run a command once on every node (srun, one task per node), without Ray; prints the
    job id. Its output is in job.log: nrl-launch logs JOBID."""
    from nrl_launch import backends, container_checks
    from nrl_launch.cli import queued
    from nrl_launch.jobs.launch import launch
    from nrl_launch.shell import join

    if interactive:
        raise UsageError(
            "--interactive: run runs one command and ends, with no Ray cluster to keep up; "
            "use nrl-launch submit --interactive for that"
        )
    if dry_run and wait:
        raise UsageError("--dry-run and --wait cannot be combined: a dry run submits nothing")
    resolved = flags.resolve(need_driver=False)
    spec = resolved.spec
    # The command comes after --, or from a job file's driver.command.
    if spec.driver.command is None:
        raise UsageError("no command: give it after --, e.g. nrl-launch run --nodes 2 -- hostname")
    backend = backends.get(spec.backend)
    if not backend.plain_jobs:
        raise UsageError(
            f"backend: run submits to Slurm, not {spec.backend!r} (from "
            f"{resolved.sources.get('backend')}); on this machine, run the command itself"
        )
    # The dry run prints the script only: this machine's files are looked at when it queues.
    container_checks.check(spec, on_host=not dry_run)
    if dry_run:
        return queued.dry_run("run", backend.plan_plain(spec), json=flags.json)
    rec = launch(spec, kind="plain")
    command = join(spec.driver.command or ())
    what = f"{command} on {spec.slurm.nodes} node(s)"
    return queued.report("run", rec, what, quiet=quiet, json=flags.json, wait=wait)
