"""The job options shared by every command that builds a job spec (render, submit, config show,
run, pull).

They are declared once here; `job_options` adds them to a command's signature, so every such
command takes exactly the same flags, and turns them into a `JobFlags`. `some_job_options` adds
only some of them, for a command to which the others mean nothing (pull has no nodes to choose).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from nrl_launch.errors import UsageError

if TYPE_CHECKING:
    from nrl_launch.layers import Resolved, Setting
    from nrl_launch.nemorl.job import Prepared

__all__ = ["DryRun", "JobFlags", "Quiet", "job_options", "some_job_options"]

F = TypeVar("F", bound=Callable[..., Any])

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
    job: Path | None
    values: dict[str, Any]  # spec key -> value, each labelled with its flag (see `labels`)
    labels: dict[str, str]
    sets: list[str]
    json: bool

    def prepare(
        self, *, check: bool | None = None, need_driver: bool = True, notes: bool = True
    ) -> Prepared:
        """The spec with its NeMo RL config applied (sized, checked, driver command built);
        the warnings (and with `notes`, what was derived) are printed on stderr."""
        from nrl_launch import output
        from nrl_launch.nemorl.job import prepare

        prepared = prepare(self.resolve(need_driver=need_driver), check=check)
        for note in prepared.notes if notes else ():
            output.note(note)
        for warning in prepared.warnings:
            output.warn(warning)
        if check is None:  # problems left here were let through by --no-check: still say them
            for problem in prepared.problems:
                output.warn(problem)
        return prepared

    def resolve(self, base: Sequence[Setting] = (), *, need_driver: bool = True) -> Resolved:
        """The validated spec these flags describe, layered over the files and environment
        (and over `base`, the command's own defaults). Without `need_driver`, a spec that
        names no driver is read as an interactive job (doctor and plan run none)."""
        from nrl_launch import layers  # pydantic and yaml load here, not for --help
        from nrl_launch.errors import ConfigError

        def load(base: Sequence[Setting]) -> Resolved:
            return layers.load(
                base=base,
                profile=self.profile,
                job_file=self.job,
                environ=os.environ,
                cwd=Path.cwd(),
                flags=[layers.Setting(k, v, self.labels[k]) for k, v in self.values.items()],
                sets=self.sets,
            )

        try:
            return load(base)
        except ConfigError as exc:
            if need_driver or not any(
                p.startswith("driver.command is not set") for p in exc.problems
            ):
                raise
        return load([*base, layers.Setting("interactive", True, "no driver needed")])


@dataclass(frozen=True)
class _Option:
    param: str
    kind: Any
    names: tuple[str, ...]  # empty for the positional driver command
    help: str
    panel: str
    key: str | None = None  # the spec key it sets directly, if any
    metavar: str | None = None

    def typer_param(self) -> Any:
        if not self.names:
            return typer.Argument(help=self.help, metavar=self.metavar, show_default=False)
        return typer.Option(
            *self.names,
            help=self.help,
            rich_help_panel=self.panel,
            show_default=False,
            metavar=self.metavar,
        )


_OPTIONS = [
    _Option(
        "profile",
        Path | None,
        ("--profile",),
        "Profile YAML (default: $NRL_LAUNCH_PROFILE, "
        "./nrl-launch.yaml, then ~/.config/nrl-launch/profile.yaml).",
        _JOB,
        metavar="FILE",
    ),
    _Option(
        "job",
        Path | None,
        ("-f", "--job"),
        "Job spec YAML, layered over the profile.",
        _JOB,
        metavar="FILE",
    ),
    _Option(
        "set_",
        list[str] | None,
        ("--set",),
        "Set any spec key, last and highest: --set slurm.nodes=4 (repeatable).",
        _JOB,
        metavar="KEY=VALUE",
    ),
    _Option(
        "backend",
        str | None,
        ("--backend",),
        "slurm (default), or local: the same job on this machine, one node.",
        _JOB,
        "backend",
        "NAME",
    ),
    _Option("nodes", int | None, ("--nodes",), "Nodes to allocate.", _SLURM, "slurm.nodes", "N"),
    _Option(
        "gpus_per_node",
        int | None,
        ("--gpus-per-node",),
        "GPUs per node.",
        _SLURM,
        "slurm.gpus_per_node",
        "N",
    ),
    _Option(
        "time",
        str | None,
        ("--time",),
        "Time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.",
        _SLURM,
        "slurm.time",
        "TIME",
    ),
    _Option(
        "account", str | None, ("--account",), "Slurm account.", _SLURM, "slurm.account", "NAME"
    ),
    _Option(
        "partition",
        str | None,
        ("--partition",),
        "Slurm partition.",
        _SLURM,
        "slurm.partition",
        "NAME",
    ),
    _Option(
        "job_name", str | None, ("--job-name",), "Slurm job name.", _SLURM, "slurm.job_name", "NAME"
    ),
    _Option(
        "container",
        str | None,
        ("--container",),
        "Container image: a registry reference or a .sqsh path (implies pyxis).",
        _RUN,
        "container.image",
        "IMAGE",
    ),
    _Option(
        "container_runtime",
        str | None,
        ("--container-runtime",),
        "pyxis or none.",
        _RUN,
        "container.runtime",
        "RUNTIME",
    ),
    _Option(
        "mount",
        list[str] | None,
        ("--mount",),
        "Bind mount SRC:DST[:FLAGS] (repeatable; replaces container.mounts).",
        _RUN,
        "container.mounts",
        "SRC:DST",
    ),
    _Option(
        "env",
        list[str] | None,
        ("--env",),
        "Environment variable for every node (repeatable).",
        _RUN,
        metavar="NAME=VALUE",
    ),
    _Option(
        "secret",
        list[str] | None,
        ("--secret",),
        "Pass this variable from your environment by name, never by value (repeatable).",
        _RUN,
        metavar="NAME",
    ),
    _Option(
        "log_dir",
        str | None,
        ("--log-dir",),
        "Base dir of <JOBID>-logs/ (relative: to the submit dir).",
        _RUN,
        "logs.base_dir",
        "DIR",
    ),
    _Option(
        "interactive", bool, ("--interactive",), "No driver: keep the cluster up for attach.", _RUN
    ),
    _Option(
        "config",
        str | None,
        ("--config",),
        "NeMo RL config: sizes and checks the job; with a RECIPE, builds the driver command.",
        _NEMO,
        "nemo_rl.config",
        "FILE",
    ),
    _Option(
        "no_check",
        bool,
        ("--no-check",),
        "Do not refuse a job whose NeMo RL config does not fit it, or whose container checks "
        "fail (problems become warnings).",
        _NEMO,
    ),
    _Option("json", bool, ("--json",), "Print a versioned JSON object instead of text.", "Output"),
    _Option(
        "command",
        list[str] | None,
        (),
        "The driver, after --: -- uv run examples/run_grpo.py --config c.yaml; "
        "with --config: RECIPE (grpo, sft, dpo, ...) and Hydra OVERRIDES.",
        _RUN,
        metavar="CMD",
    ),
]


def _job_flags(kwargs: dict[str, Any]) -> JobFlags:
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}

    def put(key: str, value: Any, label: str) -> None:
        values[key], labels[key] = value, label

    for option in _OPTIONS:
        value = kwargs[option.param]
        if option.key is not None and value not in (None, []):
            put(option.key, value, option.names[-1])
    if kwargs["container"] and not kwargs["container_runtime"]:
        put("container.runtime", "pyxis", "--container")  # an image means a container
    for key, value, label in _named_items(kwargs["env"] or [], kwargs["secret"] or []):
        put(key, value, label)
    command = kwargs["command"] or []
    _no_bare_recipe(command, kwargs["config"])
    if kwargs["no_check"]:
        put("nemo_rl.check", False, "--no-check")
    if kwargs["config"] is not None:
        for key, (value, label) in _recipe_words(command).items():
            put(key, value, label)
        command = []
    if kwargs["interactive"]:
        if command:
            raise UsageError("--interactive and a driver command after -- cannot be combined")
        put("interactive", True, "--interactive")
        put("driver.command", None, "--interactive")
    elif command:
        put("driver.command", list(command), "-- CMD")
        put("interactive", False, "-- CMD")
    return JobFlags(
        profile=kwargs["profile"],
        job=kwargs["job"],
        values=values,
        labels=labels,
        sets=kwargs["set_"] or [],
        json=kwargs["json"],
    )


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


def _no_bare_recipe(command: list[str], config: str | None) -> None:
    """`submit grpo` without --config would run a program named grpo: say what is missing."""
    from nrl_launch.spec import DEFAULT_DRIVERS

    if config is None and command and command[0] in DEFAULT_DRIVERS:
        raise UsageError(f"RECIPE {command[0]}: give the NeMo RL config with --config FILE")


def _recipe_words(words: list[str]) -> dict[str, tuple[Any, str]]:
    """With --config, the words are [RECIPE] OVERRIDES...: an override holds = or starts ~."""
    found: dict[str, tuple[Any, str]] = {}
    if words and "=" not in words[0] and not words[0].startswith(("~", "+")):
        found["nemo_rl.recipe"] = (words[0], "RECIPE")
        found["interactive"] = (False, "RECIPE")
        words = words[1:]
    if words:
        found["nemo_rl.overrides"] = (list(words), "OVERRIDES")
    return found


def job_options(func: F) -> F:
    """Give `func` the shared job options; it receives them as one `flags: JobFlags`."""
    return _with_options(func, _OPTIONS)


def some_job_options(*params: str, helps: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """Like `job_options`, with only the options named (by parameter name, e.g. "account"),
    and `helps` to say what one means to this command; the others keep their defaults."""
    helps = helps or {}
    unknown = (set(params) | set(helps)) - {o.param for o in _OPTIONS}
    if unknown:
        raise ValueError(f"no such job option: {sorted(unknown)}")
    chosen = [
        dataclasses.replace(o, help=helps.get(o.param, o.help))
        for o in _OPTIONS
        if o.param in params
    ]
    return lambda func: _with_options(func, chosen)


def _with_options(func: F, options: list[_Option]) -> F:
    own = [
        p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "flags"
    ]
    shared = [
        inspect.Parameter(
            o.param,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[o.kind, o.typer_param()],
            default=_default(o),
        )
        for o in options
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        given = {o.param: kwargs.pop(o.param) for o in options}
        flags = _job_flags({o.param: given.get(o.param, _default(o)) for o in _OPTIONS})
        return func(flags=flags, **kwargs)

    params = own + shared
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # typer must read the new signature, not func's
    return wrapper  # type: ignore[return-value]


def _default(option: _Option) -> Any:
    return False if option.kind is bool else None
