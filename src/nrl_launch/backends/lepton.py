"""DGX Cloud Lepton: one batch job of `slurm.nodes` workers, each running the job script in the
job's own image; worker 0 is the Ray head.

`plan` is pure but for importing the SDK: it renders the script and builds the job with the
`leptonai` SDK's own models, checked with the SDK's own rules, and the request carries the job
as the JSON document that is sent (`Request.job_spec`; no command is run, so `argv` is empty).
The plan names the node group by name; `submit` sends its id, which only the workspace knows.
`submit`, `describe`, `cancel`, `head_node` and `replica_log` talk to the workspace through the
SDK's client, with the credentials `lep login` saved or LEPTON_WORKSPACE_ID/_TOKEN.

The SDK is an optional extra (`pip install 'nrl-launch[lepton]'`) and is imported only inside
the functions that need it: it takes most of a second to import, and no other backend needs it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from nrl_launch import __version__
from nrl_launch.backends.base import (
    JobRef,
    Request,
    SchedulerView,
    Submitted,
    spec_environment,
    state_phase,
)
from nrl_launch.backends.lepton_sdk import (
    INSTALL_HINT,
    NO_WORKSPACE,
    credentials,
    error_detail,
    failed,
    nothing_sent,
    require_sdk,
    status_code,
    workspace_client,
)
from nrl_launch.backends.lepton_view import LEPTON_STATES, head_name, job_view, worker_of
from nrl_launch.errors import (
    ConfigError,
    JobNotFoundError,
    JobNotRunningError,
    UnconfirmedSubmitError,
    UsageError,
)
from nrl_launch.node import job_script
from nrl_launch.spec import ContainerSpec, LaunchSpec
from nrl_launch.templating import render

if TYPE_CHECKING:
    from leptonai.api.v2.client import APIClient
    from leptonai.api.v2.types.job import LeptonJob

__all__ = [
    "BACKEND",
    "INSTALL_HINT",
    "LEPTON_STATES",
    "NCCL_DEFAULTS",
    "NO_WORKSPACE",
    "LeptonBackend",
    "build_job",
    "credentials",
    "head_name",
    "job_json",
    "job_view",
    "log_text",
    "plan",
    "run_command",
    "secret_names",
    "worker_of",
]

TEMPLATE = "lepton.sh.j2"

# Set on every worker unless the job's env sets them. Lepton's containers see a CPU set that
# NCCL's own affinity detection misreads (seed 004 sets this for every Lepton job). The seed's
# NCCL_DEBUG=INFO is left out: a debugging aid, as on Slurm (`--env NCCL_DEBUG=INFO`).
NCCL_DEFAULTS: Mapping[str, str] = {"NCCL_IGNORE_CPU_AFFINITY": "1"}
# A finished job stays listed (state, logs) for 3 days, as with `lep job create`; the SDK
# model's own default (600 s) would drop it before anyone looked at why it failed.
TTL_AFTER_FINISHED_S = 3 * 24 * 3600
# The newest lines of a worker's log that `replica_log` reads (Lepton's log API pages).
LOG_LINES = 5000
_HEREDOC_END = "NRL_LAUNCH_END_OF_JOB_SCRIPT"


# ---- The job (pure) ----


def unique_name(name: str) -> str:
    """`name` with the suffix submit adds (rules.LEPTON_NAME_SUFFIX characters: '-' and five
    random hex digits), so that every job, and its log dir, has a name of its own."""
    return f"{name}-{secrets.token_hex(3)[:5]}"


def run_command(script: str) -> str:
    """The bash text every worker runs (`/bin/bash -c` it): it writes `script` to a directory of
    its own (workers may share /tmp) and runs it as `bash job.sh lepton`.

    Raises:
        ValueError: a line of `script` is the heredoc's end marker (bash would end the script
            there), or it holds a NUL (which no command can). A rendered script has neither:
            every value in it is quoted, and a quoted value never makes a line of its own.
    """
    if _HEREDOC_END in script.split("\n") or "\0" in script:
        raise ValueError(f"the job script has a line {_HEREDOC_END} or a NUL byte")
    body = script if script.endswith("\n") else script + "\n"
    return (
        "set -eu\n"
        'dir=$(mktemp -d "${TMPDIR:-/tmp}/nrl-launch.XXXXXXXX")\n'
        f"cat >\"$dir/job.sh\" <<'{_HEREDOC_END}'\n"
        f"{body}"
        f"{_HEREDOC_END}\n"
        'exec bash "$dir/job.sh" lepton\n'
    )


def _for_template(spec: LaunchSpec) -> LaunchSpec:
    """`spec` as the script sees it: Lepton runs it inside the job's image, so the script has
    no container to start (no pyxis)."""
    bare = ContainerSpec.model_construct(
        runtime="none",
        image=None,
        mounts=(),
        workdir=spec.container.workdir,
        mount_home=False,
    )
    return spec.model_copy(update={"container": bare})


def secret_names(spec: LaunchSpec) -> list[str]:
    """The job's secrets passed as Lepton secret references: every required one, and each
    optional one that lepton.secret_refs names (an optional one named nowhere is left out: a
    reference to a secret the workspace lacks would stop the job from starting)."""
    refs = spec.lepton.secret_refs
    return sorted(
        name
        for name, need in spec.secrets.items()
        if need == "required" or (need == "optional" and name in refs)
    )


def _check(what: str, check: Any, *args: Any) -> list[str]:
    try:
        check(*args)
    except ValueError as exc:
        return [f"{what}: {' '.join(str(exc).split())}"]
    return []


def _sdk_problems(spec: LaunchSpec) -> list[str]:
    """The SDK's own checks of a job's values, each naming the spec key it is about."""
    from leptonai.api.v2.job_validation import validate_job_name, validate_mount_path
    from leptonai.api.v2.spec_utils import validate_environment_variable_name as env_name

    problems = _check("slurm.job_name", validate_job_name, spec.slurm.job_name)
    for name in spec.env:
        problems += _check(f"env.{name}", env_name, name)
    for name in secret_names(spec):
        problems += _check(f"secrets.{name}", lambda n: env_name(n, is_secret=True), name)
    for mount in spec.lepton.mounts:
        problems += _check(
            f"lepton.mounts: mount_path {mount.mount_path!r}", validate_mount_path, mount.mount_path
        )
    return problems


def build_job(
    spec: LaunchSpec, script: str, environment: Sequence[tuple[str, str]] = ()
) -> LeptonJob:
    """The Lepton job for `spec`, whose workers run `script` with the variables `environment`
    (the request's own: the spec) beside the job's env; the node group by name.

    Raises:
        ConfigError: a value Lepton refuses (its SDK's checks), one line per key.
    """
    from leptonai.api.v2.job_validation import validate_job_create
    from leptonai.api.v2.types.affinity import LeptonResourceAffinity
    from leptonai.api.v2.types.common import Metadata
    from leptonai.api.v2.types.deployment import EnvValue, EnvVar, LeptonContainer, Mount
    from leptonai.api.v2.types.job import LeptonJob, LeptonJobUserSpec

    problems = _sdk_problems(spec)
    if problems:
        raise ConfigError(problems)
    lepton = spec.lepton
    values = {**NCCL_DEFAULTS, **spec.env}  # a value of the job's own wins
    envs = [EnvVar(name=name, value=values[name]) for name in sorted(values)]
    envs += [EnvVar(name=name, value=value) for name, value in environment]
    envs += [
        EnvVar(name=name, value_from=EnvValue(secret_name_ref=lepton.secret_refs.get(name, name)))
        for name in secret_names(spec)
    ]
    # Mount's field is `from`, a Python keyword: it is set by that name (its alias).
    mounts = [
        Mount.model_validate({"path": m.path, "from": m.source, "mount_path": m.mount_path})
        for m in lepton.mounts
    ]
    nodes = spec.slurm.nodes
    job = LeptonJob(
        metadata=Metadata.model_validate({"id": spec.slurm.job_name}),
        spec=LeptonJobUserSpec(
            resource_shape=lepton.resource_shape,
            affinity=LeptonResourceAffinity(
                allowed_dedicated_node_groups=[lepton.node_group] if lepton.node_group else None
            ),
            container=LeptonContainer(
                image=spec.container.image,
                command=["/bin/bash", "-c", run_command(script)],
            ),
            shared_memory_size=lepton.shared_memory_mib,
            # One worker per node, all at once, each reaching the others by name.
            completions=nodes,
            parallelism=nodes,
            intra_job_communication=True,
            max_failure_retry=lepton.max_failure_retry,
            envs=envs,
            mounts=mounts,
            image_pull_secrets=list(lepton.image_pull_secrets),
            ttl_seconds_after_finished=TTL_AFTER_FINISHED_S,
        ),
    )
    try:
        validate_job_create(job)  # any check of the SDK's that the ones above do not name
    except ValueError as exc:
        raise ConfigError([f"lepton: {' '.join(str(exc).split())}"]) from None
    return job


def job_json(job: LeptonJob) -> str:
    """The job as the API receives it (the SDK sends the same fields, by their aliases)."""
    return json.dumps(
        job.model_dump(by_alias=True, exclude_none=True, mode="json"), indent=2, sort_keys=True
    )


def plan(spec: LaunchSpec) -> Request:
    """The Lepton request for `spec`: the script every worker runs, and the job that runs it."""
    require_sdk()
    header = render(
        TEMPLATE,
        spec=_for_template(spec),
        ray=True,
        version=__version__,
    )
    script = job_script(header, "lepton")
    environment = spec_environment(spec)
    return Request(
        argv=(),
        script=script,
        job_spec=job_json(build_job(spec, script, environment)),
        environment=environment,
    )


# ---- The backend ----


def _get(client: APIClient, job_id: str) -> LeptonJob | None:
    """The job, or None when the API no longer knows it (404)."""
    try:
        return client.job.get(job_id)
    except (RuntimeError, OSError) as exc:
        if status_code(exc) == 404:
            return None
        raise failed(exc, f"asking about job {job_id}") from None


def _replica_id(client: APIClient, job_id: str, worker: int) -> str | None:
    try:
        replicas = client.job.get_replicas(job_id)
    except (RuntimeError, OSError) as exc:
        if status_code(exc) == 404:
            return None
        raise failed(exc, f"listing the workers of job {job_id}") from None
    ids: list[str] = [r.metadata.id_ for r in replicas if r.metadata.id_]
    return next((i for i in ids if worker_of(job_id, i) == worker), None)


def _node_group_ids(client: APIClient, names: list[str]) -> list[str]:
    """The ids of the node groups named `names` (an id is taken as it is)."""
    try:
        groups = client.nodegroup.list_all()
    except (RuntimeError, OSError) as exc:
        raise failed(exc, "listing the workspace's node groups") from None
    ids = []
    for name in names:
        named = [g.metadata.id_ for g in groups if g.metadata.name == name and g.metadata.id_]
        if len(named) > 1:
            raise ConfigError(
                [f"lepton.node_group: {len(named)} node groups are named {name!r}: give its id"]
            )
        if named:
            ids += named
        elif any(g.metadata.id_ == name for g in groups):
            ids.append(name)
        else:
            known = sorted(str(g.metadata.name or g.metadata.id_) for g in groups)
            raise ConfigError(
                [
                    f"lepton.node_group: no node group {name!r} in Lepton workspace "
                    f"{client.workspace_id} (it has: {', '.join(known) or 'none'})"
                ]
            )
    return ids


class LeptonBackend:
    """Batch jobs on DGX Cloud Lepton, one worker per node; Ray jobs only."""

    name = "lepton"
    slurm_cluster = False
    shares_files = False  # the log dir is on the workers' storage, not this machine's
    secrets_from_shell = False  # secrets are Lepton secrets, referenced by name
    scheduler = "the lepton backend"

    def plan(
        self, spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID"
    ) -> Request:
        return plan(spec)

    def plan_plain(
        self, spec: LaunchSpec, script_path: str | None = None, *, remove_first: str | None = None
    ) -> Request:
        raise UsageError("backend: lepton runs Ray jobs only (no run or pull): submit a job")

    def check_chain(self, spec: LaunchSpec) -> None:
        raise UsageError("--chain: Lepton has no dependency to chain jobs on")

    def new_job_id(self) -> str:
        return ""  # Lepton names the job when it creates it

    def batch_output(self, job_id: str) -> str:
        return f"{job_id}.out"  # never written: each worker's output is in Lepton's log

    def submit(self, request: Request, *, job_id: str, cwd: Path, output: Path) -> Submitted:
        from leptonai.api.v2.types.job import LeptonJob

        if request.job_spec is None:
            raise ValueError("a Lepton request carries its job (job_spec)")
        client = workspace_client()
        job = LeptonJob.model_validate_json(request.job_spec)
        affinity = job.spec.affinity
        if affinity is not None and affinity.allowed_dedicated_node_groups:
            names = affinity.allowed_dedicated_node_groups
            affinity.allowed_dedicated_node_groups = _node_group_ids(client, names)
        # Each job its own name, so its own log dir (<name>-logs) beside an earlier job's.
        name = job.metadata.id_ = unique_name(job.metadata.id_ or "")
        try:
            created = client.job.create(job)
        except ValueError as exc:  # the SDK's checks, which plan ran already
            raise ConfigError([f"lepton: {' '.join(str(exc).split())}"]) from None
        except (RuntimeError, OSError) as exc:
            if nothing_sent(exc):
                raise failed(exc, f"creating job {name}") from None
            raise UnconfirmedSubmitError(
                f"Lepton: creating job {name} may have worked ({error_detail(exc)}): "
                "see `lep job list` before submitting again"
            ) from None
        if not created.metadata.id_:
            raise UnconfirmedSubmitError(f"Lepton created job {name} but gave no id back")
        return Submitted(created.metadata.id_)

    def describe(self, jobs: Sequence[JobRef]) -> dict[str, SchedulerView]:
        if not jobs:
            return {}
        client = workspace_client()
        views = {}
        for ref in jobs:
            job = _get(client, ref.job_id)
            if job is not None:
                views[ref.job_id] = job_view(job)
        return views

    def cancel(self, jobs: Sequence[JobRef]) -> list[str]:
        """Stops each job (as `lep job stop`): its workers get SIGTERM, and the job stays
        listed, with its logs, as Stopped (deleting it would lose both)."""
        if not jobs:
            return []
        client = workspace_client()
        ended = []
        for ref in jobs:
            job = _get(client, ref.job_id)
            if job is None or state_phase(job_view(job).state).terminal:
                ended.append(ref.job_id)
                continue
            try:
                # A patch of this one field (as `lep job stop` sends it; the SDK's annotation
                # says LeptonJob): a whole spec would reset every other field.
                client.job.update(ref.job_id, spec=cast(Any, {"spec": {"stopped": True}}))
            except (RuntimeError, OSError) as exc:
                raise failed(exc, f"stopping job {ref.job_id}") from None
        return ended

    def head_node(self, job: JobRef) -> str:
        if _replica_id(workspace_client(), job.job_id, 0) is None:
            raise JobNotRunningError(
                f"Lepton lists no worker 0 for job {job.job_id}: is it running?"
            )
        return head_name(job.job_id)

    def dashboard_host(self, job: JobRef, head: str) -> str:
        return head

    def replica_log(self, job_id: str, worker: int) -> str:
        """The newest LOG_LINES lines of worker `worker`'s output, oldest first, from Lepton's
        log store (it keeps a finished job's, unlike the live stream of a running worker)."""
        client = workspace_client()
        job = _get(client, job_id)
        replica = _replica_id(client, job_id, worker) if job is not None else None
        if job is None or replica is None:
            raise JobNotFoundError(f"Lepton has no worker {worker} of job {job_id}: no log yet")
        end = time.time_ns()
        created_ms = job.metadata.created_at
        # From a minute before the job was created (clocks differ), or the last week.
        start = (created_ms - 60_000) * 1_000_000 if created_ms else end - 7 * 86_400 * 10**9
        try:
            found = client.log.get_log(
                name_or_job=job_id,
                replica=replica,
                start=str(start),
                end=str(end),
                limit=LOG_LINES,
                direction="backward",
            )
        except (RuntimeError, OSError) as exc:
            raise failed(exc, f"reading worker {worker}'s log of job {job_id}") from None
        return log_text(found)


def log_text(found: Mapping[str, Any]) -> str:
    """The lines of a log API answer (Loki's query_range: streams of [ns, line]), oldest
    first, each ending in a newline."""
    entries = [
        (int(value[0]), str(value[1]))
        for stream in found.get("data", {}).get("result", [])
        for value in stream.get("values", [])
    ]
    entries.sort(key=lambda entry: entry[0])
    return "".join(line if line.endswith("\n") else line + "\n" for _, line in entries)


BACKEND = LeptonBackend()
