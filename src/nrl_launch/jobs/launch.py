"""Submitting one job: write its script, hand it to its backend, record it.

Every command that queues a job (submit, run, pull) goes through `launch`, so every job gets the
same atomic script, the same record and the same clean-up when the scheduler refuses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from nrl_launch import paths
from nrl_launch.errors import ConfigError, NrlLaunchError, UnconfirmedSubmitError, UsageError
from nrl_launch.jobs import record
from nrl_launch.spec import LaunchSpec

__all__ = ["check_secrets", "launch", "write_script"]


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
    spec: LaunchSpec, kind: record.JobKind = "ray", *, remove_first: str | None = None
) -> record.JobRecord:
    """Queue `spec` on its backend and return its saved record: a Ray job, or with `kind`
    plain one command on every node (`run`, `pull`; `remove_first`: pull --force's file)."""
    from nrl_launch import backends

    backend = backends.get(spec.backend)
    if backend.secrets_from_shell:
        check_secrets(spec, os.environ)
    state = paths.state_dir(os.environ)
    cwd = Path.cwd()
    job_id = backend.new_job_id()  # known ahead only where no scheduler numbers the job
    script = state / "scripts" / f"{job_id or time.time_ns()}-{os.getpid()}.sh"
    if kind == "plain":
        request = backend.plan_plain(spec, str(script), remove_first=remove_first)
    else:
        request = backend.plan(spec, str(script), job_id or "JOBID")
    base = cwd / spec.logs.base_dir
    # Made here where the job's nodes share this machine's file systems (else the job makes it).
    made = _missing(base) if backend.shares_files else []
    try:
        script.parent.mkdir(parents=True, exist_ok=True)
        for directory in reversed(made):  # the job's own output goes next to its log dirs
            directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {exc.filename}: {exc.strerror}") from None
    write_script(script, request.script)
    try:
        submitted = backend.submit(
            request, job_id=job_id, cwd=cwd, output=base / backend.batch_output(job_id)
        )
    except NrlLaunchError as exc:
        script.unlink(missing_ok=True)
        # Nothing was submitted: nothing is left behind, neither the script nor the log dir.
        # A job that may have been queued keeps its output dir (the scheduler has a copy of its
        # script by now).
        if not isinstance(exc, UnconfirmedSubmitError):
            _remove_empty(made)
        raise
    rec = record.JobRecord(
        job_id=submitted.job_id,
        backend=spec.backend,
        job_name=spec.slurm.job_name,
        # A plain job (`run`, `pull`) starts no Ray and so has no dedicated head.
        nodes=spec.allocated_nodes if kind == "ray" else spec.slurm.nodes,
        submitted_at=time.time(),
        submit_dir=str(cwd),
        log_dir=str(base.resolve() / f"{submitted.job_id}-logs"),
        script_path=str(script),
        argv=list(request.argv),
        spec=spec.model_dump(mode="json"),
        pid=submitted.pid,
        kind=kind,
    )
    record.save(rec, state)
    return rec


def write_script(path: Path, text: str) -> None:
    """Write atomically: a reader (or a failed write) never sees half a script."""
    if not path.parent.is_dir():
        raise UsageError(f"{path}: directory {path.parent} does not exist")
    try:
        paths.write_atomically(path, text, mode=0o755)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None


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
