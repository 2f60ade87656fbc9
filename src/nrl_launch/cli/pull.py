"""`nrl-launch pull`: import a registry image into a .sqsh file on a compute node (enroot import),
as a Slurm job with the same records, status, logs and cancel as any other: login nodes often
forbid the import, and a .sqsh on shared storage starts every later job without pulling."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch import backends, enroot
from nrl_launch.cli import queued
from nrl_launch.cli.options import DryRun, JobFlags, Quiet, job_command
from nrl_launch.errors import UsageError
from nrl_launch.jobs.launch import launch

if TYPE_CHECKING:
    from nrl_launch.enroot import Image

# What the import is, whatever the profile says: one task on one node, no GPU, no container
# (enroot itself runs on the node). --set cannot change these; it may change anything else.
_FIXED = {
    "backend": "slurm",
    "interactive": False,
    "slurm.nodes": 1,
    "slurm.gpus_per_node": 0,
    "container.runtime": "none",
    "container.image": None,
    "driver.workdir": None,
    # A profile's sandbox serves Ray jobs: an import has none.
    "sandbox": None,
}
# Defaults of pull's own, over the profile's: a training profile's exclusive node is wasted on
# an import. Flags and --set still change them.
_DEFAULTS = {"slurm.exclusive": False, "slurm.job_name": "enroot-import"}


EXAMPLES = """\
Examples:
  nrl-launch pull nvcr.io/nvidia/nemo-rl:v0.6.0 --wait     # writes ./nemo-rl+v0.6.0.sqsh
  nrl-launch pull nvcr.io/nvidia/nemo-rl:v0.6.0 --dry-run
"""


PullSets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Set a spec key, e.g. --set caches.enroot=/shared/enroot-cache (repeatable).",
        rich_help_panel="Job spec",
        show_default=False,
        metavar="KEY=VALUE",
    ),
]

# The job options pull takes: its files and --set, where and for how long it queues, under what
# name, --log-dir and --json. The rest it fixes (_FIXED) or has no use for.
_TAKES = (
    "profile",
    "job",
    "set_",
    "time",
    "account",
    "partition",
    "job_name",
    "qos",
    "constraint",
    "reservation",
    "exclude",
    "log_dir",
    "json",
)


@job_command(_TAKES, set_=PullSets)
def pull(
    image: Annotated[
        str,
        typer.Argument(
            help="The image: nvcr.io/nvidia/nemo-rl:v0.6.0, or enroot's "
            "docker://[USER@][REGISTRY#]IMAGE[:TAG].",
            metavar="IMAGE",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="The .sqsh file to write (default: from IMAGE, e.g. nemo-rl+v0.6.0.sqsh, in "
            "the current dir); on storage the nodes share.",
            metavar="FILE",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the file if it exists (when the job starts).")
    ] = False,
    quiet: Quiet = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit with enroot's exit code."),
    ] = False,
    dry_run: DryRun = False,
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
) -> int:
    """Import IMAGE into a .sqsh file with enroot, on a compute node (one task, no GPU); prints
    the job id. Then run jobs with --container FILE."""
    try:
        parsed = enroot.parse(image)
    except ValueError as exc:
        raise UsageError(f"IMAGE {image!r}: {exc}; expected e.g. {enroot.EXAMPLE}") from None
    if dry_run and wait:
        raise UsageError("--dry-run and --wait cannot be combined: a dry run submits nothing")
    target = _output(out, parsed, force=force)
    _refuse_fixed_sets(flags.sets)
    command = ["enroot", "import", "-o", str(target), parsed.uri]
    spec = _with_pull_values(flags, command).resolve(ray=False).spec
    remove_first = str(target) if force else None
    about = {"image": parsed.uri, "output": str(target)}
    if dry_run:
        request = backends.get(spec.backend).plan_plain(spec, remove_first=remove_first)
        return queued.dry_run("pull", request, json=flags.json, extra=about)
    rec = launch(spec, kind="plain", remove_first=remove_first)
    text = (
        f"Submitted job {rec.job_id}: enroot import of {parsed.uri} into {target} (then: "
        f"--container {target}); logs in {rec.log_dir}\n{queued.next_steps(rec.job_id)}"
    )
    return queued.report("pull", [rec], text, quiet=quiet, json=flags.json, wait=wait, extra=about)


def _output(out: Path | None, image: Image, *, force: bool) -> Path:
    """The absolute .sqsh path to write: the job does not run in this directory."""
    path = Path(os.path.normpath(Path.cwd() / (out or Path(image.file_name)).expanduser()))
    flag = f"-o {out}" if out is not None else f"-o: {path.name} (the default for IMAGE)"
    if path.is_dir():
        raise UsageError(f"{flag}: {path} is a directory; give the .sqsh file to write")
    if path.suffix != ".sqsh":
        raise UsageError(f"{flag}: expected a .sqsh file name (pyxis runs it as --container)")
    if not path.parent.is_dir():
        raise UsageError(f"{flag}: directory {path.parent} does not exist")
    if path.exists() and not force:
        raise UsageError(f"{flag}: {path} already exists; pass --force to replace it")
    return path


def _refuse_fixed_sets(sets: list[str]) -> None:
    for item in sets:
        key = item.partition("=")[0].strip()
        for fixed in [*_FIXED, "driver.command"]:
            if key == fixed or fixed.startswith(f"{key}.") or key.startswith(f"{fixed}."):
                raise UsageError(
                    f"--set {key}: pull always runs enroot import as one task on one node, "
                    f"without GPUs or a container ({fixed} is pull's own)"
                )


def _with_pull_values(flags: JobFlags, command: list[str]) -> JobFlags:
    values: dict[str, Any] = {k: v for k, v in _DEFAULTS.items() if k not in flags.values}
    values |= flags.values | _FIXED | {"driver.command": command}
    labels = {key: flags.labels.get(key, "pull") for key in values}
    return dataclasses.replace(flags, values=values, labels=labels)
