"""Validation errors as the user reads them: one `key: message` line per problem, with the
value given, where it came from and what is accepted (never a pydantic traceback)."""

from __future__ import annotations

import difflib
import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from nrl_launch.spec.launch import LaunchSpec
from nrl_launch.spec.setting import Setting

__all__ = ["closest", "describe_errors"]


def describe_errors(exc: ValidationError, merged: Mapping[str, Setting]) -> list[str]:
    """One line per problem: the key, the value given, its source and what is accepted."""
    lines = []
    for err in exc.errors():
        # Drop list indexes and the "[key]" marker of a bad dict key: the path names the key.
        loc = [str(p) for p in err["loc"] if not isinstance(p, int) and p != "[key]"]
        key = ".".join(loc)
        source = _source_of(key, merged)
        origin = f" (from {source})" if source else ""
        if _holds_a_secret_value(loc, err):
            lines.append(_secret_problem(loc[1], "[key]" in err["loc"], err, origin))
            continue
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


def _holds_a_secret_value(loc: list[str], err: Any) -> bool:
    """Whether a bad entry under secrets may hold a secret's value: a name given as NAME=VALUE
    (`--secret HF_TOKEN=hf_...`), or a need that is text but not one of the words
    (`--set secrets.HF_TOKEN=hf_...`)."""
    if loc[:1] != ["secrets"] or len(loc) < 2:
        return False
    if "[key]" in err["loc"]:
        return "=" in loc[1]
    return isinstance(err.get("input"), str)


def _secret_problem(name: str, bad_name: bool, err: Any, origin: str) -> str:
    """The line for a bad entry under secrets that may hold a secret's value: it shows only a
    name that is one, never the value, and says how a secret is given."""
    name = name.partition("=")[0]
    if not _NAME.fullmatch(name):
        return (
            "secrets: a secret is given by name, never by value: --secret NAME, with NAME "
            f"exported in your shell{origin}"
        )
    text = _plain_message(err)
    need = "" if bad_name else f"{text[:1].lower()}{text[1:]}; "
    return (
        f"secrets.{name}: {need}a secret is given by name, never by value: export {name} in "
        f"your shell and give --secret {name}{origin}"
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def closest(word: str, names: Iterable[str]) -> str | None:
    """The name in `names` that `word` most likely misspells, or None when none is close."""
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(loc: list[str]) -> str:
    """The hint after `unknown key`: the same name where the spec has it at another level
    (a top-level `nodes` is `slurm.nodes`), else the closest name at this level, else the
    closest name at another level; then what this level accepts."""
    model: type[BaseModel] | None = LaunchSpec
    for part in loc[:-1]:
        info = model.model_fields.get(part) if model else None
        model = _model_of(info.annotation) if info else None
    if model is None:
        return ""
    names = list(model.model_fields)
    here = ".".join(loc)
    paths = [p for p in _field_paths() if p != here and not p.startswith(here + ".")]
    elsewhere = [p for p in paths if p.rpartition(".")[2] == loc[-1]]
    if not elsewhere:
        sibling = closest(loc[-1], names)
        near = closest(loc[-1], {p.rpartition(".")[2] for p in paths}) if not sibling else None
        elsewhere = [sibling] if sibling else [p for p in paths if p.rpartition(".")[2] == near]
    hint = f"; did you mean {' or '.join(map(repr, elsewhere))}?" if elsewhere else ""
    return f"{hint} (accepted: {', '.join(names)})"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The section a field holds (`SandboxSpec | None` holds one too), or None for a value."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [_model_of(arg) for arg in typing.get_args(annotation)]
        return next((m for m in found if m is not None), None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


@functools.cache
def _field_paths() -> tuple[str, ...]:
    """Every key of the spec as a dotted path (`slurm.nodes`), sections before their keys."""
    paths: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            paths.append(prefix + name)
            section = _model_of(info.annotation)
            if section is not None:
                walk(section, f"{prefix}{name}.")

    walk(LaunchSpec, "")
    return tuple(paths)
