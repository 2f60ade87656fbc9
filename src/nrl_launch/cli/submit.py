"""`nrl-launch submit`: render, sbatch --parsable, record the job, print its id."""

from __future__ import annotations

from typing import Annotated

import typer

from nrl_launch import output
from nrl_launch.cli.options import JobFlags, job_options


@job_options
def submit(
    flags: JobFlags,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the job id.")] = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit with the driver's exit code."),
    ] = False,
) -> int:
    """Submit the job to Slurm and record it; prints the job id."""
    from nrl_launch.jobs.launch import launch

    spec = flags.prepare().spec
    rec = launch(spec)
    job_id = rec.job_id
    submitted = {"job_id": job_id, "log_dir": rec.log_dir, "argv": rec.argv}
    if flags.json and not wait:
        output.emit_json("submit", submitted)
    elif flags.json:
        pass  # one object, printed once the job has ended
    elif quiet:
        output.emit_text(job_id)
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
