"""Reading a NeMo RL driver config the way NeMo RL's drivers do, without importing NeMo RL.

A driver loads `--config FILE` with OmegaConf; a `defaults:` key (one path or a list, relative to
the file that names it) pulls in parents, loaded the same way and merged depth first, later ones
winning, the child last; a top-level mapping with `_override_: true` replaces what it is merged
onto instead of merging into it (nemo_rl/utils/config.py, `merge_with_override`). The remaining
argv are Hydra overrides, applied in struct mode:

    key=value     the key must exist
    +key=value    the key must not exist
    ++key=value   set it either way
    ~key          delete it (`~key=value`: only if it holds that value)

Interpolations (`${policy.max_total_sequence_length}`, `${mul:a,b}`) stay as they are in the
text the driver receives; `value()` resolves them as NeMo RL does, with its resolvers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrl_launch.errors import ConfigError
from nrl_launch.paths import read_config_text

__all__ = ["MISSING", "NemoConfig", "Override", "load", "parse_override"]

_OVERRIDE = re.compile(
    r"(?P<op>\+\+|\+|~)?(?P<key>[A-Za-z0-9_][A-Za-z0-9_.\-]*)(?:=(?P<value>.*))?", re.DOTALL
)
_KEY_PART = re.compile(r"[A-Za-z0-9_\-]+")


class _Missing:
    """A key the config does not have (or holds `???`, or an interpolation that cannot resolve)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Override:
    """One Hydra override as given (`text` is what the driver receives, unchanged)."""

    text: str
    op: str  # "", "+", "++" or "~"
    key: str
    value: Any  # parsed as Hydra would; None for a bare ~key

    def touches(self, key: str) -> bool:
        return self.key == key or key.startswith(self.key + ".")


