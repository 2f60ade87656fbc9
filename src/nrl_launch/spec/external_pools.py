"""NeMo RL's external vLLM pool contract read as nrl-launch's pools (`pools.<name>.*`).

NeMo RL's main branch registers model pools in the launching shell with
`tools/external_gym_vllm/pool_config.sh` (`register_external_vllm_pool`, `external_vllm_pool_env`,
`external_vllm_pool_args`), which exports EXTERNAL_VLLM_POOLS (the ordered, uppercase pool names)
and, for each POOL, POOL_MODEL, POOL_CONTAINER, POOL_REPLICAS and the rest; its
`run_in_allocation.sh` reads them inside the job. nrl-launch reads the same variables, as it
reads ray.sub's (`layers.env_settings`, the same layer, with the same precedence: over the job
files, under the flags), so a launcher written for NeMo RL keeps working: pool SAFETY becomes
`pools.safety`, and each value's source is the variable it came from.

Read only when EXTERNAL_VLLM_POOLS is set and not empty. Every bad value is one line naming the
variable and what is accepted. `checks` runs once the spec is resolved: the node counts the
launcher stated against the ones nrl-launch computes, and the paths it declared against the
job's mounts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nrl_launch.spec.setting import Setting
from nrl_launch.storage import is_under

if TYPE_CHECKING:
    from nrl_launch.spec.setting import Resolved

__all__ = [
    "COUNTED_NODES",
    "EXPECTED_NODES",
    "GLOBALS",
    "IGNORED",
    "POOLS",
    "POOL_VARS",
    "SERVICES_DIR",
    "SERVICES_ONLY",
    "checks",
    "pool_names",
    "pool_settings",
]

POOLS = "EXTERNAL_VLLM_POOLS"
# 1: a job of the pools alone, which NeMo RL jobs submitted apart attach to.
SERVICES_ONLY = "EXTERNAL_VLLM_SERVICES_ONLY"
# A running services-only job's log dir, whose pools a launcher attaches a NeMo RL job to.
SERVICES_DIR = "EXTERNAL_VLLM_SERVICES_DIR"
# The pool nodes the launcher expects (validate_external_vllm_submission's check).
EXPECTED_NODES = "NUM_EXTERNAL_SERVICE_NODES"
# The pool nodes pool_config.sh counted when the pools were registered.
COUNTED_NODES = "EXTERNAL_VLLM_NUM_NODES"
# The contract's own globals that nrl-launch reads (GPUS_PER_NODE is ray.sub's too).
GLOBALS = (POOLS, SERVICES_ONLY, SERVICES_DIR, EXPECTED_NODES, COUNTED_NODES)

# POOL_<SUFFIX> and the key under pools.<pool> it sets.
POOL_VARS: dict[str, str] = {
    "MODEL": "vllm.model",
    "CONTAINER": "image",
    "VLLM_PYTHON": "vllm.python",
    "REPLICAS": "replicas",
    "TENSOR_PARALLEL_SIZE": "gpus_per_replica",
    "LB_PORT": "balancer_port",
    "URL_PLACEHOLDER": "url_placeholder",
    "SERVED_MODEL_NAME": "vllm.served_model_name",
    "VLLM_PORT": "port",
    "STARTUP_TIMEOUT": "startup_timeout_s",
    "ENV_VARS": "env",
    "VLLM_ARGS": "vllm.args",
}
# What run_in_allocation.sh requires of each pool, and register_external_vllm_pool's option
# that sets it. The others have NeMo RL's defaults, which are nrl-launch's too (model, 8000,
# 3600), or are empty.
_REQUIRED = {
    "MODEL": "--model",
    "CONTAINER": "--container",
    "VLLM_PYTHON": "--python",
    "REPLICAS": "--replicas",
    "TENSOR_PARALLEL_SIZE": "--tensor-parallel-size",
    "LB_PORT": "--lb-port",
    "URL_PLACEHOLDER": "--url-placeholder",
}
_NUMBERS = ("REPLICAS", "TENSOR_PARALLEL_SIZE", "LB_PORT", "VLLM_PORT", "STARTUP_TIMEOUT")
# The contract's values nrl-launch has no key for. Two are accepted and ignored, not refused:
# pool_config.sh always exports them (a refusal would refuse every launcher), and neither
# changes what the job runs.
# - POOL_DISPLAY_NAME: a label for NeMo RL's log lines; nrl-launch names a pool's logs and lines
#   by the pool's name.
# - POOL_GROUP_ID: the namespace of NeMo RL's file registry of healthy replicas, in the job's own
#   log dir; nrl-launch's balancer keeps its replicas itself, one job's alone.
IGNORED = ("DISPLAY_NAME", "GROUP_ID")
# The third is checked instead. POOL_SHARED_PATHS: the paths a pool's container must see. NeMo
# RL mounts one directory, EXTERNAL_VLLM_SHARED_ROOT (/lustre), into every replica and checks
# before sbatch that each path (and an absolute model path) lies under it; nrl-launch's pools
# mount what the job's container.mounts mount (ray.sub's MOUNTS), and nothing else. Ignored,
# that check would be lost and a path left unmounted would fail only once the job has its
# nodes; so `checks` holds each path (and the model's) against the mounts' destinations.

# NeMo RL's pool name, an uppercase shell identifier; lower-cased, nrl-launch's (32 at most).
_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,31}")
_DIGITS = re.compile(r"[0-9]+")


def pool_names(environ: Mapping[str, str]) -> list[str]:
    """The pools EXTERNAL_VLLM_POOLS lists, in its order (its words, as bash splits them);
    empty when it is unset or empty.

    Raises:
        ValueError: a word is no pool name, or one is listed twice (one line).
    """
    value = environ.get(POOLS, "")
    names: list[str] = []
    for word in value.split():
        if not _NAME.fullmatch(word):
            raise ValueError(
                f"environment variable {POOLS}={value!r}: {word!r} is not a pool's name: an "
                "uppercase shell identifier (A-Z, then A-Z, 0-9 or _; 32 at most), as "
                "register_external_vllm_pool takes it"
            )
        if word in names:
            raise ValueError(
                f"environment variable {POOLS}={value!r}: {word} is listed twice; each pool once"
            )
        names.append(word)
    return names


def pool_settings(environ: Mapping[str, str]) -> list[Setting]:
    """The pools of NeMo RL's contract as settings of `pools.<name>` (EXTERNAL_VLLM_POOLS'
    order, each labelled with its variable); none when EXTERNAL_VLLM_POOLS is unset or empty.

    Raises:
        ValueError: a variable that is missing or bad, or a services-only job (one line).
    """
    names = pool_names(environ)
    if not names:
        return []
    _check_job_kind(environ)
    settings = []
    for pool in names:
        name = pool.lower()
        for suffix, key in POOL_VARS.items():
            var = f"{pool}_{suffix}"
            value = environ.get(var, "")
            if not value:  # as run_in_allocation.sh: empty is unset
                if suffix in _REQUIRED:
                    raise ValueError(
                        f"environment variable {var} is not set, but {pool} is in {POOLS}: "
                        f"each pool needs it (register_external_vllm_pool {pool} "
                        f"{_REQUIRED[suffix]} ...); register the pool with it, or take {pool} "
                        f"out of {POOLS}"
                    )
                continue
            settings.append(
                Setting(f"pools.{name}.{key}", _value(var, suffix, value), f"env {var}")
            )
        # NeMo RL stops training once any pool exits, and waits for every pool before rollouts.
        settings.append(Setting(f"pools.{name}.required", True, f"env {POOLS}"))
    return settings


def _check_job_kind(environ: Mapping[str, str]) -> None:
    """Pools beside training, in the one job: not a services-only job, nor one that attaches to
    another job's pools."""
    only = environ.get(SERVICES_ONLY, "") or "0"
    if only not in ("0", "1"):
        raise ValueError(
            f"environment variable {SERVICES_ONLY}={only!r}: must be 0 or 1, as for NeMo RL's "
            "run_in_allocation.sh"
        )
    if only == "1":
        raise ValueError(
            f"environment variable {SERVICES_ONLY}=1: a job of the pools alone is not supported: "
            "nrl-launch runs the pools beside training, in the one job; unset it (or submit the "
            "services-only job with NeMo RL's run_in_allocation.sh)"
        )
    services = environ.get(SERVICES_DIR, "")
    if services:
        raise ValueError(
            f"environment variable {SERVICES_DIR}={services!r} is set beside {POOLS}: to use the "
            f"pools of that services-only job, unset {POOLS} (the driver's command then holds "
            "their URLs, from resolve_external_vllm_services); to run the pools in this job, "
            f"unset {SERVICES_DIR}"
        )


