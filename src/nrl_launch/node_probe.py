"""`nrl-launch doctor --on-nodes`: a short probe job on the job's own nodes.

It checks there what the login node cannot see (templates/doctor-probe.sbatch.j2): each node's
hostname and GPUs, the setup command and Ray, and that the shared dirs are the same dir on every
node. `parse_probe` and `probe_checks` are pure (tested on reports captured from the dev
cluster); `probe_nodes` submits the job through `runner`, waits for it, and removes its files.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nrl_launch import __version__, output
from nrl_launch.backends.slurm import gpu_flag, sbatch_flags
from nrl_launch.doctor import (
    PROBE_PREFIX,
    Check,
    Status,
    _existing,
    _fail,
    _gpu_request,
    _ok,
    _one_line,
    _run,
    ray_auth_on_node,
    shared_dirs,
)
from nrl_launch.errors import SchedulerError
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["ProbeReport", "parse_probe", "probe_checks", "probe_nodes", "probe_request"]

PROBE_TEMPLATE = "doctor-probe.sbatch.j2"
# Each line of the probe job's report starts with this (other output, e.g. setup's, does not).
PROBE_LINE = "nrl-probe|"


@dataclass(frozen=True)
class ProbeLine:
    node: str
    what: str  # nodes, host, gpus, setup, ray, mount, write, read, step or done
    key: str
    status: str  # ok, failed, or skipped (not checked there)
    detail: str


@dataclass
class ProbeReport:
    """What the probe job printed: its `nrl-probe|NODE|WHAT|KEY|STATUS|DETAIL` lines."""

    nodes: list[str] = field(default_factory=list)
    lines: list[ProbeLine] = field(default_factory=list)
    done: bool = False

    def of(self, what: str, node: str | None = None, key: str | None = None) -> list[ProbeLine]:
        return [
            line
            for line in self.lines
            if line.what == what
            and (node is None or line.node == node)
            and (key is None or line.key == key)
        ]


def parse_probe(text: str) -> ProbeReport:
    """The probe job's output (its other lines, such as the setup command's, are skipped)."""
    report = ProbeReport()
    for raw in text.splitlines():
        at = raw.find(PROBE_LINE)
        if at < 0:
            continue
        parts = raw[at + len(PROBE_LINE) :].split("|", 4)
        if len(parts) != 5:
            continue
        line = ProbeLine(*parts)
        if line.what == "nodes":
            report.nodes = line.detail.split()
        elif line.what == "done":
            report.done = True
        else:
            report.lines.append(line)
    return report


def _node_check(spec: LaunchSpec, report: ProbeReport, node: str) -> list[Check]:
    """One line per node (its host, GPUs and Ray), then one per problem found there."""
    host = report.of("host", node)
    if not host:
        return [_fail(node, "no answer from this node: the probe's steps did not run there")]
    facts = [f"hostname {host[0].detail}"]
    status: Status = "ok"
    for gpus in report.of("gpus", node):
        seen, _, how = gpus.detail.partition(" ")
        facts.append(f"{seen} GPUs {how}".strip())
        wanted = spec.slurm.gpus_per_node if _gpu_request(spec) else 0
        if seen.isdigit() and int(seen) < wanted:
            status = "warn"
            facts.append(f"fewer than slurm.gpus_per_node = {wanted}")
    facts += [ray.detail for ray in report.of("ray", node) if ray.status in ("ok", "skipped")]
    problems = [
        _fail(f"setup on {node}", f"the setup command failed ({line.detail})")
        for line in report.of("setup", node)
        if line.status != "ok"
    ]
    problems += [
        _fail(f"ray on {node}", line.detail)
        for line in report.of("ray", node)
        if line.status not in ("ok", "skipped")
    ]
    problems += [
        found
        for line in report.of("ray", node)
        if line.status == "ok" and (found := ray_auth_on_node(spec, node, line.detail))
    ]
    problems += [
        _fail(f"container.mounts on {node}", f"source {line.key} does not exist there")
        for line in report.of("mount", node)
        if line.status != "ok"
    ]
    return [Check(node, status, "; ".join(facts)), *problems]


def _dir_checks(report: ProbeReport, key: str, path: Path) -> list[Check]:
    """Whether each node wrote its file into `path`, and read every other node's there."""
    writes = {line.node: line for line in report.of("write", key=key)}
    failed_writes = {n for n, line in writes.items() if line.status != "ok"}
    checks = []
    for node in report.nodes:
        name = f"{key} on {node}"
        if node not in writes:
            checks.append(_fail(name, f"no answer from this node about {path}"))
        elif node in failed_writes:
            checks.append(_fail(name, f"cannot write in {path}: {writes[node].detail}"))
    order = {node: i for i, node in enumerate(report.nodes)}
    for line in sorted(report.of("read", key=key), key=lambda r: order.get(r.node, len(order))):
        if line.status == "ok" or line.node in failed_writes:
            continue
        # A node that could not write is reported above; not seeing its file says nothing new.
        unseen = [n for n in line.detail.split() if n not in failed_writes and n in writes]
        if unseen:
            checks.append(
                _fail(
                    f"{key} on {line.node}",
                    f"does not see the files {', '.join(unseen)} wrote in {path}: "
                    "it is not the same dir on every node (not shared storage)",
                )
            )
    if checks:
        return checks
    n = len(report.nodes)
    if n == 1:
        return [_ok(f"{key} on nodes", f"{report.nodes[0]} wrote a file in {path}")]
    return [_ok(f"{key} on nodes", f"all {n} nodes wrote a file in {path} and saw each other's")]


