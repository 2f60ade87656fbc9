"""A job's status: Slurm's state joined with what the job wrote to its log dir. Pure: the
parsers take command output, `read_log_dir` reads files, `phase_of` decides.

Phases: PENDING (with Slurm's reason) -> STARTING -> JOINING k/N -> RUNNING -> COMPLETED, or
FAILED (with the exit code and the reason from ENDED), CANCELLED, TIMEOUT; UNKNOWN when neither
Slurm nor the log dir can tell. A plain job (run, pull: no Ray) never joins: it is STARTING
until its command starts on node 0, then RUNNING.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "SQUEUE_FORMAT",
    "JobStatus",
    "LogView",
    "Phase",
    "SchedulerView",
    "find_log_dir",
    "main_log",
    "parse_sacct",
    "parse_scontrol_job",
    "parse_squeue",
    "phase_of",
    "read_log_dir",
    "run_log_dirs",
    "slurm_phase",
]

# The log `logs` shows by default and `status` quotes: the driver's, or a plain job's command's.
_MAIN_LOG = {"ray": "ray-driver.log", "plain": "job.log"}


def main_log(kind: str) -> str:
    """The file name of a job's main log: ray-driver.log, or job.log for a plain job."""
    return _MAIN_LOG[kind]


# Always an explicit format: a user's SQUEUE_FORMAT must not change what we parse.
SQUEUE_FORMAT = "%i|%T|%r|%D|%N"
SACCT_FIELDS = "JobID,State,ExitCode"