@dataclass(frozen=True)
class NemoConfig:
    """A loaded config: the merged tree (OmegaConf DictConfig) and where it came from."""

    path: Path
    files: tuple[Path, ...]  # the config and every parent it pulled in, child first
    overrides: tuple[Override, ...]
    tree: Any  # omegaconf.DictConfig

    def value(self, key: str, default: Any = MISSING) -> Any:
        """The resolved value at dotted `key`, or `default` when absent, `???` or unresolvable."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        try:
            found = OmegaConf.select(self.tree, key, default=MISSING, throw_on_missing=False)
        except OmegaConfBaseException:
            return default
        if found is MISSING or found == "???":
            return default
        if OmegaConf.is_config(found):
            try:
                return OmegaConf.to_container(found, resolve=True)
            except OmegaConfBaseException:
                return default
        return found

    def has(self, key: str) -> bool:
        from omegaconf import OmegaConf

        return _has(self.tree, key, OmegaConf)

    def present(self, key: str) -> bool:
        """`key` is there and not null, whether or not its interpolations resolve."""
        node = self._node(key)
        return node is not None and not node._is_none()

    def raw(self, key: str) -> Any:
        """The value at `key` as written, unresolved (an interpolation's text), or MISSING."""
        node = self._node(key)
        return MISSING if node is None else node._value()

    def _node(self, key: str) -> Any:
        """The OmegaConf node at `key`, unresolved, or None where there is none."""
        from omegaconf import OmegaConf

        if not _has(self.tree, key, OmegaConf):
            return None
        node = self.tree
        for part in key.split("."):
            node = node._get_node(part)
        return node

    def set_by_override(self, key: str) -> Override | None:
        """The last override the user gave that sets `key` (or a mapping above it)."""
        for override in reversed(self.overrides):
            if override.touches(key) and override.op != "~":
                return override
        return None


def _resolvers() -> None:
    """NeMo RL's resolvers, registered once (its configs compute sizes with them)."""
    from omegaconf import OmegaConf

    # omegaconf 2.4 renamed register_new_resolver (2.1-2.3) to register_resolver, which in
    # 2.3 and before is an older API with other semantics.
    register = (
        OmegaConf.register_resolver
        if _omegaconf_at_least(2, 4)
        else OmegaConf.register_new_resolver
    )
    for name, func in (("mul", _mul), ("add", _add), ("div", _div), ("max", _max)):
        if not OmegaConf.has_resolver(name):
            register(name, func)


def _omegaconf_at_least(major: int, minor: int) -> bool:
    import omegaconf

    parts = omegaconf.__version__.split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def _mul(a: Any, b: Any) -> Any:
    return a * b


def _add(a: Any, b: Any) -> Any:
    return a + b


def _div(a: Any, b: Any) -> Any:
    return a / b


def _max(a: Any, b: Any) -> Any:
    return max(a, b)


def load(path: Path, overrides: Sequence[str] = (), *, what: str = "--config") -> NemoConfig:
    """Load `path` and its `defaults:` chain, then apply `overrides`; one line per problem."""
    from omegaconf import OmegaConf

    _resolvers()
    files: list[Path] = []
    tree = _load_tree(path, what, files, ())
    _not_a_job_file(tree, path, what)
    parsed = [parse_override(text) for text in overrides]
    OmegaConf.set_struct(tree, True)
    problems = []
    for override in parsed:
        problem = _apply(tree, override)
        if problem:
            problems.append(f"override {override.text!r}: {problem}")
    if problems:
        raise ConfigError(problems)
    return NemoConfig(path=path, files=tuple(files), overrides=tuple(parsed), tree=tree)


# The sections of an nrl-launch job file that a NeMo RL config never has.
_JOB_SPEC_SECTIONS = ("slurm", "ray", "container", "driver", "sandbox", "nemo_rl", "logs", "caches")
_NEMO_RL_SECTIONS = ("policy", "cluster", "grpo", "sft", "dpo", "checkpointing", "loss_fn")


def _not_a_job_file(tree: Any, path: Path, what: str) -> None:
    """A job file given where the NeMo RL config goes: one line saying so."""
    spec = [k for k in _JOB_SPEC_SECTIONS if k in tree]
    if spec and not any(k in tree for k in _NEMO_RL_SECTIONS):
        shown = ", ".join(f"{k}:" for k in spec[:3])
        raise ConfigError(
            [
                f"{what} {path} looks like an nrl-launch job file ({shown}), not a NeMo RL "
                f"config: give it with -f {path}"
            ]
        )


def _load_tree(path: Path, what: str, files: list[Path], chain: tuple[Path, ...]) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    label = f"{what} {path}" if not chain else f"{path} (in the defaults of {chain[-1]})"
    real = path.resolve()
    if real in chain:
        loop = " -> ".join(str(p) for p in (*chain, real))
        raise ConfigError([f"{label}: defaults form a loop: {loop}"])
    text = read_config_text(path, label)
    try:
        tree = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())[:200]
        raise ConfigError([f"{label}: invalid YAML{where}: {problem}"]) from None
    except OmegaConfBaseException as exc:
        first = " ".join(str(exc).split())[:200]
        raise ConfigError([f"{label}: cannot be read as a config: {first}"]) from None
    except RecursionError:
        raise ConfigError([f"{label}: nested too deeply to be a config"]) from None
    if not isinstance(tree, DictConfig):
        raise ConfigError([f"{label}: must be a mapping of keys, got a list"])
    files.append(path)
    if "defaults" not in tree:
        return tree
    defaults = tree.pop("defaults")
    if isinstance(defaults, str):
        parents = [defaults]
    elif isinstance(defaults, ListConfig) and all(isinstance(d, str) for d in defaults):
        parents = [str(d) for d in defaults]
    else:
        raise ConfigError([f"{label}: defaults must be a path or a list of paths"])
    merged = OmegaConf.create({})
    for parent in parents:
        parent_tree = _load_tree(path.parent / parent, what, files, (*chain, real))
        merged = _merge(merged, parent_tree)
    return _merge(merged, tree)


def _merge(base: Any, child: Any) -> Any:
    """OmegaConf.merge as NeMo RL's `merge_with_override` does it: a top-level mapping of `child`
    marked `_override_: true` replaces the one in `base` instead of merging into it (a marker
    deeper down is an ordinary key), and `???` in `child` keeps what `base` has."""
    from omegaconf import DictConfig, OmegaConf

    for key in list(child.keys()):
        if OmegaConf.is_missing(child, key):
            continue
        value = child._get_node(key)
        if isinstance(value, DictConfig) and value.get("_override_", False):
            value.pop("_override_")
            if key in base:
                base.pop(key)
    return OmegaConf.merge(base, child)


