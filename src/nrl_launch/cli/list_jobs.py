"""`nrl-launch list`: the jobs submitted from here, newest first, from their records."""

from __future__ import annotations

import os
import time
from typing import Annotated

import typer

from nrl_launch import output, paths


def list_jobs(
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
) -> int:
    """List submitted jobs (no Slurm query: use status for their state)."""
    from nrl_launch.jobs import record

    records, warnings = record.load_all(paths.state_dir(os.environ))
    for warning in warnings:
        output.warn(warning)
    if json:
        output.emit_json("list", {"jobs": [r.model_dump(mode="json") for r in records]})
        return 0
    rows = [
        [
            r.job_id,
            r.job_name,
            str(r.nodes),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.submitted_at)),
            r.log_dir,
        ]
        for r in records
    ]
    output.table(["JOBID", "NAME", "NODES", "SUBMITTED", "LOG DIR"], rows)
    return 0
