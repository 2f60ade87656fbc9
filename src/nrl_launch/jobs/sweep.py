"""Sweeps: a grid of Hydra overrides, submitted as the jobs of one experiment.

`--sweep KEY=V1,V2,...` (repeatable) and `--sweep-file FILE` (YAML: key -> list of values) give
the axes; the grid is their product, the first axis varying slowest (as nested loops read). Each
point is one job whose driver gets the point's overrides appended as `key=value`, the Hydra
overrides NeMo RL reads, after the job's own (so a point's value wins). The jobs share one
experiment name, kept in their records, which `list/status/cancel --experiment` select by.

`--max-running K` caps how many run at once with K lanes: point k (from 0) waits on point k-K
with Slurm's `--dependency=afterany:<id>`. Slurm's array throttle (`--array=...%K`) needs one
array job of one script, but each point is a job of its own (its own script, log dir and
record), so the lanes do it: a lane's next point starts when the one before it ends, however
it ended. Pure, but for `members` (reads the records).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from nrl_launch.backends import rules
from nrl_launch.errors import ConfigError, JobNotFoundError, UsageError
from nrl_launch.jobs import record
from nrl_launch.paths import read_config_text
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.describe import describe_errors

__all__ = [
    "Axis",
    "Point",
    "axis",
    "dependency",
    "experiment_name",
    "grid",
    "job_name",
    "members",
    "parse_axis",
    "parse_file",
    "summary",
    "with_overrides",
]

# A Hydra override's key, with the `+`/`++` that adds a key the config lacks (`~` deletes: no
# value to sweep).
_KEY = re.compile(r"(\+\+|\+)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
# An experiment names files and Slurm jobs: what a path component and a job name both take.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_NAME_HELP = "1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit"


@dataclass(frozen=True)
class Axis:
    """One swept key and its values, as the driver is to receive them."""

    key: str
    values: tuple[str, ...]
    given: str  # where it was given, for messages: "--sweep 'k=1,2'" or "FILE line N"


@dataclass(frozen=True)
class Point:
    """One job of the sweep: its number (from 1) and its overrides, in the axes' order."""

    number: int
    overrides: tuple[str, ...]

    @property
    def label(self) -> str:
        return " ".join(self.overrides)


def parse_axis(text: str) -> Axis:
    """`--sweep KEY=V1,V2,...`; one line (exit 2) naming the flag when it is not that."""
    given = f"--sweep {text!r}"
    key, sep, rest = text.partition("=")
    if not sep:
        raise UsageError(f"{given}: expected KEY=V1,V2,... (e.g. policy.optimizer.lr=1e-6,3e-6)")
    if any(c in rest for c in "[]{}"):
        raise UsageError(
            f"{given}: a list value holds commas, which separate the values here: give it "
            "in a --sweep-file, quoted as Hydra reads it ('[1,2]')"
        )
    return axis(key.strip(), [v.strip() for v in rest.split(",")], given)


