"""What a valid spec would silently get wrong: warnings, one line each, that name the key and
where its value came from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from nrl_launch import trust
from nrl_launch.spec.external_pools import POOLS
from nrl_launch.spec.launch import LaunchSpec
from nrl_launch.spec.layers import RAY_SUB_ENV
from nrl_launch.spec.setting import DEFAULT, Resolved
from nrl_launch.storage import node_local_root

__all__ = ["log_base_warning", "training_warnings", "warnings"]


def warnings(
    resolved: Resolved, *, cwd: Path, ray: bool = True, containers: bool = True
) -> list[str]:
    """What the job would get wrong without a word from Slurm or the job: one line each.
    `cwd`: where a relative path is taken from (the job is submitted from there). Without
    `ray` the job starts no Ray (run, pull): its ray and sandbox keys are not used. Without
    `containers`, the spec's backend runs no container (`backends.containers`)."""
    spec, sources = resolved.spec, resolved.sources
    found = []
    read = {source for key, source in sources.items() if ray or not key.startswith(_RAY_JOB_ONLY)}
    from_env = [name for name in RAY_SUB_ENV if f"env {name}" in read]
    if from_env:
        used = ", ".join(f"{name} ({RAY_SUB_ENV[name]})" for name in from_env)
        found.append(
            f"ray.sub variables set in your shell are used: {used}; unset them if they are "
            "not meant for this job"
        )
    found += _env_pool_warnings(spec, sources)
    if (
        ray
        and spec.ray.dedicated_head
        and sources.get("ray.dedicated_head") == "env DEDICATED_RAY_HEAD"
    ):
        found.append(
            f"DEDICATED_RAY_HEAD=1: the Ray head gets a node of its own beyond slurm.nodes, "
            f"{spec.allocated_nodes} nodes in all; unlike with ray.sub, --nodes counts only the "
            f"GPU nodes ({spec.slurm.nodes}), so keep cluster.num_nodes as it was"
        )
    # Only where no one chose to run without a container (pull does, whatever the profile says;
    # a backend without `containers` never runs one, and a profile's mounts are for the
    # cluster's jobs).
    chosen = sources.get("container.runtime", DEFAULT) != DEFAULT or not containers
    if spec.container.mounts and spec.container.runtime == "none" and not chosen:
        found.append(
            f"container.mounts (from {sources['container.mounts']}) are not used: the job runs "
            "without a container; give --container IMAGE, or drop the mounts"
        )
    if ray:
        found += _exposure_warnings(spec)
    found += _cache_warnings(spec)
    log_base = log_base_warning(spec, sources, cwd=cwd, ray=ray)
    return [*found, *([log_base] if log_base else [])]


def log_base_warning(
    spec: LaunchSpec, sources: Mapping[str, str], *, cwd: Path, ray: bool = True
) -> str | None:
    """A log base dir on node-local storage for a job of several nodes, or None. Asked of the
    spec as resolved (`warnings`) and again once a NeMo RL config has sized it (its nodes may
    come from cluster.num_nodes)."""
    base = spec.logs.base_dir
    nodes = spec.allocated_nodes if ray else spec.slurm.nodes  # no Ray, no head of its own
    where = cwd / base  # the job's dir is made from where it is submitted
    root = node_local_root(str(where))
    if nodes <= 1 or root is None:
        return None
    here = "" if Path(base).is_absolute() else f", {where} from this directory,"
    return (
        f"logs.base_dir {base}{_origin('logs.base_dir', sources)}{here} is local to each node "
        f"({root}): each of the job's {nodes} nodes would write its logs and state where "
        "neither the others nor status and logs can read them; choose a directory every "
        "node shares"
    )


