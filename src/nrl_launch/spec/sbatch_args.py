"""sbatch's command line as sbatch reads it: what in `slurm.extra_args` would override nrl-launch.

`slurm.extra_args` go to sbatch after nrl-launch's own flags, and sbatch keeps the last value of
a flag, so an extra `--nodes=4` would quietly replace `slurm.nodes` (which the job script, Ray
and the NeMo RL checks all read). sbatch parses its arguments with getopt_long, so each flag has
several spellings: `--nodes=4`, `--nodes 4`, `-N4`, `-N 4`, `-vN4` (short flags bundle) and any
unambiguous prefix of the long name (`--nod=4`). `problems` reads the arguments the way
getopt_long does, with sbatch's own option table, and returns one line per argument that sets
something nrl-launch owns, and per argument sbatch would not read as an option at all (a bare
word is the job script to sbatch: it would run instead of nrl-launch's). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["OWNED", "problems"]

Arg = Literal["none", "required", "optional"]


def _words(text: str) -> list[str]:
    return text.split()


# sbatch's long options and whether each takes a value: Slurm 22.05's table (read from its
# getopt_long answers), plus the options added since (extra, segment, stepmgr, tres-bind,
# tres-per-task, container-id) and workdir, the old name of chdir.
_LONG: dict[str, Arg] = {
    **dict.fromkeys(
        _words(
            "account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint "
            "clusters comment constraint container container-id context core-spec "
            "cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency "
            "distribution error exclude export export-file extra extra-node-info gid gpu-bind "
            "gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint input "
            "job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind "
            "mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks "
            "ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres "
            "open-mode output partition power prefer priority profile qos reservation segment "
            "signal sockets-per-node switches tasks-per-node thread-spec threads-per-core time "
            "time-min tmp tres-bind tres-per-task uid wait-all-nodes wckey workdir wrap"
        ),
        "required",
    ),
    **dict.fromkeys(_words("exclusive get-user-env nice no-kill propagate"), "optional"),
    **dict.fromkeys(
        _words(
            "contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet "
            "reboot requeue spread-job stepmgr test-only usage use-min-nodes verbose version wait"
        ),
        "none",
    ),
}

# sbatch's short options: the long option each stands for.
_SHORT: dict[str, str] = {
    "a": "array",
    "A": "account",
    "b": "begin",
    "B": "extra-node-info",
    "c": "cpus-per-task",
    "C": "constraint",
    "d": "dependency",
    "D": "chdir",
    "e": "error",
    "F": "nodefile",
    "G": "gpus",
    "h": "help",
    "H": "hold",
    "i": "input",
    "J": "job-name",
    "k": "no-kill",
    "L": "licenses",
    "m": "distribution",
    "M": "clusters",
    "n": "ntasks",
    "N": "nodes",
    "o": "output",
    "O": "overcommit",
    "p": "partition",
    "q": "qos",
    "Q": "quiet",
    "s": "oversubscribe",
    "S": "core-spec",
    "t": "time",
    "v": "verbose",
    "V": "version",
    "w": "nodelist",
    "W": "wait",
    "x": "exclude",
}

_NODES = "use slurm.nodes / --nodes"
_TASKS = (
    "the job runs one task per node, which its srun steps rely on: size it with "
    "slurm.nodes / --nodes"
)
_OUTPUT = "the job's own output goes next to its log dirs: use logs.base_dir / --log-dir"
_GPUS = (
    "use slurm.gpus_per_node / --gpus-per-node (every srun step and Ray take the GPU count from "
    "it) and slurm.gpu_request for how they are asked for"
)
_ENV = (
    "secrets travel in the environment sbatch exports (nrl-launch passes --export=ALL): use "
    "env / --env and secrets / --secret"
)
_CLUSTERS = "status, logs and cancel follow jobs on this machine's cluster only"
_NOTHING = "sbatch would print it and submit nothing"

# What nrl-launch owns, by sbatch's long option name, and what to use instead.
OWNED: dict[str, str] = {
    "nodes": _NODES,
    "ntasks": _TASKS,
    "ntasks-per-node": _TASKS,
    "tasks-per-node": _TASKS,
    "ntasks-per-gpu": _TASKS,
    "ntasks-per-tres": _TASKS,
    "output": _OUTPUT,
    "error": _OUTPUT,
    "chdir": (
        "the job's log dir is relative to the directory it was submitted from: use "
        "logs.base_dir / --log-dir (and driver.workdir for the driver's working directory)"
    ),
    "job-name": "use slurm.job_name / --job-name",
    "time": (
        "use slurm.time / --time (the NeMo RL checkpoint deadline and doctor are derived from it)"
    ),
    "account": "use slurm.account / --account",
    "partition": "use slurm.partition / --partition",
    "qos": "use slurm.qos",
    "reservation": "use slurm.reservation",
    "exclude": "use slurm.exclude",
    "dependency": "use slurm.dependency (submit --chain adds singleton to it)",
    "cpus-per-task": "use slurm.cpus_per_node (the job's srun steps ask for it too)",
    "gpus": _GPUS,
    "gpus-per-node": _GPUS,
    "gpus-per-task": _GPUS,
    "gpus-per-socket": _GPUS,
    "gres": _GPUS,
    "export": _ENV,
    "export-file": _ENV,
    "signal": (
        "the job script ends Ray cleanly on Slurm's SIGTERM; another signal would end it "
        "without recording why"
    ),
    "requeue": "use slurm.requeue: true or false (unset: the cluster's JobRequeue decides)",
    "parsable": "nrl-launch passes it itself, to read the job id",
    "wrap": "nrl-launch submits its own job script",
    "test-only": "nrl-launch doctor asks sbatch --test-only itself",
    "wait": "sbatch would not return until the job ended: use nrl-launch submit --wait",
    "array": (
        "nrl-launch records one job per submit: use submit --chain N for jobs that run one "
        "after another"
    ),
    "clusters": _CLUSTERS,
    "cluster": _CLUSTERS,
    "help": _NOTHING,
    "usage": _NOTHING,
    "version": _NOTHING,
}
OWNED["no-requeue"] = OWNED["requeue"]
OWNED["workdir"] = OWNED["chdir"]

# pyxis adds --container-image, --container-mounts, ... to sbatch when it is installed.
_PYXIS = (
    "pyxis's flags belong to nrl-launch, which gives them to each srun step of the job: use "
    "container.image / --container and container.mounts / --mount"
)
_SCRIPT = (
    "sbatch would run it as the job script instead of nrl-launch's (give an option's value "
    "with =, as --constraint=h100)"
)


def problems(args: Sequence[str], *, gres_owned: bool, constraint_set: bool = False) -> list[str]:
    """One line per argument of `args` that sets what nrl-launch owns or that sbatch would not
    read as an option. `gres_owned`: nrl-launch passes --gres itself (GPUs asked for as gres),
    so any --gres here would replace it (sbatch keeps the last); `constraint_set`: so it does
    --constraint (slurm.constraint)."""
    owned = _Owned(gres_owned, constraint_set)
    found: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            found.append(
                "'--' ends sbatch's options: what follows would replace nrl-launch's job script"
            )
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            matches = _matches(name)
            if len(matches) > 1:
                shown = ", ".join(f"--{m}" for m in matches[:6])
                etc = ", ..." if len(matches) > 6 else ""
                found.append(
                    f"{word!r} abbreviates several sbatch options ({shown}{etc}): write one in full"
                )
                break  # sbatch refuses the whole command line here
            takes = _LONG[matches[0]] if matches else "none"
            pyxis = _is_pyxis(name)
            if pyxis and i + 1 < len(args) and not args[i + 1].startswith("-"):
                takes = "required"  # most of pyxis's flags take a value: refused with it
            if takes == "required" and not eq and i + 1 >= len(args) and not pyxis:
                found.append(_no_value(word))
                break
            if takes == "required" and not eq and i + 1 < len(args):
                i += 1
                word, value = f"{word} {args[i]}", args[i]
            if pyxis:
                found.append(f"{word!r} is a pyxis flag: {_PYXIS}")
            elif matches:
                found += owned.problems(word, matches[0], value)
            i += 1
            continue
        if word.startswith("-") and word != "-":
            i, more = _short(args, i, owned)
            found += more
            continue
        found.append(f"{word!r} is not an option: {_SCRIPT}")
        break  # sbatch takes every argument after the script for the script's own
    return found


def _no_value(word: str) -> str:
    """An option that takes a value, last with none: sbatch would take the next word, the job
    script's path, for it."""
    written = f"{word}=VALUE" if word.startswith("--") else f"{word}VALUE"
    return (
        f"{word!r} needs a value (sbatch would take the job script's path for it): give it "
        f"in the same word, as {written}"
    )


