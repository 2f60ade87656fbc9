"""A job's status: the scheduler's state joined with what the job wrote to its log dir. Pure:
the backend's view comes in, `read_log_dir` reads files, `phase_of` decides.

Phases: PENDING (with Slurm's reason) -> STARTING -> JOINING k/N -> RUNNING -> COMPLETED, or
FAILED (with the exit code and the reason from ENDED), CANCELLED, TIMEOUT; UNKNOWN when neither
Slurm nor the log dir can tell. A plain job (run, pull: no Ray) never joins: it is STARTING
until its command starts on node 0, then RUNNING.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrl_launch import output, trust
from nrl_launch.backends import Phase, SchedulerView, state_phase
from nrl_launch.errors import UntrustedLogError

__all__ = [
    "PREEMPTED",
    "TIME_LIMIT",
    "JobStatus",
    "LogView",
    "Phase",
    "SchedulerView",
    "find_log_dir",
    "main_log",
    "phase_of",
    "printable",
    "read_log_dir",
    "read_timeline",
    "run_log_dirs",
]

# The log `logs` shows by default and `status` quotes: the driver's, or a plain job's command's.
_MAIN_LOG = {"ray": "ray-driver.log", "plain": "job.log"}


def main_log(kind: str) -> str:
    """The file name of a job's main log: ray-driver.log, or job.log for a plain job."""
    return _MAIN_LOG[kind]


@dataclass(frozen=True)
class PoolView:
    """A model pool (pools:) as its balancer last wrote it (pool-<name>.json in the log dir)."""

    name: str
    healthy: int
    total: int
    url: str
    exited: bool = False  # every replica has exited (pool-<name>.gone)

    def line(self, *, over: bool = False) -> str:
        """As `status` shows it; `over`: the job has ended (the counts were its balancer's
        last)."""
        if self.exited:
            return f"pool {self.name}: every replica has exited"
        if over:
            return f"pool {self.name}: {self.total} replica(s), served at {self.url}"
        return f"pool {self.name}: {self.healthy}/{self.total} replicas healthy, {self.url}"


@dataclass(frozen=True)
class LogView:
    """What the job wrote to its log dir."""

    log_dir: Path | None
    head_up: bool = False
    nodes: int | None = None
    nodes_expected: int | None = None
    gpus: int | None = None
    gpus_expected: int | None = None
    dedicated_head: bool = False  # node 0 is a CPU head: the GPU nodes are the others
    driver_started: bool = False
    command_started: bool = False  # a plain job's command, on node 0
    ended: str | None = None
    exit_code: int | None = None  # the exit_code file (local, Lepton and plain jobs write one)
    sandboxes_ready: int | None = None  # nodes whose sandbox answers; None: the job has none
    pools: tuple[PoolView, ...] = ()

    @property
    def end(self) -> tuple[int, str] | None:
        """How the job ended by its own record: the exit code and ENDED's reason on one line.
        The code is the exit_code file's where the job script wrote one, else the one ENDED's
        reason names ("driver exited with code 3"), 0 for a stop (`nrl-launch stop` ends a job
        well), else 1 (a failure, or Slurm stopping it). None when it records no end."""
        code, reason = self.exit_code, self.ended or ""
        if code is None:
            if not reason:
                return None
            named = _ENDED_CODE.search(reason.splitlines()[0])
            code = int(named[1]) if named else 0 if reason.startswith("stop requested") else 1
        return code, " ".join(reason.split()) or f"exit code {code}"


# How the job scripts word an end that carries the exit code (end_job's reasons, in
# templates/): "driver exited with code 3", "the head step ended with exit code 3".
_ENDED_CODE = re.compile(r"(?:exited with code|ended with exit code) (\d+)\b")
# How they word a stop by the scheduler (their TERM traps): cancelled, a time limit, a requeue
# or a preemption, which the log dir cannot tell apart.
_SCHEDULER_STOP = re.compile(r"\w+ stopped (?:the job|node) ")
# A job Slurm ended at its time limit (state TIMEOUT).
TIME_LIMIT = "Slurm ended it at its time limit (slurm.time)"
# A job Slurm preempted without requeueing it (jobs/requeue.py: with requeue it runs again).
PREEMPTED = (
    "preempted by Slurm (a job of a higher-priority partition took its nodes) and not "
    "requeued; slurm.requeue: true would run it again"
)


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
    # submit --retries: which try of the run this is, of how many, and how each before it ended
    try_index: int | None = None
    try_count: int | None = None
    earlier_tries: list[str] = field(default_factory=list)
    # pools: each pool's replicas healthy (of how many) and URL, as its balancer last said
    pools: list[dict[str, Any]] = field(default_factory=list)
    # on Slurm: GPU-hours used so far, over every run and try (jobs/cost.py)
    gpu_hours_used: float | None = None

    @property
    def over(self) -> bool:
        """Nothing more will happen to this job: it ended, or Slurm has forgotten it."""
        return self.phase.terminal or (self.phase is Phase.UNKNOWN and self.slurm_state is None)

    def as_json(self) -> dict[str, Any]:
        """The status as `status --json` prints it (its phase by name)."""
        return dataclasses.asdict(self) | {"phase": self.phase.value}


