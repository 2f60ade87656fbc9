"""`nrl-launch doctor`: does this job spec fit this cluster? Checked before anything is queued.

Each check gives one `Check` (ok, warn or fail) that names the key or tool it is about. The
parsers and verdicts are pure (tested on output captured from the dev cluster); the functions
that ask Slurm do it through `runner`. `node_probe` runs a short real job (templates/
doctor-probe.sbatch.j2) that checks on every node what cannot be seen from the login node.

Doctor creates nothing the user did not ask for: the only files it writes are probe files that
it (or its probe job) removes at once.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nrl_launch import runner
from nrl_launch.backends.slurm import gpu_flag, sbatch_flags
from nrl_launch.errors import SchedulerError
from nrl_launch.layers import DEFAULT, Resolved
from nrl_launch.spec import LaunchSpec, Mount, slurm_time_minutes

__all__ = [
    "SLURM_TOOLS",
    "Check",
    "NodeGroup",
    "Partition",
    "local_checks",
    "parse_config",
    "parse_gpus",
    "parse_node_groups",
    "parse_partitions",
    "settings",
]

Status = Literal["ok", "warn", "fail"]

SLURM_TOOLS = ("sbatch", "srun", "squeue", "scontrol", "sinfo")
# Every file doctor or its probe job writes starts with this: a user can always tell them apart.
PROBE_PREFIX = ".nrl-doctor-"
# sinfo's node states in which a node takes no new job (a suffix such as * or ~ is stripped).
_UNUSABLE_STATES = ("down", "drain", "drng", "fail", "inval", "maint")
# A Slurm query that takes longer has a slurmctld in trouble: that is a check's answer too.
_QUICK_S = 30.0


@dataclass(frozen=True)
class Check:
    """One result line: `name` is the key, flag or tool it is about."""

    name: str
    status: Status
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def _warn(name: str, detail: str) -> Check:
    return Check(name, "warn", detail)


def _fail(name: str, detail: str) -> Check:
    return Check(name, "fail", detail)


# ---- Settings: what doctor used, and where each value came from ----

# The spec sections doctor checks; `setup` and `env` only matter on the nodes.
_USED = ("backend", "slurm.", "container.", "logs.", "caches.")
_USED_ON_NODES = ("setup", "env.")


def _plain(value: Any) -> Any:
    """A spec value as text, numbers, bools, None or a list of those (for text and JSON)."""
    if isinstance(value, Mount):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _lookup(spec: LaunchSpec, key: str) -> Any:
    node: Any = spec
    for part in key.split("."):
        node = node[part] if isinstance(node, Mapping) else getattr(node, part)
    return node


def settings(resolved: Resolved, *, on_nodes: bool) -> list[tuple[str, Any, str]]:
    """(key, value, source) of every setting the checks use, in key order."""
    used = _USED + (_USED_ON_NODES if on_nodes else ())
    keys = [k for k in resolved.sources if k.startswith(used)]
    return [(k, _plain(_lookup(resolved.spec, k)), resolved.sources[k]) for k in keys]


def _given(key: str, sources: Mapping[str, str]) -> str:
    """' (from SOURCE)' for a value the user set, so a failure says where to fix it."""
    source = sources.get(key, DEFAULT)
    return "" if source == DEFAULT else f" (from {source})"


# ---- Parsers: Slurm's output, as captured in tests/data/slurm-22.05 ----


def _key_values(line: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` of a `scontrol show ... -o` line."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)", line))


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    state: str  # UP, DOWN, DRAIN or INACTIVE
    max_time: str  # Slurm's form (1-00:00:00, 01:00:00) or UNLIMITED
    total_nodes: int


def parse_partitions(text: str) -> list[Partition]:
    """`scontrol show partition -o`: one partition per line."""
    found = []
    for line in text.splitlines():
        kv = _key_values(line)
        if "PartitionName" not in kv:
            continue
        found.append(
            Partition(
                name=kv["PartitionName"],
                default=kv.get("Default") == "YES",
                state=kv.get("State", "UNKNOWN"),
                max_time=kv.get("MaxTime", "UNLIMITED"),
                total_nodes=int(kv["TotalNodes"]) if kv.get("TotalNodes", "").isdigit() else 0,
            )
        )
    return found


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`: `Key = Value` lines."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def parse_gpus(gres: str) -> int:
    """GPUs in one node's gres as sinfo prints it: `gpu:8`, `gpu:h100:8(S:0-1)`,
    `gpu:a100:4,gpu:h100:4`, `(null)`; GPUs of several types add up."""
    total = 0
    # Socket lists in parentheses may hold commas of their own: drop them before splitting.
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of a partition that sinfo prints as one line: same gres, same state."""

    count: int
    gres: str
    gpus: int
    state: str

    @property
    def usable(self) -> bool:
        return not self.state.rstrip("*~#!%$@^-+").startswith(_UNUSABLE_STATES)


