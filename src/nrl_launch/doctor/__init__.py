"""`nrl-launch doctor`: does this job spec fit this cluster? Checked before anything is queued.

Each check gives one `Check` (ok, warn or fail) that names the key or tool it is about. This
module asks Slurm (through `runner`) and puts the checks in the order they are printed; the
verdicts on what Slurm said are pure (`verdicts`), and so is the probe job's request and report
(`probe`); `files` checks the files and dirs as this machine sees them, and `on_nodes` runs the
probe job (templates/doctor-probe.sbatch.j2), which checks on every node what cannot be seen
from the login node.

Doctor creates nothing the user did not ask for: the only files it writes are probe files that
it (or its probe job) removes at once.
"""

from __future__ import annotations

import getpass
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_launch import backends, runner
from nrl_launch.backends.slurm import sbatch_flags
from nrl_launch.doctor.files import _cache_dirs as _cache_dirs
from nrl_launch.doctor.files import _existing as _existing
from nrl_launch.doctor.files import (
    container_checks,
    dir_check,
    dir_checks,
    shared_dirs,
    trust_checks,
)
from nrl_launch.doctor.verdicts import (
    _ACCOUNTING_OFF,
    Check,
    NodeGroup,
    Partition,
    _fail,
    _warn,
    account_check,
    auth_check,
    gpus_check,
    nodes_check,
    parse_config,
    parse_gpus,
    parse_node_groups,
    parse_partitions,
    partition_check,
    ray_auth_on_node,
    submission_check,
    time_check,
    tools_check,
)
from nrl_launch.errors import SchedulerError
from nrl_launch.spec import LaunchSpec, Mount

if TYPE_CHECKING:
    from nrl_launch.spec.layers import Resolved

# The package names every check and parser (`doctor.parse_config`, `doctor.dir_check`), as the
# one module it was did; the tests also reach `_cache_dirs` and `_existing` through it.
__all__ = [
    "SLURM_TOOLS",
    "Check",
    "NodeGroup",
    "Partition",
    "account_check",
    "auth_check",
    "container_checks",
    "dir_check",
    "dir_checks",
    "gpus_check",
    "local_checks",
    "nodes_check",
    "parse_config",
    "parse_gpus",
    "parse_node_groups",
    "parse_partitions",
    "partition_check",
    "ray_auth_on_node",
    "settings",
    "shared_dirs",
    "slurm_checks",
    "submission_check",
    "time_check",
    "tools_check",
    "trust_checks",
]

SLURM_TOOLS = ("sbatch", "srun", "squeue", "scontrol", "sinfo")
# A Slurm query that takes longer has a slurmctld in trouble: that is a check's answer too.
_QUICK_S = 30.0


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


def local_checks(
    spec: LaunchSpec,
    cwd: Path,
    sources: Mapping[str, str],
    before_queue: Sequence[Check] = (),
) -> Iterator[Check]:
    """Every check that runs on this machine, in the order they are printed. `before_queue`:
    what submit's own checks before the queue found (the command has them: they are the
    API's), each a check of its own, in place of doctor's own container check of that key."""
    backend = backends.get(spec.backend)
    if backend.slurm_cluster:  # Slurm can judge the request
        yield from slurm_checks(spec, sources)
    if backend.shares_files:  # what submit's own checks say of a key, they say alone
        said = {check.name for check in before_queue}
        yield from (c for c in container_checks(spec, cwd) if c.name not in said)
    yield from before_queue
    if backend.shares_files:
        yield from dir_checks(spec, cwd)
        yield from trust_checks(spec, cwd, os.environ)
    else:
        # The image, the log dir and the caches are the scheduler's (Lepton's storage), not
        # this machine's: a check here would judge the wrong files.
        yield _warn(
            "logs.base_dir",
            f"{spec.logs.base_dir} and the image are on {spec.backend}'s side: not checked from "
            "here (render checks the job with the scheduler's own models)",
        )
    yield auth_check(spec)
