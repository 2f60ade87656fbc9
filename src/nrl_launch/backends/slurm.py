"""Slurm: the exact sbatch argv and job script for a spec (pure), and sbatch, squeue, sacct,
scontrol and scancel for the jobs it queued (through the runner).

`plan()` is what `render` prints and what `submit` hands to sbatch, so a dry run shows exactly
what would be submitted; the job's full spec goes with it in sbatch's environment (NRL_JOB_SPEC,
`Request.environment`), not in the script.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nrl_launch import __version__, runner
from nrl_launch.backends.base import (
    JobRef,
    Request,
    SchedulerView,
    Submitted,
    pool_values,
    spec_environment,
    state_phase,
)
from nrl_launch.backends.slurm_answers import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    parse_sacct,
    parse_scontrol_job,
    parse_squeue,
)
from nrl_launch.errors import (
    JobNotRunningError,
    SchedulerError,
    UnconfirmedSubmitError,
    UsageError,
)
from nrl_launch.node import job_script
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import Comment, SbatchDirective, render

__all__ = [
    "BACKEND",
    "DEFAULT_SCRIPT_NAME",
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "SlurmBackend",
    "defaults_taken",
    "parse_sacct",
    "parse_scontrol_job",
    "parse_squeue",
    "plan",
    "plan_plain",
    "pool_flags",
    "sbatch_directives",
    "sbatch_word",
]

DEFAULT_SCRIPT_NAME = "nrl-launch.sbatch"
TEMPLATE = "slurm.sbatch.j2"


def batch_output(job_id: str) -> str:
    """sbatch --output's file name, beside the log dirs: the batch script's and its steps'
    output, where pyxis and enroot say why a container did not start."""
    return f"slurm-{job_id}.out"


def gpu_flag(spec: LaunchSpec) -> str | None:
    """How this cluster wants GPUs asked for, on sbatch and on every srun step."""
    count, style = spec.slurm.gpus_per_node, spec.slurm.gpu_request
    if count == 0 or style == "none":
        return None
    return f"--gres=gpu:{count}" if style == "gres" else f"--gpus-per-node={count}"


def sbatch_flags(spec: LaunchSpec, *, ray: bool = True) -> list[str]:
    """The scheduling flags, sorted so that the same spec always renders the same argv; of a
    Ray job, or (`ray` false) a plain one."""
    s = spec.slurm
    flags = [
        f"--job-name={s.job_name}",
        # slurm.nodes are the GPU nodes; a dedicated Ray head is one node more.
        f"--nodes={spec.allocated_nodes}",
        "--ntasks-per-node=1",
        # Secrets travel by name, in the environment sbatch exports: never leave it to a
        # site default such as SBATCH_EXPORT=NONE.
        "--export=ALL",
        # The log dir is made by the job itself, so sbatch's own output goes next to it.
        f"--output={spec.logs.base_dir}/{batch_output('%j')}",
        # A requeued job's next run adds to it: the run before keeps its output, and Slurm's
        # "CANCELLED ... DUE TO PREEMPTION" line that says why it ended (jobs/requeue.py).
        "--open-mode=append",
    ]
    optional = {
        "--time": s.time,  # none given: the partition's default time limit
        "--account": s.account,
        "--partition": s.partition,
        "--qos": s.qos,
        "--reservation": s.reservation,
        "--exclude": s.exclude,
        "--constraint": s.constraint,
        "--dependency": s.dependency,
        "--cpus-per-task": s.cpus_per_node,
        "--segment": s.segment,
    }
    flags += [f"{flag}={value}" for flag, value in optional.items() if value is not None]
    if spec.exclusive_nodes(ray=ray):
        flags.append("--exclusive")
    if s.requeue is not None:
        flags.append("--requeue" if s.requeue else "--no-requeue")
    gpus = gpu_flag(spec)
    if gpus:
        flags.append(gpus)
    return sorted(flags)


# The flags a heterogeneous job's second component (the pools' nodes) takes from the first: where
# and how long it runs and how its nodes are asked for. The job's name, output, dependency and
# requeue are the whole job's, given once.
_POOL_COMPONENT_FLAGS = (
    "--time",
    "--account",
    "--partition",
    "--qos",
    "--reservation",
    "--exclude",
    "--constraint",
    "--cpus-per-task",
    "--exclusive",
    "--gres",
    "--gpus-per-node",
    "--ntasks-per-node",
    "--job-name",
)


def pool_flags(spec: LaunchSpec) -> list[str]:
    """The second component's flags (the pools' nodes, `pools:`); none without pools."""
    if not spec.pools:
        return []
    kept = [f for f in sbatch_flags(spec) if f.split("=", 1)[0] in _POOL_COMPONENT_FLAGS]
    return sorted([f"--nodes={spec.pool_nodes}", *kept])


# ---- #SBATCH lines: the same flags in the script, so that its copy resubmits by hand ----

# sbatch reads `#SBATCH` lines with rules of its own, not bash's (src/sbatch/opt.c,
# get_argument and _opt_batch_script, the same from Slurm 21.08 to 24.x):
# - it reads them up to the script's first command, and cuts the script into lines at "\n"
#   before it looks at any quote, so no word can hold a newline (nor, here, a carriage return:
#   sbatch would read it, but a raw one reads as a DOS line end to shellcheck, SC1017, and to
#   sbatch itself before a "\n");
# - words are split at whitespace; '...' and "..." group characters (the quotes are dropped);
#   a backslash makes the next character literal, inside quotes too;
# - an unquoted `#` starts a comment: the rest of the line is ignored;
# - a bare `hetjob` or `packjob` (any case) separates heterogeneous job components, and a word
#   with no characters (`""`) is dropped and ends the line: either loses the rest of the line;
# - a word that starts with `:` is refused outright;
# - nothing is expanded: `$`, backquotes, `~`, `*` and `%` reach getopt as they are.
# So a word of plain characters is written bare, and any other in "..." with a backslash before
# each `\` and `"` (after its `--flag=`, for the reader: sbatch joins the two back).
_SBATCH_BARE = re.compile(r"[\w@%+=:,./\[\]-]+", re.ASCII)
_SBATCH_FLAG = re.compile(r"--[A-Za-z][\w-]*=", re.ASCII)
_SBATCH_SEPARATORS = frozenset(["hetjob", "packjob"])


def sbatch_word(word: str) -> str:
    """`word` as an `#SBATCH` line must write it for sbatch to read it back unchanged.

    Raises:
        ValueError: `word` is empty or holds a line break, which no `#SBATCH` line can carry.
    """
    if not word or "\n" in word or "\r" in word:
        raise ValueError(f"{word!r} cannot be written on an #SBATCH line")
    bare = _SBATCH_BARE.fullmatch(word) and not word.startswith(":")
    if bare and word.lower() not in _SBATCH_SEPARATORS:
        return word
    flag = _SBATCH_FLAG.match(word)
    head = flag[0] if flag else ""
    rest = word[len(head) :].replace("\\", "\\\\").replace('"', '\\"')
    return f'{head}"{rest}"'


def defaults_taken(spec: LaunchSpec, *, ray: bool = True) -> list[Comment]:
    """What nrl-launch decided for the scheduling keys the user left unset, one line each, for
    the script's header: a default that lands in sbatch (or leaves a flag out) is said."""
    lines = []
    if spec.slurm.exclusive is None:
        whole = spec.exclusive_nodes(ray=ray)
        why = "a Ray job takes every CPU and GPU of its nodes" if ray else "a job with GPUs"
        lines.append(
            "slurm.exclusive: not set, so "
            + (f"whole nodes (--exclusive), as {why}" if whole else "shared nodes (no GPUs)")
        )
    if spec.slurm.time is None:
        lines.append("slurm.time: not set, so no --time: the partition's default time limit")
    return [Comment(line) for line in lines]


