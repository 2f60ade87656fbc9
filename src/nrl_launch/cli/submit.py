"""`nrl-launch submit`: render, sbatch --parsable, record the job, print its id."""

from __future__ import annotations

from typing import Annotated

import typer

from nrl_launch.cli import queued
from nrl_launch.cli.options import ALL_OPTIONS, JobFlags, Quiet, job_command
from nrl_launch.cli.sweep_options import ExperimentName, MaxRunning, Sweep, SweepFile

EXAMPLES = """\
Examples:
  nrl-launch submit -f examples/grpo-2node.yaml        # prints the job id
  nrl-launch submit --backend local --wait --gpus-per-node 2 \\
      -- python examples/cluster_check.py --nodes 1 --gpus-per-node 2
"""


@job_command(ALL_OPTIONS)
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
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
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
) -> int:
    """Submit the job to Slurm and record it; prints the job id."""
    # The spec's reader (yaml) loads when the command runs, not for its --help (test_imports.py).
    from nrl_launch.api import queueing
    from nrl_launch.cli import sweep as sweeps
    from nrl_launch.jobs import cost

    grid = sweeps.Grid(tuple(sweep or ()), sweep_file, experiment, max_running)
    if grid.given:  # one job per point of the grid, as one experiment
        return sweeps.submit(
            flags, grid, chain=chain, wait=wait, quiet=quiet, snapshot=not no_snapshot
        )

    prepared = flags.prepare(check=False)  # the core refuses a config that does not fit
    order = queueing.Order((queueing.Point(prepared),), chain=chain, snapshot=not no_snapshot)
    done = queueing.queue(order)
    records, code, spec = done.records, done.code, prepared.spec
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
    if spec.backend == "slurm":  # Lepton's and a local job's time is not Slurm's to count
        tries = len(rec.tries) or 1
        jobs, what = (chain, "jobs") if chain is not None else (tries, "tries")
        text += f"\n  {cost.asked_line(spec, jobs, what).replace('   ', ' ', 1)}"
    if code:
        text += f"\n  {code}"
    extra = {"chain": [r.job_id for r in records]} if chain is not None else None
    if rec.tries:
        extra = {"tries": [t.job_id for t in rec.tries]}
    return queued.report(
        "submit", records, text, quiet=quiet, json=flags.json, wait=wait, extra=extra
    )
