"""What each backend cannot run, said when a spec is validated: one line naming the keys, and
what to do instead.

The spec sits below the backends: `LaunchSpec` calls `check` when it is validated with it as
the context's "backend_rules" (`spec.layers.resolve`, `nemorl.job.prepare`). This module loads
no backend module (no jinja2, no SDK): `plan` and `render` stay light.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nrl_launch.spec import LaunchSpec

__all__ = ["LEPTON_NAME_SUFFIX", "check"]


def check(spec: LaunchSpec) -> None:
    """Raises ValueError where `spec` asks its backend for what it cannot do."""
    _RULES[spec.backend](spec)


def _slurm(spec: LaunchSpec) -> None:
    """Slurm runs every spec that validates."""


def _no_retries(spec: LaunchSpec) -> None:
    if spec.slurm.retries:
        raise ValueError(
            f"slurm.retries: backend {spec.backend} cannot retry a job (Slurm starts the spare "
            "tries, with afternotok dependencies); use --backend slurm, or --retries 0"
        )


def _no_sandbox(spec: LaunchSpec) -> None:
    if spec.sandbox is not None:
        raise ValueError(
            f"sandbox: backend {spec.backend} cannot run a sandbox beside Ray (it runs one per "
            "Slurm node, in a step of its own); use --backend slurm, or drop the sandbox section"
        )


def _no_pools(spec: LaunchSpec) -> None:
    if spec.pools:
        raise ValueError(
            f"pools: backend {spec.backend} runs no model pools (they need nodes of their own, "
            "in a second component of a Slurm heterogeneous job); use --backend slurm, or serve "
            "the model elsewhere and give its URL in the driver's command"
        )


def _local_pool_ports(spec: LaunchSpec) -> None:
    """On this machine a pool's replicas listen on its port and the ones after it (port + K):
    those must be no other pool's, nor a balancer's."""
    taken: dict[int, str] = {
        p.balancer_port: f"pools.{n}.balancer_port" for n, p in spec.pools.items()
    }
    for name, pool in spec.pools.items():
        for replica in range(pool.replicas):
            port = pool.port + replica
            other = taken.get(port)
            if other is not None:
                raise ValueError(
                    f"pools.{name}.port: on the local backend replica {replica} listens on "
                    f"{port} (port + {replica}), which is {other}'s; move one of them"
                )
            taken[port] = f"pools.{name}.port"


def _local(spec: LaunchSpec) -> None:
    """One node, this machine, no container."""
    if spec.slurm.nodes != 1:
        raise ValueError(
            f"slurm.nodes: the local backend runs one node on this machine, not "
            f"{spec.slurm.nodes}; use --nodes 1, or --backend slurm"
        )
    if spec.ray.dedicated_head:
        raise ValueError(
            "ray.dedicated_head: the local backend runs one node on this machine, the head "
            "with its GPUs; drop --dedicated-head, or use --backend slurm"
        )
    if spec.container.runtime != "none":
        raise ValueError(
            "container.runtime: the local backend runs without a container (pyxis is a Slurm "
            "plugin); use --container-runtime none"
        )
    _no_sandbox(spec)
    _no_retries(spec)
    _local_pool_ports(spec)


# Lepton's own rules for a job's name (its SDK checks them): up to 36 of a-z, 0-9 and '-'. Submit
# adds 6 ('-' and 5 of a-z0-9) so that every job, and so its log dir, has a name of its own.
LEPTON_NAME_SUFFIX = 6
_LEPTON_NAME = re.compile(rf"[a-z][a-z0-9-]{{0,{35 - LEPTON_NAME_SUFFIX}}}")
_LEPTON_SHAPE_GPUS = re.compile(r"gpu\.(\d+)x")


def _lepton(spec: LaunchSpec) -> None:
    """What a job needs to run on Lepton: where (shape, node group), its image, and a log dir
    on storage every worker mounts (the head and the workers meet there, as on Slurm)."""
    lepton, name = spec.lepton, spec.slurm.job_name
    _no_retries(spec)
    _no_pools(spec)
    if spec.ray.dedicated_head:
        raise ValueError(
            "ray.dedicated_head: not on lepton (its workers are all of one GPU shape); drop "
            "--dedicated-head, or use --backend slurm"
        )
    for key in ("resource_shape", "node_group"):
        if getattr(lepton, key) is None:
            raise ValueError(f"lepton.{key}: backend lepton needs it (see `lep node list`)")
    if not _LEPTON_NAME.fullmatch(name) or name.endswith("-"):
        raise ValueError(
            f"slurm.job_name: {name!r} is not a Lepton job name: up to "
            f"{36 - LEPTON_NAME_SUFFIX} of a-z, 0-9 and '-', starting with a letter, not ending "
            "with '-' (submit adds a suffix of its own)"
        )
    image = spec.container.image
    if image is None or image.startswith(("/", ".")) or image.endswith(".sqsh"):
        raise ValueError(
            f"container.image: backend lepton pulls a registry image (e.g. nvcr.io/nvidia/"
            f"nemo-rl:v0.6.0), not {image!r}"
        )
    if spec.container.mounts:
        raise ValueError("container.mounts: on lepton, storage is mounted with lepton.mounts")
    if spec.container.workdir is not None:
        raise ValueError(
            "container.workdir: on lepton the job starts in its image's own workdir; set "
            "driver.workdir for the driver"
        )
    shape = _LEPTON_SHAPE_GPUS.match(lepton.resource_shape or "")
    if shape and int(shape[1]) != spec.slurm.gpus_per_node:
        raise ValueError(
            f"slurm.gpus_per_node: {spec.slurm.gpus_per_node}, but lepton.resource_shape "
            f"{lepton.resource_shape!r} gives each worker {shape[1]}"
        )
    base = spec.logs.base_dir.rstrip("/")
    mounted = [m.mount_path.rstrip("/") for m in lepton.mounts]
    if not any(base == m or base.startswith(m + "/") for m in mounted):
        raise ValueError(
            f"logs.base_dir: {spec.logs.base_dir!r} must be an absolute path on storage every "
            f"worker mounts (lepton.mounts: {', '.join(mounted) or 'none'}), where the head and "
            "the workers meet"
        )
    for env in lepton.secret_refs:
        if spec.secrets.get(env, "off") == "off":
            raise ValueError(f"lepton.secret_refs.{env}: {env} is not one of the job's secrets")
    _no_sandbox(spec)


_RULES: dict[str, Callable[[LaunchSpec], None]] = {
    "slurm": _slurm,
    "local": _local,
    "lepton": _lepton,
}
