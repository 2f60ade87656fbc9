"""`nrl-launch render`: the exact sbatch argv and job script, with no side effects (CI dry run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.cli.options import ALL_OPTIONS, SUBMIT_ONLY, JobFlags, job_command
from nrl_launch.node import MARKER

EXAMPLES = """\
Examples:
  nrl-launch render -f examples/grpo-2node.yaml
  nrl-launch render -f examples/grpo-2node.yaml --nodes 4 --json
"""


@job_command(ALL_OPTIONS - SUBMIT_ONLY)
def render(
    out: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", help="Write the script to FILE (mode 0755).", metavar="FILE"
        ),
    ] = None,
    header: Annotated[
        bool,
        typer.Option(
            "--header",
            help="Print the script's own part alone (#SBATCH lines, the job's values, the "
            "driver), without the node program every job of its kind runs.",
        ),
    ] = False,
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
) -> None:
    """Print the whole job script (its header holds the sbatch command; on Lepton, the job
    spec comes first); nothing is submitted or written.

    The same input always renders the same bytes, so the output can be kept as a golden file.
    """
    # The spec's reader (yaml) loads when the spec is read, not for --help (test_imports.py).
    from nrl_launch.api import specs

    request = specs.request(flags.prepare().spec, str(out) if out else None)
    if out is not None:
        paths.write_script(out, request.script, mode=0o755)
    # A backend with an API (Lepton) sends a job: that is printed first, its script after.
    sent = _parsed(request.job_spec)
    if flags.json:
        rendered = {
            "argv": list(request.argv),
            "script": request.script,
            "script_path": str(out) if out else None,
            # What the job is started with beside the script: its spec (NRL_JOB_SPEC).
            "environment": dict(request.environment),
        }
        output.emit_json("render", rendered | ({"job_spec": sent} if sent else {}))
    elif out is not None:
        output.emit_text(request.job_spec or request.command_line)
    elif header:
        # The node program follows its marker line, the same for every job of its kind.
        own = request.script.split(MARKER, 1)[0].rstrip()
        output.emit_text(f"{request.job_spec}\n\n{own}" if request.job_spec else own)
    else:
        output.emit_text(specs.shown(request))


def _parsed(job_spec: str | None) -> object:
    """The job spec as --json prints it: an object, not a string of JSON."""
    return json.loads(job_spec) if job_spec else None
