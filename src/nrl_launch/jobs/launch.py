"""Submitting one job: write its script, hand it to its backend, record it.

Every command that queues a job (submit, run, pull) goes through `launch`, so every job gets the
same atomic script, the same record and the same clean-up when the scheduler refuses it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from nrl_launch import backends, output, paths
from nrl_launch.container_image import Finding
from nrl_launch.errors import ConfigError, NrlLaunchError, UnconfirmedSubmitError, UsageError
from nrl_launch.jobs import cost, record
from nrl_launch.jobs.prequeue import log_base_findings, secret_findings
from nrl_launch.spec import LaunchSpec

__all__ = [
    "launch",
    "log_base_findings",
    "refuse_or_warn",
    "secret_findings",
    "write_secrets",
]


def refuse_or_warn(found: Sequence[Finding]) -> None:
    """Raise ConfigError with the errors among `found`, one line each (nothing else is said);
    else say each warning."""
    errors = [f.message for f in found if f.error]
    if errors:
        raise ConfigError(errors)
    for finding in found:
        output.warn(finding.message)


def launch(
    spec: LaunchSpec,
    kind: record.JobKind = "ray",
    *,
    remove_first: str | None = None,
    environment: Mapping[str, str] | None = None,
    keep: bool = True,
    checks: bool = True,
) -> record.JobRecord:
    """Queue `spec` on its backend and return its record: a Ray job, or with `kind` plain one
    command on every node (`run`, `pull`; `remove_first`: pull --force's file). `environment`:
    variables the job gets beside the request's own; `keep`: save the record (a spare try of
    --retries is kept in its run's record instead); `checks`: check the log dir and secrets
    (a sweep's later points skip it: the first's passed, and they differ only in overrides)."""
    backend = backends.get(spec.backend)
    cwd = Path.cwd()
    if checks:  # the log dir is on the backend's storage where it shares no files with us
        refuse_or_warn(
            (log_base_findings(spec, cwd) if backend.shares_files else [])
            + (secret_findings(spec, os.environ) if backend.secrets_from_shell else [])
        )
    state = paths.state_dir(os.environ)
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
        paths.private_dir(script.parent)
        for directory in reversed(made):  # the job's own output goes next to its log dirs
            directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {exc.filename}: {exc.strerror}") from None
    if environment:
        request = dataclasses.replace(
            request, environment=(*request.environment, *environment.items())
        )
    paths.write_script(script, request.script)
    if request.secrets_file:
        write_secrets(Path(request.secrets_file), request.withheld, os.environ)
    try:
        submitted = backend.submit(
            request, job_id=job_id, cwd=cwd, output=base / backend.batch_output(job_id)
        )
    except NrlLaunchError as exc:
        script.unlink(missing_ok=True)
        if request.secrets_file:
            Path(request.secrets_file).unlink(missing_ok=True)
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
        gpus=cost.gpus_held(spec) if kind == "ray" else spec.slurm.nodes * spec.slurm.gpus_per_node,
    )
    if keep:
        record.save(rec, state)
    return rec


def write_secrets(path: Path, names: Sequence[str], environ: Mapping[str, str]) -> None:
    """slurm.secrets_via file: the values of the secrets `names` set in `environ`, as NAME=VALUE
    each ended by a NUL, in a new file only the user can read (the job reads it). Never one that
    exists: another process's file is not written through."""
    text = "".join(f"{name}={environ[name]}\0" for name in names if environ.get(name))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the job's secrets ({exc.strerror})") from None


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