def parse_override(text: str) -> Override:
    """One Hydra override; a malformed one is a ConfigError naming it and the accepted forms."""
    match = _OVERRIDE.fullmatch(text)
    if not match or any(not _KEY_PART.fullmatch(p) for p in match["key"].split(".")):
        raise ConfigError(
            [
                f"override {text!r}: expected key=value, +key=value, ++key=value or ~key "
                "(key: dotted names, e.g. policy.generation.vllm_cfg.tensor_parallel_size=2)"
            ]
        )
    op, key, raw = match["op"] or "", match["key"], match["value"]
    if raw is None and op != "~":
        raise ConfigError([f"override {text!r}: no value; write {op}{key}=VALUE (or ~{key})"])
    return Override(text=text, op=op, key=key, value=None if raw is None else _value(raw))


def _value(raw: str) -> Any:
    """A value as Hydra reads it: null, booleans in any case, numbers, lists, dicts, quoted or
    plain strings. Interpolations stay strings (OmegaConf resolves them)."""
    import yaml

    text = raw.strip()
    lowered = text.lower()
    if lowered in ("null", "none", "~") or text == "":
        return None if text else ""
    if lowered in ("true", "false"):
        return lowered == "true"
    number = _number(text)
    if number is not None:
        return number
    if "${" in text:
        return text
    if text[:1] in "[{'\"":
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    return text


def _number(text: str) -> int | float | None:
    if re.fullmatch(r"[-+]?\d[\d_]*", text):
        return int(text.replace("_", ""))
    try:
        return float(text)
    except ValueError:
        return None


def _has(tree: Any, key: str, omegaconf: Any) -> bool:
    node = tree
    for part in key.split("."):
        if not omegaconf.is_dict(node) or part not in node:
            return False
        node = node._get_node(part)
    return True


def _meant(tree: Any, key: str) -> str | None:
    """The key of the config that `key` most likely misspells (`policy.modle_name` is
    `policy.model_name`): its first part the config lacks, corrected to the closest name beside
    it, where the key so corrected is in the config; or None."""
    from omegaconf import OmegaConf

    from nrl_launch.spec.describe import closest

    parts = key.split(".")
    node = tree
    for i, part in enumerate(parts):
        if not OmegaConf.is_dict(node):
            return None
        if part not in node:
            near = closest(part, [str(name) for name in node])
            fixed = ".".join([*parts[:i], near, *parts[i + 1 :]]) if near else None
            return fixed if fixed and _has(tree, fixed, OmegaConf) else None
        node = node._get_node(part)
    return None


def _apply(tree: Any, override: Override) -> str | None:
    """Apply one override in struct mode; the reason it cannot be applied, or None."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    exists = _has(tree, override.key, OmegaConf)
    meant = None if exists or override.op not in ("", "~") else _meant(tree, override.key)
    if override.op == "" and not exists:
        if meant:
            return f"{override.key} is not in the config; did you mean {meant}?"
        return f"{override.key} is not in the config; use +{override.text} to add it"
    if override.op == "+" and exists:
        return f"{override.key} is already in the config; use {override.text[1:]} to change it"
    if override.op == "~":
        if not exists:
            hint = f"; did you mean {meant}?" if meant else ""
            return f"{override.key} is not in the config, so it cannot be deleted{hint}"
        *parents, leaf = override.key.split(".")
        parent = OmegaConf.select(tree, ".".join(parents)) if parents else tree
        if override.value is not None and parent[leaf] != override.value:
            return f"{override.key} is {parent[leaf]!r}, not {override.value!r}"
        with open_dict(parent):
            del parent[leaf]
        return None
    try:
        with open_dict(tree):
            OmegaConf.update(tree, override.key, override.value, merge=True, force_add=True)
    except OmegaConfBaseException as exc:
        # A malformed ${...}: NeMo RL's driver would stop on it at once.
        return f"its value cannot be read: {str(exc).splitlines()[0]}"
    return None
