"""`nrl-launch logs`: print or follow one of a job's logs. Ctrl-C stops following, not the job."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nrl_launch import output, paths
from nrl_launch.errors import ExitCode, JobNotFoundError, UsageError

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord


def log_file(log_dir: Path, node: str, nodes: int) -> Path:
    """driver -> ray-driver.log, head (or 0) -> ray-head.log, K -> ray-worker-K.log."""
    if node == "driver":
        return log_dir / "ray-driver.log"
    if node in ("head", "0"):
        return log_dir / "ray-head.log"
    if node.isdigit() and 0 < int(node) < nodes:
        return log_dir / f"ray-worker-{int(node)}.log"
    raise UsageError(
        f"--node {node!r}: expected driver, head, or a worker index 1..{nodes - 1}"
        if nodes > 1
        else f"--node {node!r}: this job has one node: use driver or head"
    )


def logs(
    job_id: Annotated[str, typer.Argument(help="The job id.", metavar="JOBID")],
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing until the job ends.")
    ] = False,
    node: Annotated[
        str, typer.Option("--node", help="driver (default), head, or worker index K.")
    ] = "driver",
    tail: Annotated[
        int | None, typer.Option("--tail", help="Start with the last N lines.", min=0)
    ] = None,
) -> int:
    """Print the driver's log (or the head's, or worker K's) from the job's log dir."""
    from nrl_launch.jobs import record
    from nrl_launch.jobs.status import find_log_dir

    rec = record.load(job_id, paths.state_dir(os.environ))
    path = log_file(find_log_dir(Path(rec.log_dir)), node, rec.nodes)
    if not follow:
        if not path.is_file():
            raise JobNotFoundError(f"{path} does not exist yet: has job {job_id} started?")
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        sys.stdout.write("".join(lines[-tail:] if tail is not None else lines))
        return 0
    try:
        return _follow(rec, path, tail)
    except KeyboardInterrupt:
        output.warn(f"stopped following; job {job_id} keeps running (nrl-launch cancel {job_id})")
        return ExitCode.INTERRUPTED


def _follow(rec: JobRecord, path: Path, tail: int | None) -> int:
    from nrl_launch.jobs import query

    offset, last_check, ended = 0, 0.0, False
    if tail is not None and path.is_file():
        text = path.read_text(encoding="utf-8", errors="replace")
        kept = "".join(text.splitlines(keepends=True)[-tail:]) if tail else ""
        sys.stdout.write(kept)
        offset = len(text.encode("utf-8", errors="replace"))
    while True:
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            if chunk:
                offset += len(chunk)
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
                continue
        elif not path.parent.parent.is_dir():
            raise JobNotFoundError(f"the log dir {path.parent} was removed while following it")
        if ended:
            return 0
        # The job's state is checked every few seconds, not on every read.
        if time.monotonic() - last_check > 3:
            last_check = time.monotonic()
            ended = query.statuses([rec], tail=0)[0].phase.terminal
            continue  # read once more after the job ended, then stop
        time.sleep(0.5)
