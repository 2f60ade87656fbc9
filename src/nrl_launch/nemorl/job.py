"""A job spec together with its NeMo RL config: sized, checked and given its driver command.

`prepare` is the one step between the validated spec and the backends: it reads the config
(`nemo_rl.config` and its overrides; for a driver command of its own, the `--config` and the
overrides in its argv, which are what NeMo RL runs), takes the job's nodes and GPUs from it where
the user gave none, passes `cluster.num_nodes` / `cluster.gpus_per_node` to a recipe's driver
where they are missing or differ from the job (to a driver command of the user's own, only the
GPUs per node they gave: the hardware's), builds `uv run <driver> --config FILE OVERRIDES` for
a recipe, and runs the layout checks. Reading files is its only I/O.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nrl_launch.errors import ConfigError
from nrl_launch.nemorl import config as nemo_config
from nrl_launch.nemorl import deadline, driver
from nrl_launch.nemorl.deadline import ddhhmmss_minutes
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.layers import BackendRules, Resolved, Setting, describe_errors
from nrl_launch.spec.lint import log_base_warning
from nrl_launch.storage import is_under, node_local_root

if TYPE_CHECKING:
    from nrl_launch.nemorl.config import NemoConfig
    from nrl_launch.nemorl.layout import Layout

__all__ = [
    "Prepared",
    "ddhhmmss_minutes",
    "driver_workdir",
    "node_local_reason",
    "prepare",
]

_DEFAULT = "default"


@dataclass(frozen=True)
class Prepared:
    """The spec to render, the config's layout (None without a config), and what to say."""

    spec: LaunchSpec
    layout: Layout | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what nrl-launch derived or passed on, one line each
    warnings: tuple[str, ...] = ()
    injected: tuple[str, ...] = ()  # overrides added to the driver's argv
    checkpointing: bool | None = None  # the config's checkpointing.enabled (None: no config)
    checkpoint_dir: str | None = None  # the config's checkpointing.checkpoint_dir, as written
    config: str | None = None  # the config checked, as written (--config, or the driver's)
    steps: tuple[str, int] | None = None  # the config's step count and its key, if it has one
    overrides: tuple[str, ...] = ()  # the overrides it was checked with
    unchecked: str | None = None  # why the config the driver names was not read
    # logger.log_dir and checkpointing.checkpoint_dir where relative to the driver's working
    # dir: a frozen driver (driver.snapshot) runs elsewhere, and is given them made absolute.
    relative_outputs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Source:
    """The config to check: where this machine reads it, as written, and its overrides."""

    path: Path
    shown: str
    overrides: tuple[str, ...]
    driver: str | None = None  # the driver script, when read from the driver's argv


@dataclass
class _Draft:
    spec: LaunchSpec
    sources: dict[str, str]
    backend_rules: BackendRules | None = None
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)

    def given(self, key: str) -> bool:
        return self.sources.get(key, _DEFAULT) != _DEFAULT


