"""`nrl-launch doctor --on-nodes`: run the probe job (`probe`) on the job's own nodes.

It is submitted, waited for and cancelled through the spec's backend, as a job is, and waited
for with the one poller that follows jobs (`jobs.query.Poller`); Ctrl-C cancels it. Its report
and the files it leaves behind are removed once read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nrl_launch import backends, output
from nrl_launch.backends import Backend, Request, SchedulerView, state_phase
from nrl_launch.doctor.files import PROBE_PREFIX, _existing, shared_dirs
from nrl_launch.doctor.probe import (
    ProbeReport,
    _error_path,
    _unmountable,
    parse_probe,
    probe_checks,
    probe_request,
    report_path,
)
from nrl_launch.doctor.verdicts import Check, _fail
from nrl_launch.errors import SchedulerError
from nrl_launch.jobs.query import Backoff, Poller
from nrl_launch.spec import LaunchSpec

__all__ = ["ProbeJob", "probe_nodes"]

# Gentle on slurmctld while the probe job waits in the queue: polls from 0.5 s to 3 s apart.
_BACKOFF = Backoff(first_s=0.5, most_s=3.0, factor=1.5)


@dataclass(frozen=True)
class ProbeJob:
    """The probe job as its backend knows it (a `backends.JobRef`; it has no job record)."""

    job_id: str
    log_dir: str  # the dir its report goes to
    script_path: str  # gone once submitted: sbatch keeps its own copy
    pid: int | None = None


def _remove_probe_files(job_id: str, dirs: Sequence[Path], report: Path) -> None:
    """What a cancelled or broken probe job left behind (it removes its files itself when it
    runs to the end)."""
    # Clean-up must not hide the checks' results: a file that cannot be removed stays.
    for leftover in [p for d in dirs for p in d.glob(f"{PROBE_PREFIX}{job_id}-*")] + [report]:
        with contextlib.suppress(OSError):
            leftover.unlink(missing_ok=True)


def _read_report(output: Path, patience_s: float = 10.0) -> ProbeReport:
    """The report, once its last line is there: a shared file system may show a file written
    on a node a few seconds late."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            report = parse_probe(output.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            report = ProbeReport()
        if report.done or time.monotonic() >= deadline:
            return report
        time.sleep(0.5)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _state(view: SchedulerView) -> str:
    """The job's state as the wait lines and the checks say it: RUNNING, PENDING (Resources),
    FAILED, exit code 1..."""
    code = f", exit code {view.exit_code}" if view.exit_code else ""
    return view.state + (f" ({view.reason})" if view.reason else "") + code


def _wait(
    backend: Backend, job: ProbeJob, timeout_s: float, progress: Callable[[str], None]
) -> tuple[bool, str]:
    """Wait for the job to end: (True, how it ended) or, at the timeout, (False, its state)."""
    last = ""

    def ended(views: dict[str, SchedulerView]) -> bool:
        nonlocal last
        view = views.get(job.job_id)
        if view is None or state_phase(view.state).terminal:
            return True
        if _state(view) != last:
            last = _state(view)
            progress(f"probe job {job.job_id}: {last}")
        return False

    # No limit on polls the scheduler does not answer (slurmctld busy for a moment): the
    # timeout ends the wait, and the job is cancelled then.
    poll = Poller(lambda: backend.describe([job]), give_up_after=None, quiet=True)
    views = poll.wait_until(ended, timeout_s, _BACKOFF)
    if views is None:
        return False, last or "unknown (Slurm did not answer)"
    view = views.get(job.job_id)
    return True, _state(view) if view else "ended"  # Slurm forgets a job some time after it ends


def _cancel(backend: Backend, job: ProbeJob) -> None:
    # A cancel that fails is not the end of doctor: its checks' results still count.
    with contextlib.suppress(SchedulerError):
        backend.cancel([job])
    # Slurm writes a last line into the job's output file as the job ends: the probe's files
    # are removed after that (bounded), or the file comes back.
    _wait(backend, job, 15, lambda _line: None)


def _submit(
    backend: Backend, spec: LaunchSpec, probed: Sequence[tuple[str, Path]], cwd: Path
) -> ProbeJob | Check:
    """The probe job, submitted through the backend; or the check that says why it was not."""
    fd, name = tempfile.mkstemp(prefix="nrl-doctor-", suffix=".sbatch")
    script = Path(name)
    try:
        argv, text = probe_request(spec, probed, script)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        request = Request(argv=tuple(argv), script=text)
        done = backend.submit(
            request, job_id=backend.new_job_id(), cwd=cwd, output=Path("/dev/null")
        )
    except SchedulerError as exc:
        return _fail("on nodes", f"the probe job was not accepted: {exc.message}")
    finally:
        script.unlink(missing_ok=True)  # sbatch keeps its own copy
    return ProbeJob(done.job_id, log_dir=str(probed[0][1]), script_path=str(script))


def probe_nodes(
    spec: LaunchSpec, cwd: Path, timeout_s: float, progress: Callable[[str], None]
) -> list[Check]:
    """Submit the probe job, wait for it (Ctrl-C cancels it), and judge what it printed."""
    dirs = shared_dirs(spec, cwd)
    # A dir that does not exist yet is probed where it will be created.
    probed = [(key, _existing(path)) for key, path in dirs]
    pyxis = spec.container.runtime == "pyxis"
    problem = _unmountable(probed[0][1]) if pyxis else None
    if problem:
        return [_fail("on nodes", f"not run: {problem}")]
    backend = backends.get(spec.backend)
    job = _submit(backend, spec, probed, cwd)
    if isinstance(job, Check):
        return [job]
    job_id = job.job_id
    out = report_path(probed, job_id)
    try:
        progress(
            f"on nodes: probe job {job_id} submitted ({spec.slurm.nodes} node(s)); waiting up "
            f"to {timeout_s:.0f} s, Ctrl-C cancels it"
        )
        ended, state = _wait(backend, job, timeout_s, progress)
        if not ended:
            _cancel(backend, job)
            return [
                _fail(
                    "on nodes",
                    f"probe job {job_id} was still {state} after {timeout_s:.0f} s: cancelled "
                    "it (raise --probe-timeout to wait longer)",
                )
            ]
        report = _read_report(out)
        errors = {n: _text(_error_path(out.parent, job_id, n)) for n in report.nodes if pyxis}
    except KeyboardInterrupt:
        _cancel(backend, job)
        output.warn(f"cancelled probe job {job_id}")
        raise
    finally:
        _remove_probe_files(job_id, [p for _, p in probed], out)
    if not report.nodes:
        return [
            _fail(
                "on nodes",
                f"probe job {job_id} ended ({state}) without writing its report {out}: "
                f"can the nodes write in {out.parent} (logs.base_dir)?",
            )
        ]
    checks = probe_checks(spec, report, probed, errors)
    if not report.done:
        checks.append(_fail("on nodes", f"probe job {job_id} ended before its last step"))
    return checks
