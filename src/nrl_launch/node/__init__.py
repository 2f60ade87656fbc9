"""The node program: the bash that every job of a kind runs, the same for every job.

A rendered job script is a short header (templates/, Jinja: the #SBATCH lines, the submit
command, the job's values, each quoted once) and, after `MARKER`, this program, copied verbatim
from the files here. Nothing in them is rendered: what differs between jobs (the container, the
sandbox, the secrets' names, ports, ...) is a value the header sets and the program reads. The
files are read in a fixed order that ends with the kind's own file, whose last lines are the
mode dispatch (`case ${1:-} in ...`; the probe's: a call of `probe_main`): bash runs the script
top to bottom, defining every function before the dispatch calls one.

The kinds: a Ray job on Slurm, on this machine, on Lepton; a plain command on Slurm (`run`,
`pull`: no Ray); and `doctor --on-nodes`' probe job.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

__all__ = ["MARKER", "Kind", "files", "job_script", "program"]

Kind = Literal["slurm", "local", "lepton", "plain", "probe"]

MARKER = (
    "# ---- nrl-launch node program (the same for every job of its kind; nrl_launch/node/) ----\n"
)

_DIR = Path(__file__).parent

# What each kind runs, in order: helpers, then the node steps, then the kind's own part.
_RAY = (
    "common.sh",
    "cluster.sh",
    "topology.sh",
    "ray.sh",
    "stall.sh",
    "snapshot.sh",
    "deadline.sh",
    "driver.sh",
)

# The driver's start-up shim (deadline.sh writes it as sitecustomize.py): Python, carried in the
# program as the text of one function, after deadline.sh.
_SHIM = _DIR / "save_by_shim.py"
_SHIM_END = "NRL_SAVE_BY_SHIM"
_FILES: dict[str, tuple[str, ...]] = {
    "slurm": (
        *_RAY,
        *("container.sh", "pyxis.sh", "reuse.sh", "secrets.sh", "batch.sh", "retries.sh"),
    ),
    "local": (*_RAY, "head_here.sh"),
    "lepton": (*_RAY, "head_here.sh"),
    "plain": ("common.sh", "container.sh", "secrets.sh", "batch.sh"),
    "probe": ("container.sh",),
}


def files(kind: Kind, *, sandbox: bool = False, remove_first: bool = False) -> list[Path]:
    """The files of `kind`'s program, in the order they are joined. The sandbox sidecar's
    (sandbox:, a Ray job on Slurm only) are there only for a job that has one, and so is
    pull --force's removal (remove_first.sh, a plain job's)."""
    names = [
        *_FILES[kind],
        *(("sandbox.sh",) if sandbox else ()),
        *(("remove_first.sh",) if remove_first else ()),
        f"{kind}.sh",
    ]
    return [_DIR / name for name in names]


@functools.cache
def program(kind: Kind, *, sandbox: bool = False, remove_first: bool = False) -> str:
    """`kind`'s node program: its files joined, each verbatim, a blank line between them (and
    after deadline.sh, `save_by_shim_source`, which prints save_by_shim.py)."""
    texts = []
    for path in files(kind, sandbox=sandbox, remove_first=remove_first):
        texts.append(path.read_text(encoding="utf-8"))
        if path.name == "deadline.sh":
            texts.append(_shim_function())
    return "\n".join(texts)


def _shim_function() -> str:
    shim = _SHIM.read_text(encoding="utf-8")
    if _SHIM_END in shim:
        raise ValueError(f"{_SHIM.name} holds {_SHIM_END}, which would end its heredoc early")
    return (
        "# The driver's start-up shim (nrl_launch/node/save_by_shim.py), printed verbatim.\n"
        f"save_by_shim_source() {{\n  cat <<'{_SHIM_END}'\n{shim}{_SHIM_END}\n}}\n"
    )


def job_script(
    header: str, kind: Kind, *, sandbox: bool = False, remove_first: bool = False
) -> str:
    """A job's script: its rendered header, the marker line, then the node program."""
    body = program(kind, sandbox=sandbox, remove_first=remove_first)
    return f"{header.rstrip()}\n\n{MARKER}{body}"
