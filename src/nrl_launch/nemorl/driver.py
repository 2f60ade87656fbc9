"""What a NeMo RL driver command runs, read from its argv, and which algorithm a config is for.

NeMo RL's drivers (`examples/run_*.py`) parse only `--config FILE` (argparse's
`parse_known_args`) and hand every other argument to Hydra as an override, so in

    uv run examples/run_grpo.py --config c.yaml cluster.num_nodes=2

the config is `c.yaml` and the overrides are `cluster.num_nodes=2`. Pure: no I/O.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ALGORITHMS",
    "DriverConfig",
    "algorithm_of_recipe",
    "algorithm_of_script",
    "config_algorithms",
    "read",
]

# A config's algorithm is the top-level section its driver reads (grpo:, sft:, ...).
ALGORITHMS = ("grpo", "sft", "dpo", "rm", "ppo", "distillation", "eval")


@dataclass(frozen=True)
class DriverConfig:
    """The driver script, and the config and overrides its argv give it."""

    script: str
    config: str
    overrides: tuple[str, ...]


def read(command: Sequence[str], drivers: Iterable[str] = ()) -> DriverConfig | None:
    """The config and overrides of a NeMo RL driver command, or None when `command` runs no
    NeMo RL driver (a `run_*.py` script or one of `drivers`) or gives it no `--config`."""
    known = set(drivers)
    at = next(
        (
            i
            for i, word in enumerate(command)
            if word in known
            or (word.endswith(".py") and posixpath.basename(word).startswith("run_"))
        ),
        None,
    )
    if at is None:
        return None
    config, overrides = None, []
    args = list(command[at + 1 :])
    while args:
        word = args.pop(0)
        if word == "--config" and args:
            config = args.pop(0)  # argparse: the last one given wins
        elif word.startswith("--config="):
            config = word.partition("=")[2]
        else:
            overrides.append(word)
    if not config:
        return None
    return DriverConfig(command[at], config, tuple(overrides))


def algorithm_of_script(script: str) -> str | None:
    """The algorithm a driver runs, by its name (run_grpo_math.py, nemo_gym/run_grpo_nemo_gym.py:
    grpo; run_vlm_sft.py: sft), or None when its name says none."""
    name = posixpath.basename(script).removesuffix(".py")
    return next((word for word in name.split("_") if word in ALGORITHMS), None)


def algorithm_of_recipe(recipe: str) -> str | None:
    """The algorithm of a recipe: its last word (nemo-gym-grpo: grpo)."""
    name = recipe.split("-")[-1]
    return name if name in ALGORITHMS else None


def config_algorithms(present: Callable[[str], bool]) -> list[str]:
    """The algorithms whose section a config has; `present` answers for a top-level key."""
    return [name for name in ALGORITHMS if present(name)]
