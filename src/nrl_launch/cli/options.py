"""The job options shared by every command that builds a job spec (render, submit, config show,
plan, doctor, run, pull).

Each is declared once here as an `Annotated` type; a command names those it takes in its own
signature, and `job_flags` turns what they said into a `JobFlags`. A command to which an
option means nothing (pull has no nodes to choose) simply does not take it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch.errors import UsageError

if TYPE_CHECKING:
    from nrl_launch.api.specs import Inputs
    from nrl_launch.nemorl.job import Prepared
    from nrl_launch.spec.layers import Resolved, Setting

__all__ = [
    "Account",
    "BackendName",
    "Constraint",
    "Container",
    "ContainerRuntime",
    "DedicatedHead",
    "DriverCommand",
    "DryRun",
    "Envs",
    "Exclude",
    "Exclusive",
    "GpusPerNode",
    "Interactive",
    "JobFile",
    "JobFlags",
    "JobName",
    "Json",
    "LogDir",
    "Mounts",
    "NemoConfig",
    "NoCheck",
    "Nodes",
    "Partition",
    "Profile",
    "Qos",
    "Quiet",
    "Reservation",
    "Retries",
    "Secrets",
    "Sets",
    "Time",
    "job_flags",
    "job_flags_of",
]

_JOB = "Job spec"
_SLURM = "Slurm"
_RUN = "Container and run"
_NEMO = "NeMo RL"


# Flags of every command that queues a job (submit, run, pull), declared once.
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the job id.")]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the job script (its header holds the sbatch command); nothing is "
        "submitted or written.",
    ),
]


@dataclass(frozen=True)
class JobFlags:
    """What the shared options said: files to read, values to layer, the driver argv."""

    profile: Path | None
    job: tuple[Path, ...]  # -f, in the order given: a later file's values win
    values: dict[str, Any]  # spec key -> value, each labelled with its flag (see `labels`)
    labels: dict[str, str]
    sets: list[str]
    json: bool

    def inputs(self) -> Inputs:
        """The layers these flags give the spec, for the API's loading (`api.specs`)."""
        from nrl_launch.api.specs import Inputs
        from nrl_launch.spec.layers import Setting

        flags = tuple(Setting(k, v, self.labels[k]) for k, v in self.values.items())
        return Inputs(self.profile, self.job, flags, tuple(self.sets))

    def prepare(
        self, *, check: bool | None = None, need_driver: bool = True, notes: bool = True
    ) -> Prepared:
        """The spec with its NeMo RL config applied (sized, checked, driver command built);
        the warnings (and with `notes`, what was derived) are printed on stderr."""
        from nrl_launch.api import specs

        return specs.prepare(self.inputs(), check=check, need_driver=need_driver, notes=notes)

    def resolve(
        self, base: Sequence[Setting] = (), *, need_driver: bool = True, ray: bool = True
    ) -> Resolved:
        """The validated spec these flags describe, layered over the files and environment
        (and over `base`, the command's own defaults). Without `need_driver`, a spec that
        names no driver is read as an interactive job (doctor and plan run none). Without
        `ray`, the job starts no Ray (run, pull): no warning about what only Ray reads."""
        from nrl_launch.api import specs

        return specs.resolve(self.inputs(), base, need_driver=need_driver, ray=ray)


def _option(*names: str, help: str, panel: str, metavar: str | None = None) -> Any:
    return typer.Option(
        *names, help=help, rich_help_panel=panel, show_default=False, metavar=metavar
    )


