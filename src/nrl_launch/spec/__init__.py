"""The job spec: its typed model, where each value comes from, and the rules it must keep.

The modules, each importing only those above it in this list:

    fields       reusable constrained types and validators (env names, Slurm words, times)
    sbatch_args  the raw sbatch arguments a job may add (slurm.extra_args), and those it may not
    models       the spec's sections (SlurmSpec, ContainerSpec, RaySpec, ...)
    sandbox      the sandbox section, its rules, and ray.sub's sandbox variables
    pools        the model pools beside training (judges, reward models) and their rules
    launch       LaunchSpec: the sections together, and the rules across them
    external_pools  NeMo RL's pool variables (EXTERNAL_VLLM_POOLS, <POOL>_*) as pools.<name>
    layers       the layering of defaults, profile, job files, env and flags into one spec
    describe     validation errors as `key: message` lines a user reads
    warnings     what a valid spec would silently get wrong

Only the model is imported here (pydantic); `layers` (yaml) is imported where it is used.
"""

from nrl_launch.spec.fields import reserved_env_name, slurm_time_minutes
from nrl_launch.spec.launch import LaunchSpec
from nrl_launch.spec.models import (
    DEFAULT_DRIVERS,
    DEFAULT_SECRETS,
    CachesSpec,
    ContainerSpec,
    DriverSpec,
    LeptonMount,
    LeptonSpec,
    LogsSpec,
    Mount,
    NemoRLSpec,
    RayPorts,
    RaySpec,
    RayTimeouts,
    SlurmSpec,
)
from nrl_launch.spec.pools import PoolSpec
from nrl_launch.spec.sandbox import SandboxSpec

__all__ = [
    "DEFAULT_DRIVERS",
    "DEFAULT_SECRETS",
    "CachesSpec",
    "ContainerSpec",
    "DriverSpec",
    "LaunchSpec",
    "LeptonMount",
    "LeptonSpec",
    "LogsSpec",
    "Mount",
    "NemoRLSpec",
    "PoolSpec",
    "RayPorts",
    "RaySpec",
    "RayTimeouts",
    "SandboxSpec",
    "SlurmSpec",
    "reserved_env_name",
    "slurm_time_minutes",
]
