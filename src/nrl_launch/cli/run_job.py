"""`nrl-launch run`: one command on every node of a Slurm job, without Ray (data preparation, a
check on each node), in the job's container, environment and setup, with the same records,
status, logs and cancel as a Ray job."""

from __future__ import annotations

from typing import Annotated

import typer

from nrl_launch import backends
from nrl_launch.cli import queued
from nrl_launch.cli.options import (
    ALL_OPTIONS,
    RAY_ONLY,
    SUBMIT_ONLY,
    DryRun,
    JobFlags,
    Quiet,
    job_command,
)
from nrl_launch.errors import UsageError
from nrl_launch.jobs.launch import launch
from nrl_launch.shell import join

# The command and --no-check, as they read for run.
Command = Annotated[
    list[str] | None,
    typer.Argument(
        help="The command, after --: -- python prepare_data.py --out /shared/data",
        metavar="CMD",
        show_default=False,
    ),
]
NoContainerCheck = Annotated[
    bool,
    typer.Option(
        "--no-check",
        help="Do not refuse the job when a container check fails (errors become warnings).",
        rich_help_panel="NeMo RL",
        show_default=False,
    ),
]


EXAMPLES = """\
Examples:
  nrl-launch run --nodes 2 --wait -- hostname
  nrl-launch run --nodes 2 --dry-run -- hostname     # the job script; nothing is submitted
"""


# Every job option but those only a Ray job reads (--backend: the job is Slurm's, srun starts
# the command on each node; --interactive: there is no cluster to keep up, which run refuses by
# name) and --retries.
@job_command(ALL_OPTIONS - RAY_ONLY - SUBMIT_ONLY, no_check=NoContainerCheck, command=Command)
def run(
    quiet: Quiet = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit with the command's code."),
    ] = False,
    dry_run: DryRun = False,
    refuse_interactive: Annotated[bool, typer.Option("--interactive", hidden=True)] = False,
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
) -> int:
    """Run a command once on every node (srun, one task per node), without Ray; prints the
    job id. Its output is in job.log: nrl-launch logs JOBID."""
    if refuse_interactive:
        raise UsageError(
            "--interactive: run runs one command and ends, with no Ray cluster to keep up; "
            "use nrl-launch submit --interactive for that"
        )
    if dry_run and wait:
        raise UsageError("--dry-run and --wait cannot be combined: a dry run submits nothing")
    resolved = flags.resolve(need_driver=False, ray=False)
    spec = resolved.spec
    # The command comes after --, or from a job file's driver.command.
    if spec.driver.command is None:
        raise UsageError("no command: give it after --, e.g. nrl-launch run --nodes 2 -- hostname")
    if spec.sandbox is not None:
        raise UsageError(
            f"sandbox (from {resolved.sources.get('sandbox.command')}): run starts no Ray job for "
            "a sandbox to serve; drop it for run (--set sandbox=null), or submit a Ray job"
        )
    backend = backends.get(spec.backend)
    if not backend.slurm_cluster:
        raise UsageError(
            f"backend: run submits to Slurm, not {spec.backend!r} (from "
            f"{resolved.sources.get('backend')}); on this machine, run the command itself"
        )
    # The container checks (yaml) load when run runs, not for its --help (test_run_and_pull.py).
    from nrl_launch import container_checks

    # The dry run prints the script only: this machine's files are looked at when it queues.
    container_checks.check(spec, backend=backends.get(spec.backend), on_host=not dry_run, ray=False)
    if dry_run:
        return queued.dry_run("run", backend.plan_plain(spec), json=flags.json)
    rec = launch(spec, kind="plain")
    text = (
        f"Submitted job {rec.job_id}: {join(spec.driver.command or ())} on {spec.slurm.nodes} "
        f"node(s); logs in {rec.log_dir}\n{queued.next_steps(rec.job_id)}"
    )
    return queued.report("run", [rec], text, quiet=quiet, json=flags.json, wait=wait)
