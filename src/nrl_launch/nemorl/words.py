"""The words after nrl-launch's own options, read with --config: [RECIPE] OVERRIDES..., and
what to say when they are a driver command whose `--` was forgotten. Pure: no I/O."""

from __future__ import annotations

from typing import Any

from nrl_launch.errors import UsageError
from nrl_launch.shell import join
from nrl_launch.spec import DEFAULT_DRIVERS

__all__ = ["no_bare_recipe", "recipe_words"]


def no_bare_recipe(command: list[str], config: str | None) -> None:
    """`submit grpo` without --config would run a program named grpo: say what is missing."""
    if config is None and command and command[0] in DEFAULT_DRIVERS:
        raise UsageError(f"RECIPE {command[0]}: give the NeMo RL config with --config FILE")


def recipe_words(words: list[str], config: str) -> dict[str, tuple[Any, str]]:
    """With --config, the words are [RECIPE] OVERRIDES...: an override holds = or starts ~."""
    found: dict[str, tuple[Any, str]] = {}
    if words and "=" not in words[0] and not words[0].startswith(("~", "+")):
        _no_misplaced_driver(words, config)
        found["nemo_rl.recipe"] = (words[0], "RECIPE")
        found["interactive"] = (False, "RECIPE")
        words = words[1:]
    if words:
        found["nemo_rl.overrides"] = (list(words), "OVERRIDES")
    return found


# Words that start a driver command, never a recipe: `render uv run ...` without the `--`.
_PROGRAMS = frozenset(["uv", "uvx", "python", "python3", "bash", "sh", "torchrun", "ray", "srun"])


def _no_misplaced_driver(words: list[str], config: str) -> None:
    """The first word after --config is read as the RECIPE: say what to do when it is the start
    of a driver command (its `--` forgotten, so its --config was taken as nrl-launch's, or
    nrl-launch's --config given with a command after `--`) or an override without its `=`."""
    first = words[0]
    if first in DEFAULT_DRIVERS:
        return
    if first.endswith((".yaml", ".yml")):
        raise UsageError(
            f"{first!r} is a config file, not a RECIPE: a job takes one config, with --config "
            f"(NeMo RL layers configs through the defaults: key of the one you give)"
        )
    if first in _PROGRAMS or "/" in first or first.endswith((".py", ".sh")):
        end = next((i for i, word in enumerate(words) if "=" in word), len(words))
        driver = join([*words[:end], "--config", config, *words[end:]])
        raise UsageError(
            f"{first!r} is a program, not a RECIPE: nrl-launch's --config takes a RECIPE and "
            f"overrides; a driver command takes its own --config, after the options and --: "
            f"nrl-launch ... -- {driver}"
        )
    if "." in first:  # a dotted key: recipes have no dots
        raise UsageError(
            f"override {first!r}: no value; write {first}=VALUE (or ~{first}), after the RECIPE"
        )