def parse_file(path: Path) -> list[Axis]:
    """`--sweep-file FILE`: a YAML mapping of key -> list of values. Each value is kept as it
    is written (1.0e-6 stays 1.0e-6), since the driver reads it as text. Every bad entry is one
    line naming the file, its line and what is accepted."""
    import yaml  # a sweep file is read by submit --sweep alone: status and list load no yaml

    flag = f"--sweep-file {path}"
    text = read_config_text(path, flag)
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise UsageError(f"{flag}{line}: not YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(root, yaml.MappingNode) or not root.value:
        raise UsageError(f"{flag}: expected a mapping of KEY: [V1, V2, ...], one key per line")
    axes, problems = [], []
    for key_node, values_node in root.value:
        given = f"{flag} line {key_node.start_mark.line + 1}"
        try:
            if not isinstance(key_node, yaml.ScalarNode):
                raise UsageError(f"{given}: a key is a dotted name, e.g. policy.optimizer.lr")
            if not isinstance(values_node, yaml.SequenceNode):
                raise UsageError(
                    f"{given}: {key_node.value}: expected a list of values ([V1, V2, ...])"
                )
            if not all(isinstance(n, yaml.ScalarNode) for n in values_node.value):
                raise UsageError(
                    f"{given}: {key_node.value}: each value is one scalar; a list or mapping "
                    "value is written quoted, as Hydra reads it ('[1,2]')"
                )
            axes.append(axis(key_node.value, [n.value for n in values_node.value], given))
        except UsageError as exc:
            problems.append(exc.message)
    if problems:
        raise ConfigError(problems)
    return axes


def axis(key: str, values: list[str], given: str) -> Axis:
    """One axis, checked: one line (exit 2) naming where it was `given` when it is wrong."""
    if not _KEY.fullmatch(key):
        raise UsageError(
            f"{given}: key {key!r} is not a config key: expected a dotted name "
            "(policy.optimizer.lr), or +key / ++key for one the config lacks"
        )
    if not values or any(not v for v in values):
        raise UsageError(f"{given}: {key}: an empty value; expected V1,V2,... each non-empty")
    if any("\n" in v or "\0" in v for v in values):
        raise UsageError(f"{given}: {key}: a value holds a newline or NUL")
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise UsageError(f"{given}: {key}: {', '.join(twice)} given twice")
    return Axis(key, tuple(values), given)


def grid(axes: Sequence[Axis]) -> list[Point]:
    """The product of the axes, the first varying slowest; a key swept twice is refused."""
    seen: dict[str, str] = {}
    for axis in axes:
        bare = axis.key.lstrip("+")
        if bare in seen:
            raise UsageError(f"{axis.given}: {bare} is swept already ({seen[bare]})")
        seen[bare] = axis.given
    combos = itertools.product(*([f"{a.key}={v}" for v in a.values] for a in axes))
    return [Point(n, tuple(c)) for n, c in enumerate(combos, start=1)]


def experiment_name(given: str | None, taken: Iterable[str], now: float | None = None) -> str:
    """`--experiment NAME` checked, or a new name no recorded experiment has: sweep-<time>."""
    if given is not None:
        if not _NAME.fullmatch(given):
            raise UsageError(f"--experiment {given!r}: expected a name of {_NAME_HELP}")
        return given
    stamp = time.strftime("sweep-%Y%m%d-%H%M%S", time.localtime(now))
    names = set(taken)
    name, more = stamp, 1
    while name in names:
        more += 1
        name = f"{stamp}-{more}"
    return name


def check_name(name: str) -> None:
    """An --experiment to look up: a name of the shape experiments have (exit 2 otherwise)."""
    experiment_name(name, ())


def job_name(experiment: str, point: Point) -> str:
    """The point's Slurm job name: squeue tells the points apart, and `status NAME` finds it."""
    return f"{experiment}-{point.number}"


def dependency(index: int, job_ids: Sequence[str], max_running: int | None) -> str | None:
    """Slurm's dependency of the point at `index` (from 0), given the ids of the points queued
    before it: in lanes of `max_running`, after the one `max_running` places before it."""
    if max_running is None or index < max_running:
        return None
    return f"afterany:{job_ids[index - max_running]}"


def with_overrides(spec: LaunchSpec, point: Point) -> tuple[LaunchSpec, str]:
    """`spec` whose driver gets the point's overrides appended, and which key holds them: with
    a recipe (or no driver command yet, as plan reads a config) nemo_rl.overrides, else the
    driver command itself. Refused (exit 2) where appending could not reach the driver."""
    nemo, command = spec.nemo_rl, spec.driver.command
    data = spec.model_dump()
    if nemo.recipe is not None or (not command and nemo.config is not None):
        data["nemo_rl"]["overrides"] = [*nemo.overrides, *point.overrides]
        key = "nemo_rl.overrides"
    elif command:
        if _shell_string(command):
            raise UsageError(
                "--sweep: the driver command is a shell string (bash -c ...), to which "
                "appended words never reach the driver: give the driver after -- as its own "
                "words, or use --config FILE with a RECIPE"
            )
        data["driver"]["command"] = [*command, *point.overrides]
        key = "driver.command"
    else:
        raise UsageError(
            "--sweep: the job has no driver to give the overrides to: give a driver command "
            "after --, or --config FILE with a RECIPE"
        )

    try:
        return LaunchSpec.model_validate(data, context={"backend_rules": rules.check}), key
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, {})) from None


def _shell_string(command: Sequence[str]) -> bool:
    """Whether `command` is `bash [OPTIONS] -c STRING ...` (or sh): words after it are the
    string's $0, $1..., not the driver's."""
    if command[0].rsplit("/", 1)[-1] not in ("bash", "sh"):
        return False
    for word in command[1:]:
        if not word.startswith("-") or word == "--":
            return False
        if not word.startswith("--") and "c" in word[1:]:
            return True
    return False


def members(name: str, state: Path) -> list[record.JobRecord]:
    """The records of experiment `name`, in the order its points were submitted; exit 4 when
    no job of that experiment was submitted here."""
    check_name(name)
    records = [r for r in record.load_all(state)[0] if r.experiment == name]
    if not records:
        raise JobNotFoundError(
            f"--experiment {name}: no job of that experiment was submitted with nrl-launch here"
        )
    return sorted(records, key=lambda r: (r.submitted_at, r.job_id))


def summary(phases: Sequence[str]) -> str:
    """`4 jobs: 2 RUNNING, 2 PENDING`, the phases in the order first seen."""
    counts: dict[str, int] = {}
    for phase in phases:
        counts[phase] = counts.get(phase, 0) + 1
    jobs = f"{len(phases)} job{'s' if len(phases) != 1 else ''}"
    return f"{jobs}: " + ", ".join(f"{n} {phase}" for phase, n in counts.items())