class Phase(str, enum.Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    JOINING = "JOINING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self in (Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED, Phase.TIMEOUT)


# Slurm's job states, mapped once. A requeued or preempted job is waiting to run again.
_SLURM_STATES: dict[str, Phase] = {
    "PENDING": Phase.PENDING,
    "REQUEUED": Phase.PENDING,
    "REQUEUE_HOLD": Phase.PENDING,
    "REQUEUE_FED": Phase.PENDING,
    "PREEMPTED": Phase.PENDING,
    "RESV_DEL_HOLD": Phase.PENDING,
    "CONFIGURING": Phase.STARTING,
    "RUNNING": Phase.RUNNING,
    "COMPLETING": Phase.RUNNING,
    "SUSPENDED": Phase.RUNNING,
    "STOPPED": Phase.RUNNING,
    "SIGNALING": Phase.RUNNING,
    "STAGE_OUT": Phase.RUNNING,
    "RESIZING": Phase.RUNNING,
    "COMPLETED": Phase.COMPLETED,
    "FAILED": Phase.FAILED,
    "NODE_FAIL": Phase.FAILED,
    "BOOT_FAIL": Phase.FAILED,
    "OUT_OF_MEMORY": Phase.FAILED,
    "SPECIAL_EXIT": Phase.FAILED,
    "CANCELLED": Phase.CANCELLED,
    "REVOKED": Phase.CANCELLED,
    "TIMEOUT": Phase.TIMEOUT,
    "DEADLINE": Phase.TIMEOUT,
}


@dataclass(frozen=True)
class SchedulerView:
    """What Slurm says about one job."""

    state: str  # Slurm's word, e.g. RUNNING, or CANCELLED (from "CANCELLED by 0")
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    nodes: str | None = None  # Slurm's node list of a started job, e.g. node[0-3]


@dataclass(frozen=True)
class LogView:
    """What the job wrote to its log dir."""

    log_dir: Path | None
    head_up: bool = False
    nodes: int | None = None
    nodes_expected: int | None = None
    gpus: int | None = None
    gpus_expected: int | None = None
    driver_started: bool = False
    command_started: bool = False  # a plain job's command, on node 0
    ended: str | None = None


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    phase: Phase
    detail: str  # one line: why, or what the job is waiting for
    exit_code: int | None = None
    slurm_state: str | None = None
    log_dir: str | None = None
    nodes_joined: int | None = None
    nodes_expected: int | None = None
    driver_tail: list[str] = field(default_factory=list)
    log_dirs: list[str] = field(default_factory=list)  # every run's, first first (requeues)
    cause: str | None = None  # for a failed job: the known signature its logs show

    @property
    def over(self) -> bool:
        """Nothing more will happen to this job: it ended, or Slurm has forgotten it."""
        return self.phase.terminal or (self.phase is Phase.UNKNOWN and self.slurm_state is None)


def slurm_phase(state: str) -> Phase:
    """The phase a Slurm job state stands for (UNKNOWN for a state this table lacks)."""
    return _SLURM_STATES.get(state, Phase.UNKNOWN)


def _base_state(word: str) -> str:
    return word.split()[0].rstrip("+") if word.strip() else "UNKNOWN"


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
        views[parts[0].strip()] = SchedulerView(
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
    steps (`123.batch`, `123.0`) are skipped: the job's own line is what counts."""
    views = {}
    for line in _lines(text):
        parts = line.split("|")
        if len(parts) < 3 or "." in parts[0] or not parts[0].strip():
            continue
        code, signal = _exit_code(parts[2])
        views[parts[0].strip()] = SchedulerView(
            state=_base_state(parts[1]), exit_code=code, signal=signal
        )
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
        if not job_id or not state:
            continue
        code, signal = _exit_code(_field(line, "ExitCode") or "")
        reason = _field(line, "Reason")
        views[job_id] = SchedulerView(
            state=state,
            reason=None if reason in (None, "", "None") else reason,
            exit_code=code,
            signal=signal,
        )
    return views


def run_log_dirs(log_dir: Path) -> list[Path]:
    """Every run's log dir, first run first: a requeued job writes <JOBID>-<N>-logs (N = the
    restart) next to <JOBID>-logs."""
    job = log_dir.name.removesuffix("-logs")
    restarts = sorted(
        (int(p.name[len(job) + 1 : -len("-logs")]), p)
        for p in log_dir.parent.glob(f"{job}-*-logs")
        if p.name[len(job) + 1 : -len("-logs")].isdigit()
    )
    return [log_dir] + [path for _, path in restarts]


def find_log_dir(log_dir: Path) -> Path:
    """The newest run's log dir."""
    return run_log_dirs(log_dir)[-1]


def read_log_dir(log_dir: Path) -> LogView:
    """Read the files the job script writes; a missing or half-written file reads as absent."""
    if not log_dir.is_dir():
        return LogView(log_dir=None)
    readiness: dict[str, int] = {}
    try:
        loaded = json.loads((log_dir / "readiness.json").read_text(encoding="utf-8"))
        readiness = {k: v for k, v in loaded.items() if isinstance(v, int)}
    except (OSError, ValueError, AttributeError):
        pass
    try:
        ended: str | None = (log_dir / "ENDED").read_text(encoding="utf-8").strip()
    except OSError:
        ended = None
    try:
        timeline = (log_dir / "timeline").read_text(encoding="utf-8")
    except OSError:
        timeline = ""
    return LogView(
        log_dir=log_dir,
        head_up=(log_dir / "STARTED_RAY_HEAD").exists(),
        nodes=readiness.get("nodes"),
        nodes_expected=readiness.get("nodes_expected"),
        gpus=readiness.get("gpus"),
        gpus_expected=readiness.get("gpus_expected"),
        driver_started="driver_started " in timeline,
        command_started="command_started " in timeline,
        ended=ended,
    )


def phase_of(
    slurm: SchedulerView | None, logs: LogView, nodes: int, kind: str = "ray"
) -> tuple[Phase, str]:
    """One phase and one line of detail from Slurm's view and the log dir (of a Ray job, or of
    a plain job: `kind`)."""
    if slurm is None:
        if logs.ended:
            return Phase.UNKNOWN, f"Slurm no longer knows this job; it ended: {logs.ended}"
        return Phase.UNKNOWN, "Slurm no longer knows this job and its log dir has no ENDED"
    phase = slurm_phase(slurm.state)
    if phase is Phase.PENDING:
        return phase, f"waiting for resources ({slurm.reason})" if slurm.reason else "waiting"
    if phase.terminal:
        detail = logs.ended or slurm.reason or slurm.state.lower()
        if phase is Phase.FAILED and slurm.exit_code is not None:
            detail = f"exit code {slurm.exit_code}: {detail}"
        return phase, detail
    if phase is not Phase.RUNNING:
        return phase, slurm.state.lower()
    if logs.ended:
        return Phase.RUNNING, f"stopping: {logs.ended}"
    return _plain_progress(logs, nodes) if kind == "plain" else _ray_progress(logs, nodes)


def _plain_progress(logs: LogView, nodes: int) -> tuple[Phase, str]:
    """A running plain job: its command, once node 0 has started it (no Ray to bring up)."""
    if not logs.command_started:
        return Phase.STARTING, "starting the command (the job's environment and setup)"
    return Phase.RUNNING, f"command running on {nodes} node(s)"


def _ray_progress(logs: LogView, nodes: int) -> tuple[Phase, str]:
    """A running Ray job: the head, the nodes joining, then the driver."""
    if not logs.head_up:
        return Phase.STARTING, "starting the Ray head"
    joined, expected = logs.nodes or 0, logs.nodes_expected or nodes
    if joined < expected or not logs.driver_started:
        gpus = f", {logs.gpus}/{logs.gpus_expected} GPUs" if logs.gpus_expected else ""
        if joined < expected:
            return Phase.JOINING, f"{joined}/{expected} nodes joined{gpus}"
        return Phase.RUNNING, f"all {expected} nodes joined{gpus}"
    return Phase.RUNNING, f"driver running on {expected} node(s)"
