"""Layering: where each value of the job spec comes from, in one function (`resolve`).

Precedence, lowest first:

    built-in defaults < profile < job files (-f, in order) < ray.sub env vars < CLI flags < --set

(NeMo RL's pool variables, EXTERNAL_VLLM_POOLS and <POOL>_*, are read with ray.sub's.)

Each layer is a list of settings (dotted key, value, source label); later settings replace
earlier ones at the same key. Every value keeps its source, so `config show --sources` and every
error message can say where a value came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nrl_launch import paths, trust
from nrl_launch.errors import ConfigError
from nrl_launch.spec import external_pools
from nrl_launch.spec.describe import describe_errors
from nrl_launch.spec.launch import BackendRules, LaunchSpec
from nrl_launch.spec.sandbox import (
    RAY_SUB_SANDBOX_ENV,
    ray_sub_sandbox_on,
    sandbox_env_vars,
)
from nrl_launch.spec.setting import DEFAULT, Resolved, Setting

__all__ = [
    "DEFAULT",
    "RAY_SUB_ENV",
    "BackendRules",
    "Resolved",
    "Setting",
    "describe_errors",
    "find_profile",
    "flatten",
    "load",
    "parse_set",
    "resolve",
]

# ray.sub's environment variables, so that existing launch scripts keep working.
RAY_SUB_ENV: dict[str, str] = {
    "CONTAINER": "container.image",
    "MOUNTS": "container.mounts",
    "COMMAND": "driver.command",
    "SETUP_COMMAND": "setup",
    "GPUS_PER_NODE": "slurm.gpus_per_node",
    "CPUS_PER_WORKER": "slurm.cpus_per_node",
    "BASE_LOG_DIR": "logs.base_dir",
    "UV_CACHE_DIR_OVERRIDE": "caches.uv",
    "PORT": "ray.ports.gcs",
    "RAY_CLIENT_SERVER_PORT": "ray.ports.client_server",
    "DASHBOARD_PORT": "ray.ports.dashboard",
    "DASHBOARD_AGENT_LISTEN_PORT": "ray.ports.dashboard_agent_listen",
    "DASHBOARD_AGENT_GRPC_PORT": "ray.ports.dashboard_agent_grpc",
    "NODE_MANAGER_PORT": "ray.ports.node_manager",
    "OBJECT_MANAGER_PORT": "ray.ports.object_manager",
    "RUNTIME_ENV_AGENT_PORT": "ray.ports.runtime_env_agent",
    "METRICS_EXPORT_PORT": "ray.ports.metrics_export",
    "MIN_WORKER_PORT": "ray.ports.worker_min",
    "MAX_WORKER_PORT": "ray.ports.worker_max",
    "RAY_LOG_SYNC_FREQUENCY": "ray.log_sync_s",
    # Only its value `legacy` is ray.sub's (Ray's external debugger); other values are Ray's own
    # and reach the job as they are.
    "RAY_DEBUG": "ray.external_debugger",
    # 1 or 0, as ray.sub checks it. Unlike ray.sub, the head is a node more than slurm.nodes.
    "DEDICATED_RAY_HEAD": "ray.dedicated_head",
    # The sandbox's: read only with both SANDBOX_CONTAINER and SANDBOX_COMMAND set (as ray.sub).
    **RAY_SUB_SANDBOX_ENV,
}

# ray.sub variables nrl-launch does not take, each refused with the reason when set to what
# would change the job: (the values that are fine, what to do instead).
RAY_SUB_REFUSED: dict[str, tuple[tuple[str, ...], str]] = {
    "RAY_SUB_DEBUG_ENV": (
        ("", "0"),
        "nrl-launch never prints the job's environment (it holds secrets); see it with "
        "`nrl-launch attach JOB -- env`, and unset RAY_SUB_DEBUG_ENV",
    ),
    "NRL_DEDICATED_RAY_HEAD": (
        ("",),
        "this is ray.sub's own variable for its head node; set in your shell it would reach "
        "every node, and no node would offer its GPUs; unset it",
    ),
}

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*")


class _YamlLoader(yaml.SafeLoader):
    """YAML as users mean it in a job file: `1:30` is a time, not the base-60 int 90, and a key
    given twice is a mistake (YAML would keep the last: a second `slurm:` drops the first's)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges; a key given beside it wins, as it should
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue
            if key in first:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"{key!r} is given twice (first at line {first[key] + 1})",
                    key_node.start_mark,
                )
            first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YamlLoader.add_implicit_resolver(
    _INT, re.compile(r"^[-+]?(?:0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$"), list("-+0123456789")
)
_YamlLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def load_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; every failure is one ConfigError line."""
    text = paths.read_config_text(path, f"{what} {path}")
    try:
        data = yaml.load(text, Loader=_YamlLoader)
    except RecursionError:
        raise ConfigError([f"{what} {path}: nested too deeply to be a job spec"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([f"{what} {path}: invalid YAML{where}: {problem}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{what} {path}: must be a mapping of keys, got a {type(data).__name__}"]
        )
    return data


def find_profile(flag: Path | None, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """The profile to use: --profile, else $NRL_LAUNCH_PROFILE, else ./nrl-launch.yaml, else
    the user config dir. A profile that was asked for by name must exist."""
    # One that exists but is no file (a directory, a FIFO) is said so when it is read.
    if flag is not None:
        if not flag.exists():
            raise ConfigError([f"--profile {flag}: no such file"])
        return flag
    named = environ.get(paths.PROFILE_ENV)
    if named:
        if not Path(named).exists():
            raise ConfigError([f"{paths.PROFILE_ENV}={named}: no such file"])
        return Path(named)
    for candidate in (cwd / paths.PROFILE_NAME, paths.user_profile(environ)):
        if candidate.is_file():
            # Found, not named: used only if it is yours alone. Its setup runs on every node.
            why = trust.not_mine(candidate)
            if why:
                raise ConfigError(
                    [
                        f"profile {candidate}: {why}: its setup command would run on every node "
                        "of your job, as you; remove it (or fix its owner and mode), or name a "
                        "profile with --profile FILE"
                    ]
                )
            return candidate
    return None


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, dotted + ".")
        else:
            yield dotted, value


# A NeMo RL driver config's own sections: a file holding them (and no job spec key) was meant
# for --config.
NEMO_RL_SECTIONS = ("policy", "cluster", "grpo", "sft", "dpo", "checkpointing", "loss_fn", "data")


def file_settings(path: Path, what: str) -> list[Setting]:
    """The settings of a profile or job file, each labelled with the file it came from."""
    data = load_yaml_mapping(path, what)
    bad = [str(k) for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError([f"{what} {path}: key {bad[0]!r} must be a string"])
    nemo = [k for k in NEMO_RL_SECTIONS if k in data]
    if nemo and not set(data) & set(LaunchSpec.model_fields) - {"env"}:
        shown = ", ".join(f"{k}:" for k in nemo[:3])
        raise ConfigError(
            [
                f"{what} {path} looks like a NeMo RL config ({shown}), not an nrl-launch job "
                f"spec: give it with --config {path}"
            ]
        )
    return [Setting(k, v, f"{what} {path}") for k, v in flatten(data)]


def env_settings(environ: Mapping[str, str]) -> list[Setting]:
    """ray.sub's variables that are set and not empty (ray.sub treats empty as unset), and NeMo
    RL's pool contract (`external_pools`); one they read that nrl-launch does not take is
    refused rather than ignored."""
    for name, (fine, why) in RAY_SUB_REFUSED.items():
        if environ.get(name, "") not in fine:
            raise ConfigError([f"environment variable {name}={environ[name]!r}: {why}"])
    settings = []
    try:
        sandbox = ray_sub_sandbox_on(environ)
        for name, key in RAY_SUB_ENV.items():
            value = environ.get(name)
            if not value or (name in RAY_SUB_SANDBOX_ENV and not sandbox):
                continue
            parsed = _ray_sub_value(name, value)
            if parsed is not None:
                settings.append(Setting(key, parsed, f"env {name}"))
        # NeMo RL's external vLLM pools (pool_config.sh's EXTERNAL_VLLM_POOLS and <POOL>_*).
        settings += external_pools.pool_settings(environ)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    return settings


def _ray_sub_value(name: str, value: str) -> Any:
    """The key's value for ray.sub variable `name` set to `value` (not empty); None: not a value
    of ray.sub's (the variable is left to what else reads it).

    Raises:
        ValueError: a value ray.sub itself would refuse (one line).
    """
    if name in ("MOUNTS", "SANDBOX_EXTRA_MOUNTS"):
        return [m for m in value.split(",") if m]
    if name in ("COMMAND", "SANDBOX_COMMAND"):
        return ["bash", "-c", value]  # ray.sub's commands are shell strings
    if name == "SANDBOX_ENV_VARS":
        return sandbox_env_vars(value)
    if name == "RAY_DEBUG":
        return True if value == "legacy" else None
    if name == "DEDICATED_RAY_HEAD":
        if value not in ("0", "1"):
            raise ValueError(
                f"environment variable {name}={value!r}: must be 0 or 1, as for ray.sub "
                "(or set ray.dedicated_head, --dedicated-head)"
            )
        return value == "1"
    return value


def parse_set(items: Sequence[str]) -> list[Setting]:
    """`--set key.path=value` items. Values are read as YAML, by the same rules as job files."""
    settings = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise ConfigError(
                [f"--set {item!r}: expected KEY.PATH=VALUE, e.g. --set slurm.nodes=4"]
            )
        try:
            value = yaml.load(raw, Loader=_YamlLoader) if raw.strip() else raw
        except (yaml.YAMLError, RecursionError):
            value = raw  # not YAML: take the text as it is
        settings.append(Setting(key, value, f"--set {key}"))
    return settings


def _merge(layers: Iterable[Setting]) -> dict[str, Setting]:
    merged: dict[str, Setting] = {}
    for setting in layers:
        key = setting.key
        # A new value replaces what was under it and any scalar above it.
        for old in [k for k in merged if k.startswith(key + ".") or key.startswith(k + ".")]:
            del merged[old]
        merged[key] = setting
    return merged


def _nest(settings: Iterable[Setting]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for s in settings:
        *parents, leaf = s.key.split(".")
        node = root
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = s.value
    return root


def resolve(
    layers: Sequence[Sequence[Setting]], *, backend_rules: BackendRules | None = None
) -> Resolved:
    """Merge the layers (lowest precedence first), validate once, and keep each value's source.
    `backend_rules`: what the spec's backend cannot run (`backends.rules.check`)."""
    merged = _merge(s for layer in layers for s in layer)
    context = {"backend_rules": backend_rules}
    try:
        spec = LaunchSpec.model_validate(_nest(merged.values()), context=context)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, merged)) from None
    sources = {key: DEFAULT for key, _ in flatten(spec.model_dump(mode="json"))}
    for key, setting in merged.items():
        for known in [k for k in sources if k == key or k.startswith(key + ".")]:
            sources[known] = setting.source
    return Resolved(spec=spec, sources=dict(sorted(sources.items())))


def load(
    *,
    profile: Path | None,
    job_files: Sequence[Path] = (),
    environ: Mapping[str, str],
    cwd: Path,
    flags: Sequence[Setting],
    sets: Sequence[str],
    base: Sequence[Setting] = (),
    backend_rules: BackendRules | None = None,
) -> Resolved:
    """Read every layer and resolve the spec. The order of this list is the precedence.

    `base` sits just above the built-in defaults: a command's own defaults (doctor and plan
    need no driver, so they default to an interactive job). Several job files are layered in
    their order: a later one's values replace an earlier one's.
    """
    profile_path = find_profile(profile, environ, cwd)
    resolved = resolve(
        [
            base,
            file_settings(profile_path, "profile") if profile_path else [],
            *(file_settings(job_file, "job file") for job_file in job_files),
            env_settings(environ),
            flags,
            parse_set(sets),
        ],
        backend_rules=backend_rules,
    )
    # What NeMo RL's pool contract says of the whole job: its node counts and mounted paths.
    problems = external_pools.checks(resolved, environ)
    if problems:
        raise ConfigError(problems)
    return resolved
