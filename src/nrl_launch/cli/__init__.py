"""The nrl-launch command line: wiring, and the one place errors become exit codes.

Each command lives in its own module, and a run imports and builds only the command it runs
(`_app`): this is where nrl-launch is lazy. `nrl-launch --help` lists the commands from their
summaries here (`_listing`) and imports none of them, so a command's module imports what it
needs at its top. `ray` is never imported here.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Annotated, Any, NoReturn

import typer

from nrl_launch import __version__, output, paths
from nrl_launch.errors import ExitCode, NrlLaunchError
from nrl_launch.remote.words import Grammar
from nrl_launch.shell import join

__all__ = ["app", "main"]

# Every command, in the order --help lists them: its module under nrl_launch.cli and the
# function that runs it (config: the Typer group of its subcommands).
_COMMANDS: dict[str, tuple[str, str]] = {
    "submit": ("submit", "submit"),
    "run": ("run_job", "run"),
    "pull": ("pull", "pull"),
    "status": ("status", "status"),
    "logs": ("logs", "logs"),
    "attach": ("attach", "attach"),
    "stop": ("stop", "stop"),
    "cancel": ("cancel", "cancel"),
    "dashboard": ("dashboard", "dashboard"),
    "list": ("list_jobs", "list_jobs"),
    "report": ("report", "report"),
    "render": ("render", "render"),
    "plan": ("plan", "plan"),
    "doctor": ("doctor", "doctor"),
    "init": ("init", "init"),
    "config": ("config", "app"),
}


# Each command's summary, as `nrl-launch --help` lists it: the first sentence of its help (of
# which click shows no more), kept here so that listing the commands imports none of them
# (tests/cli/test_commands.py holds each to its command's own).
_SUMMARIES: dict[str, str] = {
    "submit": "Submit the job to Slurm and record it; prints the job id.",
    "run": (
        "Run a command once on every node (srun, one task per node), without Ray; prints the "
        "job id."
    ),
    "pull": (
        "Import IMAGE into a .sqsh file with enroot, on a compute node (one task, no GPU); "
        "prints the job id."
    ),
    "status": (
        "Show each job's phase: PENDING (why), STARTING, JOINING k/N, RUNNING, or how it "
        "ended; with no JOBID, every job submitted from here."
    ),
    "logs": (
        "Print the driver's log (or the head's, or worker K's) from the job's log dir; for a "
        "plain job (run, pull), its command's output."
    ),
    "attach": (
        "Open a shell (or run CMD) on a node of a running job, in the job's container and "
        "environment, with RAY_ADDRESS set to its Ray cluster; exits with CMD's exit code."
    ),
    "stop": (
        "Stop jobs gracefully: a batch job's driver gets SIGTERM (and 30 s), Ray stops on "
        "every node, and the job ends COMPLETED."
    ),
    "cancel": "Cancel jobs; each job stops Ray on every node and records why it ended.",
    "dashboard": (
        "Print the head node, the dashboard port and the `ssh -L` command for a laptop; with "
        "--remote and --open, hold that tunnel from the laptop."
    ),
    "list": (
        "List the jobs submitted from here with their state (as nrl-launch status with no job"
        " id): one scheduler query for them all."
    ),
    "report": "Write one HTML page of a run's metric curves and its timeline (plotly: pip install "
    "'nrl-launch[report]').",
    "render": (
        "Print the whole job script (its header holds the sbatch command; on Lepton, the job "
        "spec comes first); nothing is submitted or written."
    ),
    "plan": "Print the Slurm allocation a NeMo RL config needs and its per-node GPU layout.",
    "doctor": (
        "Check the job against the cluster: Slurm, partition, account, nodes, GPUs, "
        "container, mounts, and the log and cache dirs."
    ),
    "init": (
        "Write a profile (account, partition, GPUs per node and how to ask for them, read "
        "from the cluster; container, mounts and log dir) that later commands read."
    ),
    "config": "Inspect the effective job spec.",
}


def _epilog(examples: str) -> str:
    """A command's examples as its help shows them: \\b keeps their lines as written (help
    text is otherwise rewrapped)."""
    return f"\b\n{examples}"


def _version(value: bool) -> None:
    if value:
        output.emit_text(f"nrl-launch {__version__}")
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Show tracebacks (also: NRL_LAUNCH_DEBUG=1); also after the command."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="NAME|HOST",
            help="Run the command on a remote cluster's login node over ssh: a remote of "
            "~/.config/nrl-launch/remotes.yaml, or an ssh destination (also: NRL_LAUNCH_REMOTE).",
        ),
    ] = None,
) -> None:
    """Launch multi-node Ray jobs for NeMo RL on Slurm from one typed, validated job spec."""
    del debug, version, remote  # main() reads --debug and --remote wherever they are
    if ctx.invoked_subcommand is None:  # `nrl-launch` alone: its help, exit 0 (as kubectl)
        output.emit_text(ctx.get_help())


def _no_argument_type(argument: Any, ctx: Any) -> None:
    """An argument's help names it by its metavar alone (JOBID, CMD), as an option's does
    (--nodes N): typer would add its Python type (`JOBID <str>`, `CMD <list[str]>`)."""
    del argument, ctx


def _root_app() -> typer.Typer:
    """The CLI with its root options and no command yet."""
    app = typer.Typer(
        name="nrl-launch",
        help="Launch multi-node Ray jobs for NeMo RL on Slurm from one typed, validated job spec.",
        epilog=_epilog(
            "Start here on a cluster: nrl-launch init, nrl-launch doctor, nrl-launch plan, "
            "nrl-launch submit\n"
        )
        + "\n"
        + _epilog(
            "Examples:\n  nrl-launch render -f examples/grpo-2node.yaml\n  nrl-launch status\n"
        ),
        pretty_exceptions_enable=False,  # errors are one line; tracebacks only with --debug
        rich_markup_mode=None,  # plain help: drawing it with rich costs more than the command
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    typer.core.TyperArgument.display_type_rich = _no_argument_type  # type: ignore[method-assign,assignment]
    app.callback(invoke_without_command=True)(_root)
    return app


@functools.cache
def _app(only: str | None = None) -> typer.Typer:
    """The CLI with every command, or with `only` that one command: all a run of it needs.
    Typer reads the signature of every command it is given, and importing and reading them
    all costs more than most commands take to run."""
    app = _root_app()
    for name, (module_name, function) in _COMMANDS.items():
        if only is not None and name != only:
            continue
        # __import__, not importlib.import_module: -X importtime (tests/test_imports.py, the
        # benchmark) lists only the modules the import statement's machinery loads.
        __import__(f"nrl_launch.cli.{module_name}")
        module = sys.modules[f"nrl_launch.cli.{module_name}"]
        if name == "config":
            app.add_typer(module.app, name=name)
        else:
            app.command(name, epilog=_epilog(module.EXAMPLES))(getattr(module, function))
    return app


def _listed() -> None:
    """A command as `nrl-launch --help` lists it; one that runs is built by `_app`."""
    raise AssertionError("a listed command is never run")


@functools.cache
def _listing() -> typer.Typer:
    """The CLI as `nrl-launch --help` shows it (and a word that is no command meets it): each
    command by its name and summary, none of their modules imported."""
    app = _root_app()
    for name in _COMMANDS:
        app.command(name, help=_SUMMARIES[name])(_listed)
    return app


def __getattr__(name: str) -> typer.Typer:
    """`app`: the whole CLI, for tests and tools (built when first asked for)."""
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI and exit with the code the error tree (errors.py) assigns.

    `--debug` and `--json` count anywhere before `--` (after it, the words are the driver's):
    --debug shows an error's traceback too, and with --json an error is also printed as a JSON
    object on stdout (unless the command printed its own already); its exit code is the same
    either way."""
    args = sys.argv[1:] if argv is None else argv
    end = args.index("--") if "--" in args else len(args)
    own = args[:end]
    debug = "--debug" in own or os.environ.get("NRL_LAUNCH_DEBUG", "") not in ("", "0")
    json_as = _command_of(own) if "--json" in own else None
    args = [a for a in own if a != "--debug"] + args[end:]
    output.reset()
    try:
        # A command's name is the first word (--debug is out; the root's other options end the
        # run): only that command is built. Anything else (--help, a typo) gets the listing of
        # them all; shell completion, which may complete any command's options, gets them all.
        only = args[0] if args and args[0] in _COMMANDS else None
        completing = "_NRL_LAUNCH_COMPLETE" in os.environ
        cli = _app(only) if only is not None or completing else _listing()
        with output.as_command():  # its warnings print, also those of the API it calls
            routed = _remote(args, only)
            result = (
                routed
                if routed is not None
                else typer.main.get_command(cli).main(
                    args, prog_name="nrl-launch", standalone_mode=False
                )
            )
        code = result if isinstance(result, int) else ExitCode.OK
    except NrlLaunchError as exc:
        code = _failed(exc.message, exc.exit_code, json_as, debug)
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = _failed("interrupted", ExitCode.INTERRUPTED, json_as, debug)
    except typer.TyperException as exc:  # a usage error found by the parser
        hint = _driver_hint(exc, args)  # click's "Possible options" would mislead then
        message = f"No such option: {getattr(exc, 'option_name', '')}{hint}" if hint else None
        code = _failed(message or _one_line(exc), ExitCode.BAD_INPUT, json_as, debug)
    except Exception as exc:
        message = f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)"
        code = _failed(message, ExitCode.INTERNAL, json_as, debug)
    sys.exit(int(code))