# The job options, one type each: a command takes those that mean something to it by naming
# them in its signature (`nodes: Nodes = None`) and hands them to `job_flags`.
Profile = Annotated[
    Path | None,
    _option(
        "--profile",
        help="Profile YAML (default: $NRL_LAUNCH_PROFILE, ./nrl-launch.yaml, then "
        "~/.config/nrl-launch/profile.yaml).",
        panel=_JOB,
        metavar="FILE",
    ),
]
JobFile = Annotated[
    list[Path] | None,
    _option(
        "-f",
        "--job",
        help="Job spec YAML, layered over the profile; given again, the later file's values win.",
        panel=_JOB,
        metavar="FILE",
    ),
]
SET_HELP = "Set any spec key, last and highest: --set slurm.nodes=4 (repeatable)."
Sets = Annotated[list[str] | None, _option("--set", help=SET_HELP, panel=_JOB, metavar="KEY=VALUE")]
BackendName = Annotated[
    str | None,
    _option(
        "--backend",
        help="slurm (default); local: the same job on this machine, one node; lepton: DGX "
        "Cloud Lepton (a lepton: section in the job spec).",
        panel=_JOB,
        metavar="slurm|local|lepton",
    ),
]
Nodes = Annotated[
    int | None,
    _option("-N", "--nodes", help="Nodes to allocate (default: 1).", panel=_SLURM, metavar="N"),
]
Exclusive = Annotated[
    bool | None,
    _option(
        "--exclusive/--no-exclusive",
        help="Whole nodes, or share them (default: whole nodes for a Ray job, whose Ray takes "
        "every CPU and GPU of a node, and for a command with GPUs).",
        panel=_SLURM,
    ),
]
DedicatedHead = Annotated[
    bool,
    _option(
        "--dedicated-head",
        help="Run the Ray head and the driver on a node of their own, one more than --nodes "
        "(the GPU nodes); its GPUs stay idle.",
        panel=_SLURM,
    ),
]
GpusPerNode = Annotated[
    int | None,
    _option(
        "--gpus-per-node",
        help="GPUs per node, asked for as --gres=gpu:N (default: 8).",
        panel=_SLURM,
        metavar="N",
    ),
]
Time = Annotated[
    str | None,
    _option(
        "-t",
        "--time",
        help="Time limit, as sbatch reads it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
        "(4:00 is 4 minutes; default: the partition's).",
        panel=_SLURM,
        metavar="TIME",
    ),
]
Account = Annotated[
    str | None, _option("-A", "--account", help="Slurm account.", panel=_SLURM, metavar="NAME")
]
Partition = Annotated[
    str | None,
    _option("-p", "--partition", help="Slurm partition.", panel=_SLURM, metavar="NAME"),
]
JobName = Annotated[
    str | None, _option("-J", "--job-name", help="Slurm job name.", panel=_SLURM, metavar="NAME")
]
Qos = Annotated[
    str | None, _option("--qos", help="Slurm quality of service.", panel=_SLURM, metavar="NAME")
]
Constraint = Annotated[
    str | None,
    _option(
        "--constraint",
        help="Node features the nodes must have, as sbatch reads them (h100&ib).",
        panel=_SLURM,
        metavar="FEATURES",
    ),
]
Reservation = Annotated[
    str | None,
    _option("--reservation", help="Slurm reservation.", panel=_SLURM, metavar="NAME"),
]
Exclude = Annotated[
    str | None,
    _option(
        "--exclude",
        help="Nodes not to run on (a Slurm hostlist: node[1-3]).",
        panel=_SLURM,
        metavar="NODES",
    ),
]
Retries = Annotated[
    int | None,
    _option(
        "--retries",
        help="Spare tries Slurm starts when a try fails for a cause another try can fix (a "
        "node or its Ray lost, a stall, preemption); each resumes from the newest checkpoint "
        "(slurm.retries).",
        panel=_SLURM,
        metavar="N",
    ),
]
Container = Annotated[
    str | None,
    _option(
        "--container",
        help="Container image: a registry reference or a .sqsh path (implies pyxis).",
        panel=_RUN,
        metavar="IMAGE",
    ),
]
ContainerRuntime = Annotated[
    str | None,
    _option(
        "--container-runtime",
        help="pyxis (the default with --container) or none.",
        panel=_RUN,
        metavar="pyxis|none",
    ),
]
Mounts = Annotated[
    list[str] | None,
    _option(
        "--mount",
        help="Bind mount into the container (repeatable; replaces container.mounts).",
        panel=_RUN,
        metavar="SRC:DST[:FLAGS]",
    ),
]
Envs = Annotated[
    list[str] | None,
    _option(
        "--env",
        help="Environment variable for every node (repeatable).",
        panel=_RUN,
        metavar="NAME=VALUE",
    ),
]
Secrets = Annotated[
    list[str] | None,
    _option(
        "--secret",
        help="Pass this variable from your environment by name, never by value (repeatable).",
        panel=_RUN,
        metavar="NAME",
    ),
]
LogDir = Annotated[
    str | None,
    _option(
        "--log-dir",
        help="Base dir of <JOBID>-logs/ (relative: to the submit dir).",
        panel=_RUN,
        metavar="DIR",
    ),
]
Interactive = Annotated[
    bool,
    _option("--interactive", help="No driver: keep the cluster up for attach.", panel=_RUN),
]
NemoConfig = Annotated[
    str | None,
    _option(
        "--config",
        help="NeMo RL config: sizes and checks the job; with a RECIPE, builds the driver command.",
        panel=_NEMO,
        metavar="FILE",
    ),
]
NoCheck = Annotated[
    bool,
    _option(
        "--no-check",
        help="Do not refuse a job whose NeMo RL config does not fit it, or whose container "
        "checks fail (problems become warnings).",
        panel=_NEMO,
    ),
]
Json = Annotated[
    bool, _option("--json", help="Print a versioned JSON object instead of text.", panel="Output")
]
DriverCommand = Annotated[
    list[str] | None,
    typer.Argument(
        help="The driver, after --: -- uv run examples/run_grpo.py --config c.yaml; "
        "with --config: RECIPE (grpo, sft, dpo, ...) and Hydra OVERRIDES.",
        metavar="CMD",
        show_default=False,
    ),
]