def probe_checks(
    spec: LaunchSpec, report: ProbeReport, dirs: Sequence[tuple[str, Path]]
) -> list[Check]:
    """The verdicts on a finished probe job's report."""
    checks: list[Check] = []
    for node in report.nodes:
        checks += _node_check(spec, report, node)
    for key, path in dirs:
        checks += _dir_checks(report, key, path)
    for step in report.of("step"):
        checks.append(_fail("on nodes", f"the probe's {step.key} step failed: {step.detail}"))
    return checks


def probe_request(
    spec: LaunchSpec, dirs: Sequence[tuple[str, Path]], script: Path
) -> tuple[list[str], str]:
    """The probe job's sbatch argv and script: the job's own scheduling flags (the same nodes,
    partition, account, time, GPUs) with a name of its own and no dependency. Its report goes
    to `report_path(dirs, JOBID)`, written by the script itself: an --output file that the first
    node cannot open is a launch failure in slurmstepd (the job fails before the script runs,
    and Slurm may drain the node for it), where a failed redirection in the script only ends
    the probe."""
    own = ("--job-name=", "--output=", "--dependency=")
    flags = [f for f in sbatch_flags(spec) if not f.startswith(own)]
    argv = [
        "sbatch",
        "--parsable",
        *flags,
        *spec.slurm.extra_args,
        # Last, so that nothing in extra_args can move the output.
        f"--job-name={spec.slurm.job_name}-doctor",
        "--output=/dev/null",
        str(script),
    ]
    text = render(
        PROBE_TEMPLATE,
        spec=spec,
        version=__version__,
        spec_json=spec.model_dump_json(),
        gpu_flag=gpu_flag(spec),
        ray=False,  # the probe starts no Ray: the job's values without Ray's ports
        dirs=[(key, str(path)) for key, path in dirs],
        mount_sources=[m.src for m in spec.container.mounts]
        if spec.container.runtime == "pyxis"
        else [],
        run_setup=spec.container.runtime == "none",
        prefix=PROBE_PREFIX,
        report_dir=str(dirs[0][1]),
    )
    return argv, text


def report_path(dirs: Sequence[tuple[str, Path]], job_id: str) -> Path:
    """Where the probe job writes its report: in the first shared dir (the log dir, where the
    job's own output goes)."""
    return dirs[0][1] / f"{PROBE_PREFIX}{job_id}.out"


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


def _wait(job_id: str, timeout_s: float, progress: Callable[[str], None]) -> tuple[bool, str]:
    """Wait for the job to end: (True, how it ended) or, at the timeout, (False, its state)."""
    from nrl_launch.jobs import query
    from nrl_launch.jobs.status import slurm_phase

    deadline = time.monotonic() + timeout_s
    last, delay = "", 0.5
    while True:
        try:
            views = query.scheduler_views([job_id])
        except SchedulerError:
            views = None  # slurmctld busy for a moment: ask again at the next poll
        if views is not None:
            view = views.get(job_id)
            if view is None:
                return True, "ended"  # Slurm forgets a job some time after it ends
            code = f", exit code {view.exit_code}" if view.exit_code else ""
            state = view.state + (f" ({view.reason})" if view.reason else "") + code
            if slurm_phase(view.state).terminal:
                return True, state
            if state != last:
                progress(f"probe job {job_id}: {state}")
                last = state
        if time.monotonic() >= deadline:
            return False, last or "unknown (Slurm did not answer)"
        time.sleep(delay)
        delay = min(delay * 1.5, 3.0)  # gentle on slurmctld while the job waits in the queue


def probe_nodes(
    spec: LaunchSpec, cwd: Path, timeout_s: float, progress: Callable[[str], None]
) -> list[Check]:
    """Submit the probe job, wait for it (Ctrl-C cancels it), and judge what it printed."""
    dirs, _ = shared_dirs(spec, cwd)
    # A dir that does not exist yet is probed where it will be created.
    probed = [(key, _existing(path)) for key, path in dirs]
    fd, name = tempfile.mkstemp(prefix="nrl-doctor-", suffix=".sbatch")
    script = Path(name)
    try:
        argv, text = probe_request(spec, probed, script)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        done = _run(argv)
    finally:
        script.unlink(missing_ok=True)  # sbatch keeps its own copy
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id.isdigit():
        reason = _one_line(done.stderr) or f"no job id (stdout: {done.stdout.strip()!r})"
        return [_fail("on nodes", f"the probe job was not accepted: {reason}")]
    out = report_path(probed, job_id)
    try:
        progress(
            f"on nodes: probe job {job_id} submitted ({spec.slurm.nodes} node(s)); waiting up "
            f"to {timeout_s:.0f} s, Ctrl-C cancels it"
        )
        ended, state = _wait(job_id, timeout_s, progress)
        if not ended:
            _run(["scancel", job_id])
            return [
                _fail(
                    "on nodes",
                    f"probe job {job_id} was still {state} after {timeout_s:.0f} s: cancelled "
                    "it (raise --probe-timeout to wait longer)",
                )
            ]
        report = _read_report(out)
    except KeyboardInterrupt:
        _run(["scancel", job_id])
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
    checks = probe_checks(spec, report, probed)
    if not report.done:
        checks.append(_fail("on nodes", f"probe job {job_id} ended before its last step"))
    return checks