def _remote(args: list[str], only: str | None) -> int | None:
    """With --remote (anywhere before `--`, or NRL_LAUNCH_REMOTE), or for a job submitted from
    here to a remote cluster, the command runs there (nrl_launch.remote); None: here. What
    each word of the command is (an option, its value, a JOBID) its own declaration says."""
    end = args.index("--") if "--" in args else len(args)
    asked = any(a == "--remote" or a.startswith("--remote=") for a in args[:end])
    if not asked and not os.environ.get("NRL_LAUNCH_REMOTE"):
        # Without --remote, only list and a command naming jobs (status...) may go to a cluster.
        if only is None or not (paths.state_dir(os.environ) / "remote").is_dir():
            return None
        if only != "list" and not Grammar.of(_command(only)).names_jobs:
            return None
    # Only for a command that runs on a cluster: ssh, remotes.yaml (pydantic) stay off --help.
    from nrl_launch.remote import forward

    value, args = forward.take_remote(args, os.environ)
    if value is not None and args[:1] in ([], ["--help"], ["-h"], ["--version"]):
        return None  # nrl-launch's own help and version
    return forward.route(value, args, _command)


def _command(name: str) -> Any:
    """The (click) command `name` as this CLI declares it (None: it has none of that name):
    its options, which take values, and its arguments."""
    if name not in _COMMANDS:
        return None
    return typer.main.get_command(_app(name)).commands.get(name)  # type: ignore[attr-defined]