def run_log_dirs(log_dir: Path) -> list[Path]:
    """Every run's log dir, first run first: a requeued job writes <JOBID>-<N>-logs (N = the
    restart) next to <JOBID>-logs. A restart's dir that is not this user's own is not the job's
    (another user can make one where they can write): it is left out, with a warning."""
    job = log_dir.name.removesuffix("-logs")
    restarts = []
    for path in log_dir.parent.glob(f"{job}-*-logs"):
        restart = path.name[len(job) + 1 : -len("-logs")]
        if not restart.isdigit():
            continue
        why = trust.not_mine(path)
        if why:
            output.warn(f"ignoring {path.name}, not job {job}'s: {why}")
            continue
        restarts.append((int(restart), path))
    return [log_dir] + [path for _, path in sorted(restarts)]


def find_log_dir(log_dir: Path, *run: str) -> Path:
    """The newest run's log dir, this user's own. With `run` (names of files in it that
    nrl-launch will run, as attach runs <JOBID>-attach.sh and it job.sbatch, or job.sh), those
    of them that are there too, and no other user can replace the dir meanwhile.

    Raises:
        UntrustedLogError: it (or one of `run`) exists and another user could have written it.
    """
    newest = run_log_dirs(log_dir)[-1]
    if not newest.exists():
        return newest
    found = trust.not_mine(newest)
    if run and not found:
        here = [
            newest / name
            for name in run
            if (newest / name).is_symlink() or (newest / name).exists()
        ]
        found = trust.replaceable(newest.parent) or next(
            (why for path in here if (why := trust.not_mine(path))), None
        )
    if found:
        raise UntrustedLogError(
            f"{found}: another user could have written what nrl-launch would "
            f"{'run' if run else 'read'} there; not using the job's log dir {newest}"
        )
    return newest