def parse_node_groups(text: str) -> list[NodeGroup]:
    """`sinfo -h -p PARTITION -o '%D|%G|%t'`."""
    groups = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        groups.append(NodeGroup(int(parts[0]), parts[1], parse_gpus(parts[1]), parts[2]))
    return groups


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


# ---- Verdicts: pure functions of the spec and what Slurm said ----


def tools_check(found: Mapping[str, str | None], versions: Mapping[str, str]) -> Check:
    """`found`: tool -> its path or None; `versions`: tool -> its --version line."""
    missing = [tool for tool, path in found.items() if path is None]
    if missing:
        return _fail(
            "slurm",
            f"{', '.join(missing)} not found on PATH: run doctor on a Slurm login node",
        )
    distinct = sorted(set(versions.values()))
    if len(distinct) > 1:
        listed = ", ".join(f"{tool} {versions[tool]}" for tool in found)
        return _warn("slurm", f"the commands are of different versions: {listed}")
    return _ok("slurm", f"{', '.join(found)} found ({distinct[0] if distinct else 'version?'})")


def partition_check(
    partitions: Sequence[Partition], wanted: str | None, sources: Mapping[str, str]
) -> tuple[Check, Partition | None]:
    """The partition the job would run in (the default one when none is set) and whether
    it takes jobs."""
    names = ", ".join(p.name for p in partitions) or "none"
    if wanted is None:
        default = next((p for p in partitions if p.default), None)
        if default is None:
            return (
                _fail(
                    "slurm.partition",
                    f"not set, and the cluster has no default partition: set one of {names}",
                ),
                None,
            )
        found, how = default, f"{default.name} (not set: the cluster's default partition)"
    else:
        match = next((p for p in partitions if p.name == wanted), None)
        if match is None:
            return (
                _fail(
                    "slurm.partition",
                    f"{wanted!r}{_given('slurm.partition', sources)} does not exist; "
                    f"partitions: {names}",
                ),
                None,
            )
        found, how = match, _partition_name(match)
    summary = f"{how}: {found.state}, {found.total_nodes} nodes, time limit {found.max_time}"
    if found.state in ("DRAIN", "INACTIVE"):
        return _fail("slurm.partition", f"{summary}; it accepts no new jobs"), found
    if found.state != "UP":
        return _warn("slurm.partition", f"{summary}; jobs queue but do not start"), found
    return _ok("slurm.partition", summary), found


def _partition_name(partition: Partition) -> str:
    return partition.name + (" (the default partition)" if partition.default else "")


def time_check(spec: LaunchSpec, partition: Partition, sources: Mapping[str, str]) -> Check:
    limit, name = partition.max_time, partition.name
    # A bare number is minutes, as sbatch reads it.
    asked = spec.slurm.time + (" min" if spec.slurm.time.strip().isdigit() else "")
    if limit.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return _ok("slurm.time", f"{asked}; partition {name} has no time limit")
    try:
        limit_min = slurm_time_minutes(limit)
    except ValueError:
        return _warn(
            "slurm.time", f"not checked: partition {name}'s time limit {limit!r} is unknown"
        )
    if slurm_time_minutes(spec.slurm.time) > limit_min:
        return _fail(
            "slurm.time",
            f"{asked}{_given('slurm.time', sources)} is longer than partition {name}'s "
            f"time limit {limit}",
        )
    return _ok("slurm.time", f"{asked} is within partition {name}'s time limit {limit}")


_ACCOUNTING_OFF = ("", "accounting_storage/none")


