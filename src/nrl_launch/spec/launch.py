"""The whole job spec (`LaunchSpec`): its sections put together, and the rules across them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nrl_launch.spec.fields import (
    EnvName,
    Text,
    as_text,
    looks_like_a_value,
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
    SpecBase,
)
from nrl_launch.spec.pools import PoolSpec, check_pools
from nrl_launch.spec.sandbox import SandboxSpec, check_sandbox


class LaunchSpec(SpecBase):
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
    # pydantic copies a default for each model (ruff cannot tell SpecBase is pydantic's).
    env: dict[EnvName, Annotated[Text, BeforeValidator(as_text)]] = {}  # noqa: RUF012
    secrets: dict[EnvName, SecretNeed] = DEFAULT_SECRETS
    setup: Text | None = None
    driver: DriverSpec = DriverSpec()
    nemo_rl: NemoRLSpec = NemoRLSpec()
    lepton: LeptonSpec = LeptonSpec()
    # ray.sub's SANDBOX_CONTAINER and SANDBOX_COMMAND: a sandbox beside Ray on every node.
    sandbox: SandboxSpec | None = None
    # Model pools beside training (judges, reward models): each pool's replicas on nodes of
    # their own, in a second component of the same Slurm job (spec/pools.py).
    pools: dict[str, PoolSpec] = {}  # noqa: RUF012

    @field_validator("secrets", mode="before")
    @classmethod
    def _secrets_over_defaults(cls, value: Any) -> Any:
        # `secrets: [A, B]` lists required ones; either form adds to the defaults.
        # A list of anything but names is left for validation to refuse (not hashed here).
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            value = dict.fromkeys(value, "required")
        if isinstance(value, dict) and any(looks_like_a_value(str(n)) for n in value):
            raise ValueError(
                "a name given looks like a credential's value, not a variable's name (it is not "
                "said back): a secret is given by name, never by value: --secret NAME, with "
                "NAME exported in your shell"
            )
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
        """The nodes of the training cluster: slurm.nodes (its GPU nodes), and its dedicated Ray
        head. A job with pools allocates pool_nodes more, in a second component."""
        return self.slurm.nodes + (1 if self.ray.dedicated_head else 0)

    @property
    def pool_nodes(self) -> int:
        """The nodes of every pool's replicas together (the job's second component)."""
        return sum(p.nodes(self.slurm.gpus_per_node) for p in self.pools.values())

    # What the spec's backend cannot run is the backend's to say (`backends.rules.check`); the
    # spec sits below the backends, so whoever validates a user's spec hands that check in, as
    # the validation context's "backend_rules" (`layers.resolve`, `nemorl.job.prepare`).
    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> LaunchSpec:
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
        backend_rules = (info.context or {}).get("backend_rules")
        if backend_rules is not None:
            backend_rules(self)
        _check_worker_ports(self.ray.ports, self.slurm.gpus_per_node)
        check_sandbox(self)
        check_pools(self)
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


# What a spec's backend cannot run (`backends.rules.check`): raises ValueError, one line naming
# the keys; handed to validation as the context's "backend_rules" (see `LaunchSpec._check`).
BackendRules = Callable[[LaunchSpec], None]
