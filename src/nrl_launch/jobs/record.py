"""Job records: one versioned JSON file per submitted job, written atomically.

Schema versions:
    1: job_id, backend, job_name, nodes, submitted_at, submit_dir, log_dir, script_path, argv, spec,
       and optional: pid (local backend), runs (every run's log dir once the job was requeued),
       kind (ray, or plain for `run` and `pull`; records written before it existed are ray),
       tries (submit --retries: every try of the run, first first, each its job id and script;
       the run has this one record, under the first try's id), experiment (submit --sweep:
       the experiment the job is a point of), overrides (that point's Hydra overrides, as
       appended to its driver's command) and gpus (every GPU its allocation holds)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from nrl_launch import backends
from nrl_launch.errors import JobNotFoundError, StateError, UnreadableRecordError, UsageError
from nrl_launch.paths import private_dir, read_text, write_atomically

__all__ = [
    "SCHEMA_VERSION",
    "JobKind",
    "JobRecord",
    "Try",
    "by_backend",
    "load",
    "load_all",
    "require_ray",
    "save",
]

SCHEMA_VERSION = 1
# What submit records: Slurm's numeric ids, and the local backend's local-<ms>.
# Lepton's job ids are its job names with a suffix: a-z, 0-9 and '-'.
_JOB_ID = re.compile(r"[0-9]+|local-[0-9]+|[a-z][a-z0-9-]{0,63}")
# What a job name may look like (my_run, grpo-8b.v2): one that no job has is not found (exit 4).
_NAME_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
JobKind = Literal["ray", "plain"]


class Try(BaseModel):
    """One try of a --retries run: its Slurm job and the script it was submitted with."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    script_path: str


class JobRecord(BaseModel):
    # Records outlive versions of nrl-launch: keys a later version adds are ignored here.
    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = SCHEMA_VERSION
    job_id: str
    backend: Literal["slurm", "local", "lepton"]
    job_name: str
    nodes: int  # the allocation's: slurm.nodes, plus a Ray job's dedicated head (node 0)
    submitted_at: float
    submit_dir: str
    log_dir: str  # <base>/<JOBID>-logs; a requeued run writes <base>/<JOBID>-<N>-logs beside it
    script_path: str
    argv: list[str]
    spec: dict[str, Any]
    pid: int | None = None  # the local backend's job process
    runs: list[str] = []  # every run's log dir, first first, once `status` saw a requeue
    kind: JobKind = "ray"  # plain: one command per node, no Ray (`run`, `pull`)
    tries: list[Try] = []  # submit --retries: every try, this one (the first) first
    experiment: str | None = None  # submit --sweep: the experiment this job is a point of
    overrides: list[str] = []  # submit --sweep: the point's overrides, given to its driver
    gpus: int | None = None  # every GPU the allocation holds (jobs.cost); None: not recorded

    @property
    def batch_output(self) -> Path:
        """The job's own output, next to its log dirs (its backend names it)."""
        return Path(self.log_dir).parent / backends.get(self.backend).batch_output(self.job_id)

    def node_index(self, value: str, also: str = "") -> int:
        """`--node` (head, or an index 0..nodes-1) as an index; `also` names other accepted
        words for the message."""
        if value == "head":
            return 0
        if value.isdigit() and int(value) < self.nodes:
            return int(value)
        accepted = (
            f"{also}head, or a node index 0..{self.nodes - 1}"
            if self.nodes > 1
            else (f"{also}head (this job has one node)")
        )
        raise UsageError(f"--node {value!r}: expected {accepted}")


def pool_of(record: JobRecord, value: str) -> tuple[str, int | None] | None:
    """`--node` as one of the job's pools: NAME (the pool: its balancer) or NAME.K (its replica
    K), as (NAME, K or None); None when `value` names no pool of the job.

    Raises:
        UsageError: the pool has no replica K.
    """
    pools = record.spec.get("pools") or {}
    name, dot, replica = value.partition(".")
    if name not in pools:
        return None
    if not dot:
        return name, None
    replicas = int(pools[name].get("replicas", 1))
    if not (replica.isdigit() and int(replica) < replicas):
        raise UsageError(
            f"--node {value!r}: pool {name} has replicas {name}.0 to {name}.{replicas - 1}"
        )
    return name, int(replica)


def pools_named(record: JobRecord, what: str) -> str:
    """The job's pools as `--node` takes them, for a message (`what`: NAME.K's meaning)."""
    return "".join(f"{name}.K ({what}), " for name in record.spec.get("pools") or {})


