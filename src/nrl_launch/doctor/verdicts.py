"""doctor's verdicts: the `Check` each one gives, the parsers of Slurm's answers (scontrol, sinfo),
and pure functions of the spec and those answers, each tested on output captured from the dev
cluster (tests/data/slurm-22.05)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from nrl_launch.backends.slurm import gpu_flag
from nrl_launch.spec import LaunchSpec, slurm_time_minutes
from nrl_launch.spec.layers import DEFAULT

if TYPE_CHECKING:
    from nrl_launch import runner

__all__ = [
    "RAY_AUTH_SINCE",
    "Check",
    "NodeGroup",
    "Partition",
    "Status",
    "account_check",
    "auth_check",
    "gpus_check",
    "nodes_check",
    "parse_config",
    "parse_gpus",
    "parse_node_groups",
    "parse_partitions",
    "partition_check",
    "ray_auth_on_node",
    "submission_check",
    "time_check",
    "tools_check",
]

Status = Literal["ok", "warn", "fail"]

# sinfo's node states in which a node takes no new job (a suffix such as * or ~ is stripped).
_UNUSABLE_STATES = ("down", "drain", "drng", "fail", "inval", "maint")


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
    time = spec.slurm.time
    if time is None:
        return _ok("slurm.time", f"not given: partition {name}'s default time limit applies")
    # A bare number is minutes, as sbatch reads it.
    asked = time + (" min" if time.strip().isdigit() else "")
    if limit.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return _ok("slurm.time", f"{asked}; partition {name} has no time limit")
    try:
        limit_min = slurm_time_minutes(limit)
    except ValueError:
        return _warn(
            "slurm.time", f"not checked: partition {name}'s time limit {limit!r} is unknown"
        )
    if slurm_time_minutes(time) > limit_min:
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
