"""Submitting one job: write its script, hand it to sbatch (or start it here), record it.

Every command that queues a job (submit, run, pull) goes through `launch`, so every job gets the
same atomic script, the same record and the same clean-up when the scheduler refuses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from nrl_launch import paths
from nrl_launch.backends import Request, batch_output
from nrl_launch.errors import ConfigError, SchedulerError, UsageError
from nrl_launch.jobs import record
from nrl_launch.spec import LaunchSpec

__all__ = ["RequestFor", "check_secrets", "launch"]

# (script path, job id) -> the request to run; the job id is only known ahead for local jobs.
RequestFor = Callable[[str, str], Request]


def check_secrets(spec: LaunchSpec, environ: Mapping[str, str]) -> None:
    """Secrets travel by name in the environment sbatch exports: say now, before anything is
    queued, that a required one is missing here, not minutes later on a node."""
    from nrl_launch import output

    missing = [name for name in spec.required_secrets if not environ.get(name)]
    if missing:
        raise ConfigError(
            [
                f"secrets.{name}: {name} is not set in this shell and the job requires it: "
                f"export it first, or mark it optional (--set secrets.{name}=optional)"
                for name in missing
            ]
        )
    absent = [name for name in spec.optional_secrets if not environ.get(name)]
    if absent:
        output.warn(
            f"{', '.join(absent)} (optional in secrets) not set in this shell: the job runs "
            "without them"
        )


def launch(
    spec: LaunchSpec, request_for: RequestFor | None = None, kind: record.JobKind = "ray"
) -> record.JobRecord:
    """Queue `spec` (by default as a Ray job: `backends.plan`) and return its saved record;
    `kind` tells status what the job's script writes (plain: `run` and `pull`, no Ray)."""
    from nrl_launch import backends, runner
    from nrl_launch.cli.render import write_script

    if request_for is None:

        def request_for(script_path: str, job_id: str) -> Request:
            return backends.plan(spec, script_path, job_id)

    check_secrets(spec, os.environ)
    state = paths.state_dir(os.environ)
    cwd = Path.cwd()
    # A local job has no scheduler to number it: its id is its start time (ms).
    job_id = f"local-{time.time_ns() // 1_000_000}" if spec.backend == "local" else ""
    script = state / "scripts" / f"{job_id or time.time_ns()}-{os.getpid()}.sh"
    request = request_for(str(script), job_id)
    base = cwd / spec.logs.base_dir
    made = _missing(base)
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
            pid = runner.spawn(
                list(request.argv), cwd=cwd, output=base / batch_output(spec.backend, job_id)
            )
        else:
            done = runner.run(list(request.argv))
    except SchedulerError:
        # Nothing was submitted: nothing is left behind, neither the script nor the log dir.
        script.unlink(missing_ok=True)
        _remove_empty(made)
        raise
    if spec.backend != "local":
        job_id = done.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            # sbatch succeeded, so a job may be queued: its output dir stays (its script is
            # slurmctld's copy by now).
            script.unlink(missing_ok=True)
            raise SchedulerError(f"sbatch printed no job id (stdout: {done.stdout.strip()!r})")
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
        kind=kind,
    )
    record.save(rec, state)
    return rec


def _missing(path: Path) -> list[Path]:
    """The directories `path.mkdir(parents=True)` would create, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _remove_empty(directories: list[Path]) -> None:
    """Remove `directories` (deepest first) while they are empty: what another process put
    there meanwhile stays, with the directories above it."""
    try:
        for directory in directories:
            directory.rmdir()
    except OSError:
        return
