"""The nrl-launch command line: wiring, and the one place errors become exit codes.

Each command lives in its own module; heavy modules (pydantic, jinja2, yaml, rich) are imported
inside the commands, so that `--help` stays fast. `ray` is never imported here.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, NoReturn

import typer

from nrl_launch import __version__, output
from nrl_launch.cli import (
    attach,
    cancel,
    config,
    dashboard,
    doctor,
    list_jobs,
    logs,
    plan,
    pull,
    render,
    run_job,
    status,
    stop,
    submit,
)
from nrl_launch.errors import ExitCode, NrlLaunchError

__all__ = ["app", "main"]

app = typer.Typer(
    name="nrl-launch",
    help="Launch multi-node Ray jobs for NeMo RL on Slurm from one typed, validated job spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # errors are one line; tracebacks only with --debug
    rich_markup_mode=None,  # plain help: drawing it with rich costs more than the command
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("submit")(submit.submit)
app.command("run")(run_job.run)
app.command("pull")(pull.pull)
app.command("status")(status.status)
app.command("logs")(logs.logs)
app.command("attach")(attach.attach)
app.command("stop")(stop.stop)
app.command("cancel")(cancel.cancel)
app.command("dashboard")(dashboard.dashboard)
app.command("list")(list_jobs.list_jobs)
app.command("render")(render.render)
app.command("plan")(plan.plan)
app.command("doctor")(doctor.doctor)
app.add_typer(config.app, name="config")


def _version(value: bool) -> None:
    if value:
        output.emit_text(f"nrl-launch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks (also: NRL_LAUNCH_DEBUG=1).")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Launch multi-node Ray jobs for NeMo RL on Slurm from one typed, validated job spec."""


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI and exit with the code the error tree (errors.py) assigns."""
    args = sys.argv[1:] if argv is None else argv
    root_options = args[: next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))]
    debug = "--debug" in root_options or os.environ.get("NRL_LAUNCH_DEBUG", "") not in ("", "0")
    try:
        result = typer.main.get_command(app).main(
            args, prog_name="nrl-launch", standalone_mode=False
        )
        code = result if isinstance(result, int) else ExitCode.OK
    except NrlLaunchError as exc:
        if debug:
            raise
        output.error(exc.message)
        code = exc.exit_code
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        output.error("interrupted")
        code = ExitCode.INTERRUPTED
    except KeyboardInterrupt:
        output.error("interrupted")
        code = ExitCode.INTERRUPTED
    except typer.TyperException as exc:  # a usage error found by the parser
        if debug:
            raise
        output.error(_one_line(exc))
        code = ExitCode.BAD_INPUT
    except Exception as exc:
        if debug:
            raise
        output.error(
            f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)"
        )
        code = ExitCode.INTERNAL
    sys.exit(int(code))


def _one_line(exc: typer.TyperException) -> str:
    """Click's usage errors, as one line naming the flag (no usage block)."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    return " ".join(message.split())