def sbatch_directives(spec: LaunchSpec, *, ray: bool = True) -> list[SbatchDirective]:
    """The `#SBATCH` lines of the job script: the sorted flags of `sbatch_flags`, one a line,
    then the extra args in the user's order, a line from each word that starts with `-`.

    sbatch gives its command-line flags precedence over these lines, so submitting the argv of
    `plan` is unchanged; `--parsable` is left out (it changes only what sbatch prints), so that
    `sbatch job.sbatch` by hand prints what it always does."""
    lines = [[flag] for flag in sbatch_flags(spec, ray=ray)]
    extra: list[list[str]] = []
    for word in spec.slurm.extra_args:
        if word.startswith("-") or not extra:
            extra.append([])
        extra[-1].append(word)
    directives = [
        SbatchDirective("#SBATCH " + " ".join(sbatch_word(w) for w in words))
        for words in lines + extra
    ]
    if ray and spec.pools:
        # A heterogeneous job: sbatch reads the lines after `hetjob` as the second component.
        # The separator alone is written bare: a user's word "hetjob" is quoted (sbatch_word).
        directives.append(SbatchDirective("#SBATCH hetjob"))
        directives += [SbatchDirective(f"#SBATCH {sbatch_word(f)}") for f in pool_flags(spec)]
    return directives


