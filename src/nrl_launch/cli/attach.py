"""`nrl-launch attach`: a shell, or one command, on a node of a running job (interactive or
batch), through the job's own <JOBID>-attach.sh."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from nrl_launch import paths, runner
from nrl_launch.cli.status import job_argument
from nrl_launch.errors import JobNotRunningError, UsageError
from nrl_launch.jobs import query, record
from nrl_launch.jobs.status import find_log_dir

EXAMPLES = """\
Examples:
  nrl-launch attach JOBID                      # a shell on the head node, in the job's container
  nrl-launch attach JOBID --node 1 -- ray status
"""


def attach(
    job_id: Annotated[str, job_argument("The job id or name.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="The command to run, after --; none: an interactive shell.", metavar="CMD"
        ),
    ] = None,
    node: Annotated[
        str,
        typer.Option(
            "--node",
            metavar="NODE",
            help="head (default), or a node index K (0 is the head); a pool's NAME.K: the "
            "first node of its replica K.",
        ),
    ] = "head",
    json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Errors as a versioned JSON object on stdout (CMD's own output is unchanged).",
        ),
    ] = False,
) -> int:
    """Open a shell (or run CMD) on a node of a running job, in the job's container and
    environment, with RAY_ADDRESS set to its Ray cluster; exits with CMD's exit code."""
    del json  # main() prints an error as JSON; CMD's own output is CMD's

    rec = query.current_try(record.load(job_id, paths.state_dir(os.environ)))
    query.require_network(rec, "attach")
    record.require_ray(rec, "attach")
    pool = record.pool_of(rec, node)
    if pool is None:
        where = str(rec.node_index(node, also=record.pools_named(rec, "a pool's replica")))
    elif rec.backend != "slurm":
        raise UsageError(
            f"--node {node!r}: on backend {rec.backend} the pool's replicas are processes on "
            "the head's machine: attach --node head reaches them"
        )
    else:
        where = f"{pool[0]}.{pool[1] or 0}"  # a pool alone: its replica 0
    query.require_running(rec, "attach to")
    # Written by the job when it starts, with its nodes: the same script users run by hand. It
    # runs here, as you, and runs the log dir's job.sbatch: only if no one else could write them.
    name = f"{rec.job_id}-attach.sh"
    script = find_log_dir(Path(rec.log_dir), name, "job.sbatch", "job.sh") / name
    if not script.is_file():
        raise JobNotRunningError(
            f"job {rec.job_id} has not written {script.name} yet (it is starting): try again"
        )
    # The attach script also reads ray.sub's COMMAND; a user's exported COMMAND (their
    # training command, say) must not replace the shell they asked for.
    env = {name: value for name, value in os.environ.items() if name != "COMMAND"}
    runner.become(["bash", str(script), where, "--", *(command or [])], env)
