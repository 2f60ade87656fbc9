"""Where a job's training is, as `status` shows it: its driver's progress (jobs/progress.py)
against the job's end. Whether the run finishes in this job at its pace, or how many more jobs
of the same limit it needs (a chain's links), and when it last saved. A job whose driver is not
a known trainer has none: nothing is invented."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch import trust
from nrl_launch.jobs.progress import Progress, read_log_progress
from nrl_launch.jobs.report import duration, sparkline
from nrl_launch.jobs.status import read_timeline
from nrl_launch.spec.fields import slurm_time_minutes

if TYPE_CHECKING:
    from nrl_launch.jobs.record import JobRecord

__all__ = ["Training", "read_training"]


@dataclass(frozen=True)
class Training:
    """A running or ended job's training: its progress, and the job's limit and end."""

    progress: Progress
    limit_s: float | None  # the job's time limit (slurm.time); None: none known
    ends_at: float | None  # when Slurm ends this job: its start plus the limit
    now: float

    @property
    def left_in_job_s(self) -> float | None:
        return None if self.ends_at is None else max(0.0, self.ends_at - self.now)

    @property
    def jobs_needed(self) -> int | None:
        """More jobs of the same limit the run needs after this one at its pace: 0 when it
        finishes in this one; None when the pace or the limit is not known."""
        left, in_job = self.progress.seconds_left(), self.left_in_job_s
        if left is None or in_job is None or self.limit_s is None:
            return None
        return 0 if left <= in_job else math.ceil((left - in_job) / self.limit_s)

    def lines(self, *, over: bool) -> list[str]:
        """What status shows under the job's line."""
        p = self.progress
        if p.step is None:
            return [f"training: {p.algorithm}, setting up (no step yet)"]
        of = f"/{p.total}" if p.total else ""
        epoch = f", epoch {p.epoch}/{p.epochs}" if p.epoch and p.epochs else ""
        pace = p.seconds_per_step()
        head = f"training: step {p.step}{of} ({p.algorithm}{epoch})"
        if pace is not None:
            head += f", {pace:.3g} s/step"
        left = p.seconds_left()
        if left is not None and not over:
            head += f", {duration(left)} to the last step"
        lines = [head]
        if not over and (verdict := self._verdict()):
            lines.append(f"  {verdict}")
        lines += [f"  {line}" for line in (self._metrics(), self._save()) if line]
        lines += [f"  {note}" for note in p.notes]
        return lines

    def _verdict(self) -> str:
        needed, in_job = self.jobs_needed, self.left_in_job_s
        if needed is None or in_job is None or self.limit_s is None:
            return ""
        if needed == 0:
            return f"finishes in this job at this pace ({duration(in_job)} of its limit left)"
        return (
            f"does not finish in this job ({duration(in_job)} left): {needed} more job(s) of "
            f"{duration(self.limit_s)} at this pace (submit --chain)"
        )

    def _metrics(self) -> str:
        shown = []
        for name in self.progress.main:
            value = self.progress.latest(name)
            if value is None:
                continue
            series = [v for _, v in self.progress.metrics.get(name, ())]
            shown.append(f"{name} {value:.4g} {sparkline(series[-40:])}".rstrip())
        return "    ".join(shown)

    def _save(self) -> str:
        save, p = self.progress.last_save, self.progress
        if save is None:
            return "no checkpoint saved yet"
        ago = ""
        pace = p.seconds_per_step()
        if p.step is not None and pace is not None and p.step >= save.step:
            ago = f", about {duration((p.step - save.step) * pace)} ago"
        return f"last save: step {save.step}{ago}"

    def as_json(self) -> dict[str, Any]:
        return self.progress.as_json() | {
            "limit_s": self.limit_s,
            "job_ends_at": self.ends_at,
            "seconds_left_in_job": self.left_in_job_s,
            "jobs_needed": self.jobs_needed,
        }


def read_training(rec: JobRecord, log_dir: Path, now: float | None = None) -> Training | None:
    """The training of the job whose current run writes `log_dir`; None when its driver's log
    is not a known trainer's (or there is none yet)."""
    if rec.kind != "ray" or trust.not_mine(log_dir):  # another user's dir shows nothing
        return None
    progress = read_log_progress(log_dir / "ray-driver.log")
    if progress is None:
        return None
    limit = (rec.spec.get("slurm") or {}).get("time")
    limit_s = slurm_time_minutes(limit) * 60 if isinstance(limit, str) else None
    started = next((at for name, at in read_timeline(log_dir) if name == "started"), None)
    ends_at = started + limit_s if started is not None and limit_s is not None else None
    return Training(progress, limit_s, ends_at, time.time() if now is None else now)
