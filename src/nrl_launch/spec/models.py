"""The job spec's sections: typed, frozen, validated once at the edge.

Every key a user can set lives here with its default. Unknown keys are refused (`extra="forbid"`),
and each constraint says in its message what is accepted, because that message is what a user
sees at 2 a.m. (see `describe.describe_errors`). `launch.LaunchSpec` puts the sections together.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nrl_launch.spec import sbatch_args
from nrl_launch.spec.fields import (
    MOUNT_FLAGS,
    EnvName,
    Int,
    Line,
    Minutes,
    NonEmpty,
    Port,
    SbatchValue,
    SlurmWord,
    Text,
    as_text,
    check_path_part,
    check_time,
    printable,
)


class SpecBase(BaseModel):
    """Every section of the spec: unknown keys refused, frozen, defaults validated too."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class Mount(SpecBase):
    """A bind mount, written `SRC:DST[:FLAGS]` (or `PATH` for the same path inside)."""

    src: Text
    dst: Text
    flags: Line | None = None

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if not isinstance(data, str):
            return data
        parts = data.split(":")
        if len(parts) == 1:
            return {"src": parts[0], "dst": parts[0]}
        if len(parts) in (2, 3) and all(parts):
            return dict(zip(("src", "dst", "flags"), parts, strict=False))
        raise ValueError(
            f"{data!r} is not SRC:DST[:FLAGS] with absolute paths (e.g. /data:/data:ro)"
        )

    @model_validator(mode="after")
    def _check(self) -> Mount:
        check_path_part(self.src, "source")
        check_path_part(self.dst, "destination")
        if self.flags is not None and not MOUNT_FLAGS.fullmatch(self.flags):
            raise ValueError(
                f"flags {self.flags!r} must be pyxis mount flags such as ro, rw or ro+rprivate"
            )
        return self

    def __str__(self) -> str:
        return f"{self.src}:{self.dst}" + (f":{self.flags}" if self.flags else "")