def require_ray(record: JobRecord, command: str, hint: str = "") -> None:
    """Refuse `command` (attach, stop, dashboard) on a plain job, in one line: it has no Ray."""
    if record.kind == "plain":
        raise UsageError(
            f"job {record.job_id} runs a plain command (nrl-launch run or pull), without Ray: "
            f"nrl-launch {command} works on Ray jobs only{hint}"
        )


def _jobs_dir(state: Path) -> Path:
    return state / "jobs"


def save(record: JobRecord, state: Path) -> Path:
    """Write the record atomically: a reader sees the old file or the new one, never half."""
    path = _jobs_dir(state) / f"{record.job_id}.json"
    try:
        private_dir(path.parent)
        write_atomically(path, record.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise StateError(
            f"cannot write the job record of job {record.job_id} to {path}: {exc.strerror}"
        ) from None
    return path


def _read(path: Path) -> JobRecord:
    """The record in `path`; UnreadableRecordError says, in one line, why it cannot be used."""
    try:
        data = json.loads(read_text(path))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are both
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _unreadable(path, f"not a JSON job record ({reason})") from None
    if not isinstance(data, dict):
        raise _unreadable(path, f"not a JSON object but a {type(data).__name__}")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _unreadable(path, f"schema_version is {version!r}, not a version nrl-launch writes")
    if version > SCHEMA_VERSION:
        raise _unreadable(
            path,
            f"written by a newer nrl-launch (schema version {version}; this one reads up to "
            f"{SCHEMA_VERSION}): upgrade nrl-launch",
        )
    try:
        rec = JobRecord.model_validate(data)
    except ValidationError as exc:
        wrong = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'record'}: {err['msg'][:1].lower()}"
            f"{err['msg'][1:]}"
            for err in exc.errors()[:3]
        )
        raise _unreadable(path, wrong) from None
    if path.stem != rec.job_id:
        raise _unreadable(path, f"it holds job {rec.job_id!r}, not {path.stem!r}")
    return rec


def _unreadable(path: Path, reason: str) -> UnreadableRecordError:
    return UnreadableRecordError(f"job record {path} is unreadable: {reason}")


def load(job: str, state: Path) -> JobRecord:
    """The record of the job `job` names: its id, else the name it was submitted under
    (slurm.job_name). An id wins over a name; a name that several jobs share is refused, with
    their ids (a --chain gives every job of the chain the same name)."""
    path = _jobs_dir(state) / f"{job}.json"
    if _JOB_ID.fullmatch(job) and path.is_file():
        return _read(path)
    records = load_all(state)[0]
    # A later try of a --retries run: the run's record.
    run = [r for r in records if any(t.job_id == job for t in r.tries)]
    if run:
        return run[0]
    named = [r for r in records if r.job_name == job]
    if len(named) > 1:
        ids = ", ".join(r.job_id for r in named)
        raise UsageError(
            f"JOBID {job!r}: {len(named)} jobs are named {job!r} ({ids}, newest first): "
            "give the job id"
        )
    if named:
        return named[0]
    if not _JOB_ID.fullmatch(job) and not _NAME_LIKE.fullmatch(job):
        raise UsageError(
            f"JOBID {job!r}: expected a Slurm job id (digits), local-<digits>, a Lepton job id "
            "(a-z, 0-9 and '-') or the name of a job submitted here (none is named so)"
        )
    raise JobNotFoundError(
        f"no job {job!r} was submitted with nrl-launch here, by that id or name "
        f"(records in {path.parent})"
    )


def load_all(state: Path) -> tuple[list[JobRecord], list[str]]:
    """Every readable record, newest first, and one warning per unreadable one."""
    records, warnings = [], []
    for path in sorted(_jobs_dir(state).glob("*.json")):
        try:
            records.append(_read(path))
        except UnreadableRecordError as exc:  # noqa: PERF203 - one bad record must not hide the rest
            warnings.append(exc.message)
    records.sort(key=lambda r: r.submitted_at, reverse=True)
    return records, warnings


def by_backend(records: Sequence[JobRecord]) -> dict[str, list[JobRecord]]:
    """The records grouped by the backend that ran them, in their order: one scheduler query
    (or one scancel) per backend."""
    groups: dict[str, list[JobRecord]] = {}
    for rec in records:
        groups.setdefault(rec.backend, []).append(rec)
    return groups
