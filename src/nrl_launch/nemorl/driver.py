"""What a NeMo RL driver command runs, read from its argv, and which algorithm a config is for.

NeMo RL's drivers (`examples/run_*.py`) parse only `--config FILE` (argparse's
`parse_known_args`) and hand every other argument to Hydra as an override, so in

    uv run examples/run_grpo.py --config c.yaml cluster.num_nodes=2

the config is `c.yaml` and the overrides are `cluster.num_nodes=2`. A driver given as a shell
string (`bash -c "uv run examples/run_grpo.py --config c.yaml ..."`, as ray.sub's COMMAND
is) is read the same way, from the one command of the string that runs a driver. Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ALGORITHMS",
    "DriverConfig",
    "algorithm_of_recipe",
    "algorithm_of_script",
    "config_algorithms",
    "read",
    "steps_key",
    "takes_appended",
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
    NeMo RL driver (a `run_*.py` script or one of `drivers`) or gives it no `--config`.

    `bash -c STRING` (or `sh -c`) is read from STRING: its one command that runs a driver, with
    the dirs a `cd` before it changes to. None, as for any command it cannot tell, when no
    command or several run a driver, or when what the driver is given depends on the shell
    (a `$` expansion, a backquote, a here-document)."""
    known = set(drivers)
    string = _shell_string(command)
    if string is not None:
        return _read_shell(string, known)
    return _read_argv(command, known)


def takes_appended(command: Sequence[str], drivers: Iterable[str] = ()) -> bool:
    """Whether words appended to `command` reach its NeMo RL driver as overrides: an argv (not
    a shell string) that runs a driver, whose every word after the driver is the driver's."""
    return _shell_string(command) is None and _read_argv(command, set(drivers)) is not None


def _is_driver(word: str, known: set[str]) -> bool:
    return word in known or (word.endswith(".py") and posixpath.basename(word).startswith("run_"))


def _read_argv(command: Sequence[str], known: set[str]) -> DriverConfig | None:
    at = next((i for i, word in enumerate(command) if _is_driver(word, known)), None)
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


_SHELLS = ("bash", "sh")
# The shell's control operators and redirections, as shlex splits them off (punctuation_chars).
_OPERATORS = ";&|()<>\n"
_REDIRECTIONS = {"<", ">", ">>", ">&", "<&", "&>", "&>>", ">|", "<>", ">>&"}


def _shell_string(command: Sequence[str]) -> str | None:
    """STRING of `bash [OPTIONS] -c STRING [NAME ARGS...]` (or sh), else None."""
    if not command or posixpath.basename(command[0]) not in _SHELLS:
        return None
    args, run_string = list(command[1:]), False
    while args:
        word = args.pop(0)
        if word.startswith("--"):  # --login, --norc, or -- (the end of the options)
            continue
        if len(word) > 1 and word[0] in "-+":
            run_string = run_string or (word[0] == "-" and "c" in word[1:])
            if word[-1] in "oO" and args:  # -o pipefail, -eo pipefail: the option's name
                args.pop(0)
            continue
        return word if run_string else None
    return None


def _read_shell(string: str, known: set[str]) -> DriverConfig | None:
    """The driver config of the one command of a shell string that runs a driver."""
    segments = _segments(string.replace("\\\n", " "))  # a line continuation: one line
    if segments is None:
        return None
    runs = [i for i, words in enumerate(segments) if any(_is_driver(w, known) for w in words)]
    if len(runs) != 1:
        return None  # no driver, or several: which one NeMo RL runs is not for us to guess
    words = segments[runs[0]]
    found = _read_argv(words, known)
    if found is None or any("$" in w or "`" in w for w in (found.config, *found.overrides)):
        return None  # what the shell makes of them is known only when it runs
    # Each `cd DIR` before it moves the driver's working dir, which a relative --config is in.
    workdir = ""
    for cd in (words for words in segments[: runs[0]] if words[:1] == ["cd"]):
        if len(cd) != 2 or cd[1].startswith(("~", "-")) or "$" in cd[1] or "`" in cd[1]:
            return None  # cd home, cd -, or a dir only the shell knows
        workdir = posixpath.join(workdir, cd[1])
    if workdir and not posixpath.isabs(found.config):
        return DriverConfig(found.script, posixpath.join(workdir, found.config), found.overrides)
    return found


def _segments(string: str) -> list[list[str]] | None:
    """The words of each simple command of a shell string (split at ;, &&, ||, |, &, (, ) and
    newlines), redirections left out; None when the shell could read it otherwise than as words
    (an unclosed quote, a here-document)."""
    lexer = shlex.shlex(string, posix=True, punctuation_chars=_OPERATORS)
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"  # a newline ends a command, as ; does
    try:
        tokens = list(lexer)
    except ValueError:  # No closing quotation, No escaped character
        return None
    segments: list[list[str]] = [[]]
    while tokens:
        token = tokens.pop(0)
        if token in _REDIRECTIONS:
            if segments[-1] and segments[-1][-1].isdigit():  # 2>&1: its fd, not a word
                segments[-1].pop()
            if tokens:
                tokens.pop(0)  # the redirection's target
        elif token.startswith("<<"):
            return None  # a here-document: what follows is not the command's words
        elif token and all(c in _OPERATORS for c in token):
            segments.append([])
        else:
            segments[-1].append(token)
    return [words for words in segments if words]


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


def steps_key(algorithm: str | None, present: Callable[[str], bool]) -> str | None:
    """The key of a config's step count (`grpo.max_num_steps`): in the section of the
    algorithm the driver runs where the config has it, else in the config's first algorithm
    section; None when it has none."""
    has = config_algorithms(present)
    section = algorithm if algorithm in has else next(iter(has), None)
    return f"{section}.max_num_steps" if section else None
