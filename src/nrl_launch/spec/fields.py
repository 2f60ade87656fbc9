"""The value types and checks the job spec's fields share: names, times, paths, text.

Pure functions and `Annotated` types, each raising ValueError with what is accepted; `models.py`
builds its models from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

__all__ = [
    "MOUNT_FLAGS",
    "EnvName",
    "Int",
    "Line",
    "NonEmpty",
    "Port",
    "SbatchValue",
    "SlurmWord",
    "Text",
    "as_text",
    "check_path_part",
    "check_time",
    "credential_name",
    "looks_like_a_value",
    "printable",
    "refuse_credentials",
    "reserved_env_name",
    "slurm_time_minutes",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Slurm's --time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_TIME = re.compile(
    r"(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?)"
    r"|(?:(?P<h>\d+):(?P<hm>\d+):(?P<hs>\d+))"
    r"|(?:(?P<m>\d+)(?::(?P<ms>\d+))?)"
)
_TIME_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
MOUNT_FLAGS = re.compile(r"[a-z]+(?:\+[a-z]+)*")


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL byte")
    return value


def _single_line(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("must be a single line")
    return _no_nul(value)


def printable(value: str) -> str:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("must not contain control characters such as newlines or tabs")
    return value


def _nonempty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return _no_nul(value)


def as_text(value: Any) -> Any:
    """YAML reads `16` as an int and `1e-3` as a float; env values are strings either way."""
    if isinstance(value, bool):
        raise ValueError("must be a string (quote yes/no/true/false in YAML)")
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _not_bool(value: Any) -> Any:
    """YAML reads yes/no/on/off/true/false as booleans, and Python takes a boolean for 1 or 0:
    `nodes: yes` would be one node."""
    if isinstance(value, bool):
        raise ValueError(
            "must be a number, not a yes/no/on/off/true/false, which YAML reads as a boolean"
        )
    return value


# A whole number that is not a boolean in disguise.
Int = Annotated[int, BeforeValidator(_not_bool)]
# A span in minutes, fractions allowed (0.5 is 30 s); at most a year.
Minutes = Annotated[float, BeforeValidator(_not_bool), Field(gt=0, le=525600, allow_inf_nan=False)]
Text = Annotated[str, AfterValidator(_no_nul)]
Line = Annotated[str, AfterValidator(_single_line)]
NonEmpty = Annotated[str, AfterValidator(_nonempty)]
Port = Annotated[Int, Field(ge=1, le=65535)]
# A value written on an #SBATCH line of the job script (backends.slurm.sbatch_word): sbatch cuts
# the script into lines before it reads any quote, and a raw carriage return reads as a DOS line
# end (to shellcheck, SC1017).
SbatchValue = Annotated[NonEmpty, AfterValidator(_single_line)]


def _one_word(value: str) -> str:
    if any(c.isspace() for c in value):
        raise ValueError(
            "must have no spaces: Slurm reads a name, or a list of them joined by commas "
            "(a,b), as one word"
        )
    return value


# A Slurm name or list of them (account, partition, QOS, reservation, a hostlist, a feature
# expression, a dependency): sbatch refuses one with a space only once it is asked.
SlurmWord = Annotated[SbatchValue, BeforeValidator(as_text), AfterValidator(_one_word)]


# Names bash sets itself (or refuses to set), and prefixes owned by bash, Slurm and the job
# script: a job env value under one of them would be lost or would break the script.
_BASH_NAMES = frozenset(
    [
        "_",
        "IFS",
        "PPID",
        "UID",
        "EUID",
        "GROUPS",
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "FUNCNAME",
        "HISTCMD",
        "OPTIND",
        "OPTARG",
        "SHELLOPTS",
        "EPOCHSECONDS",
        "EPOCHREALTIME",
        "PWD",
        "OLDPWD",
        "HOSTNAME",
        # bash changes SHLVL in every shell it starts, and keeps PIPESTATUS and DIRSTACK
        # (which it also refuses to export) up to date itself.
        "SHLVL",
        "PIPESTATUS",
        "DIRSTACK",
        # Arrays of bash's own (mapfile's, coproc's and completion's): shellcheck flags a
        # string assigned to one.
        "MAPFILE",
        "COPROC",
        "COMP_WORDS",
        "COMPREPLY",
    ]
)


def reserved_env_name(name: str) -> str | None:
    """Why `name` cannot be set in a job's environment, or None if it can."""
    if name == "FUNCNEST":
        return "FUNCNEST limits how deep the job script's functions may nest"
    if name in _BASH_NAMES or name.startswith("BASH"):
        return f"{name} is set by bash itself"
    if name.startswith(("SLURM_", "SLURMD_")):
        return f"{name} is set by Slurm for each job"
    if name.startswith("NRL_"):
        return "the NRL_ prefix belongs to the job script"
    return None


