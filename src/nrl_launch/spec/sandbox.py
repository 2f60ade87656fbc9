"""The sandbox sidecar of a job (`sandbox:`): ray.sub's SANDBOX_CONTAINER and SANDBOX_COMMAND.

One sandbox per node, in a Slurm step of its own beside Ray's (NeMo Skills' code execution, which
NeMo Gym's resource servers call on 127.0.0.1). It listens on `port` (nginx, in NeMo Skills'
image) and starts its workers from `base_port` up: that band is reserved for it, and no Ray port
of the job may fall in it. The head starts the driver only once every node's sandbox answers.

`launch.py` holds the field (`LaunchSpec.sandbox`) and calls `check_sandbox` from its cross-section
check; `layers.py` reads ray.sub's variables, with `ray_sub_sandbox_on` and `sandbox_env_vars`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nrl_launch import paths
from nrl_launch.spec.fields import EnvName, Int, NonEmpty, Port, Text, as_text, refuse_credentials
from nrl_launch.spec.models import Mount
from nrl_launch.storage import is_under

if TYPE_CHECKING:
    from nrl_launch.spec.launch import LaunchSpec

__all__ = [
    "DEFAULT_SANDBOX_BASE_PORT",
    "DEFAULT_SANDBOX_PORT",
    "RAY_SUB_SANDBOX_ENV",
    "SANDBOX_WORKER_PORTS",
    "SandboxSpec",
    "check_sandbox",
    "ray_ports",
    "ray_sub_sandbox_on",
    "sandbox_env_vars",
    "sandbox_mount_problems",
]

DEFAULT_SANDBOX_PORT = 6000  # ray.sub's NEMO_SKILLS_SANDBOX_PORT: NeMo Skills' nginx
DEFAULT_SANDBOX_BASE_PORT = 6001  # ray.sub's SANDBOX_BASE_PORT: its first uWSGI worker
# Ports reserved for the sandbox's workers from base_port up: ray.sub's band 6001-6999. NeMo
# Skills starts one worker per CPU thread (6001-6224 on a 224-thread node) and moves a worker
# that finds its port taken up by 200 at a time.
SANDBOX_WORKER_PORTS = 999

# What the sandbox's command finds in its environment, under ray.sub's names (NeMo Skills'
# start-with-nginx.sh reads them): set by the job, never by sandbox.env.
_SET_BY_JOB = {
    "NGINX_PORT": "sandbox.port",
    "SANDBOX_WORKER_BASE_PORT": "sandbox.base_port",
    "SANDBOX_PORTS_DIR": "the job (<log dir>/sandbox)",
}

# The sandbox's whole environment besides sandbox.env (and Slurm's SLURM_*): what its wrapper
# reads (templates/_sandbox.sh.j2 and node/sandbox.sh), the ports under ray.sub's names, NeMo
# Skills' network block, and the few variables any program expects. Never the job's
# environment: it holds the secrets, and the login shell's, which may hold credentials nobody
# declared.
SANDBOX_ENV_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "NRL_SANDBOX_DIR",
    "NRL_SANDBOX_PORT",
    "NRL_SANDBOX_READY_TIMEOUT",
    "NRL_SANDBOX_ISOLATE",
    "NGINX_PORT",
    "SANDBOX_WORKER_BASE_PORT",
    "SANDBOX_PORTS_DIR",
    "NEMO_SKILLS_SANDBOX_BLOCK_NETWORK",
)

# ray.sub's sandbox variables and their keys. CONTAINER and COMMAND turn the sandbox on; the
# others mean something only with them (ray.sub ignores them otherwise, and so does nrl-launch:
# NEMO_SKILLS_SANDBOX_PORT then reaches the job as it is, through sbatch's --export=ALL).
RAY_SUB_SANDBOX_ENV: dict[str, str] = {
    "SANDBOX_CONTAINER": "sandbox.image",
    "SANDBOX_COMMAND": "sandbox.command",
    "SANDBOX_EXTRA_MOUNTS": "sandbox.mounts",
    "SANDBOX_ENV_VARS": "sandbox.env",
    "NEMO_SKILLS_SANDBOX_PORT": "sandbox.port",
    "SANDBOX_BASE_PORT": "sandbox.base_port",
}


def _mount(value: Any) -> Any:
    """A mount as container.mounts takes it (SRC:DST[:FLAGS]), kept as that text."""
    try:
        return str(Mount.model_validate(value))
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise ValueError(message) from None


class SandboxSpec(BaseModel):
    """One sandbox per node of the job, started before Ray, in a container of its own."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # A registry reference or a .sqsh path (pyxis imports it). None: the command runs on the
    # node itself, in a job without a container (container.runtime none).
    image: NonEmpty | None = None
    # An argv list, as driver.command; ray.sub's SANDBOX_COMMAND (a shell string) is bash -c.
    command: tuple[Text, ...]
    # Extra mounts of the sandbox's container (the job's container.mounts are not its own);
    # the log dir is always mounted.
    mounts: tuple[Annotated[str, BeforeValidator(_mount)], ...] = ()
    env: dict[EnvName, Annotated[Text, BeforeValidator(as_text)]] = {}
    port: Port = DEFAULT_SANDBOX_PORT
    base_port: Port = DEFAULT_SANDBOX_BASE_PORT
    # How long each node's sandbox may take to answer on `port` once its command starts.
    ready_timeout_s: Int = Field(default=300, ge=1)
    # Its command in PID and user namespaces of its own, where the image's unshare can (util-
    # linux 2.38 or later): it then cannot see or signal the job's other processes on the node.
    isolate_pids: bool = True
    # No image: the command runs on the node as you, with your files (the log dir, the Ray
    # token, your home). Refused unless this says you accept that.
    unsafe_on_host: bool = False

    @model_validator(mode="before")
    @classmethod
    def _has_command(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("command") is None:
            raise ValueError(
                "no command: give the command each node's sandbox runs, e.g. "
                "[/start-with-nginx.sh] (ray.sub's SANDBOX_COMMAND)"
            )
        return data

    @field_validator("command")
    @classmethod
    def _nonempty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or not value[0]:
            raise ValueError("must be a non-empty argv list, e.g. [/start-with-nginx.sh]")
        return value

    @field_validator("env")
    @classmethod
    def _not_the_job_s(cls, value: dict[str, str]) -> dict[str, str]:
        for name in sorted(set(value) & set(_SET_BY_JOB)):
            raise ValueError(f"the job sets {name} from {_SET_BY_JOB[name]}; set that instead")
        return value

    @property
    def last_port(self) -> int:
        """The last of the sandbox's worker ports (base_port and the ones after it)."""
        return self.base_port + SANDBOX_WORKER_PORTS - 1

    @model_validator(mode="after")
    def _band(self) -> SandboxSpec:
        last = self.last_port
        if last > 65535:
            raise ValueError(
                f"sandbox.base_port: {self.base_port} leaves no room for the sandbox's "
                f"{SANDBOX_WORKER_PORTS} worker ports (up to 65535): at most "
                f"{65536 - SANDBOX_WORKER_PORTS}"
            )
        if self.base_port <= self.port <= last:
            raise ValueError(
                f"sandbox.port: {self.port} lies in the sandbox's worker ports "
                f"{self.base_port}-{last} (sandbox.base_port and the {SANDBOX_WORKER_PORTS} "
                "after it); move one of them"
            )
        return self

    def exported(self) -> list[str]:
        """The names of the sandbox's whole environment (srun --export), sandbox.env's last."""
        return [*SANDBOX_ENV_NAMES, *sorted(set(self.env) - set(SANDBOX_ENV_NAMES))]

    def ports(self) -> str:
        """The ports the sandbox holds on every node, as a user reads them: 6000, 6001-6999."""
        return f"{self.port}, {self.base_port}-{self.last_port}"


def ray_ports(spec: LaunchSpec) -> list[tuple[str, int, int]]:
    """Every port Ray opens on a node, as (key, first, last)."""
    ports = spec.ray.ports
    found = [
        (f"ray.ports.{name}", port, port)
        for name, port in ports.model_dump().items()
        if name not in ("worker_min", "worker_max")
    ]
    found.append(("ray.ports.worker_min..worker_max", ports.worker_min, ports.worker_max))
    return found


def _check_image(sandbox: SandboxSpec, runtime: str) -> None:
    """Where the sandbox runs: in its image, or (only when the user says they accept it) on the
    node itself."""
    if sandbox.image is None and runtime != "none":
        raise ValueError(
            "sandbox.image is not set: the job runs in a container, and so does its sandbox; "
            "give the sandbox's image (ray.sub's SANDBOX_CONTAINER), a registry reference or a "
            ".sqsh path"
        )
    if sandbox.image is None and not sandbox.unsafe_on_host:
        raise ValueError(
            "sandbox.image is not set: the sandbox's code (a model's) would run on each node as "
            "you, able to read and change your files, the job's log dir and its Ray token; give "
            "the sandbox's image (ray.sub's SANDBOX_CONTAINER), or set "
            "sandbox.unsafe_on_host: true to accept that"
        )
    if sandbox.image is not None and sandbox.unsafe_on_host:
        raise ValueError(
            "sandbox.unsafe_on_host: the sandbox runs in its image (sandbox.image), not on the "
            "node; drop one of them"
        )


def check_sandbox(spec: LaunchSpec) -> None:
    """The sandbox against the rest of the job: its image and the Ray ports (whether its
    backend runs one at all is the backend's rule: `backends.rules`).

    Raises:
        ValueError: one line naming the keys, and what is accepted.
    """
    sandbox = spec.sandbox
    if sandbox is None:
        return
    _check_image(sandbox, spec.container.runtime)
    if "NEMO_SKILLS_SANDBOX_PORT" in spec.env:
        raise ValueError(
            "env.NEMO_SKILLS_SANDBOX_PORT: the job sets it to sandbox.port "
            f"({sandbox.port}) on every node; set sandbox.port instead"
        )
    secrets = spec.required_secrets + spec.optional_secrets
    for name in sorted(set(sandbox.env) & set(secrets)):
        raise ValueError(
            f"sandbox.env.{name}: {name} is one of the job's secrets, which travel by name only "
            "and never reach the sandbox (the code it runs comes from a model); drop it there"
        )
    refuse_credentials(
        sandbox.env,
        "sandbox.env",
        "and the sandbox runs code a model wrote; keep credentials out of it",
    )
    if sandbox.image is not None and any(c in spec.logs.base_dir for c in ",:"):
        raise ValueError(
            f"logs.base_dir: {spec.logs.base_dir!r} holds ',' or ':', which pyxis cannot mount "
            "into the sandbox's container; choose another directory"
        )
    last = sandbox.last_port
    ours = (
        ("sandbox.port", sandbox.port, sandbox.port, f"sandbox.port {sandbox.port}"),
        (
            "sandbox.base_port",
            sandbox.base_port,
            last,
            f"the sandbox's worker ports {sandbox.base_port}-{last} (sandbox.base_port and "
            f"the {SANDBOX_WORKER_PORTS - 1} after it)",
        ),
    )
    for ray_key, first, ray_last in ray_ports(spec):
        for key, low, high, what in ours:
            if low <= ray_last and first <= high:
                ray = f"{first}" if first == ray_last else f"{first}-{ray_last}"
                raise ValueError(
                    f"{key}: {what} overlap {ray_key} ({ray}); the sandbox's ports (now "
                    f"{sandbox.ports()}) must all be outside Ray's: move one of them"
                )


def sandbox_mount_problems(spec: LaunchSpec, cwd: Path, environ: Mapping[str, str]) -> list[str]:
    """Every sandbox mount that would show the sandbox (code a model wrote) what is the job's
    alone, one line each (none when the mounts are safe): its source is logs.base_dir or a
    directory above it (the script every node runs, the Ray token), or it holds or is inside
    nrl-launch's state dir (paths.state_dir: every job's script and, with slurm.secrets_via
    file, the secrets' values). `cwd`: where the job is submitted from (a relative
    logs.base_dir is taken from it); `environ`: the environment that says where the state dir
    is. Every door that queues or checks a job calls this."""
    if spec.sandbox is None or spec.sandbox.image is None:
        return []
    base = os.path.realpath(cwd / spec.logs.base_dir)
    state = os.path.realpath(paths.state_dir(environ))
    found = []
    for mount in spec.sandbox.mounts:
        source = os.path.realpath(cwd / mount.split(":")[0])
        shown, fix = [], []
        if is_under(base, source):
            shown.append(
                f"the job's log dirs (logs.base_dir {base}), whose job.sbatch every node runs "
                "and whose Ray token lets anyone in"
            )
            fix.append("holds no log dir, or move logs.base_dir")
        if is_under(state, source) or is_under(source, state):
            shown.append(
                f"nrl-launch's state dir ({state}), which holds every job's script and the "
                "file of its secrets' values (slurm.secrets_via file)"
            )
            fix.append("neither holds nor is inside that state dir")
        if shown:
            found.append(
                f"sandbox.mounts: {mount} shows the sandbox {' and '.join(shown)}; mount a "
                f"directory that {fix[0] if len(fix) == 1 else 'holds neither'}"
            )
    return found


def ray_sub_sandbox_on(environ: Mapping[str, str]) -> bool:
    """Whether ray.sub's sandbox variables are to be read: ray.sub runs its sandbox only when
    both SANDBOX_CONTAINER and SANDBOX_COMMAND are set, and reads the others only then.

    Raises:
        ValueError: one of the two is set without the other (one line naming both).
    """
    container = environ.get("SANDBOX_CONTAINER", "")
    command = environ.get("SANDBOX_COMMAND", "")
    if bool(container) != bool(command):
        given, missing = (
            ("SANDBOX_CONTAINER", "SANDBOX_COMMAND")
            if container
            else ("SANDBOX_COMMAND", "SANDBOX_CONTAINER")
        )
        raise ValueError(
            f"environment variable {given} is set but {missing} is not: ray.sub runs its sandbox "
            f"only with both; set {missing} too (or sandbox.image and sandbox.command in a job "
            f"file), or unset {given}"
        )
    return bool(container)


def sandbox_env_vars(value: str) -> dict[str, str]:
    """SANDBOX_ENV_VARS: comma-separated NAME=VALUE words, as srun's --export takes them.

    Raises:
        ValueError: a word is not NAME=VALUE (one line).
    """
    pairs = {}
    for word in (w for w in value.split(",") if w):
        name, sep, val = word.partition("=")
        if not sep or not name:
            raise ValueError(
                f"environment variable SANDBOX_ENV_VARS={value!r}: {word!r} is not NAME=VALUE "
                "(comma-separated, as srun --export takes them); or set sandbox.env in a job file"
            )
        pairs[name] = val
    return pairs
