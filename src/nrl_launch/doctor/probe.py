"""The probe job of `nrl-launch doctor --on-nodes`: its request, and the verdicts on its report.

It checks on the job's own nodes what the login node cannot see (its script: the header
templates/doctor-probe.sbatch.j2, then the node program's node/probe.sh): each node's hostname
and GPUs, on the node itself; then, where the job's own steps run (in its container, with the
pyxis flags and mounts the job's steps get, when it has one), the setup command and Ray, and
that the shared dirs are the same dir on every node. A container that does not start on a node
is said in pyxis's words (jobs/pyxis_errors.py).
Everything here is pure (tested on reports captured from the dev cluster); `on_nodes` submits
the job, waits for it, and removes its files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from nrl_launch import __version__
from nrl_launch.backends.slurm import container_mounts, gpu_flag, sbatch_flags
from nrl_launch.doctor.files import PROBE_PREFIX, _cache_dirs, _existing, _host_path
from nrl_launch.doctor.verdicts import (
    Check,
    Status,
    _fail,
    _gpu_request,
    _ok,
    ray_auth_on_node,
)
from nrl_launch.jobs import pyxis_errors
from nrl_launch.node import job_script
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = [
    "ProbeLine",
    "ProbeReport",
    "parse_probe",
    "probe_checks",
    "probe_request",
    "report_path",
]

PROBE_TEMPLATE = "doctor-probe.sbatch.j2"
# Each line of the probe job's report starts with this (other output, e.g. setup's, does not).
PROBE_LINE = "nrl-probe|"
# The steps that run where the job's own steps do: in its container, when it has one.
_CONTAINER_STEPS = ("info", "read")
# The keys a pyxis failure can be about, as pyxis_errors names them in its causes.
_CONTAINER_KEYS = ("container.mounts", "container.workdir", "container.image")


@dataclass(frozen=True)
class ProbeLine:
    node: str
    what: str  # nodes, host, gpus, container, setup, ray, write, read, step or done
    key: str
    status: str  # ok or failed
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
    """One line per node (its host, GPUs, container and Ray), then one per problem found
    there."""
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
    facts += [f"container: {line.detail or 'started'}" for line in report.of("container", node)]
    facts += [ray.detail for ray in report.of("ray", node) if ray.status == "ok"]
    problems = [
        _fail(f"setup on {node}", f"the setup command failed ({line.detail})")
        for line in report.of("setup", node)
        if line.status != "ok"
    ]
    problems += [
        _fail(f"ray on {node}", line.detail)
        for line in report.of("ray", node)
        if line.status != "ok"
    ]
    problems += [
        found
        for line in report.of("ray", node)
        if line.status == "ok" and (found := ray_auth_on_node(spec, node, line.detail))
    ]
    return [Check(node, status, "; ".join(facts)), *problems]


def _dir_checks(report: ProbeReport, key: str, path: Path, skip: set[str]) -> list[Check]:
    """Whether each node wrote its file into `path`, and read every other node's there; the
    nodes in `skip` ran neither step (their container did not start: said once, above)."""
    nodes = [node for node in report.nodes if node not in skip]
    if not nodes:
        return []
    writes = {line.node: line for line in report.of("write", key=key)}
    failed_writes = {n for n, line in writes.items() if line.status != "ok"}
    checks = []
    for node in nodes:
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
    if len(nodes) == 1:
        return [_ok(f"{key} on nodes", f"{nodes[0]} wrote a file in {path}")]
    every = "all " if len(nodes) == len(report.nodes) else ""
    return [
        _ok(
            f"{key} on nodes",
            f"{every}{len(nodes)} nodes wrote a file in {path} and saw each other's",
        )
    ]


def probe_checks(
    spec: LaunchSpec,
    report: ProbeReport,
    dirs: Sequence[tuple[str, Path]],
    errors: Mapping[str, str | None] | None = None,
) -> list[Check]:
    """The verdicts on a finished probe job's report. `errors`: by node, the stderr of its info
    step (None where there is no such file), which holds pyxis's words when the job's container
    did not start there."""
    checks: list[Check] = []
    stopped = _no_container(spec, report)
    for node in report.nodes:
        checks += _node_check(spec, report, node)
        if node in stopped:
            checks.append(_container_failure(node, (errors or {}).get(node), dirs[0][1]))
    for key, path in dirs:
        checks += _dir_checks(report, key, path, stopped)
    for step in report.of("step"):
        if stopped and step.key in _CONTAINER_STEPS:
            continue  # srun failed because a container did not start: said per node above
        checks.append(_fail("on nodes", f"the probe's {step.key} step failed: {step.detail}"))
    return checks


# ---- In the job's container ----


def _no_container(spec: LaunchSpec, report: ProbeReport) -> set[str]:
    """The nodes that answered from the host step but not from inside the container."""
    if spec.container.runtime != "pyxis":
        return set()
    inside = {line.node for line in report.of("container")}
    return {line.node for line in report.of("host")} - inside


def _container_failure(node: str, stderr: str | None, log_dir: Path) -> Check:
    """Why the job's container did not start on `node`, from its info step's stderr: pyxis's
    line, under the key it is about (container.image, container.mounts, container.workdir)."""
    if stderr is None:
        # slurmstepd creates the file before pyxis starts; without it the step never ran.
        return _fail(
            f"container on {node}",
            f"the probe's info step did not start there: can {node} write in {log_dir} "
            "(logs.base_dir)?",
        )
    # pyxis_errors names the node from `slurmstepd-NODE:` (Slurm 22.05 on the dev cluster) or
    # else from srun's next `srun: error: NODE: task` line, which is in the report, not this
    # file: this file is one node's, so say which the way srun does.
    found = pyxis_errors.find(f"{stderr}\nsrun: error: {node}: task 0: Exited with exit code 1\n")
    if found is None:
        said = [line.strip() for line in stderr.splitlines() if line.strip()]
        last = f": {said[-1]}" if said else " (its stderr is empty)"
        return _fail(f"container on {node}", f"no answer from inside the job's container{last}")
    key = next((k for k in _CONTAINER_KEYS if k in found.cause), "container")
    return _fail(f"{key} on {node}", found.cause)


def _error_path(log_dir: Path, job_id: str, node: str) -> Path:
    """The info step's stderr on `node` (srun --error ...-info-%N.err in the template)."""
    return log_dir / f"{PROBE_PREFIX}{job_id}-info-{node}.err"


