"""`nrl-launch init`: write a profile of this cluster's settings, which later commands read.

What Slurm can say (its default partition, the GPUs of that partition's nodes and so how to ask
for them, your default account) is asked of it through the runner; what it cannot (the
container, its mounts, the log dir) comes from flags or, on a terminal, from one question each.
Nothing is asked when stdin is not a terminal. The profile goes where later commands look for
one (--profile, else $NRL_LAUNCH_PROFILE, else the user's config dir) and is checked as the
job spec is before anything is written; an existing one is replaced only with --force (or,
on a terminal, when you say yes). Questions are asked on stderr (output.ask).
"""

from __future__ import annotations

import getpass
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from nrl_launch import backends, container_checks, output, paths, runner
from nrl_launch.backends import rules
from nrl_launch.cli.options import (
    Account,
    Container,
    GpusPerNode,
    Json,
    LogDir,
    Mounts,
    Partition,
)
from nrl_launch.container_image import image_ray_findings
from nrl_launch.doctor.verdicts import parse_config, parse_node_groups, parse_partitions
from nrl_launch.errors import ConfigError, SchedulerError, UsageError
from nrl_launch.spec import layers, lint

if TYPE_CHECKING:
    from nrl_launch.doctor.verdicts import NodeGroup
    from nrl_launch.spec import LaunchSpec
    from nrl_launch.spec.layers import Resolved

__all__ = ["EXAMPLES", "ClusterFacts", "Query", "init", "read_cluster"]

EXAMPLES = """\
Examples:
  nrl-launch init
  nrl-launch init --container nvcr.io/nvidia/nemo-rl:v0.6.0 --mount /lustre:/lustre \\
    --log-dir /lustre/fs1/users/alice/logs
"""

# A Slurm query that takes longer has a slurmctld in trouble: init goes on without its answer.
_QUICK_S = 30.0
_ACCOUNTING_OFF = ("", "accounting_storage/none")

Query = Callable[[list[str]], str | None]


@dataclass
class ClusterFacts:
    """What Slurm said: spec key -> value, and one line on each value (or on what is missing)."""

    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    answered: bool = True  # False: Slurm did not answer (not installed, or not responding)


def read_cluster(query: Query, *, partition: str | None, user: str) -> ClusterFacts:
    """Ask Slurm for the partition (the default one unless `partition` is given), the GPUs of
    its nodes and how to ask for them, and `user`'s default account. `query(argv)` returns a
    command's stdout, or None when it failed or is not installed.

    Raises:
        UsageError: `partition` is not one of the cluster's.
    """
    facts = ClusterFacts()
    partitions_text = query(["scontrol", "show", "partition", "-o"])
    if partitions_text is None:
        facts.warnings.append(
            "Slurm did not answer (scontrol show partition): the profile holds only what was "
            "given; run init on a Slurm login node to read the partition and GPUs"
        )
        facts.answered = False
        return facts
    partitions = parse_partitions(partitions_text)
    names = ", ".join(p.name for p in partitions) or "none"
    if partition is not None and partition not in [p.name for p in partitions]:
        raise UsageError(f"--partition {partition!r}: not a partition of this cluster ({names})")
    if partition is None:
        default = next((p.name for p in partitions if p.default), None)
        if default is None:
            facts.warnings.append(
                f"the cluster has no default partition: give --partition ({names})"
            )
            return facts
        partition = default
        facts.values["slurm.partition"] = default
        facts.notes.append(f"slurm.partition: {default}, the cluster's default ({names})")
    nodes = query(["sinfo", "-h", "-p", partition, "-o", "%D|%G|%t"])
    _gpus(facts, partition, parse_node_groups(nodes or ""))
    config = parse_config(query(["scontrol", "show", "config"]) or "")
    if config.get("AccountingStorageType", "") not in _ACCOUNTING_OFF:
        argv = ["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"]
        account = next(iter((query(argv) or "").split()), None)
        if account:
            facts.values["slurm.account"] = account
            facts.notes.append(f"slurm.account: {account}, {user}'s default account")
    return facts


def _gpus(facts: ClusterFacts, partition: str, groups: list[NodeGroup]) -> None:
    counts = sorted({g.gpus for g in groups})
    if not counts:
        facts.warnings.append(f"sinfo gave no nodes of partition {partition}: GPUs not read")
        return
    if counts[-1] == 0:
        facts.values["slurm.gpu_request"] = "none"
        facts.warnings.append(
            f"partition {partition}'s nodes have no GPUs in Slurm's gres: slurm.gpu_request none "
            "(GPUs are not asked of Slurm); give --gpus-per-node with the GPUs each node has"
        )
        return
    facts.values["slurm.gpus_per_node"] = counts[-1]
    facts.values["slurm.gpu_request"] = "gres"
    kinds = ", ".join(sorted({g.gres for g in groups}))
    facts.notes.append(
        f"slurm.gpus_per_node: {counts[-1]}, asked for as --gres=gpu:N (partition {partition}'s "
        f"nodes: {kinds})"
    )


