"""The unit of layering: one value of the spec and where it came from, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nrl_launch.spec.launch import LaunchSpec

__all__ = ["DEFAULT", "Resolved", "Setting"]

DEFAULT = "default"


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
