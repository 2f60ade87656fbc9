"""`nrl-launch dashboard`: where a running job's Ray dashboard is, and the ssh tunnel that
reaches it from a laptop through this (login) node."""

from __future__ import annotations

import getpass
import os
import socket
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output, paths

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord


def dashboard(
    job_id: Annotated[str, typer.Argument(help="The job id.", metavar="JOBID")],
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
) -> int:
    """Print the head node, the dashboard port and the `ssh -L` command for a laptop."""
    from nrl_launch import backends
    from nrl_launch.jobs import query, record

    rec = record.load(job_id, paths.state_dir(os.environ))
    query.require_network(rec, "dashboard")
    record.require_ray(rec, "dashboard")
    query.require_running(rec, "open")
    head = query.head_node(rec)
    port = int(rec.spec["ray"]["ports"]["dashboard"])
    target = backends.get(rec.backend).dashboard_host(rec, head)
    ssh = f"ssh -N -L {port}:{target}:{port} {getpass.getuser()}@{socket.gethostname()}"
    url = f"http://localhost:{port}"
    # With Ray's token auth the dashboard asks for the job's token: say where it is, never what.
    token = _token_path(rec)
    if json:
        output.emit_json(
            "dashboard",
            {
                "job_id": rec.job_id,
                "head_node": head,
                "port": port,
                "ssh": ssh,
                "url": url,
                "token_path": token,
            },
        )
        return 0
    text = (
        f"Job {rec.job_id}'s Ray dashboard: {head}:{port} (the head node)\n"
        f"From your laptop, open the tunnel through this node, then browse {url}:\n"
        f"  {ssh}"
    )
    if token:
        text += f"\nIt asks for the job's token: the contents of {token} (readable by you only)."
    output.emit_text(text)
    return 0


def _token_path(rec: JobRecord) -> str | None:
    from pathlib import Path

    from nrl_launch.jobs.status import find_log_dir

    if rec.spec.get("ray", {}).get("auth", "off") != "token":
        return None
    return str(find_log_dir(Path(rec.log_dir)) / "ray-auth-token")
