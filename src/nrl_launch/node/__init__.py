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
# A job with pools: each pool's balancer (Python, standard library only), which the batch step
# writes into the log dir, carried the same way after pools.sh.
_BALANCER = _DIR / "pool_balancer.py"
_BALANCER_END = "NRL_POOL_BALANCER"
# Every node's `ray start` (the head's raylet beside its dashboard, a worker's once the head node
# is up): Python (Ray and the standard library), which start_ray passes to `python -c`, carried
# the same way after driver.sh.
_START = _DIR / "ray_start.py"
_START_END = "NRL_RAY_START"
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


def files(
    kind: Kind, *, sandbox: bool = False, remove_first: bool = False, pools: bool = False
) -> list[Path]:
    """The files of `kind`'s program, in the order they are joined. The sandbox sidecar's
    (sandbox:, a Ray job on Slurm only) are there only for a job that has one, and so are the
    model pools' (pools:, likewise) and pull --force's removal (remove_first.sh, a plain
    job's)."""
    names = [
        *_FILES[kind],
        *(("sandbox.sh",) if sandbox else ()),
        *(("pools.sh", f"pools_{kind}.sh") if pools else ()),
        *(("remove_first.sh",) if remove_first else ()),
        f"{kind}.sh",
    ]
    return [_DIR / name for name in names]


@functools.cache
def program(
    kind: Kind, *, sandbox: bool = False, remove_first: bool = False, pools: bool = False
) -> str:
    """`kind`'s node program: its files joined, each verbatim, a blank line between them (and
    after deadline.sh, `save_by_shim_source`, which prints save_by_shim.py; after driver.sh,
    `ray_start_source`, which prints ray_start.py; after pools.sh, `pool_balancer_source`, which
    prints pool_balancer.py)."""
    texts = []
    for path in files(kind, sandbox=sandbox, remove_first=remove_first, pools=pools):
        texts.append(path.read_text(encoding="utf-8"))
        if path.name == "deadline.sh":
            what = "the driver's start-up shim"
            texts.append(_source_function(_SHIM, _SHIM_END, "save_by_shim_source", what))
        if path.name == "driver.sh":
            what = "each node's `ray start`"
            texts.append(_source_function(_START, _START_END, "ray_start_source", what))
        if path.name == "pools.sh":
            what = "each pool's balancer"
            texts.append(_source_function(_BALANCER, _BALANCER_END, "pool_balancer_source", what))
    return "\n".join(texts)


def _source_function(path: Path, end: str, name: str, what: str) -> str:
    """A bash function that prints the file at `path` verbatim (a quoted heredoc)."""
    text = path.read_text(encoding="utf-8")
    if end in text:
        raise ValueError(f"{path.name} holds {end}, which would end its heredoc early")
    return (
        f"# {what[0].upper()}{what[1:]} (nrl_launch/node/{path.name}), printed verbatim.\n"
        f"{name}() {{\n  cat <<'{end}'\n{text}{end}\n}}\n"
    )


def job_script(
    header: str,
    kind: Kind,
    *,
    sandbox: bool = False,
    remove_first: bool = False,
    pools: bool = False,
) -> str:
    """A job's script: its rendered header, the marker line, then the node program."""
    body = program(kind, sandbox=sandbox, remove_first=remove_first, pools=pools)
    return f"{header.rstrip()}\n\n{MARKER}{body}"