# The options that set one spec key each, with the flag that labels the value.
_KEYED = {
    "backend": ("backend", "--backend"),
    "nodes": ("slurm.nodes", "--nodes"),
    "dedicated_head": ("ray.dedicated_head", "--dedicated-head"),
    "gpus_per_node": ("slurm.gpus_per_node", "--gpus-per-node"),
    "exclusive": ("slurm.exclusive", "--exclusive"),
    "time": ("slurm.time", "--time"),
    "account": ("slurm.account", "--account"),
    "partition": ("slurm.partition", "--partition"),
    "job_name": ("slurm.job_name", "--job-name"),
    "qos": ("slurm.qos", "--qos"),
    "constraint": ("slurm.constraint", "--constraint"),
    "reservation": ("slurm.reservation", "--reservation"),
    "exclude": ("slurm.exclude", "--exclude"),
    "retries": ("slurm.retries", "--retries"),
    "container": ("container.image", "--container"),
    "container_runtime": ("container.runtime", "--container-runtime"),
    "mount": ("container.mounts", "--mount"),
    "log_dir": ("logs.base_dir", "--log-dir"),
    "config": ("nemo_rl.config", "--config"),
}


def job_flags(
    *,
    profile: Path | None = None,
    job: list[Path] | None = None,
    set_: list[str] | None = None,
    backend: str | None = None,
    nodes: int | None = None,
    dedicated_head: bool = False,
    gpus_per_node: int | None = None,
    exclusive: bool | None = None,
    time: str | None = None,
    account: str | None = None,
    partition: str | None = None,
    job_name: str | None = None,
    qos: str | None = None,
    constraint: str | None = None,
    reservation: str | None = None,
    exclude: str | None = None,
    retries: int | None = None,
    container: str | None = None,
    container_runtime: str | None = None,
    mount: list[str] | None = None,
    env: list[str] | None = None,
    secret: list[str] | None = None,
    log_dir: str | None = None,
    interactive: bool = False,
    config: str | None = None,
    no_check: bool = False,
    json: bool = False,
    command: list[str] | None = None,
) -> JobFlags:
    """What a command's job options said, as one `JobFlags` (each value labelled with its
    flag). A command passes the options it takes; the others keep these defaults."""
    keyed = {
        "backend": backend,
        "nodes": nodes,
        "dedicated_head": dedicated_head or None,  # a switch: set only when given
        "gpus_per_node": gpus_per_node,
        "exclusive": exclusive,
        "time": time,
        "account": account,
        "partition": partition,
        "job_name": job_name,
        "qos": qos,
        "constraint": constraint,
        "reservation": reservation,
        "exclude": exclude,
        "retries": retries,
        "container": container,
        "container_runtime": container_runtime,
        "mount": mount,
        "log_dir": log_dir,
        "config": config,
    }
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}

    def put(key: str, value: Any, label: str) -> None:
        values[key], labels[key] = value, label

    for param, value in keyed.items():
        if value not in (None, []):
            key, label = _KEYED[param]
            put(key, value, label)
    if container and not container_runtime:
        put("container.runtime", "pyxis", "--container")  # an image means a container
    for key, value, label in _named_items(env or [], secret or []):
        put(key, value, label)
    words = command or []
    from nrl_launch.nemorl import words as recipe_words

    recipe_words.no_bare_recipe(words, config)
    if no_check:
        put("nemo_rl.check", False, "--no-check")
    if config is not None:
        for key, (value, label) in recipe_words.recipe_words(words, config).items():
            put(key, value, label)
        words = []
    if interactive:
        if words:
            raise UsageError("--interactive and a driver command after -- cannot be combined")
        put("interactive", True, "--interactive")
        put("driver.command", None, "--interactive")
    elif words:
        put("driver.command", list(words), "-- CMD")
        put("interactive", False, "-- CMD")
    return JobFlags(
        profile=profile,
        job=tuple(job or ()),
        values=values,
        labels=labels,
        sets=set_ or [],
        json=json,
    )


_JOB_OPTIONS = frozenset(inspect.signature(job_flags).parameters)


def job_flags_of(params: Mapping[str, Any]) -> JobFlags:
    """`job_flags` of a command's own parameters (its `locals()` on entry): the job options
    among them, by name, each declared in its signature with the types above."""
    return job_flags(**{name: value for name, value in params.items() if name in _JOB_OPTIONS})


def _named_items(env: list[str], secrets: list[str]) -> list[tuple[str, str, str]]:
    """--env NAME=VALUE and --secret NAME as (spec key, value, label); a secret so named is
    required at submit."""
    found = []
    for item in env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        found.append((f"env.{name}", value, "--env"))
    found += [(f"secrets.{name}", "required", "--secret") for name in secrets]
    return found
