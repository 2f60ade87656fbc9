"""The job options shared by every command that builds a job spec (render, submit, config show,
plan, doctor, run, pull), declared once.

Each is an `Annotated` type (the typer Option or Argument), and one row of JOB_OPTIONS names its
parameter, default and the spec key it sets. A command says which it takes with
`@job_command(...)`, which writes them into the signature typer reads (its flags, --help and
completion) and hands the command what they said as one `JobFlags`. A command to which an
option means nothing (pull has no nodes to choose) simply does not take it.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from nrl_launch.errors import UsageError
from nrl_launch.nemorl import words as recipe_words
from nrl_launch.spec.setting import Setting

if TYPE_CHECKING:
    from nrl_launch.api.specs import Inputs
    from nrl_launch.nemorl.job import Prepared
    from nrl_launch.spec.layers import Resolved

# What the commands import; the other options are rows of JOB_OPTIONS, taken by name.
__all__ = [
    "ALL_OPTIONS",
    "JOB_OPTIONS",
    "RAY_ONLY",
    "SUBMIT_ONLY",
    "Account",
    "Container",
    "DryRun",
    "GpusPerNode",
    "JobFlags",
    "JobOption",
    "Json",
    "LogDir",
    "Mounts",
    "Partition",
    "Quiet",
    "job_command",
    "job_flags",
    "option_info",
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
        from nrl_launch.api import specs  # the spec's reader (yaml): not for --help (test_imports)

        flags = tuple(Setting(k, v, self.labels[k]) for k, v in self.values.items())
        return specs.Inputs(self.profile, self.job, flags, tuple(self.sets))

    def prepare(
        self, *, check: bool | None = None, need_driver: bool = True, notes: bool = True
    ) -> Prepared:
        """The spec with its NeMo RL config applied (sized, checked, driver command built);
        the warnings (and with `notes`, what was derived) are printed on stderr."""
        from nrl_launch.api import specs  # the spec's reader: as in `inputs`

        return specs.prepare(self.inputs(), check=check, need_driver=need_driver, notes=notes)

    def resolve(
        self, base: Sequence[Setting] = (), *, need_driver: bool = True, ray: bool = True
    ) -> Resolved:
        """The validated spec these flags describe, layered over the files and environment
        (and over `base`, the command's own defaults). Without `need_driver`, a spec that
        names no driver is read as an interactive job (doctor and plan run none). Without
        `ray`, the job starts no Ray (run, pull): no warning about what only Ray reads."""
        from nrl_launch.api import specs  # the spec's reader: as in `inputs`

        return specs.resolve(self.inputs(), base, need_driver=need_driver, ray=ray)


def option_info(
    *names: str, help: str, panel: str | None = None, metavar: str | None = None
) -> Any:
    """An option as the job's and the sweep's are shown: its help, in its panel, no default."""
    return typer.Option(
        *names, help=help, rich_help_panel=panel, show_default=False, metavar=metavar
    )


# The job options, one type each (and one row each in JOB_OPTIONS, below).
Profile = Annotated[
    Path | None,
    option_info(
        "--profile",
        help="Profile YAML (default: $NRL_LAUNCH_PROFILE, ./nrl-launch.yaml, then "
        "~/.config/nrl-launch/profile.yaml).",
        panel=_JOB,
        metavar="FILE",
    ),
]
JobFile = Annotated[
    list[Path] | None,
    option_info(
        "-f",
        "--job",
        help="Job spec YAML, layered over the profile; given again, the later file's values win.",
        panel=_JOB,
        metavar="FILE",
    ),
]
SET_HELP = "Set any spec key, last and highest: --set slurm.nodes=4 (repeatable)."
Sets = Annotated[
    list[str] | None, option_info("--set", help=SET_HELP, panel=_JOB, metavar="KEY=VALUE")
]
BackendName = Annotated[
    str | None,
    option_info(
        "--backend",
        help="slurm (default); local: the same job on this machine, one node; lepton: DGX "
        "Cloud Lepton (a lepton: section in the job spec).",
        panel=_JOB,
        metavar="slurm|local|lepton",
    ),
]
Nodes = Annotated[
    int | None,
    option_info("-N", "--nodes", help="Nodes to allocate (default: 1).", panel=_SLURM, metavar="N"),
]
Exclusive = Annotated[
    bool | None,
    option_info(
        "--exclusive/--no-exclusive",
        help="Whole nodes, or share them (default: whole nodes for a Ray job, whose Ray takes "
        "every CPU and GPU of a node, and for a command with GPUs).",
        panel=_SLURM,
    ),
]
DedicatedHead = Annotated[
    bool,
    option_info(
        "--dedicated-head",
        help="Run the Ray head and the driver on a node of their own, one more than --nodes "
        "(the GPU nodes); its GPUs stay idle.",
        panel=_SLURM,
    ),
]
GpusPerNode = Annotated[
    int | None,
    option_info(
        "--gpus-per-node",
        help="GPUs per node, asked for as --gres=gpu:N (default: 8).",
        panel=_SLURM,
        metavar="N",
    ),
]
Time = Annotated[
    str | None,
    option_info(
        "-t",
        "--time",
        help="Time limit, as sbatch reads it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
        "(4:00 is 4 minutes; default: the partition's).",
        panel=_SLURM,
        metavar="TIME",
    ),
]
Account = Annotated[
    str | None, option_info("-A", "--account", help="Slurm account.", panel=_SLURM, metavar="NAME")
]
Partition = Annotated[
    str | None,
    option_info("-p", "--partition", help="Slurm partition.", panel=_SLURM, metavar="NAME"),
]
JobName = Annotated[
    str | None,
    option_info("-J", "--job-name", help="Slurm job name.", panel=_SLURM, metavar="NAME"),
]
Qos = Annotated[
    str | None, option_info("--qos", help="Slurm quality of service.", panel=_SLURM, metavar="NAME")
]
Constraint = Annotated[
    str | None,
    option_info(
        "--constraint",
        help="Node features the nodes must have, as sbatch reads them (h100&ib).",
        panel=_SLURM,
        metavar="FEATURES",
    ),
]
Reservation = Annotated[
    str | None,
    option_info("--reservation", help="Slurm reservation.", panel=_SLURM, metavar="NAME"),
]
Exclude = Annotated[
    str | None,
    option_info(
        "--exclude",
        help="Nodes not to run on (a Slurm hostlist: node[1-3]).",
        panel=_SLURM,
        metavar="NODES",
    ),
]
Retries = Annotated[
    int | None,
    option_info(
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
    option_info(
        "--container",
        help="Container image: a registry reference or a .sqsh path (implies pyxis).",
        panel=_RUN,
        metavar="IMAGE",
    ),
]
ContainerRuntime = Annotated[
    str | None,
    option_info(
        "--container-runtime",
        help="pyxis (the default with --container) or none.",
        panel=_RUN,
        metavar="pyxis|none",
    ),
]
Mounts = Annotated[
    list[str] | None,
    option_info(
        "--mount",
        help="Bind mount into the container (repeatable; replaces container.mounts).",
        panel=_RUN,
        metavar="SRC:DST[:FLAGS]",
    ),
]
Envs = Annotated[
    list[str] | None,
    option_info(
        "--env",
        help="Environment variable for every node (repeatable).",
        panel=_RUN,
        metavar="NAME=VALUE",
    ),
]
Secrets = Annotated[
    list[str] | None,
    option_info(
        "--secret",
        help="Pass this variable from your environment by name, never by value (repeatable).",
        panel=_RUN,
        metavar="NAME",
    ),
]
LogDir = Annotated[
    str | None,
    option_info(
        "--log-dir",
        help="Base dir of <JOBID>-logs/ (relative: to the submit dir).",
        panel=_RUN,
        metavar="DIR",
    ),
]
Interactive = Annotated[
    bool,
    option_info("--interactive", help="No driver: keep the cluster up for attach.", panel=_RUN),
]
NemoConfig = Annotated[
    str | None,
    option_info(
        "--config",
        help="NeMo RL config: sizes and checks the job; with a RECIPE, builds the driver command.",
        panel=_NEMO,
        metavar="FILE",
    ),
]
NoCheck = Annotated[
    bool,
    option_info(
        "--no-check",
        help="Do not refuse a job whose NeMo RL config does not fit it, or whose container "
        "checks fail (problems become warnings).",
        panel=_NEMO,
    ),
]
Json = Annotated[
    bool,
    option_info("--json", help="Print a versioned JSON object instead of text.", panel="Output"),
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

# ---- The table: which parameter each option is, its default, the spec key it sets ----


@dataclass(frozen=True)
class JobOption:
    """One job option as commands take it: the parameter's name, its type (the `Annotated`
    type above, which holds the typer Option or Argument), its default, and the spec key it
    sets, labelled with its flag (None: `job_flags` reads the value itself)."""

    name: str
    type: Any
    default: Any = None
    key: str | None = None

    @property
    def flag(self) -> str:
        """The long flag, the label of the value it sets (--exclusive of --[no-]exclusive)."""
        info = typing.get_args(self.type)[1]  # typer.Option("--a", "-b"): its default is "--a"
        names = (info.default, *(info.param_decls or ()))
        return next(str(n).split("/")[0] for n in names if str(n).startswith("--"))


# Every job option, in the order a command's --help lists them. `json` and `command` close the
# list, after the command's own options (see `job_command`).
JOB_OPTIONS: tuple[JobOption, ...] = (
    JobOption("profile", Profile),
    JobOption("job", JobFile),
    JobOption("set_", Sets),
    JobOption("backend", BackendName, key="backend"),
    JobOption("nodes", Nodes, key="slurm.nodes"),
    JobOption("dedicated_head", DedicatedHead, False, key="ray.dedicated_head"),
    JobOption("gpus_per_node", GpusPerNode, key="slurm.gpus_per_node"),
    JobOption("exclusive", Exclusive, key="slurm.exclusive"),
    JobOption("time", Time, key="slurm.time"),
    JobOption("account", Account, key="slurm.account"),
    JobOption("partition", Partition, key="slurm.partition"),
    JobOption("job_name", JobName, key="slurm.job_name"),
    JobOption("qos", Qos, key="slurm.qos"),
    JobOption("constraint", Constraint, key="slurm.constraint"),
    JobOption("reservation", Reservation, key="slurm.reservation"),
    JobOption("exclude", Exclude, key="slurm.exclude"),
    JobOption("retries", Retries, key="slurm.retries"),
    JobOption("container", Container, key="container.image"),
    JobOption("container_runtime", ContainerRuntime, key="container.runtime"),
    JobOption("mount", Mounts, key="container.mounts"),
    JobOption("env", Envs),
    JobOption("secret", Secrets),
    JobOption("log_dir", LogDir, key="logs.base_dir"),
    JobOption("interactive", Interactive, False),
    JobOption("config", NemoConfig, key="nemo_rl.config"),
    JobOption("no_check", NoCheck, False),
    JobOption("json", Json, False),
    JobOption("command", DriverCommand),
)
_CLOSING = ("json", "command")

# Which commands take which: every option, less these groups.
ALL_OPTIONS = frozenset(option.name for option in JOB_OPTIONS)
SUBMIT_ONLY = frozenset({"retries"})  # spare tries are queued: only submit takes it
# What only a Ray job reads: run and pull start no Ray (run refuses --interactive by name).
RAY_ONLY = frozenset({"backend", "dedicated_head", "interactive", "config"})

_R = TypeVar("_R")
_KEYWORD = inspect.Parameter.KEYWORD_ONLY  # typer calls a command with keywords only


def job_command(
    takes: Collection[str], **variants: Any
) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """A command that takes the job options named in `takes`: its signature, which typer reads
    for the flags, --help and completion, is its own parameters with the job options where
    its `flags: JobFlags` parameter stands (in JOB_OPTIONS' order; --json and CMD last), and it
    is called with what they said as `flags`. `variants` give an option a type of the
    command's own (run's --no-check, whose help speaks of containers only)."""
    taken = [option for option in JOB_OPTIONS if option.name in takes]
    unknown = (set(takes) - ALL_OPTIONS) | (variants.keys() - set(takes))
    if unknown:
        raise ValueError(f"job_command: not a job option it takes: {sorted(unknown)}")
    options = [
        inspect.Parameter(
            o.name, _KEYWORD, annotation=variants.get(o.name, o.type), default=o.default
        )
        for o in taken
    ]
    middle = [p for p in options if p.name not in _CLOSING]
    closing = [p for p in options if p.name in _CLOSING]

    def decorate(function: Callable[..., _R]) -> Callable[..., _R]:
        own = inspect.signature(function, eval_str=True).parameters.values()
        own_params = [p.replace(kind=_KEYWORD) for p in own]
        at = [p.name for p in own_params].index("flags")
        params = [*own_params[:at], *middle, *own_params[at + 1 :], *closing]

        @functools.wraps(function)  # its name, and its docstring: the command's help
        def command(**given: Any) -> _R:
            flags = job_flags(**{o.name: given.pop(o.name) for o in taken})
            return function(**given, flags=flags)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate


def job_flags(**given: Any) -> JobFlags:
    """What a command's job options said (by parameter name: `nodes=4`), as one `JobFlags`,
    each value labelled with its flag. Options not given keep their defaults."""
    unknown = given.keys() - ALL_OPTIONS
    if unknown:
        raise TypeError(f"job_flags: not a job option: {sorted(unknown)}")
    said = {option.name: option.default for option in JOB_OPTIONS} | given
    # Each option that sets one key, when given: a switch that is off (dedicated_head) says nothing.
    items = [
        (o.key, said[o.name], o.flag)
        for o in JOB_OPTIONS
        if o.key is not None and said[o.name] not in (None, [], o.default)
    ]
    if said["container"] and not said["container_runtime"]:
        items.append(("container.runtime", "pyxis", "--container"))  # an image means a container
    items += _named_items(said["env"] or [], said["secret"] or [])
    items += _driver_items(
        said["command"] or [],
        said["config"],
        interactive=said["interactive"],
        no_check=said["no_check"],
    )
    return JobFlags(
        profile=said["profile"],
        job=tuple(said["job"] or ()),
        values={key: value for key, value, _ in items},  # a later item wins
        labels={key: label for key, _, label in items},
        sets=said["set_"] or [],
        json=said["json"],
    )


def _driver_items(
    words: list[str], config: str | None, *, interactive: bool, no_check: bool
) -> list[tuple[str, Any, str]]:
    """The driver command after --, --config's recipe and overrides, --interactive and
    --no-check as (spec key, value, label)."""
    recipe_words.no_bare_recipe(words, config)
    found: list[tuple[str, Any, str]] = []
    if no_check:
        found.append(("nemo_rl.check", False, "--no-check"))
    if config is not None:
        recipe = recipe_words.recipe_words(words, config)
        found += [(key, value, label) for key, (value, label) in recipe.items()]
        words = []
    if interactive:
        if words:
            raise UsageError("--interactive and a driver command after -- cannot be combined")
        found += [("interactive", True, "--interactive"), ("driver.command", None, "--interactive")]
    elif words:
        found += [("driver.command", list(words), "-- CMD"), ("interactive", False, "-- CMD")]
    return found


def _named_items(env: list[str], secrets: list[str]) -> list[tuple[str, Any, str]]:
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
