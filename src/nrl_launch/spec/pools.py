"""Model pools beside training (`pools:`): judges, reward models and gym services, each served by
replicas on nodes of their own, in the same heterogeneous Slurm job as the training cluster.

A pool is `replicas` copies of one OpenAI-compatible server, each on its own slice of the pool
nodes (Slurm's second job component), and one load balancer on the training head node whose URL,
`http://<head>:<balancer_port>/v1`, replaces the pool's `url_placeholder` in the driver's command
once every required pool is healthy. NeMo RL's main branch runs the same shape
(`tools/external_gym_vllm/`); `layers.py` also reads its `EXTERNAL_VLLM_POOLS` contract.

`launch.py` holds the field (`LaunchSpec.pools`) and calls `check_pools` from its cross-section
check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from nrl_launch.spec.fields import (
    EnvName,
    Int,
    Line,
    NonEmpty,
    Port,
    Text,
    as_text,
    refuse_credentials,
)
from nrl_launch.spec.sandbox import ray_ports

if TYPE_CHECKING:
    from nrl_launch.spec.launch import LaunchSpec

__all__ = [
    "ENGINE_PORTS",
    "EPHEMERAL_FLOOR",
    "PoolSpec",
    "Slice",
    "VllmServe",
    "check_pools",
    "slices",
    "url_file",
]

# Linux's default ephemeral port range starts here (net.ipv4.ip_local_port_range): a port at or
# above it may be taken by any outgoing connection on the node before the server binds it.
EPHEMERAL_FLOOR = 32768
# vLLM's engine rendezvous band in NeMo RL's port table (VLLM_PORT=7000): kept for the engines.
ENGINE_PORTS = (7000, 7999)
# A pool's name: a file name part (pool-<name>-<K>.log) and, upper-cased, NeMo RL's <POOL>_*
# variable prefix.
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# What reads as a pool's URL placeholder in a driver's command: NeMo RL's __<POOL>_BASE_URL__.
PLACEHOLDER_FORM = re.compile(r"__[A-Z][A-Z0-9_]*URL__")


class VllmServe(BaseModel):
    """A pool served by vLLM's OpenAI server: the job writes its command (the model, the
    replica's tensor-parallel size, port and served name, then `args`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    model: NonEmpty
    # The Python whose vLLM serves it (in the pool's image): NeMo RL's POOL_VLLM_PYTHON.
    python: NonEmpty = "python3"
    served_model_name: NonEmpty = "model"
    args: tuple[Text, ...] = ()

    @field_validator("args")
    @classmethod
    def _not_ours(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            given = arg.split("=", 1)[0]
            flag = _vllm_flag(given)
            if flag in _VLLM_SET_BY_JOB:
                raise ValueError(
                    f"{given} is set by the job (from {_VLLM_SET_BY_JOB[flag]}); drop it here"
                )
        return value


def _vllm_flag(given: str) -> str:
    """The option vLLM reads `given` as: its parser (FlexibleArgumentParser) takes _ for - in a
    long option's name, and -tp is --tensor-parallel-size; either spelling given after the
    job's own flags would win over them."""
    if given.startswith("--"):
        given = "--" + given[2:].replace("_", "-")
    return _VLLM_ALIASES.get(given, given)


_VLLM_SET_BY_JOB = {
    "--model": "vllm.model",
    "--port": "the pool's port",
    "--tensor-parallel-size": "gpus_per_replica",
    "--served-model-name": "vllm.served_model_name",
    "--distributed-executor-backend": "the replica's nodes: ray when it spans more than one",
}
_VLLM_ALIASES = {"-tp": "--tensor-parallel-size"}


class PoolSpec(BaseModel):
    """One pool: `replicas` servers, each on nodes of its own, behind one balancer."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    replicas: Int = Field(default=1, ge=1, le=256)
    # The GPUs of one replica (its tensor-parallel size): a whole number of nodes' GPUs, as NeMo
    # RL requires. None: one node's (slurm.gpus_per_node).
    gpus_per_replica: Int | None = Field(default=None, ge=1)
    # The server each replica runs on its first node, an argv list; or `vllm`, which makes one.
    command: tuple[Text, ...] | None = None
    vllm: VllmServe | None = None
    # A registry reference or a .sqsh path; None: the job's container.image.
    image: NonEmpty | None = None
    env: dict[EnvName, Annotated[Text, BeforeValidator(as_text)]] = {}
    # Each replica's HTTP port, on its own nodes (vLLM's --port).
    port: Port = 8000
    # The pool's URL port, on the training job's head node (NeMo RL's POOL_LB_PORT).
    balancer_port: Port
    # The word of the driver's command that becomes the pool's URL; None: __<NAME>_URL__.
    url_placeholder: Annotated[Line, Field(pattern=r"^\S+$")] | None = None
    # How long every replica may take to answer health_path once the job starts.
    startup_timeout_s: Int = Field(default=3600, ge=1)
    health_path: Annotated[Line, Field(pattern=r"^/\S*$")] = "/health"
    # Required: the driver waits for it, and the job fails once every replica has exited.
    # Optional: the driver starts without it, and losing it is a warning.
    required: bool = True

    @model_validator(mode="after")
    def _one_server(self) -> PoolSpec:
        if self.command is None and self.vllm is None:
            raise ValueError(
                "no server: give the one each replica runs, command (an argv list) or vllm "
                "(its model and args)"
            )
        if self.command is not None and self.vllm is not None:
            raise ValueError("command and vllm are both set: give one of them")
        if self.command is not None and (not self.command or not self.command[0]):
            raise ValueError("command must be a non-empty argv list")
        return self

    def nodes_per_replica(self, gpus_per_node: int) -> int:
        """The nodes each replica takes."""
        if self.gpus_per_replica is None or gpus_per_node == 0:
            return 1
        return max(1, self.gpus_per_replica // gpus_per_node)

    def nodes(self, gpus_per_node: int) -> int:
        """The pool's node slice: its replicas' nodes together."""
        return self.replicas * self.nodes_per_replica(gpus_per_node)

    def placeholder(self, name: str) -> str:
        return self.url_placeholder or f"__{name.upper()}_URL__"

    def tensor_parallel(self, gpus_per_node: int) -> int:
        return self.gpus_per_replica or gpus_per_node

    def server_command(self, gpus_per_node: int) -> tuple[str, ...]:
        """What each replica runs: `command`, or vLLM's OpenAI server for `vllm`."""
        if self.command is not None:
            return self.command
        assert self.vllm is not None
        v = self.vllm
        argv = [
            v.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            f"--model={v.model}",
            f"--tensor-parallel-size={self.tensor_parallel(gpus_per_node)}",
            f"--port={self.port}",
            f"--served-model-name={v.served_model_name}",
        ]
        if self.nodes_per_replica(gpus_per_node) > 1:
            argv.append("--distributed-executor-backend=ray")
        return (*argv, *v.args)


@dataclass(frozen=True)
class Slice:
    """One replica's nodes: indices into the pool nodes (the job's second component)."""

    pool: str
    replica: int
    first: int
    nodes: int

    @property
    def indices(self) -> range:
        return range(self.first, self.first + self.nodes)


def slices(spec: LaunchSpec) -> list[Slice]:
    """Every replica's slice of the pool nodes: the pools in the spec's order, each pool's
    replicas one after another (NeMo RL's order: EXTERNAL_VLLM_POOLS, then replica)."""
    found, first = [], 0
    for name, pool in spec.pools.items():
        per = pool.nodes_per_replica(spec.slurm.gpus_per_node)
        for replica in range(pool.replicas):
            found.append(Slice(name, replica, first, per))
            first += per
    return found


def url_file(name: str) -> str:
    """The log dir's file that holds a pool's URL, as NeMo RL names it (<pool>_url)."""
    return f"{name}_url"


def _check_names(pools: dict[str, PoolSpec]) -> None:
    for name in pools:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"pools.{name}: a pool's name is a lowercase letter, then lowercase letters, "
                "digits or _ (32 at most), e.g. judge or safety_rm"
            )