def init(
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="Where to write it (default: $NRL_LAUNCH_PROFILE, else "
            "~/.config/nrl-launch/profile.yaml).",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the profile if it exists.")
    ] = False,
    account: Account = None,
    partition: Partition = None,
    gpus_per_node: GpusPerNode = None,
    gpu_request: Annotated[
        str | None,
        typer.Option(
            "--gpu-request",
            help="How the job asks Slurm for GPUs (default: gres where the nodes have GPUs in "
            "Slurm's gres, else none).",
            metavar="gres|gpus-per-node|none",
            show_default=False,
        ),
    ] = None,
    container: Container = None,
    mount: Mounts = None,
    log_dir: LogDir = None,
    json: Json = False,
) -> None:
    """Write a profile (account, partition, GPUs per node and how to ask for them, read from
    the cluster; container, mounts and log dir) that later commands read. On a terminal it asks
    for what was not given; elsewhere it asks nothing."""
    asking = _interactive()
    target = _target(profile)
    if target.exists() and not force:
        replace = f"Profile {target} already exists. Replace it?"
        if not (asking and output.confirm(replace)):
            raise UsageError(f"profile {target} already exists; pass --force to replace it")
    given = {
        "slurm.account": account,
        "slurm.partition": partition,
        "slurm.gpus_per_node": gpus_per_node,
        "slurm.gpu_request": gpu_request,
        "container.image": container,
        "container.mounts": mount or None,
        "logs.base_dir": log_dir,
    }
    values = {key: value for key, value in given.items() if value is not None}
    sources = {key: _FLAGS[key] for key in values}
    _checked(values, sources)  # a bad flag is refused before Slurm is asked anything
    user = _user()
    facts = read_cluster(_query, partition=partition, user=user)
    if not facts.answered and not values and not asking:
        raise _no_slurm()  # the profile would hold nothing: one line, nothing written
    _report(facts)
    values = {**facts.values, **values}
    sources = {**dict.fromkeys(facts.values, "the cluster"), **sources}
    if asking:
        _ask(values, sources, lambda name: read_cluster(_query, partition=name, user=user))
        if not facts.answered and not values:
            raise _no_slurm()
    checked = _checked(values, sources)
    containers = backends.containers(checked.spec.backend)
    for line in lint.warnings(checked, cwd=Path.cwd(), containers=containers):
        output.warn(line)
    # The image as pyxis will read it in every job of this profile (its file may be on storage
    # only the compute nodes have: that is checked at submit).
    backend = backends.get(checked.spec.backend)
    keys = ["container.image"]
    container_checks.check(checked.spec, backend=backend, on_host=False, keys=keys, ray=False)
    for finding in image_ray_findings(checked.spec, on_host=False, profile=True):
        output.warn(finding.message)  # a job may still set ray.auth off: refused at render
    written = {key: _value(checked.spec, key) for key in values}
    text = _profile_text(written)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomically(target, text)
    except OSError as exc:
        raise UsageError(f"profile {target}: cannot write it ({exc.strerror or exc})") from None
    if json:
        output.emit_json("init", {"profile": str(target), "values": written, "sources": sources})
    else:
        output.emit_text(f"Wrote profile {target}:\n{text}")
    read = layers.find_profile(None, os.environ, Path.cwd())
    if read is None or read.resolve() != target.resolve():
        instead = f"they read {read} instead" if read else "they do not find it"
        output.warn(
            f"commands run here do not read {target} by themselves ({instead}): pass "
            f"--profile {target}, or set {paths.PROFILE_ENV}={target}"
        )


def _no_slurm() -> SchedulerError:
    """Slurm is not here (or did not answer) and no value was given: a profile of nothing."""
    flags = "--partition, --gpus-per-node, --account, --container, --mount, --log-dir"
    if shutil.which("scontrol") is None:
        why = "found no Slurm here (scontrol is not on PATH)"
    else:
        why = "Slurm did not answer (scontrol show partition)"
    return SchedulerError(
        f"init {why}: run it on the cluster's login node, or give the values by flag "
        f"({flags}); nothing was written"
    )


def _checked(values: dict[str, Any], sources: dict[str, str]) -> Resolved:
    """`values` validated as the job spec validates them, or ConfigError naming each key."""
    settings = [layers.Setting(key, value, sources[key]) for key, value in values.items()]
    interactive = [layers.Setting("interactive", True, "init")]
    return layers.resolve([settings, interactive], backend_rules=rules.check)


def _target(flag: Path | None) -> Path:
    """The profile file to write: the one later commands look for first, --profile aside."""
    if flag is not None:
        return flag
    named = os.environ.get(paths.PROFILE_ENV)
    return Path(named) if named else paths.user_profile(os.environ)


