"""The laptop's records of the jobs it submitted to remote clusters: one small JSON per job,
<state>/remote/<cluster>/<jobid>.json, so that a command naming a job id needs no --remote.
The job's full record is the cluster's own (written there by its nrl-launch)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from nrl_launch import paths
from nrl_launch.errors import RemoteError, StateError, UsageError
from nrl_launch.remote.profiles import Remote

__all__ = ["RemoteJob", "checked_id", "clusters", "find", "jobs_of", "local_job", "save"]

SCHEMA_VERSION = 1
# A job id as a cluster's nrl-launch gives it out: Slurm's (1234; an array task's 1234_5, a
# heterogeneous job's 1234+1), the local backend's local-<ms>, Lepton's (a-z, 0-9, '-'). It
# names a file here, so nothing else: no '/', no '..'.
JOB_ID = re.compile(r"[0-9]+(?:[_+][0-9]+)?|local-[0-9]+|[a-z][a-z0-9-]{0,63}")
_ACCEPTED = (
    "a Slurm job id (digits; 12_3 or 12+1), local-<digits> or a Lepton job id (a-z, 0-9, '-')"
)


def checked_id(remote: Remote, value: object) -> str:
    """`value`, a job id the remote's nrl-launch gave, when it is one (it is about to name a
    file here); else one line."""
    if isinstance(value, str) and JOB_ID.fullmatch(value):
        return value
    raise RemoteError(
        f"remote {remote.name}: its nrl-launch gave the job id {value!r}, expected {_ACCEPTED}: "
        f"nothing was recorded here (`nrl-launch --remote {remote.name} list` shows its jobs)"
    )


def _job_id(value: str) -> str:
    if not JOB_ID.fullmatch(value):
        raise ValueError(f"expected {_ACCEPTED}")
    return value


class RemoteJob(BaseModel):
    """A job submitted from here to a remote cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    remote: Remote  # the cluster as it was reached (its profile may change or go later)
    job_id: Annotated[str, AfterValidator(_job_id)]  # names its record's file
    log_dir: str = ""  # on the cluster
    code_dir: str = ""  # the synced copy of the project, on the cluster
    commit: str | None = None  # of the laptop's checkout when it was synced
    dirty: bool = False  # whether it had uncommitted changes (synced as they were)
    submitted_at: float = 0.0


def save(job: RemoteJob, environ: Mapping[str, str]) -> Path:
    path = paths.remote_dir(environ, job.remote.name) / f"{job.job_id}.json"
    try:
        paths.private_dir(path.parent)
        paths.write_atomically(path, job.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise StateError(
            f"cannot write the record of remote job {job.job_id} to {path}: {exc.strerror}"
        ) from None
    return path


def _all(environ: Mapping[str, str]) -> list[RemoteJob]:
    found = []
    for path in sorted((paths.state_dir(environ) / "remote").glob("*/*.json")):
        if path.name == "checked.json":
            continue
        try:
            found.append(RemoteJob.model_validate(json.loads(paths.read_text(path))))
        except (OSError, ValueError, ValidationError):
            continue
    return found


def find(job_id: str, environ: Mapping[str, str]) -> RemoteJob | None:
    """The remote job `job_id` names (None: it is no remote job of ours). Two clusters that
    gave out the same id: one line asking which."""
    found = [j for j in _all(environ) if j.job_id == job_id]
    if len({j.remote.name for j in found}) > 1:
        names = ", ".join(sorted({j.remote.name for j in found}))
        raise UsageError(
            f"JOBID {job_id}: jobs of that id were submitted to several clusters ({names}): "
            f"say which with --remote NAME"
        )
    return found[0] if found else None


def jobs_of(name: str, environ: Mapping[str, str]) -> list[RemoteJob]:
    """The jobs submitted from here to cluster `name`."""
    return [j for j in _all(environ) if j.remote.name == name]


def clusters(environ: Mapping[str, str]) -> dict[str, Remote]:
    """Every cluster this machine has submitted to, by name (the newest record's remote)."""
    known: dict[str, RemoteJob] = {}
    for job in _all(environ):
        old = known.get(job.remote.name)
        if old is None or job.submitted_at > old.submitted_at:
            known[job.remote.name] = job
    return {name: job.remote for name, job in sorted(known.items())}


def local_job(job_id: str) -> bool:
    """Whether this machine has a record of its own of `job_id` (a local job wins)."""
    return (paths.state_dir(os.environ) / "jobs" / f"{job_id}.json").is_file()