def _taken_ports(spec: LaunchSpec) -> list[tuple[str, int, int]]:
    """Every port Ray opens on a node, then the sandbox's, as (key, first, last)."""
    found = ray_ports(spec)
    if spec.sandbox is not None:
        found.append(("sandbox.port", spec.sandbox.port, spec.sandbox.port))
        found.append(("sandbox.base_port", spec.sandbox.base_port, spec.sandbox.last_port))
    return found


def _check_port(key: str, port: int, taken: list[tuple[str, int, int]]) -> None:
    if port < 1024 or port >= EPHEMERAL_FLOOR:
        raise ValueError(
            f"{key}: {port} is outside 1024-{EPHEMERAL_FLOOR - 1}: a pool's port must be "
            f"below the ephemeral ports (from {EPHEMERAL_FLOOR}, which any outgoing connection "
            "may hold) and not privileged; NeMo RL's pools use 8000 and up"
        )
    low, high = ENGINE_PORTS
    if low <= port <= high:
        raise ValueError(
            f"{key}: {port} lies in vLLM's engine rendezvous ports {low}-{high} (NeMo RL's port "
            "table); NeMo RL's pools use 8000 and up"
        )
    for other, first, last in taken:
        if first <= port <= last:
            where = f"{first}" if first == last else f"{first}-{last}"
            raise ValueError(f"{key}: {port} is taken by {other} ({where}); move one of them")