# The profile's keys, in the order it lists them, each with the flag that gives it.
_FLAGS = {
    "slurm.account": "--account",
    "slurm.partition": "--partition",
    "slurm.gpus_per_node": "--gpus-per-node",
    "slurm.gpu_request": "--gpu-request",
    "container.image": "--container",
    "container.mounts": "--mount",
    "logs.base_dir": "--log-dir",
}

# What init asks on a terminal about each value no flag gave, in this order.
_QUESTIONS = {
    "slurm.account": "Slurm account (empty: your default)",
    "slurm.partition": "Partition (empty: the cluster's default)",
    "slurm.gpus_per_node": "GPUs per node",
    "container.image": "Container image, a registry reference or a .sqsh path (empty: none)",
    "container.mounts": "Mounts, SRC:DST[:FLAGS] separated by spaces (empty: none)",
    "logs.base_dir": "Log dir, on storage every node shares (empty: the submit dir)",
}


def _interactive() -> bool:
    """Whether init may ask questions: only with a terminal on stdin. From a pipe, a script or
    CI it asks nothing, and what no flag gave stays as the cluster said (or unset)."""
    return sys.stdin.isatty()


def _report(facts: ClusterFacts) -> None:
    for line in facts.notes:
        output.note(line)
    for line in facts.warnings:
        output.warn(line)


def _ask(
    values: dict[str, Any], sources: dict[str, str], read: Callable[[str], ClusterFacts]
) -> None:
    """Ask (on stderr) for each value no flag gave; what the cluster said is the
    default (Enter keeps it). An answer is checked as the job spec checks it, and a bad one is
    asked again. A partition other than the default is read from the cluster in turn (`read`),
    so the GPUs the profile holds are that partition's."""
    for key, question in _QUESTIONS.items():
        if sources.get(key, "the cluster") != "the cluster":
            continue  # a flag gave it
        shown = _shown(values.get(key, ""))
        answer, facts = _prompt(key, question, shown, read)
        if _shown(answer) == shown:
            continue  # Enter: what the cluster said, or nothing
        values.pop(key, None)
        sources.pop(key, None)
        if facts is not None:  # another partition: what the cluster says of it instead
            _report(facts)
            for said in [k for k, source in sources.items() if source == "the cluster"]:
                del values[said], sources[said]
            fresh = {k: v for k, v in facts.values.items() if k not in sources}
            values.update(fresh)
            sources.update(dict.fromkeys(fresh, "the cluster"))
        if answer:
            values[key] = answer
            sources[key] = "your answer"


def _prompt(
    key: str, question: str, shown: str, read: Callable[[str], ClusterFacts]
) -> tuple[Any, ClusterFacts | None]:
    """One question's answer (`shown` on Enter), asked again until it is valid; for a partition
    other than `shown`, also what the cluster says of it."""
    read_facts: list[ClusterFacts] = []

    def parse(text: str) -> Any:
        answer = _parse(key, text)
        if key == "slurm.partition" and answer and answer != shown:
            try:
                read_facts[:] = [read(answer)]
            except UsageError as exc:  # not one of the cluster's partitions
                raise ValueError(exc.message.removeprefix("--partition ")) from None
        return answer

    answer = output.ask(question, default=shown, parse=parse)
    return answer, (read_facts[0] if read_facts else None)


def _shown(value: Any) -> str:
    """A value as a question shows it for its default (mounts: separated by spaces)."""
    return " ".join(value) if isinstance(value, list) else str(value)


def _parse(key: str, text: str) -> Any:
    """An answer as the profile holds it (mounts: a list; empty: none), checked as the job spec
    checks it; a bad one raises ValueError (output.ask shows it and asks again)."""
    answer = text.strip()
    if not answer:
        return ""
    value = answer.split() if key == "container.mounts" else answer
    try:
        _checked({key: value}, {key: "your answer"})
    except ConfigError as exc:
        raise ValueError("; ".join(exc.problems)) from None
    return value


def _value(spec: LaunchSpec, key: str) -> Any:
    """The validated value of `key` as YAML writes it (an answer "4" is the number 4)."""
    section, name = key.split(".")
    value = getattr(getattr(spec, section), name)
    return [str(mount) for mount in value] if key == "container.mounts" else value


def _profile_text(values: dict[str, Any]) -> str:
    nested: dict[str, Any] = {}
    for key in sorted(values, key=list(_FLAGS).index):
        section, name = key.split(".")
        nested.setdefault(section, {})[name] = values[key]
    header = "# Written by nrl-launch init: the site settings every command reads first.\n"
    return header + yaml.safe_dump(nested, sort_keys=False, allow_unicode=True)


def _query(argv: list[str]) -> str | None:
    try:
        done = runner.run(argv, check=False, timeout=_QUICK_S)
    except SchedulerError:
        return None
    return done.stdout if done.returncode == 0 else None


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # a uid with no name (some containers)
        return str(os.getuid())