def container_mounts(spec: LaunchSpec) -> list[str]:
    """The user's mounts, then each shared cache the container would not see otherwise."""
    mounts = [str(m) for m in spec.container.mounts]
    seen = [m.dst.rstrip("/") for m in spec.container.mounts]
    hidden = [
        r for r in spec.caches.roots() if not any(r == d or r.startswith(d + "/") for d in seen)
    ]
    return mounts + [f"{root}:{root}" for root in hidden]


def secrets_file(spec: LaunchSpec, script_path: str) -> str | None:
    """With slurm.secrets_via file, the file submit writes the secrets' values to: beside the
    job's script in the state dir, which is the user's alone."""
    return f"{script_path}.secrets" if spec.slurm.secrets_via == "file" else None


def withheld(spec: LaunchSpec, secrets: str | None) -> dict[str, Any]:
    """The Request's fields for the secrets file: the file, and the names sbatch goes without."""
    if secrets is None:
        return {}
    names = tuple(sorted(spec.required_secrets + spec.optional_secrets))
    return {"secrets_file": secrets, "withheld": names}


def _sbatch_request(
    spec: LaunchSpec, script_path: str, template: str, *, ray: bool, **values: Any
) -> Request:
    """The sbatch request of a Ray job (`plan`) or a plain one (`plan_plain`): the same sbatch
    flags, container mounts, secrets and environment from the same spec; `template` (with
    `values`) renders the script's header, which the node program of its kind follows."""
    # Extra args go last, in the user's order: they may be a flag followed by its value.
    flags = sbatch_flags(spec, ray=ray)
    pools = pool_flags(spec) if ray else []
    # A job with pools is heterogeneous: its second component's flags come after a `:`.
    second = (":", *pools) if pools else ()
    argv = ("sbatch", "--parsable", *flags, *spec.slurm.extra_args, *second, script_path)
    secrets = secrets_file(spec, script_path)
    script = render(
        template,
        spec=spec,
        ray=ray,
        version=__version__,
        submit_command=join(argv),
        defaults=defaults_taken(spec, ray=ray),
        sbatch_directives=sbatch_directives(spec, ray=ray),
        gpu_flag=gpu_flag(spec),
        # The caches too: the job exports UV_CACHE_DIR, HF_HOME... pointing there.
        mounts=",".join(container_mounts(spec)),
        secrets_file=secrets,
        **values,
    )
    if ray:
        script = job_script(
            script, "slurm", sandbox=spec.sandbox is not None, pools=bool(spec.pools)
        )
    else:
        script = job_script(script, "plain", remove_first=bool(values.get("remove_first")))
    return Request(
        argv=argv, script=script, environment=spec_environment(spec), **withheld(spec, secrets)
    )


def plan(spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME) -> Request:
    """The sbatch request for `spec`; `script_path` is where the script will be written."""
    exported = spec.sandbox.exported() if spec.sandbox else []
    return _sbatch_request(
        spec, script_path, TEMPLATE, ray=True, sandbox_export=exported, pools=pool_values(spec)
    )


# ---- Asking Slurm: the commands ----


def _sacct(job_ids: Sequence[str]) -> dict[str, SchedulerView]:
    ids = ",".join(job_ids)
    try:
        plain = runner.run(["sacct", "-n", "-P", "-X", "-j", ids, "-o", SACCT_FIELDS], check=False)
        if plain.returncode == 0 and "accounting storage is disabled" not in plain.stdout:
            return parse_sacct(plain.stdout)
        # No accounting database (as on the dev cluster): the job completion log still has
        # one line per finished job.
        comp = runner.run(["sacct", "-c", "-n", "-P", "-j", ids, "-o", SACCT_FIELDS], check=False)
    except SchedulerError:
        return {}
    return parse_sacct(comp.stdout) if comp.returncode == 0 else {}


def _scontrol(job_id: str) -> dict[str, SchedulerView]:
    try:
        shown = runner.run(["scontrol", "show", "job", "-o", job_id], check=False)
    except SchedulerError:
        return {}
    return parse_scontrol_job(shown.stdout) if shown.returncode == 0 else {}


