"""What every backend shares: the request it plans, the job it submits, the scheduler's view
of a job and its phase, and the `Backend` protocol itself. The backends import this module;
`backends/__init__.py` (the registry) imports the backends."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nrl_launch.shell import join

if TYPE_CHECKING:
    from nrl_launch.spec import LaunchSpec

__all__ = [
    "JOB_SPEC_VAR",
    "Backend",
    "JobRef",
    "Phase",
    "Request",
    "SchedulerView",
    "Submitted",
    "pool_values",
    "spec_environment",
    "state_phase",
]


# The variable that carries the job's full spec (JSON) to the job, which writes it to spec.json.
JOB_SPEC_VAR = "NRL_JOB_SPEC"


def spec_environment(spec: LaunchSpec) -> tuple[tuple[str, str], ...]:
    """A Request's `environment` for `spec`: its JSON in JOB_SPEC_VAR."""
    return ((JOB_SPEC_VAR, spec.model_dump_json()),)


def pool_values(spec: LaunchSpec) -> list[dict[str, Any]]:
    """Each pool as the job's header writes it (templates/_pools.sh.j2)."""
    gpus = spec.slurm.gpus_per_node
    return [
        {
            "name": name,
            "replicas": pool.replicas,
            "nodes_per_replica": pool.nodes_per_replica(gpus),
            "port": pool.port,
            "balancer_port": pool.balancer_port,
            "placeholder": pool.placeholder(name),
            "startup_timeout_s": pool.startup_timeout_s,
            "health_path": pool.health_path,
            "required": int(pool.required),
            "image": pool.image or "",
            "server": pool.server_command(gpus),
            "env": pool.env,
        }
        for name, pool in spec.pools.items()
    ]


@dataclass(frozen=True)
class Request:
    """What `submit` runs: `argv` (sbatch and its flags, or bash, then the script) and the
    script it runs."""

    argv: tuple[str, ...]
    script: str
    job_spec: str | None = None  # a JSON job for a backend with an API (Lepton): what is sent
    # slurm.secrets_via file: where submit writes the secrets' values (the job reads them), and
    # their names, which the scheduler's own environment then goes without.
    secrets_file: str | None = None
    withheld: tuple[str, ...] = ()
    # Variables the job is started with, beside the script (NAME, value): the full spec as
    # JSON, NRL_JOB_SPEC, which the job writes to its log dir's spec.json. Not in the script: a
    # copy of it run by hand runs from the values written there.
    environment: tuple[tuple[str, str], ...] = ()

    @property
    def command_line(self) -> str:
        """`argv` as one bash command line, quoted so that it can be pasted into a shell."""
        return str(join(self.argv))


@dataclass(frozen=True)
class Submitted:
    """What a backend returns once it has the job: its id, and its process for a local job."""

    job_id: str
    pid: int | None = None


class Phase(str, enum.Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    JOINING = "JOINING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self in (Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED, Phase.TIMEOUT)


# Every backend states a job's state in Slurm's words (the local backend and Lepton map theirs
# onto them), mapped to phases once here. A requeued job is waiting to run again.
_STATE_PHASES: dict[str, Phase] = {
    "PENDING": Phase.PENDING,
    "REQUEUED": Phase.PENDING,
    "REQUEUE_HOLD": Phase.PENDING,
    "REQUEUE_FED": Phase.PENDING,
    # Preempted and not requeued (a requeued job is PENDING again): over, as if cancelled.
    "PREEMPTED": Phase.CANCELLED,
    "RESV_DEL_HOLD": Phase.PENDING,
    "CONFIGURING": Phase.STARTING,
    "RUNNING": Phase.RUNNING,
    "COMPLETING": Phase.RUNNING,
    "SUSPENDED": Phase.RUNNING,
    "STOPPED": Phase.RUNNING,
    "SIGNALING": Phase.RUNNING,
    "STAGE_OUT": Phase.RUNNING,
    "RESIZING": Phase.RUNNING,
    "COMPLETED": Phase.COMPLETED,
    "FAILED": Phase.FAILED,
    "NODE_FAIL": Phase.FAILED,
    "BOOT_FAIL": Phase.FAILED,
    "OUT_OF_MEMORY": Phase.FAILED,
    "SPECIAL_EXIT": Phase.FAILED,
    "CANCELLED": Phase.CANCELLED,
    "REVOKED": Phase.CANCELLED,
    "TIMEOUT": Phase.TIMEOUT,
    "DEADLINE": Phase.TIMEOUT,
}


def state_phase(state: str) -> Phase:
    """The phase a scheduler state (Slurm's word) stands for (UNKNOWN for one this table lacks)."""
    return _STATE_PHASES.get(state, Phase.UNKNOWN)


@dataclass(frozen=True)
class SchedulerView:
    """What the scheduler says about one job."""

    state: str  # Slurm's word, e.g. RUNNING, or CANCELLED (from "CANCELLED by 0")
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    nodes: str | None = None  # Slurm's node list of a started job, e.g. node[0-3]


class JobRef(Protocol):
    """What a backend needs of a job it submitted (a `jobs.record.JobRecord` is one)."""

    @property
    def job_id(self) -> str: ...
    @property
    def log_dir(self) -> str: ...
    @property
    def script_path(self) -> str: ...
    @property
    def pid(self) -> int | None: ...


class Backend(Protocol):
    """One place a job can run."""

    name: str
    # Its jobs are sbatch requests to a Slurm cluster: it has plain jobs (`plan_plain`: run,
    # pull), and doctor asks Slurm about a request and can run its probe job there.
    slurm_cluster: bool
    shares_files: bool  # the job's log dir is on this machine's file systems: made here
    secrets_from_shell: bool  # secrets travel from this shell's environment (not references)
    scheduler: str  # how a message names what runs its jobs: Slurm, the local backend

    def plan(
        self, spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID"
    ) -> Request:
        """The request for a Ray job (pure); `script_path` is where its script will be."""

    def plan_plain(
        self, spec: LaunchSpec, script_path: str | None = None, *, remove_first: str | None = None
    ) -> Request:
        """The request for a plain job: one command on every node, no Ray (`run`, `pull`);
        raises UsageError where the backend has none (not `slurm_cluster`)."""

    def check_chain(self, spec: LaunchSpec) -> None:
        """Raises UsageError unless jobs can be chained one after another here (--chain)."""

    def new_job_id(self) -> str:
        """The id of the next job when it is known before submitting (else "")."""

    def batch_output(self, job_id: str) -> str:
        """The file name of the job's own output, beside its log dirs (`job_id` may be `%j`)."""

    def submit(self, request: Request, *, job_id: str, cwd: Path, output: Path) -> Submitted:
        """Hand the request over. Raises SchedulerError when nothing was queued, and
        UnconfirmedSubmitError when something may have been."""

    def describe(self, jobs: Sequence[JobRef]) -> dict[str, SchedulerView]:
        """The scheduler's view of each job it still knows, by job id."""

    def cancel(self, jobs: Sequence[JobRef]) -> list[str]:
        """Cancel the jobs; returns the ids of those that had already ended."""

    def head_node(self, job: JobRef) -> str:
        """The node the job's Ray head runs on."""

    def dashboard_host(self, job: JobRef, head: str) -> str:
        """Where the login node's `ssh -L` tunnel points to reach the head's dashboard."""

    def replica_log(self, job_id: str, worker: int) -> str:
        """What worker `worker` printed, from the scheduler's own log store: for a backend
        whose log dirs are not on this machine (`shares_files` false); the others raise
        UsageError (the log dir has it)."""
