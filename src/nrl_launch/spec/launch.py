"""The whole job spec (`LaunchSpec`): its sections put together, and the rules across them."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    field_validator,
    model_validator,
)

from nrl_launch.spec.fields import (
    EnvName,
    Text,
    as_text,
    refuse_credentials,
)
from nrl_launch.spec.models import (
    DEFAULT_SECRETS,
    CachesSpec,
    ContainerSpec,
    DriverSpec,
    LeptonSpec,
    LogsSpec,
    NemoRLSpec,
    RayPorts,
    RaySpec,
    SecretNeed,
    SlurmSpec,
    _Spec,
)
from nrl_launch.spec.sandbox import SandboxSpec, check_sandbox


class LaunchSpec(_Spec):
    """Everything needed to render and launch one job."""

    # slurm: a batch job on a Slurm cluster; local: the same bring-up on this machine, one node.
    # lepton: a batch job of one worker per node on DGX Cloud Lepton.
    backend: Literal["slurm", "local", "lepton"] = "slurm"
    interactive: bool = False
    slurm: SlurmSpec = SlurmSpec()
    container: ContainerSpec = ContainerSpec(runtime="none")
    ray: RaySpec = RaySpec()
    logs: LogsSpec = LogsSpec()
    caches: CachesSpec = CachesSpec()
    # pydantic copies a field's default for each model (ruff cannot see _Spec is pydantic's).
    env: dict[EnvName, Annotated[Text, BeforeValidator(as_text)]] = {}  # noqa: RUF012
    secrets: dict[EnvName, SecretNeed] = DEFAULT_SECRETS
    setup: Text | None = None
    driver: DriverSpec = DriverSpec()
    nemo_rl: NemoRLSpec = NemoRLSpec()
    lepton: LeptonSpec = LeptonSpec()
    # ray.sub's SANDBOX_CONTAINER and SANDBOX_COMMAND: a sandbox beside Ray on every node.
    sandbox: SandboxSpec | None = None

    @field_validator("secrets", mode="before")
    @classmethod
    def _secrets_over_defaults(cls, value: Any) -> Any:
        # `secrets: [A, B]` lists required ones; either form adds to the defaults.
        # A list of anything but names is left for validation to refuse (not hashed here).
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            value = dict.fromkeys(value, "required")
        if isinstance(value, dict):
            # YAML reads a bare `off` as false: the word meant, as ray.auth takes it.
            value = {name: "off" if need is False else need for name, need in value.items()}
        return {**DEFAULT_SECRETS, **value} if isinstance(value, dict) else value

    @property
    def required_secrets(self) -> list[str]:
        return sorted(n for n, need in self.secrets.items() if need == "required")

    @property
    def optional_secrets(self) -> list[str]:
        return sorted(n for n, need in self.secrets.items() if need == "optional")

    def exclusive_nodes(self, *, ray: bool = True) -> bool:
        """Whether the job takes whole nodes: slurm.exclusive, else whole nodes for a Ray job
        and for a plain job (`ray` false) with GPUs."""
        if self.slurm.exclusive is not None:
            return self.slurm.exclusive
        return ray or self.slurm.gpus_per_node > 0

    @property
    def allocated_nodes(self) -> int:
        """The nodes the job allocates: slurm.nodes (its GPU nodes), and its dedicated Ray head."""
        return self.slurm.nodes + (1 if self.ray.dedicated_head else 0)

    @model_validator(mode="after")
    def _check(self) -> LaunchSpec:
        if self.interactive and self.driver.command is not None:
            raise ValueError(
                "driver.command is set but the job is interactive: "
                "drop --interactive, or the command"
            )
        recipe = self.nemo_rl.recipe
        if recipe is not None and self.driver.command is not None:
            raise ValueError(
                f"nemo_rl.recipe {recipe!r} builds the driver command, but driver.command is "
                "set too: give one of them"
            )
        if recipe is not None and self.interactive:
            raise ValueError(
                f"nemo_rl.recipe {recipe!r} runs a driver, but the job is interactive: "
                "drop one of them"
            )
        if not self.interactive and self.driver.command is None and recipe is None:
            raise ValueError(
                "driver.command is not set: give the driver after `--` (e.g. -- uv run "
                "examples/run_grpo.py), or pass --interactive for a cluster that stays up"
            )
        if self.backend == "local" and self.slurm.nodes != 1:
            raise ValueError(
                f"slurm.nodes: the local backend runs one node on this machine, not "
                f"{self.slurm.nodes}; use --nodes 1, or --backend slurm"
            )
        if self.backend == "local" and self.ray.dedicated_head:
            raise ValueError(
                "ray.dedicated_head: the local backend runs one node on this machine, the head "
                "with its GPUs; drop --dedicated-head, or use --backend slurm"
            )
        if self.backend == "local" and self.container.runtime != "none":
            raise ValueError(
                "container.runtime: the local backend runs without a container (pyxis is a Slurm "
                "plugin); use --container-runtime none"
            )
        if self.backend == "lepton":
            _check_lepton(self)
        _check_worker_ports(self.ray.ports, self.slurm.gpus_per_node)
        check_sandbox(self)
        if self.container.runtime == "pyxis" and any(c in self.logs.base_dir for c in ",:"):
            raise ValueError(
                f"logs.base_dir: {self.logs.base_dir!r} holds ',' or ':', which pyxis cannot "
                "mount into the container; choose another directory"
            )
        _check_env(self)
        return self


def _check_env(spec: LaunchSpec) -> None:
    """The job's env against its secrets and caches: a value that is a secret's, or that the
    caches would replace."""
    for name in sorted(set(spec.env) & set(spec.required_secrets + spec.optional_secrets)):
        raise ValueError(
            f"env.{name}: {name} is listed in secrets; a secret is passed by name only"
        )
    refuse_credentials(
        spec.env,
        "env",
        "and a value in env is written into the job script, spec.json, the job record and "
        "sbatch's command line; pass it by name instead: export it and give --secret {name}",
    )
    # The job exports the caches' variables after the env's: one of the env's (or a secret's)
    # under the same name would be lost without a word.
    caches = spec.caches.env()
    for name in sorted(set(caches) & {*spec.env, *spec.secrets}):
        key = "env" if name in spec.env else "secrets"
        raise ValueError(
            f"{key}.{name}: the caches set {name} (to {caches[name]!r}); say where that "
            "cache goes under caches (hf_home, uv, megatron, enroot) instead"
        )


def _check_worker_ports(ports: RayPorts, gpus: int) -> None:
    """Ray's worker ports: 16 per GPU, never fewer than 64."""
    width = ports.worker_max - ports.worker_min + 1
    need = max(64, 16 * gpus)
    if width < need and ports.model_fields_set.isdisjoint({"worker_min", "worker_max"}):
        # The range is the default one: the GPU count is what is off (--gpus-per-node 99).
        raise ValueError(
            f"slurm.gpus_per_node: {gpus} GPUs per node is more than the Ray worker ports "
            f"{ports.worker_min}-{ports.worker_max} serve ({width // 16} at 16 ports each): "
            "give the GPUs of one node, or widen ray.ports.worker_min..worker_max"
        )
    if width < need:
        raise ValueError(
            f"ray.ports.worker_min..worker_max: {ports.worker_min}-{ports.worker_max} holds "
            f"{width} ports; need at least {need} (16 per GPU, never fewer than 64)"
        )


# Lepton's own rules for a job's name (its SDK checks them): up to 36 of a-z, 0-9 and '-'. Submit
# adds 6 ('-' and 5 of a-z0-9) so that every job, and so its log dir, has a name of its own.
LEPTON_NAME_SUFFIX = 6
_LEPTON_NAME = re.compile(rf"[a-z][a-z0-9-]{{0,{35 - LEPTON_NAME_SUFFIX}}}")
_LEPTON_SHAPE_GPUS = re.compile(r"gpu\.(\d+)x")


def _check_lepton(spec: LaunchSpec) -> None:
    """What a job needs to run on Lepton: where (shape, node group), its image, and a log dir
    on storage every worker mounts (the head and the workers meet there, as on Slurm)."""
    lepton, name = spec.lepton, spec.slurm.job_name
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
