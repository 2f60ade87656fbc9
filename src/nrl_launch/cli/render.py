"""`nrl-launch render`: the exact sbatch argv and job script, with no side effects (CI dry run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nrl_launch import output
from nrl_launch.cli.options import JobFlags, job_options
from nrl_launch.errors import UsageError


@job_options
def render(
    flags: JobFlags,
    out: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", help="Write the script to FILE (mode 0755).", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Print the sbatch command and the whole job script; nothing is submitted or written.

    The same input always renders the same bytes, so the output can be kept as a golden file.
    """
    from nrl_launch import backends

    spec = flags.resolve().spec
    request = backends.plan(spec, str(out) if out else None)
    if out is not None:
        write_script(out, request.script)
    if flags.json:
        output.emit_json(
            "render",
            {
                "argv": list(request.argv),
                "script": request.script,
                "script_path": str(out) if out else None,
            },
        )
    elif out is not None:
        output.emit_text(request.command_line)
    else:
        output.emit_text(request.script)


def write_script(path: Path, text: str) -> None:
    """Write atomically: a reader (or a failed write) never sees half a script."""
    import os
    import tempfile

    directory = path.parent
    if not directory.is_dir():
        raise UsageError(f"{path}: directory {directory} does not exist")
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).chmod(0o755)
        Path(tmp).replace(path)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None