def _env_pool_warnings(spec: LaunchSpec, sources: Mapping[str, str]) -> list[str]:
    """Pools from NeMo RL's variables in the user's shell (left by a launcher sourced earlier,
    say): each takes nodes of its own, which the job asks Slurm for."""
    names = [n for n in spec.pools if sources.get(f"pools.{n}.required") == f"env {POOLS}"]
    if not names:
        return []
    nodes = sum(spec.pools[n].nodes(spec.slurm.gpus_per_node) for n in names)
    shown = ", ".join(f"pools.{n}" for n in names)
    return [
        f"NeMo RL's pool variables set in your shell are used: {POOLS} ({shown}), {nodes} "
        f"node{'s' if nodes != 1 else ''} beside training; unset them if they are not meant for "
        "this job"
    ]


def _exposure_warnings(spec: LaunchSpec) -> list[str]:
    """What a Ray job would open to other users of the cluster, by the user's own choice."""
    found = []
    if spec.ray.external_debugger:
        found.append(
            "ray.external_debugger is on: a breakpoint on any node opens Ray's debugger on that "
            "node's address with no password, and whoever connects first gets a Python prompt "
            "as you; turn it on only where everyone who can reach the nodes is trusted"
        )
    sandbox = spec.sandbox
    if sandbox is None:
        return found
    blocked = sandbox.env.get("NEMO_SKILLS_SANDBOX_BLOCK_NETWORK", "1") != "0"
    found.append(
        f"sandbox: NeMo Skills' sandbox answers on every address of each node (ports "
        f"{sandbox.ports()}) with no authentication: anyone who can reach the nodes can run code "
        "in it, as you. It sees no file of the job but its exchange dir, no secret and no Ray "
        "token; "
        + (
            "NEMO_SKILLS_SANDBOX_BLOCK_NETWORK=1 keeps the code it runs off the network"
            if blocked
            else "sandbox.env turns NeMo Skills' network block off: the code it runs can reach "
            "the network"
        )
    )
    if sandbox.unsafe_on_host:
        found.append(
            "sandbox.unsafe_on_host: the sandbox's code runs on each node as you, with your "
            "files, the job's log dir and its Ray token within reach"
        )
    return found


def _cache_warnings(spec: LaunchSpec) -> list[str]:
    """Caches another user can write: what they plant there (a uv wheel, a model's remote code)
    runs in the job."""
    found = []
    for root in spec.caches.roots():
        why = trust.shared(Path(root)) or trust.replaceable(Path(root))
        if why:
            found.append(
                f"caches {root}: {why}: another user could put code there that your job runs "
                "(a uv wheel, a model's remote code); keep the caches to yourself"
            )
    return found


# The keys only a Ray job reads: a plain job (run, pull) starts neither Ray nor a sandbox.
_RAY_JOB_ONLY = ("ray.", "sandbox.")


# Slurm reads `4:00` as MM:SS, 4 minutes. Under 10 "minutes" hours were more likely meant
# (4:00:00) for a training run; 20:00 is as likely a short run of 20 minutes.
_MINUTES_SECONDS = re.compile(r"(\d+):(\d\d)")


def training_warnings(resolved: Resolved) -> list[str]:
    """What a job that runs a driver (a training run) would get wrong: a time limit of a few
    minutes written as hours."""
    spec = resolved.spec
    if spec.interactive or (spec.driver.command is None and spec.nemo_rl.recipe is None):
        return []
    if spec.slurm.time is None:
        return []
    time = spec.slurm.time.strip()
    match = _MINUTES_SECONDS.fullmatch(time)
    if not match or int(match[1]) >= 10:
        return []
    seconds = f" {int(match[2])} seconds" if int(match[2]) else ""
    return [
        f"slurm.time {time!r}{_origin('slurm.time', resolved.sources)} is {int(match[1])} "
        f"minutes{seconds} to Slurm (MM:SS); for hours write {time}:00"
    ]


def _origin(key: str, sources: Mapping[str, str]) -> str:
    source = sources.get(key, DEFAULT)
    return "" if source == DEFAULT else f" (from {source})"
