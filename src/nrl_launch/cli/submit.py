"""`nrl-launch submit`: render, sbatch --parsable, record the job, print its id."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.cli.options import JobFlags, job_options
from nrl_launch.errors import SchedulerError, UsageError


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
    from nrl_launch import backends, runner
    from nrl_launch.cli.render import write_script
    from nrl_launch.jobs import record

    spec = flags.resolve().spec
    state = paths.state_dir(os.environ)
    cwd = Path.cwd()
    # A local job has no scheduler to number it: its id is its start time (ms).
    job_id = f"local-{time.time_ns() // 1_000_000}" if spec.backend == "local" else ""
    script = state / "scripts" / f"{job_id or time.time_ns()}-{os.getpid()}.sh"
    request = backends.plan(spec, str(script), job_id)
    base = cwd / spec.logs.base_dir
    try:
        script.parent.mkdir(parents=True, exist_ok=True)
        # The job's own output goes next to its log dirs: that directory must exist.
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {exc.filename}: {exc.strerror}") from None
    write_script(script, request.script)
    pid = None
    try:
        if spec.backend == "local":
            pid = runner.spawn(list(request.argv), cwd=cwd, output=base / f"{job_id}.out")
        else:
            done = runner.run(list(request.argv))
            job_id = done.stdout.strip().split(";")[0]
            if not job_id.isdigit():
                raise SchedulerError(f"sbatch printed no job id (stdout: {done.stdout.strip()!r})")
    except SchedulerError:
        script.unlink(missing_ok=True)  # nothing was submitted: nothing is left behind
        raise
    rec = record.JobRecord(
        job_id=job_id,
        backend=spec.backend,
        job_name=spec.slurm.job_name,
        nodes=spec.slurm.nodes,
        submitted_at=time.time(),
        submit_dir=str(cwd),
        log_dir=str(base.resolve() / f"{job_id}-logs"),
        script_path=str(script),
        argv=list(request.argv),
        spec=spec.model_dump(mode="json"),
        pid=pid,
    )
    record.save(rec, state)
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
