"""What `status` says of a job that Slurm preempted or requeued.

A preempted job (a job of a higher-priority partition took its nodes) with slurm.requeue runs
again, in a log dir of its own (<JOBID>-<N>-logs), after Slurm has held it back for a while
(BeginTime: its credentials' lifetime, cred_expire, 120 s by default); without requeue it ends
PREEMPTED. Either way slurmstepd writes "*** JOB <id> ON <node> CANCELLED AT <time> DUE TO
PREEMPTION ***" into the batch output, which a requeued job's next run adds to (sbatch
--open-mode=append) instead of replacing: the only record of why a run ended when the cluster
keeps no accounting. A run's own ENDED can only say that Slurm stopped it.
"""

from __future__ import annotations

import re
from pathlib import Path

from nrl_launch.jobs.status import printable

__all__ = ["preempted_at", "requeue_note"]

# One line per step that Slurm stopped (the batch step's and each srun's): the same time.
_PREEMPTION = re.compile(rb"\*\*\* JOB \d+ ON \S+ CANCELLED AT (\S+) DUE TO PREEMPTION \*\*\*")
# The batch output holds the batch step's own lines and what srun and pyxis print, not the
# nodes' or the driver's logs: its end is enough.
_READ = 4 << 20


def preempted_at(batch_output: Path | None) -> list[str]:
    """When Slurm preempted the job, each time once, oldest first (Slurm's local time)."""
    if batch_output is None:
        return []
    try:
        with batch_output.open("rb") as out:
            out.seek(max(0, out.seek(0, 2) - _READ))
            text = out.read()
    except OSError:
        return []
    return sorted({m[1].decode("ascii", "replace") for m in _PREEMPTION.finditer(text)})


def requeue_note(runs: list[Path], batch_output: Path | None, *, waiting: bool) -> str | None:
    """How the job's last run ended, for a job Slurm requeued: one that has run more than once,
    or (`waiting`: PENDING again, its newest run ended) is about to. It was preempted, as the
    batch output says, or else what that run's ENDED says; None for a job never requeued."""
    ended_run = runs[-1] if waiting else runs[-2] if len(runs) > 1 else None
    if ended_run is None:
        return None
    number = len(runs) if waiting else len(runs) - 1
    times = preempted_at(batch_output)
    if len(times) >= number:
        return f"run {number} was preempted by Slurm at {times[-1]} and requeued"
    try:
        ended = printable((ended_run / "ENDED").read_bytes().decode("utf-8", "replace")).strip()
    except OSError:
        ended = ""
    return f"run {number} was requeued by Slurm" + (f" ({ended})" if ended else "")