def _value(var: str, suffix: str, value: str) -> Any:
    """The key's value for the contract's variable `var` (not empty).

    Raises:
        ValueError: a value pool_config.sh would refuse (one line).
    """
    if suffix in _NUMBERS:
        if not _positive(value):
            raise ValueError(
                f"environment variable {var}={value!r}: must be a positive integer, as "
                "register_external_vllm_pool requires"
            )
        return int(value)
    if suffix == "VLLM_ARGS":  # one argv entry a line (external_vllm_pool_args)
        return [line for line in value.split("\n") if line]
    if suffix == "ENV_VARS":  # NAME=value a line (external_vllm_pool_env)
        found = {}
        for number, line in enumerate(value.split("\n"), 1):
            if not line:
                continue
            name, sep, val = line.partition("=")
            if not sep:
                # The line is not said back: it may be a value pasted without its name.
                raise ValueError(
                    f"environment variable {var}: line {number} has no '=': each line is "
                    "NAME=value, as external_vllm_pool_env writes them"
                )
            found[name] = val  # as bash's export of each line: the last one wins
        return found
    return value


def checks(resolved: Resolved, environ: Mapping[str, str]) -> list[str]:
    """What the contract says of the resolved job that the spec alone cannot: the pool nodes
    the launcher expects (NUM_EXTERNAL_SERVICE_NODES) and counted (EXTERNAL_VLLM_NUM_NODES),
    and the paths its pools must see (POOL_SHARED_PATHS, an absolute POOL_MODEL) against the
    job's mounts. One line each; none when EXTERNAL_VLLM_POOLS is unset or empty."""
    names = pool_names(environ)
    if not names:
        return []
    problems = _node_counts(resolved, environ, names)
    problems += _shared_paths(resolved, environ, names)
    return problems