def _check_slices(name: str, pool: PoolSpec, gpus_per_node: int) -> None:
    key = f"pools.{name}.gpus_per_replica"
    if pool.gpus_per_replica is None:
        return
    if gpus_per_node == 0:
        raise ValueError(
            f"{key}: {pool.gpus_per_replica} GPUs, but slurm.gpus_per_node is 0; drop it (one "
            "node per replica) or give the nodes' GPUs"
        )
    if pool.gpus_per_replica % gpus_per_node:
        raise ValueError(
            f"{key}: {pool.gpus_per_replica} is not a multiple of slurm.gpus_per_node "
            f"({gpus_per_node}): each replica takes whole nodes (NeMo RL's TP rule)"
        )


def _check_placeholders(spec: LaunchSpec) -> None:
    command = spec.driver.command
    if command is None:
        return
    text = "\n".join(command)
    placeholders = {pool.placeholder(name): name for name, pool in spec.pools.items()}
    for placeholder, name in placeholders.items():
        if placeholder not in text:
            raise ValueError(
                f"pools.{name}.url_placeholder: {placeholder} is not in the driver's command; "
                f"put it where the pool's URL goes (e.g. ++env.{name}.base_url={placeholder})"
            )
    for stray in sorted(set(PLACEHOLDER_FORM.findall(text)) - set(placeholders)):
        raise ValueError(
            f"driver.command: {stray} reads as a pool's URL placeholder, but no pool has it "
            f"(pools have: {', '.join(sorted(placeholders)) or 'none'}); fix the word or add "
            "the pool"
        )


def check_pools(spec: LaunchSpec) -> None:
    """The pools against the rest of the job: names, node slices, ports, placeholders and
    images (whether its backend runs pools at all is the backend's rule: `backends.rules`).

    Raises:
        ValueError: one line naming the key, and what is accepted.
    """
    if not spec.pools:
        return
    _check_names(spec.pools)
    gpus = spec.slurm.gpus_per_node
    taken = _taken_ports(spec)
    placeholders: dict[str, str] = {}
    for name, pool in spec.pools.items():
        _check_slices(name, pool, gpus)
        _check_port(f"pools.{name}.balancer_port", pool.balancer_port, taken)
        taken.append((f"pools.{name}.balancer_port", pool.balancer_port, pool.balancer_port))
        # A replica's own nodes run no job Ray, but a replica that spans nodes runs a private
        # Ray with the job's ports.
        _check_port(f"pools.{name}.port", pool.port, _taken_ports(spec))
        placeholder = pool.placeholder(name)
        if placeholder in placeholders:
            raise ValueError(
                f"pools.{name}.url_placeholder: {placeholder} is pools.{placeholders[placeholder]}"
                "'s too; each pool needs its own"
            )
        placeholders[placeholder] = name
        secrets = spec.required_secrets + spec.optional_secrets
        for env_name in sorted(set(pool.env) & set(secrets)):
            raise ValueError(
                f"pools.{name}.env.{env_name}: {env_name} is one of the job's secrets, which "
                "travel by name only; every replica gets the job's secrets as training does"
            )
        refuse_credentials(
            pool.env,
            f"pools.{name}.env",
            "and a value in env is written into the job script and spec.json; pass it by name "
            "instead: export it and give --secret {name}",
        )
        if pool.image is None and spec.container.runtime == "pyxis" and not spec.container.image:
            raise ValueError(
                f"pools.{name}.image: not set, and the job has no container.image to take; give "
                "the image its replicas run in"
            )
        if pool.image is not None and spec.container.runtime == "none":
            raise ValueError(
                f"pools.{name}.image: the job runs without containers (container.runtime "
                "none); drop it, or run the job in containers"
            )
    _check_placeholders(spec)