def _failed(message: str, code: ExitCode, json_as: str | None, debug: bool) -> int:
    """Report the error being handled: one line per problem on stderr (after its traceback
    with --debug), and with --json (`json_as`: the command) the same as a JSON object on
    stdout, unless the command printed one already. --debug changes neither: the exit code
    and the JSON are what scripts read."""
    if debug:
        output.traceback()
    output.error(message)
    if json_as is not None and not output.json_printed():
        errors = {"exit_code": int(code), "errors": message.splitlines()}
        output.emit_json(json_as, errors, ok=False)
    return int(code)


def _command_of(args: list[str]) -> str:
    """The command `args` run, as --json names it (`config show`): its first words (the root
    takes no option with a value)."""
    words = [a for a in args if not a.startswith("-")]
    if words[:1] == ["config"]:
        return " ".join(words[:2])
    return words[0] if words else ""


def _driver_hint(exc: typer.TyperException, args: list[str]) -> str:
    """For an option nrl-launch does not have here, a command that takes it: another command
    that has it (`render --sweep`: plan's and submit's), or, met after the words of a driver
    (or command) given without `--` before them (`render python train.py --lr 3`), the driver
    after `--`. Not after a RECIPE: with --config the words are the recipe and its overrides,
    which never take options. (typer carries its own click: its exceptions and parameters are
    read by their attributes.)"""
    option, ctx = getattr(exc, "option_name", None), getattr(exc, "ctx", None)
    params = ctx.command.params if option and ctx is not None else []
    valued = {
        name
        for p in params
        if p.param_type_name == "option" and not p.is_flag and not p.count
        for name in p.opts
    }
    words = args[1:]  # after the command's name
    given, driver, i = set(), None, 0  # the options given before it; where a driver starts
    while i < len(words) and words[i] != option:
        if not words[i].startswith("-") or words[i] == "--":
            driver = i if driver is None else driver
            i += 1
            continue
        given.add(words[i].partition("=")[0])
        i += 2 if words[i] in valued else 1
    if option and (hint := _elsewhere(str(option), given, args[0], words)):
        return hint
    variadic = any(p.param_type_name == "argument" and p.nargs == -1 for p in params)
    if not variadic or driver is None or "--config" in given:
        return ""
    fixed = join([args[0], *words[:driver], "--", *words[driver:]])
    return f"; options of the driver (or command) go after `--`: nrl-launch {fixed}"


# The commands a hint names first (those that only read: plan checks what submit would queue),
# and what one needs given to run at all (plan reads a NeMo RL config).
_HINT_ORDER = ("plan", "render", "doctor", "submit", "run")
_HINT_NEEDS = {"plan": "--config"}


def _elsewhere(option: str, given: set[str], current: str, words: list[str]) -> str:
    """` (render has none; plan and submit take it: nrl-launch plan ...)`: the other commands
    that take a driver as the current one does and have `option`; the command line with the
    first that also takes every option given (`given`), where one does."""
    here = _command(current)
    if here is None or _arguments(here) != ("command",):
        return ""  # only the job's commands: `status --wait` is no `stop --wait`
    having, runnable = [], []
    for name in sorted(_COMMANDS, key=lambda n: (*_HINT_ORDER, n).index(n)):
        command = None if name == current else _command(name)
        if command is None or _arguments(command) != ("command",):
            continue
        opts = {o for p in command.params if p.param_type_name == "option" for o in p.opts}
        if option in opts:
            having.append(name)
            if given <= opts and _HINT_NEEDS.get(name, option) in given | {option}:
                runnable.append(name)
    if not having:
        return ""
    names = ", ".join(having[:-1]) + (" and " if len(having) > 1 else "") + having[-1]
    takes = "takes" if len(having) == 1 else "take"
    run = f": nrl-launch {join([runnable[0], *words])}" if runnable else ""
    return f" ({current} has none; {names} {takes} it{run})"


def _arguments(command: Any) -> tuple[str, ...]:
    """The names of a (click) command's arguments: ("command",) for a job's (its driver)."""
    return tuple(p.name for p in command.params if p.param_type_name == "argument")


def _one_line(exc: typer.TyperException) -> str:
    """Click's usage errors, as one line naming the flag (no usage block)."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    return " ".join(message.split())
