"""Reading a config's sizes, and the parallelism arithmetic layout.py and generation.py share.

`Reader` reads a value with its type checked, a wrong one becoming a problem (one line naming
the key, the value and what is accepted) instead of a crash; `divides` is the world-size rule
every model obeys; `megatron` sizes a Megatron model as NeMo RL's lm_policy.py checks it. Pure:
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nrl_launch.nemorl.config import MISSING

__all__ = ["Lookup", "Reader", "Training", "algorithm", "divides", "megatron_sizes"]

Lookup = Callable[[str], Any]  # a dotted key -> its resolved value, or MISSING


@dataclass(frozen=True)
class Training:
    backend: str  # dtensor or megatron
    tp: int
    cp: int
    pp: int
    ep: int
    gpus: int
    dp: int | None  # None when the world does not divide

    def describe(self) -> str:
        parts = f"TP{self.tp} CP{self.cp} PP{self.pp}" + (f" EP{self.ep}" if self.ep > 1 else "")
        dp = f" -> DP{self.dp}" if self.dp else ""
        name = "Megatron" if self.backend == "megatron" else "FSDP2/DTensor"
        return f"{name} {parts}{dp} on {self.gpus} GPU(s)"


@dataclass
class Reader:
    """Reads values with their types checked; a wrong one becomes a problem, not a crash.
    `raw` gives a key's text unresolved (an interpolation as written), to name it."""

    lookup: Lookup
    present: Callable[[str], bool]
    raw: Callable[[str], Any] | None = None
    problems: list[str] = field(default_factory=list)

    def required(self, key: str, why: str) -> int | None:
        """A whole number >= 1 the config must set: unset, it is the problem "`key` is not set:
        `why`" (a wrong value is already one)."""
        value = self.int(key, None)
        if value is None and not any(p.startswith(key) for p in self.problems):
            self.problems.append(f"{key} is not set: {why}")
        return value

    def int(self, key: str, default: int | None, *, low: int = 1) -> int | None:
        value = self.lookup(key)
        if value is MISSING and self.present(key):
            text = self.raw(key) if self.raw else None
            written = f"={text}" if isinstance(text, str) else ""
            self.problems.append(
                f"{key}{written}: its interpolation does not resolve here; expected a whole "
                f"number >= {low}"
            )
            return default
        if value is MISSING or value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.problems.append(f"{key}: expected a whole number >= {low}, got {value!r}")
            return default
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.lookup(key)
        if value is MISSING or value is None:
            return default
        if not isinstance(value, bool):
            self.problems.append(f"{key}: expected true or false, got {value!r}")
            return default
        return value

    def has(self, key: str) -> bool:
        return self.present(key)


def algorithm(read: Reader) -> str:
    """The algorithm a config is for, by its section: the drivers differ in what they accept."""
    for name in ("distillation", "ppo"):
        if read.has(name):
            return name
    return "grpo"


def megatron_sizes(
    read: Reader, gpus: int, key: Callable[[str], str], what: str, experts: str
) -> Training:
    """Megatron's sizes, read through `key` (a size's name -> its dotted key), checked on
    `gpus` as lm_policy.py checks them; `what` and `experts` name the model in the problems."""
    tp = read.int(key("tensor_model_parallel_size"), 1) or 1
    pp = read.int(key("pipeline_model_parallel_size"), 1) or 1
    cp = read.int(key("context_parallel_size"), 1) or 1
    ep = read.int(key("expert_model_parallel_size"), 1) or 1
    etp = read.int(key("expert_tensor_parallel_size"), tp) or tp
    if ep > 1 or etp != tp:
        divides(
            read,
            experts,
            gpus,
            etp * ep * pp,
            f"{key('expert_tensor_parallel_size')}={etp} x expert_model_parallel_size={ep} "
            f"x pipeline_model_parallel_size={pp}",
        )
    names = (
        f"{key('tensor_model_parallel_size')}={tp} x context_parallel_size={cp} x "
        f"pipeline_model_parallel_size={pp}"
    )
    dp = divides(read, what, gpus, tp * cp * pp, names)
    return Training("megatron", tp, cp, pp, ep, gpus, dp)


def divides(read: Reader, what: str, gpus: int, size: int, names: str) -> int | None:
    """gpus / size, or None with a problem when it does not divide (or there are no GPUs)."""
    if gpus <= 0:
        return None
    if gpus < size or gpus % size:
        read.problems.append(f"{what}: {gpus} GPU(s) are not a multiple of {size} ({names})")
        return None
    return gpus // size
