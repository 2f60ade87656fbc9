"""What Slurm answers about jobs, read (pure): squeue's, sacct's and `scontrol show job`'s lines,
by job id. A job with pools is a heterogeneous one, whose components Slurm lists apart
(`325+0`, `325+1`, or JobId=326 with HetJobId=325): its first component, training's, speaks for
the job."""

from __future__ import annotations

import re

from nrl_launch.backends.base import SchedulerView

__all__ = [
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "parse_sacct",
    "parse_scontrol_job",
    "parse_squeue",
]

# Always an explicit format: a user's SQUEUE_FORMAT must not change what we parse.
SQUEUE_FORMAT = "%i|%T|%r|%D|%N"
SACCT_FIELDS = "JobID,State,ExitCode"


def _base_state(word: str) -> str:
    return word.split()[0].rstrip("+") if word.strip() else "UNKNOWN"


def _job_id(word: str) -> tuple[str, int]:
    """A job id as squeue and sacct print it, and its heterogeneous component: `325+1` is
    component 1 of job 325 (a job with pools); a plain id is component 0."""
    job_id, _, offset = word.strip().partition("+")
    return job_id, int(offset) if offset.isdigit() else 0


def _lines(text: str) -> list[str]:
    # Slurm ends each job's line with "\n" only. str.splitlines() also splits on U+2028, U+0085
    # and the like, which a job name (or any field a user sets) may hold.
    return text.split("\n")


def parse_squeue(text: str) -> dict[str, SchedulerView]:
    """`squeue -h --states=all -o SQUEUE_FORMAT` lines, by job id."""
    views = {}
    for line in _lines(text):
        parts = line.split("|")
        if len(parts) < 3 or not parts[0].strip():
            continue
        reason = parts[2].strip()
        nodes = parts[4].strip() if len(parts) > 4 else ""
        job_id, component = _job_id(parts[0])
        if component and job_id in views:
            continue  # a job with pools: its first component (training) speaks for it
        views[job_id] = SchedulerView(
            state=_base_state(parts[1]),
            reason=None if reason in ("", "None") else reason,
            nodes=nodes or None,
        )
    return views


def _exit_code(text: str) -> tuple[int | None, int | None]:
    match = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(match[1]), int(match[2])) if match else (None, None)


def parse_sacct(text: str) -> dict[str, SchedulerView]:
    """`sacct -n -P -o JobID,State,ExitCode` lines (with or without -c), by job id; job
    steps (`123.batch`, `123.0`) are skipped: the job's own line is what counts. So is a line
    with no state: sacct -c reads the completion log by spaces, and a job name with a space
    in it leaves the state empty (then scontrol's answer stands)."""
    views = {}
    for line in _lines(text):
        parts = line.split("|")
        if len(parts) < 3 or "." in parts[0] or not parts[0].strip() or not parts[1].strip():
            continue
        code, signal = _exit_code(parts[2])
        job_id, component = _job_id(parts[0])
        if component and job_id in views:
            continue  # a job with pools: its first component (training) speaks for it
        views[job_id] = SchedulerView(state=_base_state(parts[1]), exit_code=code, signal=signal)
    return views


def _field(line: str, key: str) -> str | None:
    match = re.search(rf"(?:^|\s){key}=(\S*)", line)
    return match[1] if match else None


def parse_scontrol_job(text: str) -> dict[str, SchedulerView]:
    """`scontrol show job -o` lines (one job per line), by job id: what Slurm still holds of a
    finished job (for MinJobAge) where sacct has no answer."""
    views = {}
    for line in _lines(text):
        job_id, state = _field(line, "JobId"), _field(line, "JobState")
        if not job_id or not state or (_field(line, "HetJobOffset") or "0") != "0":
            continue  # a job with pools: its first component (training) speaks for it
        code, signal = _exit_code(_field(line, "ExitCode") or "")
        reason = _field(line, "Reason")
        views[job_id] = SchedulerView(
            state=state,
            reason=None if reason in (None, "", "None") else reason,
            exit_code=code,
            signal=signal,
        )
    return views