def prepare(
    resolved: Resolved,
    *,
    time_limited: bool,
    backend_rules: BackendRules | None = None,
    check: bool | None = None,
) -> Prepared:
    """Apply the NeMo RL config to the spec; raise ConfigError with every problem when checking
    (`check` None: the spec's nemo_rl.check) finds any. `time_limited`: the spec's backend ends
    its jobs at slurm.time (`backends.time_limited`), before which NeMo RL must save;
    `backend_rules`: what it cannot run, checked again once the config has sized the spec
    (`backends.rules.check`)."""
    spec = resolved.spec
    nemo = spec.nemo_rl
    source, said, unchecked = _source(resolved)
    cfg = None
    if source is not None:
        what = "--config" if source.driver is None else "the driver's --config"
        try:
            cfg = nemo_config.load(source.path, source.overrides, what=what)
            if source.driver is not None and not cfg.present("cluster"):
                unchecked = f"the driver's --config {source.shown} has no cluster: section"
        except ConfigError as exc:
            if source.driver is None:
                raise
            # A run_*.py script of the job's own may read --config its own way.
            unchecked = f"the driver's --config {source.shown} is not a NeMo RL config ({exc})"
        if unchecked is not None and source.driver is not None:
            unchecked += ", so it is not read as NeMo RL's"
    if source is None or cfg is None or (unchecked is not None and source.driver is not None):
        notes = [f"{unchecked}: its config is not checked"] if unchecked else []
        return Prepared(
            spec=spec,
            notes=tuple(notes),
            warnings=(*said, *_storage_warnings(spec, None)),
            unchecked=unchecked,
        )
    draft = _Draft(spec, dict(resolved.sources), backend_rules)
    extra = _extra_nodes(cfg)
    # A recipe's command is built here, so the job's sizes are passed to it. A driver command
    # of the user's own is theirs: only the GPUs per node they gave (the hardware's, as NeMo
    # RL's launchers pass it from the allocation) are appended, where they reach the driver.
    own_argv = (
        source.driver is not None
        and spec.driver.command is not None
        and driver.takes_appended(spec.driver.command, nemo.drivers.values())
    )
    _size(draft, cfg, "nodes", extra, source.shown, pass_on=nemo.recipe is not None)
    _size(
        draft,
        cfg,
        "gpus_per_node",
        0,
        source.shown,
        pass_on=nemo.recipe is not None or own_argv,
    )
    _segment(draft, cfg, source.shown)
    deadline = _deadline(draft, cfg, time_limited)
    if draft.injected:
        cfg = nemo_config.load(source.path, [*source.overrides, *draft.injected], what=what)
    # Sizing loads only with a NeMo RL config: render without one stays light (test_imports).
    from nrl_launch.nemorl.layout import compute

    layout = compute(cfg.value, cfg.present, cfg.raw)
    problems = [*draft.problems, *layout.problems, *_job_fits(draft, layout)]
    warnings = [
        *said,
        *_log_base_warning(resolved, draft),
        *_disabled_warnings(source, cfg),
        *_algorithm_warning(nemo.recipe, source, cfg),
        *_storage_warnings(draft.spec, cfg),
        *deadline,
    ]
    if (nemo.check if check is None else check) and problems:
        raise ConfigError(problems)
    return Prepared(
        spec=_with_command(draft),
        layout=layout,
        problems=tuple(problems),
        notes=tuple(draft.notes),
        warnings=tuple(warnings),
        injected=tuple(draft.injected),
        checkpointing=cfg.value("checkpointing.enabled", False) is True,
        checkpoint_dir=d
        if isinstance(d := cfg.value("checkpointing.checkpoint_dir", None), str)
        else None,
        config=source.shown,
        steps=_steps(nemo.recipe, source, cfg),
        overrides=source.overrides,
        relative_outputs=tuple(
            (key, value)
            for key in ("logger.log_dir", "checkpointing.checkpoint_dir")
            if isinstance(value := cfg.value(key, None), str) and value and value[0] != "/"
        ),
    )


def _source(resolved: Resolved) -> tuple[_Source | None, list[str], str | None]:
    """The config to check and its overrides, what to warn about them, and why a config the
    driver names cannot be read here. A driver command of the job's own that gives NeMo RL's
    driver `--config FILE` runs that file with the overrides after it: those are checked (the
    file through nemo_rl.config when the driver's path cannot be read on this machine)."""
    spec = resolved.spec
    nemo = spec.nemo_rl
    given = None
    if nemo.config is not None:
        given = _Source(Path(nemo.config), nemo.config, nemo.overrides)
    found = None
    if nemo.recipe is None and spec.driver.command:
        found = driver.read(spec.driver.command, nemo.drivers.values())
    if found is None:
        return given, [], None
    path, why = _host_path(spec, found.config)
    warnings = []
    if path is not None:
        source = _Source(path, found.config, found.overrides, found.script)
        if given is not None and given.path.resolve() != path.resolve():
            label = resolved.sources.get("nemo_rl.config", "nemo_rl.config")
            warnings.append(
                f"nemo_rl.config {nemo.config} (from {label}) is not the driver's --config "
                f"{found.config}: checking the driver's, which NeMo RL runs"
            )
    elif given is not None:  # this machine's copy of the driver's config, read with its argv
        source = _Source(given.path, given.shown, found.overrides, found.script)
    else:
        return None, [], f"the driver's --config {found.config} is not readable here ({why})"
    left_out = [o for o in nemo.overrides if o not in found.overrides]
    if left_out:
        warnings.append(
            f"nemo_rl.overrides {' '.join(left_out)} are not in the driver's command: not "
            "checked (the driver's own overrides are what NeMo RL runs)"
        )
    return source, warnings, None