# The words of a variable name that say its value is a credential (OPENAI_API_KEY, GITHUB_PAT,
# DB_PASSWORD): whole words between underscores, and TOKEN, SECRET and PASSWORD inside a word
# too (HFTOKEN, CLIENTSECRET); TOKENIZERS_PARALLELISM (Hugging Face's tokenizers) holds none.
_CREDENTIAL_WORDS = frozenset(
    ["TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "PAT"]
)
_CREDENTIAL_PARTS = ("TOKEN", "SECRET", "PASSWORD")


def credential_name(name: str) -> str | None:
    """The word of `name` that says it holds a credential (KEY of OPENAI_API_KEY), or None."""
    for word in name.upper().split("_"):
        if word in _CREDENTIAL_WORDS:
            return word
        if not word.startswith("TOKENIZER") and any(p in word for p in _CREDENTIAL_PARTS):
            return word
    return None


# What a credential's value looks like where a variable's name belongs (`--secret hf_...`): the
# prefixes Hugging Face, GitHub and AWS give their tokens, or a long run of letters and digits
# with no word in it (a W&B key is 40 hex digits). Such a "name" is never said back.
_TOKEN_VALUE = re.compile(
    r"(hf|gh[pousr]|github_pat)_[A-Za-z0-9_]{8,}|AKIA[0-9A-Z]{12,}|(?=[A-Za-z_]*[0-9])[A-Za-z0-9]{20,}"
)


def looks_like_a_value(name: str) -> bool:
    """Whether a secret's "name" is a credential's value given in its place."""
    return _TOKEN_VALUE.fullmatch(name) is not None


def refuse_credentials(names: Iterable[str], key: str, why: str) -> None:
    """Raise for the first of `names` (sorted) that says it holds a credential: one line,
    `KEY.NAME: its name says it holds a credential (WORD), WHY`; `why` may name it as {name}.

    Raises:
        ValueError: one of `names` does.
    """
    for name in sorted(names):
        word = credential_name(name)
        if word:
            raise ValueError(
                f"{key}.{name}: its name says it holds a credential ({word}), "
                + why.format(name=name)
            )


def _env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
    reason = reserved_env_name(value)
    if reason:
        raise ValueError(f"{value!r} cannot be set: {reason}")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


def slurm_time_minutes(value: str) -> float:
    """Minutes in a Slurm time limit; raises ValueError naming the accepted forms."""
    match = _TIME.fullmatch(value.strip())
    if not match:
        raise ValueError(f"must be a Slurm time limit: {_TIME_FORMS}")
    g = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    if "d" in g:
        if g["dh"] > 23 or g.get("dm", 0) > 59 or g.get("ds", 0) > 59:
            raise ValueError(f"hours must be < 24, minutes and seconds < 60 ({_TIME_FORMS})")
        total = g["d"] * 1440 + g["dh"] * 60 + g.get("dm", 0) + g.get("ds", 0) / 60
    elif "h" in g:
        if g["hm"] > 59 or g["hs"] > 59:
            raise ValueError(f"minutes and seconds must be < 60 ({_TIME_FORMS})")
        total = g["h"] * 60 + g["hm"] + g["hs"] / 60
    else:
        if g.get("ms", 0) > 59:
            raise ValueError(f"seconds must be < 60 ({_TIME_FORMS})")
        total = g["m"] + g.get("ms", 0) / 60
    if total <= 0:
        raise ValueError("must be longer than zero (an unlimited job blocks backfill)")
    return total


def check_time(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # a bare number in YAML is minutes, as sbatch reads it
    if isinstance(value, str):
        slurm_time_minutes(value)
    return value


def check_path_part(path: str, what: str) -> None:
    if not path.startswith("/"):
        raise ValueError(f"{what} {path!r} must be an absolute path")
    for bad in (",", ":"):
        if bad in path:
            raise ValueError(
                f"{what} {path!r} must not contain {bad!r} (pyxis separates mounts with it)"
            )