class SlurmSpec(SpecBase):
    # squeue and sacct print one job per line: a control character in a name would split it.
    job_name: Annotated[NonEmpty, BeforeValidator(as_text), AfterValidator(printable)] = (
        "nrl-launch"
    )
    nodes: Int = Field(default=1, ge=1)
    # None: no --time, the partition's default time limit (as sbatch alone does).
    time: Annotated[Line, BeforeValidator(check_time)] | None = None
    account: SlurmWord | None = None
    partition: SlurmWord | None = None
    qos: SlurmWord | None = None
    reservation: SlurmWord | None = None
    # None: whole nodes (--exclusive) for a Ray job, whose Ray takes every CPU and GPU of its
    # nodes, and for a plain job with GPUs; a plain CPU job (run --gpus-per-node 0) shares.
    exclusive: bool | None = None
    exclude: SlurmWord | None = None
    constraint: SlurmWord | None = None
    dependency: SlurmWord | None = None
    requeue: bool | None = None  # unset: the cluster's JobRequeue decides
    # submit --retries: spare tries Slurm starts when a try fails for a cause another try can
    # fix (a node or its Ray lost, a stall, NODE_FAIL, preemption, the time limit); a driver
    # that fails within retry_min_runtime_s of starting is its own error and is not retried.
    retries: Int = Field(default=0, ge=0, le=100)
    retry_min_runtime_s: Int = Field(default=600, ge=0)
    # How the secrets' values reach the job. env: in the environment sbatch exports, which
    # Slurm keeps with the job (slurmctld's state; slurmdbd with AccountingStoreFlags=job_env).
    # file: in a file only you can read (the state dir), which the job reads and Slurm never
    # sees; it needs the state dir on storage the job's first node sees.
    secrets_via: Literal["env", "file"] = "env"
    gpus_per_node: Int = Field(default=8, ge=0)
    gpu_request: Literal["gres", "gpus-per-node", "none"] = "gres"
    cpus_per_node: Int | None = Field(default=None, ge=1)
    # srun's MPI plugin for the job's steps (--mpi; ray.sub always passes pmix); None: the
    # site's MpiDefault. Ray's own processes use none: their PMI variables are cleared.
    mpi: SlurmWord | None = None
    # sbatch --segment (Slurm 24.11, topology/block): the nodes come in segments of this many,
    # as NeMo RL's cluster.segment_size must match; read from the config when it sets one.
    segment: Int | None = Field(default=None, ge=1)
    # Raw sbatch arguments, after nrl-launch's own: never one that overrides what it sets.
    extra_args: tuple[Line, ...] = ()

    @field_validator("extra_args")
    @classmethod
    def _not_owned(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if not value:
            return value  # most jobs: no need to load sbatch's option table
        # The fields above are validated first; one that failed is missing here.
        gres_owned = (
            info.data.get("gpu_request") == "gres" and info.data.get("gpus_per_node", 0) > 0
        )
        constraint_set = info.data.get("constraint") is not None
        problems = sbatch_args.problems(value, gres_owned=gres_owned, constraint_set=constraint_set)
        if "" in value:
            # sbatch drops an empty word of an #SBATCH line, and the rest of the line with it.
            problems.append(
                "an empty argument cannot be written on an #SBATCH line of the job script: "
                "give an empty value with =, as --comment="
            )
        if problems:
            raise ValueError("\n".join(problems))
        return value


class ContainerSpec(SpecBase):
    runtime: Literal["pyxis", "none"]
    image: NonEmpty | None = None
    mounts: tuple[Mount, ...] = ()
    workdir: Text | None = None
    mount_home: bool = False
    # Keep the unpacked image on each node for the user's next job with the same image
    # (node/reuse.sh); the container is then read-only.
    reuse: bool = False

    @model_validator(mode="before")
    @classmethod
    def _default_runtime(cls, data: Any) -> Any:
        # An image implies pyxis, so `--container IMAGE` alone is enough.
        if isinstance(data, dict) and data.get("runtime") is None:
            return {**data, "runtime": "pyxis" if data.get("image") else "none"}
        return data

    @model_validator(mode="after")
    def _check(self) -> ContainerSpec:
        if self.runtime == "pyxis" and not self.image:
            raise ValueError(
                "runtime is pyxis but container.image is not set: give --container IMAGE "
                "(a registry reference or a .sqsh path), or --container-runtime none"
            )
        if self.runtime == "none" and self.image:
            raise ValueError(
                "container.image is set but container.runtime is none: use pyxis or drop the image"
            )
        if self.workdir is not None:
            check_path_part(self.workdir, "workdir")
        return self


class RayPorts(SpecBase):
    """Every port Ray opens. The same ports are used on every node (one raylet per node)."""

    gcs: Port = 1200
    client_server: Port = 1201
    dashboard: Port = 8265
    dashboard_agent_listen: Port = 1311
    dashboard_agent_grpc: Port = 1307
    node_manager: Port = 1301
    object_manager: Port = 1303
    runtime_env_agent: Port = 1305
    metrics_export: Port = 1309
    worker_min: Port = 2000
    worker_max: Port = 2999

    @model_validator(mode="after")
    def _distinct(self) -> RayPorts:
        single = {
            k: v for k, v in self.model_dump().items() if k not in ("worker_min", "worker_max")
        }
        seen: dict[int, str] = {}
        for name, port in single.items():
            if port in seen:
                raise ValueError(
                    f"{seen[port]} and {name} are both {port}; every Ray port must differ"
                )
            seen[port] = name
            if self.worker_min <= port <= self.worker_max:
                raise ValueError(
                    f"{name}={port} lies inside the worker port range "
                    f"{self.worker_min}-{self.worker_max}; move one of them"
                )
        if self.worker_max < self.worker_min:
            raise ValueError(f"worker_max={self.worker_max} is below worker_min={self.worker_min}")
        return self


class RayTimeouts(SpecBase):
    """Bounds, in seconds, on each wait of the bring-up: nothing waits forever."""

    head_start_s: Int = Field(default=300, ge=1)
    join_s: Int = Field(default=600, ge=1)
    driver_s: Int | None = Field(default=None, ge=1)


def _yaml_switch(value: Any) -> Any:
    """YAML reads a bare `off` as false (and `on` as true): take them as the words meant."""
    if value is False:
        return "off"
    if value is True:
        return "token"
    return value


class RaySpec(SpecBase):
    ports: RayPorts = RayPorts()
    timeouts: RayTimeouts = RayTimeouts()
    # token: Ray's token authentication (Ray >= 2.52) with a fresh token per job, so that no
    # one else who can reach the job's ports can run code as its owner. off: for older Ray.
    auth: Annotated[Literal["token", "off"], BeforeValidator(_yaml_switch)] = "token"
    # ray.sub's RAY_DEBUG=legacy: Ray's debugger listens on each node's address, so `ray debug`
    # run through `nrl-launch attach` reaches a breakpoint on any node.
    external_debugger: bool = False
    # ray.sub's RAY_LOG_SYNC_FREQUENCY: every N seconds each node copies its Ray session logs
    # (and nsight profiles) into <log dir>/ray/<node>/, and once more at the job's end.
    log_sync_s: Int | None = Field(default=None, ge=1)
    # ray.sub's DEDICATED_RAY_HEAD=1: one more node than slurm.nodes (the GPU nodes) runs the Ray
    # head and the driver, offering Ray no GPUs (they stay idle), so no GPU actor lands there.
    dedicated_head: bool = False
    # Ray's dashboard on the head (`nrl-launch dashboard`, Ray's job API). false: none. Ray
    # starts the head's own raylet (node 0's GPUs) only once its dashboard answers, and the
    # dashboard's processes take CPU while the nodes start: without it, the bring-up is as
    # fast as a bare `ray start --include-dashboard=false` (benchmarks/RESULTS.md, issue 37).
    dashboard: bool = True


class LeptonMount(SpecBase):
    """Storage every Lepton worker mounts: `path` of the volume `source` at `mount_path`."""

    source: NonEmpty  # the volume, as Lepton names it: node-nfs:<volume>, or a storage name
    path: NonEmpty = "/"
    mount_path: NonEmpty

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        check_path_part(value, "mount_path")
        return value


class LeptonSpec(SpecBase):
    """Where a job runs on DGX Cloud Lepton (backend lepton): one worker per node."""

    resource_shape: NonEmpty | None = None  # e.g. gpu.8xh100-80gb: GPUs and their kind, per worker
    node_group: NonEmpty | None = None  # the dedicated node group, by name
    image_pull_secrets: tuple[NonEmpty, ...] = ()  # registry credentials, by secret name
    mounts: tuple[LeptonMount, ...] = ()
    # A secret of the job (secrets:) by the name of the Lepton secret that holds it; a required
    # one not named here is the Lepton secret of the same name.
    secret_refs: dict[EnvName, NonEmpty] = {}
    shared_memory_mib: Int | None = Field(default=None, ge=1)
    max_failure_retry: Int = Field(default=0, ge=0)


class LogsSpec(SpecBase):
    # Relative paths are relative to the directory `sbatch` runs in, as with ray.sub.
    base_dir: SbatchValue = "."

    @field_validator("base_dir")
    @classmethod
    def _no_patterns(cls, value: str) -> str:
        if "%" in value or "\\" in value:
            raise ValueError(
                "must not contain '%' or '\\' (sbatch reads them as filename patterns)"
            )
        return value


class CachesSpec(SpecBase):
    """Caches every node must share: HF conversions and uv builds race or fail on node-local
    caches. `dir` alone sets them all (`caches: /lustre/me/cache` is short for it); a key of its
    own moves one of them elsewhere."""

    dir: Text | None = None
    hf_home: Text | None = None
    uv: Text | None = None
    megatron: Text | None = None
    # enroot's layer cache (ENROOT_CACHE_PATH), for `pull`: a shared one is downloaded once.
    enroot: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"dir": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _absolute(self) -> CachesSpec:
        for name in ("dir", "hf_home", "uv", "megatron", "enroot"):
            value = getattr(self, name)
            if value is not None:
                check_path_part(value, name)
        return self

    def env(self) -> dict[str, str]:
        """The variables the job exports, by name: HF_HOME and its two sub-caches, NeMo RL's
        Megatron checkpoint conversions, and uv's cache when caches.uv says where (ray.sub's
        UV_CACHE_DIR_OVERRIDE)."""
        base = self.dir.rstrip("/") if self.dir else None
        hf = self.hf_home or (f"{base}/huggingface" if base else None)
        found = {
            "HF_HOME": hf,
            # transformers and datasets default to these under HF_HOME; set them too, because
            # an older TRANSFORMERS_CACHE in the submitting shell would win otherwise.
            "TRANSFORMERS_CACHE": f"{hf.rstrip('/')}/hub" if hf else None,
            "HF_DATASETS_CACHE": f"{hf.rstrip('/')}/datasets" if hf else None,
            "NRL_MEGATRON_CHECKPOINT_DIR": self.megatron or (f"{base}/megatron" if base else None),
            # Only when asked for, not under `dir`: NeMo RL's maintainers keep UV_CACHE_DIR unset
            # in the container (its prebuilt envs; concurrent jobs corrupt a shared uv cache:
            # NeMo RL PR #3379), as ray.sub does.
            "UV_CACHE_DIR": self.uv,
            # Only when asked for: pyxis imports images with the job's environment too.
            "ENROOT_CACHE_PATH": self.enroot,
        }
        return {name: path for name, path in found.items() if path}

    def roots(self) -> list[str]:
        """The directories to create and mount: `dir` and any cache kept outside it."""
        roots = [self.dir] if self.dir else []
        for path in (self.hf_home, self.megatron, self.uv, self.enroot):
            if path and not any(_under(path, root) for root in roots):
                roots.append(path)
        return [r.rstrip("/") or "/" for r in roots]


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


# The drivers of each recipe, relative to the NeMo RL checkout the job runs in. Names change
# between releases (run_grpo_math.py became run_grpo.py in v0.6): a profile can point a recipe
# at another script under nemo_rl.drivers.
DEFAULT_DRIVERS = {
    "grpo": "examples/run_grpo.py",
    "sft": "examples/run_sft.py",
    "dpo": "examples/run_dpo.py",
    "rm": "examples/run_rm.py",
    "ppo": "examples/run_ppo.py",
    "distillation": "examples/run_distillation.py",
    "eval": "examples/run_eval.py",
    "vlm-grpo": "examples/run_vlm_grpo.py",
    "nemo-gym-grpo": "examples/nemo_gym/run_grpo_nemo_gym.py",
}


_MODULE_CLASS = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class NemoRLSpec(SpecBase):
    """The NeMo RL config the job trains with. nrl-launch reads it to size and check the job
    before queueing, and with a recipe builds the driver command itself."""

    recipe: NonEmpty | None = None
    config: NonEmpty | None = None
    overrides: tuple[Text, ...] = ()
    drivers: dict[str, NonEmpty] = DEFAULT_DRIVERS
    # How a driver is started: NeMo RL's drivers run under uv, which builds their venv.
    launcher: tuple[NonEmpty, ...] = ("uv", "run")
    check: bool = True
    # With checkpointing on, the driver must save this long before the job's end.
    checkpoint_margin_min: Int = Field(default=15, ge=1)
    # Whether the node gives the driver checkpoint_must_save_by counted back from the job's end
    # when it starts (node/deadline.sh). None: nrl-launch decides (a recipe with checkpointing
    # on, on a backend with a time limit, whose config does not set it); true: a driver
    # command of the job's own that runs NeMo RL gets it too.
    save_by_job_end: bool | None = None
    # The timer whose clock the node's start-up shim makes count from the job's end: NeMo RL's
    # (module:Class; a fork may have its own).
    timer_class: NonEmpty = "nemo_rl.utils.timer:TimeoutChecker"

    @field_validator("drivers", mode="before")
    @classmethod
    def _over_defaults(cls, value: Any) -> Any:
        # A profile that renames one driver keeps the others.
        return {**DEFAULT_DRIVERS, **value} if isinstance(value, dict) else value

    @field_validator("timer_class")
    @classmethod
    def _module_class(cls, value: str) -> str:
        if not _MODULE_CLASS.fullmatch(value):
            raise ValueError(
                f"{value!r} is not module:Class, e.g. nemo_rl.utils.timer:TimeoutChecker"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> NemoRLSpec:
        if self.recipe is not None and self.recipe not in self.drivers:
            raise ValueError(
                f"recipe {self.recipe!r} is not known; accepted: {', '.join(self.drivers)} "
                "(add one under nemo_rl.drivers)"
            )
        if self.recipe is not None and self.config is None:
            raise ValueError(f"recipe {self.recipe!r} needs a config: give --config FILE")
        if self.overrides and self.config is None:
            raise ValueError("overrides are given but no config: give --config FILE")
        return self


class FrozenCode(SpecBase):
    """The copy of the driver's code that submit made (driver.snapshot; set by submit): every
    link, retry and requeue of the job runs it, not the checkout as it is by then."""

    dir: Text  # the copy: the git checkout's files as they were at submit
    source: Text  # the checkout it copies (git's top level)
    workdir: Text  # the copy of the driver's working directory
    python_path: tuple[Text, ...] = ()  # the copy's source roots, first on the driver's path
    venv: Text | None = None  # the checkout's project env, for `uv run` (the copy has none)
    commit: Text | None = None
    dirty: bool = False  # uncommitted changes (untracked files too) were frozen


class DriverSpec(SpecBase):
    command: tuple[Text, ...] | None = None
    workdir: Text | None = None
    # A run whose driver prints nothing for this many minutes ends FAILED as stalled (a cause
    # retries treat as retryable); unset: never (node/stall.sh).
    stall_min: Minutes | None = None
    # Freeze the driver's code at submit (a copy of its git checkout): --no-snapshot, false.
    snapshot: bool = True
    frozen: FrozenCode | None = None

    @field_validator("command")
    @classmethod
    def _nonempty(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError("must be a non-empty argv list, e.g. [uv, run, examples/run_grpo.py]")
        return value


# What a secret listed under `secrets:` needs: required ones must be set when the job is
# submitted, optional ones are passed when they are; off drops a default.
SecretNeed = Literal["required", "optional", "off"]
# Passed when set, by name: the tokens NeMo RL's guides use. A job may mark one required.
DEFAULT_SECRETS: dict[str, SecretNeed] = {"HF_TOKEN": "optional", "WANDB_API_KEY": "optional"}