def read_log_dir(log_dir: Path) -> LogView:
    """Read the files the job script writes; a missing or half-written file reads as absent. A
    dir that is not this user's own is not read (another user may have made it, to make the job
    look COMPLETED or to be attached to): it reads as absent, with a warning. Text is kept to
    printable characters: a log dir's words never move the terminal."""
    if not log_dir.is_dir():
        return LogView(log_dir=None)
    why = trust.not_mine(log_dir)
    if why:
        output.warn(f"not reading {log_dir}: {why}")
        return LogView(log_dir=None)
    readiness: dict[str, int] = {}
    try:
        loaded = json.loads((log_dir / "readiness.json").read_text(encoding="utf-8"))
        readiness = {k: v for k, v in loaded.items() if isinstance(v, int)}
    except (OSError, ValueError, AttributeError):
        pass
    try:
        # Bytes, decoded: text mode would turn a carriage return into a line break.
        ended: str | None = printable((log_dir / "ENDED").read_bytes().decode("utf-8")).strip()
    except (OSError, UnicodeDecodeError):
        ended = None
    try:
        exit_code: int | None = int((log_dir / "exit_code").read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        exit_code = None
    try:
        timeline = (log_dir / "timeline").read_text(encoding="utf-8")
    except OSError:
        timeline = ""
    sandbox = log_dir / "sandbox"  # made at the start of a job with a sandbox, before Ray
    sandboxes_ready = len(list(sandbox.glob("READY.*"))) if sandbox.is_dir() else None
    return LogView(
        pools=read_pools(log_dir),
        log_dir=log_dir,
        head_up=(log_dir / "STARTED_RAY_HEAD").exists(),
        nodes=readiness.get("nodes"),
        nodes_expected=readiness.get("nodes_expected"),
        gpus=readiness.get("gpus"),
        gpus_expected=readiness.get("gpus_expected"),
        dedicated_head=readiness.get("dedicated_head") == 1,
        driver_started="driver_started " in timeline,
        command_started="command_started " in timeline,
        ended=ended,
        exit_code=exit_code,
        sandboxes_ready=sandboxes_ready,
    )


def read_timeline(log_dir: Path) -> list[tuple[str, float]]:
    """A run's timeline (`phase` in node/common.sh: a name and epoch seconds a line), in order;
    empty without one, or where the dir is not this user's own (another user could have made
    it, to show what they like). A line that is not a name and a number is skipped."""
    if trust.not_mine(log_dir):
        return []
    try:
        lines = (log_dir / "timeline").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        name, _, value = line.partition(" ")
        try:
            found.append((name, float(value)))
        except ValueError:
            continue
    return found


def read_pools(log_dir: Path) -> tuple[PoolView, ...]:
    """Each pool's state as its balancer last wrote it; a half-written or odd file is skipped."""
    found = []
    for path in sorted(log_dir.glob("pool-*.json")):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            name, healthy, total = state["pool"], state["healthy"], state["total"]
            url = printable(str(state["url"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not (isinstance(name, str) and isinstance(healthy, int) and isinstance(total, int)):
            continue
        exited = (log_dir / f"pool-{name}.gone").exists()
        found.append(PoolView(printable(name), healthy, total, url, exited))
    return tuple(found)


# C0 and C1 control characters but newline and tab, and DEL: terminal escapes among them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with its control characters (terminal escapes, carriage returns) shown as ?."""
    return _CONTROL.sub("?", text)


def phase_of(
    slurm: SchedulerView | None, logs: LogView, nodes: int, kind: str = "ray"
) -> tuple[Phase, str]:
    """One phase and one line of detail from Slurm's view and the log dir (of a Ray job, or of
    a plain job: `kind`)."""
    if slurm is None:
        return _as_recorded(logs)
    phase = state_phase(slurm.state)
    if phase is Phase.PENDING:
        return phase, f"waiting for resources ({slurm.reason})" if slurm.reason else "waiting"
    if phase.terminal:
        detail = logs.ended or slurm.reason or slurm.state.lower()
        if slurm.state == "PREEMPTED":  # its ENDED can only say that Slurm stopped it
            detail = PREEMPTED
        elif slurm.state == "TIMEOUT":  # the same, once its trap has written ENDED, if yet
            detail = TIME_LIMIT
        if phase is Phase.FAILED and slurm.exit_code is not None:
            detail = f"exit code {slurm.exit_code}: {detail}"
        return phase, detail
    if phase is not Phase.RUNNING:
        return phase, slurm.state.lower()
    if logs.ended:
        return Phase.RUNNING, f"stopping: {logs.ended}"
    return _plain_progress(logs, nodes) if kind == "plain" else _ray_progress(logs, nodes)


def _as_recorded(logs: LogView) -> tuple[Phase, str]:
    """A job Slurm no longer knows: COMPLETED or FAILED as its log dir records its end; UNKNOWN
    when it records none, or only that Slurm stopped it (cancelled or out of time: the log dir
    cannot say which)."""
    end = logs.end
    if end is None:
        return Phase.UNKNOWN, "Slurm no longer knows this job and its log dir has no ENDED"
    code, reason = end
    if _SCHEDULER_STOP.match(reason):
        return Phase.UNKNOWN, f"Slurm no longer knows this job; it ended: {logs.ended}"
    detail = f"{reason} (as its log dir records; the scheduler no longer knows this job)"
    return (Phase.COMPLETED if code == 0 else Phase.FAILED), detail


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
    # Every node of the allocation counts; a dedicated head is named, as its GPUs are not.
    head = f" (1 CPU head + {expected - 1} GPU nodes)" if logs.dedicated_head else ""
    if joined < expected or not logs.driver_started:
        gpus = f", {logs.gpus}/{logs.gpus_expected} GPUs" if logs.gpus_expected else ""
        if joined < expected:
            return Phase.JOINING, f"{joined}/{expected} nodes joined{head}{gpus}"
        # The head starts the driver once every node's sandbox answers (up to its ready timeout).
        sandboxes = (
            f"; waiting for the sandbox: {logs.sandboxes_ready}/{expected} nodes answer"
            if logs.sandboxes_ready is not None
            else ""
        )
        # And once every required pool's replicas all answer.
        waiting = [f"{p.name} {p.healthy}/{p.total}" for p in logs.pools if p.healthy < p.total]
        pools = f"; waiting for pools: {', '.join(waiting)}" if waiting else ""
        return Phase.RUNNING, f"all {expected} nodes joined{head}{gpus}{sandboxes}{pools}"
    return Phase.RUNNING, f"driver running on {expected} node(s){head}"