def _probe_mounts(spec: LaunchSpec, log_dir: Path) -> list[str]:
    """The job's mounts (backends.slurm.container_mounts): the user's, then each cache dir the
    job creates and mounts at its own path, here the dir it would be created in (doctor creates
    nothing, and pyxis cannot mount a source that does not exist). set_container_args adds
    `log_dir`, as it adds the job's log dir."""
    mounts = container_mounts(spec)
    own = len(spec.container.mounts)
    made = [_existing(Path(m.partition(":")[0])) for m in mounts[own:]]
    # Never / onto /: the container would be the host's file system.
    extra = [p for p in dict.fromkeys(made) if p not in (log_dir, Path("/"))]
    return mounts[:own] + [f"{path}:{path}" for path in extra]


def _inside_path(spec: LaunchSpec, key: str, probed: Path) -> str:
    """Where the job's steps see `probed`, the dir (or its nearest existing parent) that the
    probe writes in for `key`: without a container, and for the log dir (the job mounts it at its
    own path), the same path; for a cache, its own path in the container, as far up as `probed`
    is above the cache's host path."""
    path = dict(_cache_dirs(spec)).get(key)
    if spec.container.runtime != "pyxis" or path is None:
        return str(probed)
    host = Path(_host_path(spec, path))
    if not host.is_relative_to(probed):
        return str(probed)
    up = len(host.parts) - len(probed.parts)
    inside = PurePosixPath(path)
    return str(inside.parents[up - 1] if up > 0 else inside)


def _unmountable(log_dir: Path) -> str | None:
    """Why pyxis cannot mount `log_dir`, the probe's stand-in for the job's log dir, if it
    cannot."""
    if any(c in str(log_dir) for c in ",:"):
        return f"{log_dir} holds ',' or ':', which pyxis cannot mount into the container"
    if log_dir == Path("/"):
        return (
            "logs.base_dir: no parent of it exists but /, which the probe cannot mount into the "
            "container as the job mounts its log dir: create it first"
        )
    return None


def probe_request(
    spec: LaunchSpec, dirs: Sequence[tuple[str, Path]], script: Path
) -> tuple[list[str], str]:
    """The probe job's sbatch argv and script: the job's own scheduling flags (the same nodes,
    partition, account, time, GPUs) with a name of its own and no dependency. Its report goes
    to `report_path(dirs, JOBID)`, written by the script itself: an --output file that the first
    node cannot open is a launch failure in slurmstepd (the job fails before the script runs,
    and Slurm may drain the node for it), where a failed redirection in the script only ends
    the probe."""
    own = ("--job-name=", "--output=", "--open-mode=", "--dependency=")
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
    header = render(
        PROBE_TEMPLATE,
        spec=spec,
        version=__version__,
        gpu_flag=gpu_flag(spec),
        ray=False,  # the probe starts no Ray: the job's values without Ray's ports
        dirs=[(key, _inside_path(spec, key, path)) for key, path in dirs],
        host_dirs=[(key, str(path)) for key, path in dirs],
        mounts=",".join(_probe_mounts(spec, dirs[0][1])),
        prefix=PROBE_PREFIX,
        report_dir=str(dirs[0][1]),
    )
    return argv, job_script(header, "probe")


def report_path(dirs: Sequence[tuple[str, Path]], job_id: str) -> Path:
    """Where the probe job writes its report: in the first shared dir (the log dir, where the
    job's own output goes)."""
    return dirs[0][1] / f"{PROBE_PREFIX}{job_id}.out"
