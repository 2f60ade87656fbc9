"""`nrl-launch list`: every job submitted from here, newest first, with its live state (one
batched query per backend: one squeue for all Slurm jobs)."""

from __future__ import annotations

from typing import Annotated

import typer

from nrl_launch import output
from nrl_launch.cli import experiment as experiments
from nrl_launch.cli.status import all_records, show_table
from nrl_launch.cli.sweep_options import ExperimentFilter
from nrl_launch.jobs import query

EXAMPLES = """\
Examples:
  nrl-launch list
  nrl-launch list --json
"""


def list_jobs(
    json: Annotated[bool, typer.Option("--json", help="Print a versioned JSON object.")] = False,
    experiment: ExperimentFilter = None,
) -> int:
    """List the jobs submitted from here with their state (as nrl-launch status with no job
    id): one scheduler query for them all."""
    if experiment is not None:
        return experiments.show("list", experiment, json=json)

    records = all_records()
    found = query.overview(records)
    if json:
        jobs = [
            r.model_dump(mode="json") | {"status": s.as_json()}
            for r, s in zip(records, found, strict=True)
        ]
        output.emit_json("list", {"jobs": jobs})
    else:
        show_table(records, found)
    return 0
