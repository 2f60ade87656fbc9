"""`submit --sweep` and `plan --sweep`: every point of the grid prepared and checked before any
is queued, then the points queued as the jobs of one experiment (jobs/sweep.py: the grid, the
names, the lanes of --max-running)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch import output
from nrl_launch.api import sweeps
from nrl_launch.errors import ConfigError, UsageError
from nrl_launch.jobs import cost, sweep

if TYPE_CHECKING:
    from nrl_launch.api.sweeps import Checked
    from nrl_launch.cli.options import JobFlags
    from nrl_launch.jobs.record import JobRecord

__all__ = ["Grid", "plan", "submit"]


@dataclass(frozen=True)
class Grid:
    """What the sweep options said."""

    sweeps: tuple[str, ...] = ()
    sweep_file: Path | None = None
    experiment: str | None = None
    max_running: int | None = None

    @property
    def given(self) -> bool:
        return bool(self.sweeps or self.sweep_file or self.experiment or self.max_running)

    def points(self) -> list[sweep.Point]:
        if self.max_running is not None and self.max_running < 1:
            raise UsageError(f"--max-running {self.max_running}: expected 1 or more")
        axes = [sweep.parse_axis(text) for text in self.sweeps]
        if self.sweep_file is not None:
            axes += sweep.parse_file(self.sweep_file)
        return sweep.grid(axes)


def plan(flags: JobFlags, grid: Grid) -> None:
    """`plan --sweep`: every point's verdict; exit 2 naming each point that does not fit."""
    base = flags.resolve(need_driver=False)
    checked = sweeps.check_points(base, grid.points(), check=False)
    if any(c.prepared is not None and c.prepared.layout is None for c in checked):
        raise UsageError(
            "--sweep: plan needs a NeMo RL config to check the points against: give --config "
            "FILE (or a driver command that gives one --config)"
        )
    bad = sweeps.problems(checked)
    if flags.json:
        data: dict[str, Any] = {"points": [_point_data(c) for c in checked]}
        if bad:
            data |= {"exit_code": int(ConfigError(bad).exit_code), "errors": bad}
        output.emit_json("plan", data, ok=not bad)
    else:
        text = []
        for c in checked:
            text.append(
                f"Point {c.point.number} ({c.point.label or 'no overrides'}): {_verdict(c)}"
            )
            text += [f"  {problem}" for problem in c.problems]
        fit = sum(not c.problems for c in checked)
        text.append(f"{fit} of {len(checked)} point(s) fit.")
        if base.spec.backend == "slurm":
            specs = [c.prepared.spec for c in checked if c.prepared and not c.problems]
            text.append(cost.total_line([cost.gpu_hours_asked(s) for s in specs]))
        output.emit_text("\n".join(text))
    if bad:
        raise ConfigError(bad)


def _verdict(c: Checked) -> str:
    if c.problems:
        return f"{len(c.problems)} problem(s)"
    layout = c.prepared.layout if c.prepared else None
    if layout is None or not layout.cluster_nodes:
        return "fits"
    return f"fits ({layout.nodes} node(s) x {layout.gpus_per_node} GPU(s))"


def _point_data(c: Checked) -> dict[str, Any]:
    spec = c.prepared.spec if c.prepared else None
    return {
        "point": c.point.number,
        "overrides": list(c.point.overrides),
        "fits": not c.problems,
        "problems": list(c.problems),
        "slurm_nodes": spec.allocated_nodes if spec else None,
        "gpus_per_node": spec.slurm.gpus_per_node if spec else None,
        "driver": list(spec.driver.command or []) if spec else [],
    }


def submit(flags: JobFlags, grid: Grid, *, chain: int | None, wait: bool, quiet: bool,
           snapshot: bool) -> int:  # fmt: skip
    """`submit --sweep`: check every point, then queue them all as one experiment (through the
    one queueing core, `queueing.queue`); print the experiment's name and its jobs."""
    if chain is not None:
        raise UsageError(
            "--chain with --sweep: a sweep's points run side by side (--max-running caps how "
            "many); chain one point at a time with submit --chain"
        )
    if wait:
        raise UsageError(
            "--wait with --sweep: follow the sweep with nrl-launch status --experiment NAME --watch"
        )
    name, queued = sweeps.submit(
        flags.resolve(),
        grid.points(),
        experiment=grid.experiment,
        max_running=grid.max_running,
        snapshot=snapshot,
    )
    return _report(queued.records, name, grid, made_up=grid.experiment is None, quiet=quiet,
                   json=flags.json, code=queued.code)  # fmt: skip


def _report(
    records: list[JobRecord],
    name: str,
    grid: Grid,
    *,
    made_up: bool,
    quiet: bool,
    json: bool,
    code: str,
) -> int:
    jobs = [
        {
            "job_id": r.job_id,
            "job_name": r.job_name,
            "overrides": r.overrides,
            "log_dir": r.log_dir,
        }
        for r in records
    ]
    if json:
        output.emit_json(
            "submit", {"experiment": name, "max_running": grid.max_running, "jobs": jobs}
        )
        return 0
    if quiet:
        output.emit_text("\n".join(r.job_id for r in records))
        return 0
    at_once = (
        f", at most {grid.max_running} running at once"
        if grid.max_running and grid.max_running < len(records)
        else ""
    )
    named = " (a name made up: give your own with --experiment NAME)" if made_up else ""
    lines = [f"Submitted experiment {name}{named}: {len(records)} job(s){at_once}"]
    lines += [f"  {r.job_id}  {r.job_name}  {' '.join(r.overrides)}" for r in records]
    lines.append(f"  logs in {Path(records[0].log_dir).parent}/<JOBID>-logs")
    lines.append(
        f"  nrl-launch status --experiment {name}    nrl-launch list --experiment {name}    "
        f"nrl-launch cancel --experiment {name}"
    )
    if records[0].backend == "slurm":
        lines.append(f"  {cost.total_line([cost.recorded_asked(r) for r in records])}")
    if code:
        lines.append(f"  {code}")
    output.emit_text("\n".join(lines))
    return 0