def _host_path(spec: LaunchSpec, written: str) -> tuple[Path | None, str]:
    """Where this machine reads the file `written` in the driver's argv names (relative to the
    driver's working directory, inside the container with one), or None and why not."""
    workdir = driver_workdir(spec)
    path = written if workdir is None else posixpath.join(workdir, written)
    if path.startswith("/") and spec.container.runtime == "pyxis":
        mounts = [m for m in spec.container.mounts if is_under(path, m.dst)]
        if not mounts:
            return None, f"{path} is inside the container, under no mount"
        mount = max(mounts, key=lambda m: len(m.dst))
        path = mount.src.rstrip("/") + path[len(mount.dst.rstrip("/")) :]
    if not Path(path).is_file():
        return None, f"no file {path}"
    return Path(path), ""


def _log_base_warning(resolved: Resolved, draft: _Draft) -> list[str]:
    """A node-local log base dir, once the config has given the job several nodes: the spec as
    resolved had one, so nothing was said of it (`lint.warnings`)."""
    cwd = Path.cwd()  # where the job is submitted from, as lint takes it
    sized = log_base_warning(draft.spec, draft.sources, cwd=cwd)
    if sized is None or log_base_warning(resolved.spec, resolved.sources, cwd=cwd) is not None:
        return []
    return [sized]


def _disabled_warnings(source: _Source, cfg: NemoConfig) -> list[str]:
    """NeMo RL disables a recipe by renaming it *.yaml.disabled: its nightly tests stop
    running it, so it may no longer work with the NeMo RL it ships in."""
    warnings = []
    for path in cfg.files:  # the config first, then its defaults
        if path.name.endswith(".disabled"):
            name = source.shown
            if path != cfg.path:
                name = f"{path} (in the defaults of {source.shown})"
            warnings.append(
                f"{name}: NeMo RL has disabled this config (renamed *.disabled): its nightly "
                "tests no longer run it, so it may not work"
            )
    return warnings


def _runs(recipe: str | None, source: _Source) -> tuple[str | None, str]:
    """The algorithm the recipe (or driver) runs, if its name says, and who runs it."""
    if recipe is not None:
        return driver.algorithm_of_recipe(recipe), f"recipe {recipe}"
    if source.driver is not None:
        return driver.algorithm_of_script(source.driver), f"driver {source.driver}"
    return None, ""


def _steps(recipe: str | None, source: _Source, cfg: NemoConfig) -> tuple[str, int] | None:
    """The config's step count as its overrides leave it (`grpo.max_num_steps`), and its key."""
    key = driver.steps_key(_runs(recipe, source)[0], cfg.present)
    steps = cfg.value(key, None) if key else None
    return (key, steps) if key and isinstance(steps, int) and not isinstance(steps, bool) else None


def _algorithm_warning(recipe: str | None, source: _Source, cfg: NemoConfig) -> list[str]:
    """A recipe (or driver) of one algorithm given another's config: `sft --config grpo.yaml`."""
    want, who = _runs(recipe, source)
    if not who:
        return []
    has = driver.config_algorithms(cfg.present)
    if want is None or not has or want in has:
        return []
    return [
        f"{who} runs {want}, but the config {source.shown} is for {' and '.join(has)} "
        f"(it has no {want}: section): check the recipe and the config"
    ]


def _extra_nodes(cfg: NemoConfig) -> int:
    gym = cfg.value("env.nemo_gym.num_gpu_nodes", 0)
    return gym if isinstance(gym, int) and not isinstance(gym, bool) and gym > 0 else 0


