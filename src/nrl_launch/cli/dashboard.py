"""`nrl-launch dashboard`: where a running job's Ray dashboard is, and the ssh tunnel that
reaches it from a laptop through this (login) node."""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import backends, output, paths
from nrl_launch.cli.status import job_argument
from nrl_launch.errors import UsageError
from nrl_launch.jobs import query, record
from nrl_launch.jobs.status import find_log_dir

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord

EXAMPLES = """\
Examples:
  nrl-launch dashboard JOBID
  nrl-launch dashboard JOBID --json
"""


def dashboard(
    job_id: Annotated[str, job_argument("The job id or name.")],
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
    open_: Annotated[
        bool,
        typer.Option(
            "--open",
            help="With --remote (on a laptop): hold an ssh tunnel to the dashboard until Ctrl-C "
            "or the job's end, reopened when the connection drops; prints the local port.",
        ),
    ] = False,
    local_port: Annotated[
        int | None,
        typer.Option(
            "--port",
            metavar="N",
            help="--open's local port (default: the dashboard's own when free, else any free).",
        ),
    ] = None,
) -> int:
    """Print the head node, the dashboard port and the `ssh -L` command for a laptop; with
    --remote and --open, hold that tunnel from the laptop."""
    rec = query.current_try(record.load(job_id, paths.state_dir(os.environ)))
    query.require_network(rec, "dashboard")
    record.require_ray(rec, "dashboard")
    port = _port(rec)
    if (rec.spec.get("ray") or {}).get("dashboard") is False:
        raise UsageError(
            f"job {rec.job_id} runs no Ray dashboard (ray.dashboard: false); a job with "
            "ray.dashboard: true (the default) has one"
        )
    query.require_running(rec, "open")
    head = query.head_node(rec)
    target = backends.get(rec.backend).dashboard_host(rec, head)
    ssh = f"ssh -N -L {port}:{target}:{port} {getpass.getuser()}@{socket.gethostname()}"
    if open_ or local_port is not None:
        # Here is the login node: the tunnel is the laptop's to hold (nrl-launch over --remote).
        raise UsageError(
            f"--open holds a tunnel from your laptop: run `nrl-launch --remote CLUSTER dashboard "
            f"{rec.job_id} --open` there, or open it by hand: {ssh}"
        )
    url = f"http://localhost:{port}"
    # With Ray's token auth the dashboard asks for the job's token: say where it is, never what.
    token = _token_path(rec)
    if json:
        output.emit_json(
            "dashboard",
            {
                "job_id": rec.job_id,
                "head_node": head,
                "target": target,
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


def _port(rec: JobRecord) -> int:
    """The dashboard's port, as the job's record has its spec (ray.ports.dashboard)."""
    ray = rec.spec.get("ray")
    ports = ray.get("ports") if isinstance(ray, dict) else None
    port = ports.get("dashboard") if isinstance(ports, dict) else None
    if not isinstance(port, int) or isinstance(port, bool):
        raise UsageError(
            f"job {rec.job_id}'s record names no Ray dashboard port (ray.ports.dashboard): "
            f"the head's log, ray-head.log in {rec.log_dir}, says where its dashboard listens"
        )
    return port


def _token_path(rec: JobRecord) -> str | None:
    if rec.spec.get("ray", {}).get("auth", "off") != "token":
        return None
    return str(find_log_dir(Path(rec.log_dir)) / "ray-auth-token")
