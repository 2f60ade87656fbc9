"""`list --experiment NAME` and `status --experiment NAME`: the experiment's jobs together, each
with its point's overrides, under a one-line summary (`4 jobs: 2 RUNNING, 2 PENDING`); and the
jobs `cancel --experiment` ends."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from nrl_launch import output, paths
from nrl_launch.errors import UsageError
from nrl_launch.jobs import cost, query, sweep

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord

__all__ = ["records", "show"]


def records(name: str, job_ids: list[str] | None, command: str) -> list[JobRecord]:
    """The experiment's records, in the order its points were queued (exit 4: none)."""
    if job_ids:
        raise UsageError(f"{command}: give JOBIDs or --experiment NAME, not both")
    return sweep.members(name, paths.state_dir(os.environ))


def show(command: str, name: str, *, json: bool) -> int:
    """The experiment's jobs and their states (one scheduler query for them all)."""
    members = records(name, None, command)
    # status: each failed job's cause from its logs; list: a quick overview
    found = query.statuses(members, tail=0) if command == "status" else query.overview(members)
    line = sweep.summary([s.phase.value for s in found])
    used = sum(s.gpu_hours_used or 0.0 for s in found)
    if json:
        jobs = [
            # as status --json gives each job (cli/status.py imports this module: not from there)
            dataclasses.asdict(s)
            | {"phase": s.phase.value, "job_name": r.job_name, "overrides": r.overrides}
            for r, s in zip(members, found, strict=True)
        ]
        summed = {"gpu_hours_used": round(used, 3)}
        output.emit_json(command, {"experiment": name, "summary": line, **summed, "jobs": jobs})
        return 0
    output.emit_text(f"Experiment {name}: {line}")
    if used:
        output.emit_text(f"  {cost.hours(used)} GPU-hours used by its jobs together")
    rows = [
        [r.job_id, r.job_name, s.phase.value, " ".join(r.overrides), s.detail]
        for r, s in zip(members, found, strict=True)
    ]
    output.table(["JOBID", "NAME", "STATE", "OVERRIDES", "DETAIL"], rows)
    return 0