def _size(
    draft: _Draft, cfg: NemoConfig, what: str, extra: int, shown: str, *, pass_on: bool
) -> None:
    """Match slurm.<what> and cluster.<what> (nodes: num_nodes, beyond which `extra` nodes run).
    `pass_on`: where the job's value differs, pass it to the driver (else _job_fits says so)."""
    spec_key, cfg_key = f"slurm.{what}", f"cluster.{'num_nodes' if what == 'nodes' else what}"
    in_cfg = cfg.value(cfg_key, None)
    valid = isinstance(in_cfg, int) and not isinstance(in_cfg, bool) and in_cfg >= 1
    in_cfg = in_cfg if valid else None
    job_value = getattr(draft.spec.slurm, what)
    if not draft.given(spec_key):
        if in_cfg is None:
            return  # not set, or not a size: the layout says which, in one line
        _set(draft, spec_key, in_cfg + extra, f"{cfg_key} in {shown}")
        draft.notes.append(
            f"{spec_key}={in_cfg + extra}: from {cfg_key}={in_cfg}"
            + (f" + {extra} NeMo Gym GPU node(s)" if extra else "")
        )
        return
    want = job_value - extra
    source = draft.sources[spec_key]
    if want < 1:
        draft.problems.append(
            f"{spec_key}={job_value} (from {source}) leaves no node for training: the config "
            f"takes {extra} node(s) for NeMo Gym"
        )
        return
    if in_cfg == want:
        return
    override = cfg.set_by_override(cfg_key)
    if override is not None:  # two things the user said: refused even with --no-check
        raise ConfigError(
            [
                f"{spec_key}={job_value} (from {source}) contradicts the override "
                f"{override.text!r}"
                + (f" (+ {extra} NeMo Gym node(s))" if extra else "")
                + ": drop one of them"
            ]
        )
    if not pass_on:
        return  # the driver command is the user's: _job_fits says what does not match
    draft.injected.append(f"++{cfg_key}={want}")
    was = "is not in the config" if in_cfg is None else f"is {in_cfg} in the config"
    draft.notes.append(
        f"{cfg_key} {was}; the job has {want} ({source}): passing ++{cfg_key}={want}"
    )


def _segment(draft: _Draft, cfg: NemoConfig, shown: str) -> None:
    """NeMo RL's cluster.segment_size and sbatch's --segment (slurm.segment) say the same, or
    NeMo RL places its workers by segments Slurm did not make (NeMo RL's docs: set both); the
    job's nodes, a dedicated head's included, must make whole segments (sbatch refuses them
    otherwise)."""
    key, cfg_key = "slurm.segment", "cluster.segment_size"
    in_cfg = cfg.value(cfg_key, None)
    in_cfg = in_cfg if isinstance(in_cfg, int) and not isinstance(in_cfg, bool) else None
    if in_cfg is not None and in_cfg >= 1 and not draft.given(key):
        _set(draft, key, in_cfg, f"{cfg_key} in {shown}")
        draft.notes.append(f"{key}={in_cfg}: from {cfg_key}={in_cfg} (sbatch --segment)")
    segment = draft.spec.slurm.segment
    if segment is None:
        return
    if in_cfg != segment:
        if draft.spec.nemo_rl.recipe is not None and in_cfg is None:
            draft.injected.append(f"++{cfg_key}={segment}")
            draft.notes.append(f"{cfg_key} is not in the config; passing ++{cfg_key}={segment}")
        else:
            draft.problems.append(
                f"{key}={segment} (from {draft.sources.get(key, 'default')}) but the config has "
                f"{cfg_key}={in_cfg}: NeMo RL places its workers by the segments Slurm makes, "
                "so set both to one value"
            )
    nodes = draft.spec.allocated_nodes
    if nodes % segment:
        head = (
            ", a dedicated Ray head included (it breaks the segments: drop it)"
            if draft.spec.ray.dedicated_head
            else ""
        )
        draft.problems.append(
            f"{key}={segment}: the job's {nodes} nodes{head} are not whole segments of "
            f"{segment}; sbatch --segment needs a multiple of it"
        )


def _set(draft: _Draft, key: str, value: Any, source: str) -> None:
    section, name = key.split(".")
    data = draft.spec.model_dump()
    data[section][name] = value
    draft.spec = _validated(data, {key: Setting(key, value, source)}, draft.backend_rules)
    draft.sources[key] = source


def _validated(
    data: dict[str, Any], merged: dict[str, Setting], backend_rules: BackendRules | None
) -> LaunchSpec:
    try:
        return LaunchSpec.model_validate(data, context={"backend_rules": backend_rules})
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, merged)) from None


def _deadline(draft: _Draft, cfg: NemoConfig, time_limited: bool) -> list[str]:
    """NeMo RL's save before the job's end (nemorl/deadline.py): its notes, and its warnings
    returned; nemo_rl.save_by_job_end turned on where the node is to set it."""
    decision = deadline.decide(draft.spec, cfg, time_limited=time_limited)
    if decision.manage and draft.spec.nemo_rl.save_by_job_end is None:
        _set(draft, "nemo_rl.save_by_job_end", True, "nemo_rl.checkpoint_margin_min")
    draft.notes.extend(decision.notes)
    return list(decision.warnings)


