"""`nrl-launch config show`: the effective job spec and where each value came from."""

from __future__ import annotations

from typing import Annotated

import typer
import yaml

from nrl_launch import output
from nrl_launch.cli.options import ALL_OPTIONS, SUBMIT_ONLY, JobFlags, job_command
from nrl_launch.spec.layers import flatten

EXAMPLES = """\
Examples:
  nrl-launch config show -f examples/grpo-2node.yaml
  nrl-launch config show -f examples/grpo-2node.yaml --sources    # where each value came from
"""


# \b keeps the examples' lines as written: help text is otherwise rewrapped.
app = typer.Typer(help="Inspect the effective job spec.", epilog=f"\b\n{EXAMPLES}")


@app.callback(invoke_without_command=True)
def _group(ctx: typer.Context) -> None:
    """Inspect the effective job spec."""
    if ctx.invoked_subcommand is None:  # `nrl-launch config` alone: its help, as kubectl does
        output.emit_text(ctx.get_help())


@app.command("show", epilog=f"\b\n{EXAMPLES}")
@job_command(ALL_OPTIONS - SUBMIT_ONLY)
def show(
    sources: Annotated[
        bool, typer.Option("--sources", help="Show where each value came from.")
    ] = False,
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
) -> None:
    """Print the job spec after layering defaults, profile, job file, env, flags and --set."""
    resolved = flags.resolve()
    spec = resolved.spec.model_dump(mode="json")
    if flags.json:
        output.emit_json("config show", {"spec": spec, "sources": resolved.sources})
    elif sources:
        rows = [
            [
                key,
                yaml.safe_dump(value, default_flow_style=True, width=1 << 20)
                .strip()
                .removesuffix("\n..."),
                resolved.sources[key],
            ]
            for key, value in flatten(spec)
        ]
        output.table(["KEY", "VALUE", "SOURCE"], rows)
    else:
        output.emit_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