def account_check(
    account: str | None,
    config: Mapping[str, str],
    user: str,
    associations: runner.Completed | None,
    sources: Mapping[str, str],
) -> Check:
    """`associations`: what `sacctmgr -n -P show assoc where user=USER account=ACCOUNT` said
    (None when sacctmgr is not there)."""
    if config.get("AccountingStorageType", "") in _ACCOUNTING_OFF:
        return _ok("slurm.account", "not checked: accounting is off on this cluster")
    if account is None:
        return _ok("slurm.account", "not set: Slurm charges your default account")
    if associations is None:
        return _warn("slurm.account", "not checked: sacctmgr is not on PATH")
    if associations.returncode != 0:
        return _warn("slurm.account", f"not checked: sacctmgr: {_one_line(associations.stderr)}")
    if any(line.strip() for line in associations.stdout.splitlines()):
        return _ok("slurm.account", f"{account}: user {user} may use it")
    return _fail(
        "slurm.account",
        f"{account!r}{_given('slurm.account', sources)}: user {user} has no association "
        f"with it (sacctmgr show assoc where user={user} account={account})",
    )


def _gpu_request(spec: LaunchSpec) -> bool:
    return spec.slurm.gpus_per_node > 0 and spec.slurm.gpu_request != "none"


def nodes_check(
    spec: LaunchSpec, partition: Partition, groups: Sequence[NodeGroup], sources: Mapping[str, str]
) -> Check:
    want, name = spec.slurm.nodes, partition.name
    given = _given("slurm.nodes", sources)
    total = sum(g.count for g in groups) or partition.total_nodes
    if want > total:
        return _fail("slurm.nodes", f"{want}{given}, but partition {name} has {total} nodes")
    gpus = spec.slurm.gpus_per_node if _gpu_request(spec) else 0
    fit = [g for g in groups if g.gpus >= gpus]
    if not fit:
        fit = list(groups)  # no node has enough GPUs: one problem, gpus_check's line says it
    fitting = sum(g.count for g in fit)
    if want > fitting:
        return _fail(
            "slurm.nodes",
            f"{want}{given}, but only {fitting} nodes of partition {name} have {gpus} GPUs",
        )
    usable = sum(g.count for g in fit if g.usable)
    if want > usable:
        return _warn(
            "slurm.nodes",
            f"{want}{given}, but only {usable} of partition {name}'s {fitting} nodes are up now "
            "(the others are down or drained): the job waits until enough return",
        )
    return _ok("slurm.nodes", f"{want} of partition {name}'s {total} nodes ({usable} up)")


def gpus_check(
    spec: LaunchSpec,
    partition: Partition,
    groups: Sequence[NodeGroup],
    config: Mapping[str, str],
    sources: Mapping[str, str],
) -> Check:
    count, style = spec.slurm.gpus_per_node, spec.slurm.gpu_request
    if not _gpu_request(spec):
        return _ok("slurm.gpus_per_node", f"no GPUs requested ({count}, slurm.gpu_request {style})")
    name, given = partition.name, _given("slurm.gpus_per_node", sources)
    flag = gpu_flag(spec)
    select = config.get("SelectType", "")
    if style == "gpus-per-node" and select and select != "select/cons_tres":
        return _fail(
            "slurm.gpus_per_node",
            f"{flag} needs SelectType=select/cons_tres; this cluster has {select}: "
            "set slurm.gpu_request to gres",
        )
    most = max((g.gpus for g in groups), default=0)
    kinds = ", ".join(sorted({g.gres for g in groups})) or "none"
    if most == 0:
        return _fail(
            "slurm.gpus_per_node",
            f"{count}{given}, but partition {name}'s nodes have no GPUs in Slurm (gres: {kinds})",
        )
    if count > most:
        return _fail(
            "slurm.gpus_per_node",
            f"{count}{given}, but partition {name}'s nodes have at most {most} GPUs "
            f"(gres: {kinds})",
        )
    return _ok("slurm.gpus_per_node", f"{count} as {flag}; partition {name}'s nodes: {kinds}")


def submission_check(returncode: int, stderr: str) -> Check:
    """`sbatch --test-only`: Slurm's own verdict on the whole request, without queueing it.
    It prints `sbatch: Job N to start at T using C processors on nodes L in partition P`
    (N is no real job), or the reason it would refuse the job."""
    text = _one_line(stderr)
    if returncode == 0:
        match = re.search(r"to start at (\S+) using (\d+) processors on nodes (\S+)", text)
        if match:
            return _ok(
                "sbatch --test-only",
                f"Slurm accepts the request: it would start at {match[1]} on {match[3]}",
            )
        return _ok("sbatch --test-only", f"Slurm accepts the request: {text}")
    return _fail("sbatch --test-only", f"Slurm refuses the request: {text or 'no reason given'}")


# ---- Files and dirs, as this machine sees them ----