def _job_fits(draft: _Draft, layout: Layout) -> list[str]:
    if not layout.cluster_nodes:
        return []
    slurm, problems = draft.spec.slurm, []
    if slurm.nodes != layout.nodes:
        extra = "".join(f" + {n} {why}" for n, why in layout.extra_nodes)
        problems.append(
            f"slurm.nodes={slurm.nodes} (from {draft.sources.get('slurm.nodes')}) but the config "
            f"needs {layout.nodes} node(s) (cluster.num_nodes={layout.cluster_nodes}{extra}): "
            f"use --nodes {layout.nodes}, or pass cluster.num_nodes to the driver"
        )
    if slurm.gpus_per_node != layout.gpus_per_node:
        problems.append(
            f"slurm.gpus_per_node={slurm.gpus_per_node} (from "
            f"{draft.sources.get('slurm.gpus_per_node')}) but the config has "
            f"cluster.gpus_per_node={layout.gpus_per_node}: use --gpus-per-node "
            f"{layout.gpus_per_node}, or pass cluster.gpus_per_node to the driver"
        )
    return problems


def _with_command(draft: _Draft) -> LaunchSpec:
    nemo = draft.spec.nemo_rl
    if nemo.recipe is None:
        if not draft.injected:
            return draft.spec
        data = draft.spec.model_dump()  # the user's own driver argv, with what _size passes
        data["driver"]["command"] = [*(draft.spec.driver.command or ()), *draft.injected]
        return _validated(data, {}, draft.backend_rules)
    command = [
        *nemo.launcher,
        nemo.drivers[nemo.recipe],
        "--config",
        str(nemo.config),
        *nemo.overrides,
        *draft.injected,
    ]
    data = draft.spec.model_dump()
    data["driver"]["command"] = command
    # The command is built: the spec now runs it as given (nemo_rl keeps the config and the
    # user's overrides, to say where the command came from).
    data["nemo_rl"]["recipe"] = None
    return _validated(data, {}, draft.backend_rules)


def node_local_reason(path: str, spec: LaunchSpec) -> str | None:
    """Why `path` (as the job's nodes see it) is not shared between nodes, or None."""
    if not path.startswith("/"):
        workdir = driver_workdir(spec)
        if workdir is None:
            return None
        reason = node_local_reason(workdir, spec)
        return (
            f"it is relative to the driver's working directory {workdir}, and {reason}"
            if reason
            else None
        )
    root = node_local_root(path)
    if root is not None:
        return f"{root} is local to each node"
    if spec.container.runtime == "pyxis":
        mounted = [m.dst for m in spec.container.mounts] + spec.caches.roots()
        if not any(is_under(path, d) for d in mounted):
            return "it is inside the container (under no mount), so each node has its own"
    return None


def driver_workdir(spec: LaunchSpec) -> str | None:
    """The driver's working directory, as the job's nodes see it (inside the container with
    one): driver.workdir, else container.workdir, else None for the submit dir."""
    if spec.driver.workdir:
        return spec.driver.workdir
    if spec.container.runtime == "pyxis" and spec.container.workdir:
        return spec.container.workdir
    return None  # the submit dir: the job's own log dir lives there, so it is shared


def _storage_warnings(spec: LaunchSpec, cfg: NemoConfig | None) -> list[str]:
    """What the job would leave open or unshared: Ray without auth, node-local storage."""
    warnings = []
    if spec.ray.auth == "off":
        warnings.append(
            "ray.auth is off: anyone who can reach the job's Ray ports can run code as you "
            "(turn it off only for Ray older than 2.52)"
        )
    checks = [(f"caches ({name})", path) for name, path in spec.caches.env().items()]
    if cfg is not None:
        for key in ("logger.log_dir", "checkpointing.checkpoint_dir"):
            value = cfg.value(key, None)
            if isinstance(value, str) and value:
                checks.append((key, value))
    for what, path in checks:
        reason = node_local_reason(path, spec)
        if reason:
            warnings.append(f"{what} {path} is not on storage every node shares: {reason}")
    return warnings