def scheduler_views(job_ids: Sequence[str]) -> dict[str, SchedulerView]:
    """Slurm's view of each job: one squeue call for all of them, then one sacct call for those
    that have finished (squeue shows no exit code and forgets jobs after MinJobAge)."""
    if not job_ids:
        return {}
    argv = ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT]
    queue = runner.run(argv, check=False)
    if queue.returncode == 0:
        views = parse_squeue(queue.stdout)
    elif "Invalid job id" in queue.stderr:  # none of them is known to squeue any more
        views = {}
    else:
        raise SchedulerError.from_process(argv, queue.returncode, queue.stderr)
    finished = [i for i in job_ids if i not in views or state_phase(views[i].state).terminal]
    if finished:
        views.update(_sacct(finished))
    # Neither accounting nor a completion log (many sites keep one or the other, not all):
    # slurmctld still holds a finished job, exit code included, for MinJobAge: the jobs squeue
    # lists (its format has no exit code). One it does not list, scontrol does not know either.
    for job_id in finished:
        if job_id in views and views[job_id].exit_code is None:
            views.update(_scontrol(job_id))
    return views


class SlurmBackend:
    """Jobs queued with sbatch; a Ray job (`plan`) or a plain one (`plan_plain`)."""

    name = "slurm"
    slurm_cluster = True
    shares_files = True
    secrets_from_shell = True
    scheduler = "Slurm"

    def plan(
        self, spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID"
    ) -> Request:
        return plan(spec, script_path or DEFAULT_SCRIPT_NAME)

    def plan_plain(
        self, spec: LaunchSpec, script_path: str | None = None, *, remove_first: str | None = None
    ) -> Request:
        return plan_plain(spec, script_path or DEFAULT_SCRIPT_NAME, remove_first=remove_first)

    def check_chain(self, spec: LaunchSpec) -> None:
        return None  # Slurm's singleton dependency chains them

    def new_job_id(self) -> str:
        return ""  # Slurm numbers the job when sbatch queues it

    def batch_output(self, job_id: str) -> str:
        return batch_output(job_id)

    def submit(self, request: Request, *, job_id: str, cwd: Path, output: Path) -> Submitted:
        # The job's output file (slurm-<JOBID>.out), which Slurm makes with the umask sbatch
        # was run with, is its owner's alone, as the job's own files are. Secrets that travel
        # in a file are not in the environment Slurm keeps. The request's own variables (the
        # spec) reach the batch step through --export=ALL, as the rest of this environment does.
        env = {
            k: v
            for k, v in os.environ.items()
            # NRL_RETRY: which try of a --retries run a job is; never one a shell inherited.
            if k not in request.withheld and k != "NRL_RETRY"
        }
        env.update(request.environment)
        done = runner.run(list(request.argv), umask=0o077, env=env)
        queued = done.stdout.strip().split(";")[0]  # --parsable: ID or ID;CLUSTER
        if not queued.isdigit():
            raise UnconfirmedSubmitError(
                f"sbatch printed no job id (stdout: {done.stdout.strip()!r})"
            )
        return Submitted(queued)

    def describe(self, jobs: Sequence[JobRef]) -> dict[str, SchedulerView]:
        return scheduler_views([job.job_id for job in jobs])

    def cancel(self, jobs: Sequence[JobRef]) -> list[str]:
        # Each job's own trap stops Ray on every node and records the cancel.
        runner.run(["scancel", *(job.job_id for job in jobs)])
        return []

    def head_node(self, job: JobRef) -> str:
        """The first of Slurm's node list."""
        view = scheduler_views([job.job_id]).get(job.job_id)
        if view is None or not view.nodes:
            raise JobNotRunningError(f"Slurm gives no nodes for job {job.job_id}: is it running?")
        names = runner.run(["scontrol", "show", "hostnames", view.nodes]).stdout.split()
        if not names:
            raise SchedulerError(f"scontrol show hostnames {view.nodes} printed no node")
        return names[0]

    def dashboard_host(self, job: JobRef, head: str) -> str:
        return head

    def replica_log(self, job_id: str, worker: int) -> str:
        raise UsageError(f"job {job_id}'s logs are in its log dir, on this machine")


BACKEND = SlurmBackend()


# ---- Plain jobs: one command on every node, no Ray ----

PLAIN_TEMPLATE = "plain.sbatch.j2"


def plan_plain(
    spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME, *, remove_first: str | None = None
) -> Request:
    """Slurm without Ray (`run`, `pull`): the sbatch request that runs `spec.driver.command`
    once per node. The same sbatch flags, container flags, environment and log dir as the Ray
    job (`plan`), from the same spec; only the job script differs (PLAIN_TEMPLATE).

    `remove_first` is a file the job removes just before the command starts (pull --force).
    """
    if spec.ray.dedicated_head:
        # No Ray, so no head to give a node of its own: the command runs on slurm.nodes nodes.
        ray = spec.ray.model_copy(update={"dedicated_head": False})
        spec = spec.model_copy(update={"ray": ray})
    return _sbatch_request(spec, script_path, PLAIN_TEMPLATE, ray=False, remove_first=remove_first)