def _is_image_path(image: str) -> bool:
    return image.startswith(("/", "./")) or image.endswith(".sqsh")


def container_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    container = spec.container
    if container.runtime != "pyxis":
        if container.mounts:
            return [
                _warn(
                    "container.mounts",
                    "set, but container.runtime is none: the job runs without a container "
                    "and mounts nothing",
                )
            ]
        return []
    checks = []
    image = container.image or ""
    if _is_image_path(image):
        path = cwd / image
        if not path.exists():
            checks.append(_fail("container.image", f"{image}: no such file"))
        elif not path.is_file():
            checks.append(_fail("container.image", f"{image}: not a file"))
        elif not os.access(path, os.R_OK):
            checks.append(_fail("container.image", f"{image}: not readable"))
        else:
            checks.append(_ok("container.image", f"{image}: a readable file"))
    else:
        checks.append(
            _ok("container.image", f"{image}: pulled by pyxis at job start (not checked here)")
        )
    for mount in container.mounts:
        if Path(mount.src).exists():
            checks.append(_ok("container.mounts", f"{mount.src} exists (mounted at {mount.dst})"))
        else:
            checks.append(
                _fail("container.mounts", f"source {mount.src} does not exist (mount {mount})")
            )
    return checks


def _cache_dirs(spec: LaunchSpec) -> list[tuple[str, str]]:
    """(key, path) of every cache dir set. Every field of `caches` is a dir that all nodes
    must share, so a cache added to the spec is checked without a change here."""
    caches = spec.caches
    found = []
    for name in type(caches).model_fields:
        value = getattr(caches, name)
        if isinstance(value, str) and value:
            found.append((f"caches.{name}", value))
    return found


def _host_path(spec: LaunchSpec, path: str) -> str:
    """Where a cache dir the job uses inside its container is on the nodes' own file system:
    through the mount that holds it; the same path without a container, or when no mount
    holds it (the job then mounts it at its own path: backends.slurm.container_mounts)."""
    if spec.container.runtime != "pyxis":
        return path
    # The deepest mount first: /data/hf under both /data and /data/hf is /data/hf's.
    for mount in sorted(spec.container.mounts, key=lambda m: len(m.dst), reverse=True):
        dst = mount.dst.rstrip("/")  # "" for a mount at /, which holds every path
        if path == dst or path.startswith(dst + "/"):
            return mount.src.rstrip("/") + path[len(dst) :]
    return path


def shared_dirs(spec: LaunchSpec, cwd: Path) -> list[tuple[str, Path]]:
    """The dirs every node must share, as host paths: the log dir, then each cache dir."""
    dirs = [("logs.base_dir", cwd / spec.logs.base_dir)]
    return dirs + [(key, Path(_host_path(spec, path))) for key, path in _cache_dirs(spec)]


def _existing(path: Path) -> Path:
    """`path` if it exists, else its nearest existing parent (what a mkdir -p would create in)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_write(directory: Path) -> str | None:
    """Create and remove a private file in `directory`; None if that worked, else why not."""
    probe = directory / f"{PROBE_PREFIX}{socket.gethostname()}-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def dir_check(key: str, path: Path, created_by: str) -> Check:
    """Whether the job can write in `path`; a dir that does not exist yet must be creatable
    (its nearest existing parent writable): `created_by` says what creates it."""
    if path.is_dir():
        problem = _probe_write(path)
        if problem:
            return _fail(key, f"{path} is not writable ({problem})")
        return _ok(key, f"{path} is writable")
    if path.exists():
        return _fail(key, f"{path} exists but is not a directory")
    parent = _existing(path)
    if not parent.is_dir():
        return _fail(key, f"{path} cannot be created: {parent} is not a directory")
    problem = _probe_write(parent)
    if problem:
        return _fail(key, f"{path} does not exist, and {parent} is not writable ({problem})")
    return _ok(key, f"{path} does not exist yet; {created_by} creates it in {parent} (writable)")


def dir_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    checks = []
    for key, path in shared_dirs(spec, cwd):
        created_by = "submit" if key == "logs.base_dir" else "its first use"
        checks.append(dir_check(key, path, created_by))
    return checks


# ---- Asking Slurm ----


def _run(argv: list[str]) -> runner.Completed:
    """Run a Slurm command; one that is missing or hangs is an answer like any failure (exit
    127 with the reason), so that it becomes a check's line, not the end of doctor."""
    try:
        return runner.run(argv, check=False, timeout=_QUICK_S)
    except SchedulerError as exc:
        return runner.Completed(127, "", exc.message)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # a uid with no name (some containers)
        return str(os.getuid())


