"""GPU-hours: what a job asks for before it runs, and what it has used since it started.

Counted as Slurm holds them and as NeMo RL's tools/launch prints them: every GPU of every node
the job allocates (a dedicated Ray head's idle ones and a pool's nodes too) times the hours. A
job asks for its time limit's worth; it uses, per run (a requeue starts another), the time from
its job script's start to its end, or to now while it runs (its log dir's timeline).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch.jobs.status import read_timeline
from nrl_launch.spec.fields import slurm_time_minutes

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord
    from nrl_launch.spec import LaunchSpec

__all__ = [
    "asked_line",
    "gpu_hours_asked",
    "gpus_held",
    "hours",
    "recorded_asked",
    "recorded_gpus",
    "recorded_used",
    "total_line",
    "used",
]


def gpus_held(spec: LaunchSpec) -> int:
    """Every GPU the job's allocation holds: its training nodes (with a dedicated head) and its
    pools' nodes, each with slurm.gpus_per_node."""
    return (spec.allocated_nodes + spec.pool_nodes) * spec.slurm.gpus_per_node


def gpu_hours_asked(spec: LaunchSpec, jobs: int = 1) -> float | None:
    """GPUs x the time limit x `jobs` (a chain's links, a sweep's points); None without a
    limit (the partition's default applies, which the spec does not know)."""
    if spec.slurm.time is None:
        return None
    return gpus_held(spec) * slurm_time_minutes(spec.slurm.time) / 60 * jobs


def asked_line(spec: LaunchSpec, jobs: int = 1, what: str = "jobs") -> str:
    """GPU-hours as plan and submit print them: the product, spelled out."""
    gpus = gpus_held(spec)
    nodes = spec.allocated_nodes + spec.pool_nodes
    held = f"{nodes} node(s) x {spec.slurm.gpus_per_node} GPU(s)"
    asked = gpu_hours_asked(spec, jobs)
    if asked is None:
        return (
            f"GPU-hours:   {held} = {gpus} GPU(s) x the partition's default time limit "
            "(no slurm.time given)"
        )
    times = f" x {jobs} {what}" if jobs > 1 else ""
    return f"GPU-hours:   {held} x {spec.slurm.time}{times} = {hours(asked)} GPU-hours at most"


def total_line(asked: Sequence[float | None], what: str = "point(s)") -> str:
    """The GPU-hours of several jobs together (a sweep's points), as plan and submit print
    them; unknown where one has no time limit."""
    if not asked:
        return "GPU-hours:   none (no job)"
    if any(a is None for a in asked):
        return (
            f"GPU-hours:   {len(asked)} {what}; unknown: no slurm.time, the partition's "
            "default time limit applies"
        )
    total = sum(a or 0.0 for a in asked)
    return f"GPU-hours:   {len(asked)} {what}, {hours(total)} GPU-hours at most"


def recorded_asked(rec: JobRecord) -> float | None:
    """GPU-hours a recorded job asked for: its GPUs x its time limit; None without one."""
    limit = (rec.spec.get("slurm") or {}).get("time")
    if not isinstance(limit, str):
        return None
    return recorded_gpus(rec) * slurm_time_minutes(limit) / 60


def hours(value: float) -> str:
    """GPU-hours as a person reads them: 0.42, 12.5, 1,536."""
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def recorded_gpus(rec: JobRecord) -> int:
    """The GPUs a recorded job holds: as submit counted them, else (records from before it
    did) its nodes x the spec's gpus_per_node."""
    if rec.gpus is not None:
        return rec.gpus
    slurm: Mapping[str, Any] = rec.spec.get("slurm") or {}
    per_node = slurm.get("gpus_per_node")
    return rec.nodes * per_node if isinstance(per_node, int) else 0


def run_seconds(log_dir: Path, now: float, *, over: bool = False) -> float:
    """How long one run of a job has held its nodes: its timeline's `started` to its `ended`,
    or to `now` while it runs; a run that is `over` without an `ended` (its nodes were killed
    under it) to the last thing it recorded. 0 before it started, or without a timeline of
    this user's own."""
    started = ended = last = None
    for name, at in read_timeline(log_dir):
        last = at
        if name == "started" and started is None:
            started = at
        elif name == "ended":
            ended = at
    if started is None:
        return 0.0
    end = ended if ended is not None else last if over else now
    return max(0.0, (end or started) - started)


def used(
    gpus: int, log_dirs: Iterable[str | Path], *, over: bool, now: float | None = None
) -> float:
    """GPU-hours a job has used over its runs (`log_dirs`: each run's, or each try's); `over`:
    the job has ended, so a run without an end ended at its last record."""
    now = time.time() if now is None else now
    return gpus * sum(run_seconds(Path(d), now, over=over) for d in log_dirs) / 3600


def recorded_used(rec: JobRecord, log_dirs: Sequence[str], *, over: bool) -> float:
    """GPU-hours a recorded job has used: each of its runs (`log_dirs`, a status's; a
    requeue's too) and each earlier try of a --retries run (their log dirs lie beside its)."""
    base = Path(rec.log_dir).parent
    earlier = [base / f"{t.job_id}-logs" for t in rec.tries]
    current = list(log_dirs) or [rec.log_dir]
    # The current try's dirs are the status's; an earlier try's is its own first run's.
    runs: list[str | Path] = [*(d for d in earlier if str(d) not in current), *current]
    return used(recorded_gpus(rec), runs, over=over)
