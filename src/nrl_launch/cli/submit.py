"""`nrl-launch submit`: render, sbatch --parsable, record the job, print its id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output
from nrl_launch.cli.options import JobFlags, Quiet, job_options
from nrl_launch.errors import UsageError

if TYPE_CHECKING:
    from nrl_launch.spec import LaunchSpec


@job_options
def submit(
    flags: JobFlags,
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
) -> int:
    """Submit the job to Slurm and record it; prints the job id."""
    from nrl_launch import container_checks
    from nrl_launch.jobs.launch import launch

    if chain is not None and chain < 1:
        raise UsageError(f"--chain {chain}: expected a number of jobs, 1 or more")
    prepared = flags.prepare()
    spec = prepared.spec
    # Before anything is written: pyxis would fail these on every node, after the queue.
    container_checks.check(spec, on_host=True)
    if chain is not None:
        spec = _chained(spec, prepared.checkpointing)
    records = [launch(spec) for _ in range(chain or 1)]
    rec = records[-1]
    job_id = rec.job_id
    submitted = {"job_id": job_id, "log_dir": rec.log_dir, "argv": rec.argv}
    if chain is not None:
        submitted["chain"] = [r.job_id for r in records]
    if flags.json and not wait:
        output.emit_json("submit", submitted)
    elif flags.json:
        pass  # one object, printed once the job has ended
    elif quiet:
        output.emit_text("\n".join(r.job_id for r in records))
    elif chain is not None:
        ids = " ".join(r.job_id for r in records)
        output.emit_text(
            f"Submitted a chain of {chain} jobs, each starting when the one before ends: {ids}\n"
            f"  nrl-launch list    nrl-launch status {ids}    nrl-launch cancel {ids}"
        )
    else:
        output.emit_text(
            f"Submitted job {job_id} ({spec.slurm.nodes} node(s)); logs in {rec.log_dir}\n"
            f"  nrl-launch status {job_id}    nrl-launch logs {job_id} -f    "
            f"nrl-launch cancel {job_id}"
        )
        if spec.interactive:
            attach_script = f"{rec.log_dir}/{job_id}-attach.sh"
            output.emit_text(
                f"  Once it runs: nrl-launch attach {job_id} [--node K] [-- CMD], or ray.sub's\n"
                f"    bash {attach_script} [K]    COMMAND='ray status' bash {attach_script} [K]\n"
                f"  Stop it with nrl-launch stop {job_id}"
            )
    if not wait:
        return 0
    from nrl_launch.cli.status import follow, status_object

    code = follow([rec], quiet=quiet or flags.json)
    if flags.json:
        from nrl_launch.jobs import query

        output.emit_json("submit", submitted | {"status": status_object(query.statuses([rec])[0])})
    return code


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