def _output_of(argv: list[str]) -> str:
    """stdout of a query that must succeed; raises SchedulerError with its stderr."""
    done = _run(argv)
    if done.returncode != 0:
        raise SchedulerError.from_process(argv, done.returncode, done.stderr)
    return done.stdout


def _tools() -> tuple[Check, bool]:
    found = {tool: shutil.which(tool) for tool in SLURM_TOOLS}
    versions = {}
    for tool, path in found.items():
        if path is not None:
            done = _run([tool, "--version"])
            versions[tool] = done.stdout.strip().splitlines()[0] if done.stdout.strip() else "?"
    return tools_check(found, versions), all(found.values())


def _associations(account: str, user: str) -> runner.Completed | None:
    if shutil.which("sacctmgr") is None:
        return None
    where = [f"user={user}", f"account={account}"]
    return _run(["sacctmgr", "-n", "-P", "show", "assoc", "where", *where, "format=Account,User"])


def slurm_checks(spec: LaunchSpec, sources: Mapping[str, str]) -> Iterator[Check]:
    """The tools, then the partition, time, account, nodes and GPUs; last, Slurm's own
    verdict on the exact request (`sbatch --test-only`)."""
    tools, complete = _tools()
    yield tools
    if not complete:
        return
    try:
        partitions = parse_partitions(_output_of(["scontrol", "show", "partition", "-o"]))
        config = parse_config(_output_of(["scontrol", "show", "config"]))
    except SchedulerError as exc:
        yield _fail("slurm", f"Slurm does not answer: {exc.message}")
        return
    check, partition = partition_check(partitions, spec.slurm.partition, sources)
    yield check
    if partition is not None:
        yield time_check(spec, partition, sources)
    user = _user()
    asked = spec.slurm.account is not None
    if asked and config.get("AccountingStorageType", "") not in _ACCOUNTING_OFF:
        found = _associations(spec.slurm.account or "", user)
    else:
        found = None
    yield account_check(spec.slurm.account, config, user, found, sources)
    if partition is not None:
        try:
            argv = ["sinfo", "-h", "-p", partition.name, "-o", "%D|%G|%t"]
            groups = parse_node_groups(_output_of(argv))
        except SchedulerError as exc:
            yield _fail("slurm.nodes", exc.message)
        else:
            yield nodes_check(spec, partition, groups, sources)
            yield gpus_check(spec, partition, groups, config, sources)
    argv = ["sbatch", "--test-only", *sbatch_flags(spec), *spec.slurm.extra_args, "--wrap", "true"]
    done = _run(argv)
    yield submission_check(done.returncode, done.stderr)


def local_checks(spec: LaunchSpec, cwd: Path, sources: Mapping[str, str]) -> Iterator[Check]:
    """Every check that runs on this machine, in the order they are printed."""
    if spec.backend == "slurm":
        yield from slurm_checks(spec, sources)
    yield from container_checks(spec, cwd)
    yield from dir_checks(spec, cwd)
    yield auth_check(spec)


# Ray's token authentication came in this release; before it, RAY_AUTH_MODE is ignored.
RAY_AUTH_SINCE = (2, 52)


def auth_check(spec: LaunchSpec) -> Check:
    if spec.ray.auth == "off":
        return _warn(
            "ray.auth",
            "off: anyone who can reach the job's Ray ports can run code as you "
            "(only for Ray older than 2.52)",
        )
    return _ok(
        "ray.auth",
        "token: each job makes its own token (0600, in its log dir); the nodes need Ray 2.52 "
        "or later (--on-nodes checks)",
    )


def ray_auth_on_node(spec: LaunchSpec, node: str, ray_version_line: str) -> Check | None:
    """Whether the Ray a node reports (`ray, version X (PATH)`) does what ray.auth asks of it."""
    if spec.ray.auth != "token":
        return None
    found = re.search(r"version (\S+)", ray_version_line)
    version = found[1] if found else ray_version_line
    numbers = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if len(numbers) == 2 and numbers < RAY_AUTH_SINCE:
        return _fail(
            f"ray.auth on {node}",
            f"Ray {version} has no token authentication (2.52 or later has): upgrade Ray on the "
            "nodes, or set ray.auth: off",
        )
    return None
