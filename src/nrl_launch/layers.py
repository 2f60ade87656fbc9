"""Layering: where each value of the job spec comes from, in one function (`resolve`).

Precedence, lowest first:

    built-in defaults < profile < job files (-f, in order) < ray.sub env vars < CLI flags < --set

Each layer is a list of settings (dotted key, value, source label); later settings replace
earlier ones at the same key. Every value keeps its source, so `config show --sources` and every
error message can say where a value came from.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from nrl_launch import paths, trust
from nrl_launch.errors import ConfigError
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec_sandbox import (
    RAY_SUB_SANDBOX_ENV,
    exposed_log_mount,
    ray_sub_sandbox_on,
    sandbox_env_vars,
)
from nrl_launch.storage import node_local_root

__all__ = [
    "RAY_SUB_ENV",
    "Resolved",
    "Setting",
    "find_profile",
    "flatten",
    "load",
    "parse_set",
    "resolve",
    "training_warnings",
    "warnings",
]

DEFAULT = "default"

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


@dataclass(frozen=True)
class Setting:
    """One value from one layer: `key` is dotted (`slurm.nodes`), `source` says where from."""

    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class Resolved:
    """The validated spec, the merged raw values, and the source of every value."""

    spec: LaunchSpec
    sources: dict[str, str] = field(default_factory=dict)


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
    """ray.sub's variables that are set and not empty (ray.sub treats empty as unset); one it
    reads that nrl-launch does not take is refused rather than ignored."""
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


def resolve(layers: Sequence[Sequence[Setting]]) -> Resolved:
    """Merge the layers (lowest precedence first), validate once, and keep each value's source."""
    merged = _merge(s for layer in layers for s in layer)
    try:
        spec = LaunchSpec.model_validate(_nest(merged.values()))
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
        ]
    )
    exposed = exposed_log_mount(resolved.spec, cwd)
    if exposed:
        raise ConfigError([exposed])
    return resolved


def describe_errors(exc: ValidationError, merged: Mapping[str, Setting]) -> list[str]:
    """One line per problem: the key, the value given, its source and what is accepted."""
    lines = []
    for err in exc.errors():
        # Drop list indexes and the "[key]" marker of a bad dict key: the path names the key.
        loc = [str(p) for p in err["loc"] if not isinstance(p, int) and p != "[key]"]
        key = ".".join(loc)
        source = _source_of(key, merged)
        origin = f" (from {source})" if source else ""
        if err["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key{origin}{_did_you_mean(loc)}")
            continue
        text = _plain_message(err)
        # A validator that finds several problems in one value says each on a line of its own.
        for line in text.splitlines():
            message = line[:1].lower() + line[1:]
            if not key:  # a rule across sections: its message names the keys
                lines.append(message)
            elif isinstance(err["input"], (dict, list, tuple)) or err["type"] == "missing":
                lines.append(f"{key}: {message}{origin}")
            else:
                got = f"got {err['input']!r}" + (f", from {source}" if source else "")
                lines.append(f"{key}: {message} ({got})")
    return lines


# pydantic's words for a wrong kind of value, in YAML's: YAML has lists and mappings, not
# tuples, dictionaries or Python classes.
_KINDS = {
    "tuple_type": "must be a list, e.g. [a, b]",
    "list_type": "must be a list, e.g. [a, b]",
    "model_type": "must be a mapping of keys (KEY: VALUE)",
    "dict_type": "must be a mapping of keys (KEY: VALUE)",
}


def _plain_message(err: Any) -> str:
    """A pydantic error's message as the user reads it: in YAML's words, with a hint when YAML
    made a boolean of what was meant as a word (`on`, `yes`)."""
    text = _KINDS.get(err["type"]) or str(err["msg"]).removeprefix("Value error, ")
    if isinstance(err.get("input"), bool) and err["type"] in ("literal_error", "enum"):
        text += " (YAML reads yes/no/on/off/true/false as a boolean: quote the word)"
    return text


def _source_of(key: str, merged: Mapping[str, Setting]) -> str | None:
    for k, setting in merged.items():
        if k == key or k.startswith(key + ".") or key.startswith(k + "."):
            return setting.source
    return None


def _did_you_mean(loc: list[str]) -> str:
    model: type[BaseModel] = LaunchSpec
    for part in loc[:-1]:
        info = model.model_fields.get(part)
        annotation = info.annotation if info else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    names = list(model.model_fields)
    close = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (accepted: {', '.join(names)})"


# ---- Warnings: what a valid spec would silently get wrong ----


def warnings(resolved: Resolved, *, cwd: Path, ray: bool = True) -> list[str]:
    """What the job would get wrong without a word from Slurm or the job: one line each.
    `cwd`: where a relative path is taken from (the job is submitted from there). Without
    `ray` the job starts no Ray (run, pull): its ray and sandbox keys are not used."""
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
    # the local backend never runs one, and a profile's mounts are for the cluster's jobs).
    chosen = sources.get("container.runtime", DEFAULT) != DEFAULT or spec.backend == "local"
    if spec.container.mounts and spec.container.runtime == "none" and not chosen:
        found.append(
            f"container.mounts (from {sources['container.mounts']}) are not used: the job runs "
            "without a container; give --container IMAGE, or drop the mounts"
        )
    if ray:
        found += _exposure_warnings(spec)
    found += _cache_warnings(spec)
    base = spec.logs.base_dir
    nodes = spec.allocated_nodes if ray else spec.slurm.nodes  # no Ray, no head of its own
    where = cwd / base  # the job's dir is made from where it is submitted
    root = node_local_root(str(where))
    if nodes > 1 and root is not None:
        here = "" if Path(base).is_absolute() else f", {where} from this directory,"
        found.append(
            f"logs.base_dir {base}{_origin('logs.base_dir', sources)}{here} is local to each node "
            f"({root}): each of the job's {nodes} nodes would write its logs and state where "
            "neither the others nor status and logs can read them; choose a directory every "
            "node shares"
        )
    return found


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