def _node_counts(resolved: Resolved, environ: Mapping[str, str], names: list[str]) -> list[str]:
    spec = resolved.spec
    gpus = spec.slurm.gpus_per_node
    where = f"slurm.gpus_per_node {gpus} (from {resolved.sources.get('slurm.gpus_per_node')})"
    problems = []
    # What pool_config.sh counted, against the same variables at the job's GPUs per node: the
    # two differ when it counted at another GPUS_PER_NODE (4 when unset), or when a pool's
    # REPLICAS or TENSOR_PARALLEL_SIZE changed after it was registered. (What a flag or --set
    # changes in pools.<name> is the job's, and is checked against NUM_EXTERNAL_SERVICE_NODES.)
    counted = environ.get(COUNTED_NODES, "")
    ours = _count(environ, names, gpus)
    drifted = _positive(counted) and ours is not None and int(counted) != ours
    if drifted:
        problems.append(
            f"environment variable {COUNTED_NODES}={counted} (pool_config.sh's count of the "
            f"pools' nodes), but {', '.join(names)} take {ours} at {where}: it counted at "
            "another GPUS_PER_NODE (4 when unset), or a pool changed after it was registered; "
            "export GPUS_PER_NODE (the nodes' GPUs) before register_external_vllm_pool, or give "
            "them as slurm.gpus_per_node (--gpus-per-node)"
        )
    expected = environ.get(EXPECTED_NODES, "")
    if expected and not _positive(expected):
        problems.append(
            f"environment variable {EXPECTED_NODES}={expected!r}: must be a positive integer "
            "(the pool nodes), as validate_external_vllm_submission requires"
        )
    # Expected as pool_config.sh counted, which is wrong already: said once, above.
    elif expected and int(expected) != spec.pool_nodes and not (drifted and expected == counted):
        each = ", ".join(f"{n} {p.nodes(gpus)}" for n, p in spec.pools.items())
        problems.append(
            f"environment variable {EXPECTED_NODES}={expected}: the job's pools take "
            f"{spec.pool_nodes} nodes ({each}) at {where}; set it to {spec.pool_nodes}, or "
            "change the pools"
        )
    return problems


def _positive(value: str) -> bool:
    return bool(_DIGITS.fullmatch(value)) and int(value) > 0


def _count(environ: Mapping[str, str], names: list[str], gpus: int) -> int | None:
    """The pool nodes of the contract's variables at `gpus` per node, as pool_config.sh counts
    them; None where that cannot be counted (no GPUs)."""
    if gpus == 0:
        return None
    total = 0
    for pool in names:
        replicas, tp = (
            environ.get(f"{pool}_{s}", "") for s in ("REPLICAS", "TENSOR_PARALLEL_SIZE")
        )
        if not (_positive(replicas) and _positive(tp)):
            return None
        total += int(replicas) * int(tp) // gpus
    return total


def _shared_paths(resolved: Resolved, environ: Mapping[str, str], names: list[str]) -> list[str]:
    """Each path a pool declared it must see, and its model's path, against the job's mounts'
    destinations: a pool's container mounts what the job's does (nothing else of the node)."""
    spec = resolved.spec
    mounted = [m.dst for m in spec.container.mounts]
    problems = []
    for pool in names:
        var = f"{pool}_SHARED_PATHS"
        paths = [(p, f"environment variable {var}") for p in environ.get(var, "").split("\n") if p]
        key = f"pools.{pool.lower()}.vllm.model"
        server = spec.pools[pool.lower()].vllm
        if server is not None and server.model.startswith("/"):
            paths.append((server.model, f"{key} (from {resolved.sources.get(key)})"))
        for path, what in paths:
            if not path.startswith("/"):
                problems.append(
                    f"{what}: {path!r} is not an absolute path, as register_external_vllm_pool "
                    "requires"
                )
            elif not any(is_under(path, dst) for dst in mounted):
                problems.append(
                    f"{what}: {path} is under none of the job's container.mounts (mounted: "
                    f"{', '.join(mounted) or 'none'}), and a pool's container sees only those "
                    "(NeMo RL mounted EXTERNAL_VLLM_SHARED_ROOT); mount a directory that holds "
                    "it (MOUNTS, --mount)"
                )
    return problems