def _matches(name: str) -> list[str]:
    """The long options getopt_long may read `name` as: itself, or those it abbreviates."""
    if name in _LONG:
        return [name]
    return sorted(option for option in _LONG if option.startswith(name))


def _is_pyxis(name: str) -> bool:
    return name.startswith(("container-", "no-container-")) and name != "container-id"


def _short(args: Sequence[str], i: int, owned: _Owned) -> tuple[int, list[str]]:
    """Read the bundle of short options at args[i] (`-vN4`, `-N 4`); returns where the next
    argument starts and the problems found."""
    word = args[i]
    for j, letter in enumerate(word[1:], start=1):
        option = _SHORT.get(letter)
        if option is None:
            where = f" in {word!r}" if len(word) > 2 else ""
            return i + 1, [f"'-{letter}'{where} is not an sbatch option"]
        takes = _LONG[option]
        if takes == "none":
            problems_here = owned.problems(word, option, "")
            if problems_here:
                return i + 1, problems_here
            continue
        value = word[j + 1 :]
        if takes == "required" and not value and i + 1 >= len(args):
            return i + 1, [_no_value(word)]
        if takes == "required" and not value and i + 1 < len(args):
            i += 1
            word, value = f"{word} {args[i]}", args[i]
        return i + 1, owned.problems(word, option, value)
    return i + 1, []


@dataclass(frozen=True)
class _Owned:
    """What of sbatch's flags nrl-launch sets for this job beyond `OWNED`'s: --gres for the
    GPUs, --constraint when slurm.constraint is set."""

    gres: bool
    constraint: bool

    def problems(self, word: str, option: str, value: str) -> list[str]:
        if option == "constraint" and self.constraint:
            return [
                f"{word!r} would replace slurm.constraint (sbatch keeps the last --constraint): "
                "give the constraint once, in slurm.constraint"
            ]
        hint = OWNED.get(option)
        if hint is None:
            return []
        if option == "gres" and not _names_gpu(value):
            if not self.gres:
                return []  # nrl-launch asks for GPUs with --gpus-per-node, or none: gres combine
            return [
                f"{word!r} would replace nrl-launch's --gres for the GPUs (sbatch keeps the last "
                "--gres): set slurm.gpu_request: gpus-per-node to ask for the GPUs with "
                "--gpus-per-node instead"
            ]
        return [f"{word!r} is sbatch's --{option}, which nrl-launch owns: {hint}"]


def _names_gpu(gres: str) -> bool:
    """Whether a --gres value (`gpu:8`, `gres/gpu:a100:4,nvme:1`) asks for GPUs."""
    names = (entry.split(":")[0].strip().lower().removeprefix("gres/") for entry in gres.split(","))
    return "gpu" in names
