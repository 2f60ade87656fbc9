"""Why pyxis could not start a step's container, from what it and enroot printed. Pure.

pyxis (0.24) reports with slurm_error, which slurmstepd sends to the step's srun, so the lines
land in the srun's stderr: the batch job's own output, `slurm-<JOBID>.out`, not the job's log
dir. They read

    slurmstepd: error: pyxis: couldn't chdir to /x: No such file or directory

(`slurmstepd-NODE: error: ...` on newer Slurm; `K: ` first under srun --label). When an enroot
command fails, pyxis relays enroot's output after `pyxis: printing enroot log file:`, one
`pyxis:     LINE` each (four spaces; older pyxis wrote `pyxis: [ERROR] ...`), and enroot's own
errors are `[ERROR] MESSAGE` (common::err). srun then names the node:
`srun: error: NODE: task 0: Exited with exit code 1`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PyxisFailure", "find"]

# `[K: ]slurmstepd[-NODE]: error: pyxis: ...`; the node, when Slurm names it, and pyxis's words.
_ERROR = re.compile(r"^(?P<prefix>.*?)\berror:\s+(?P<msg>pyxis:.*?)\s*$")
_STEPD_NODE = re.compile(r"slurmstepd-(?P<node>[^:\s]+):")
_SRUN_NODE = re.compile(r"srun: error: (?P<node>[^:\s]+): tasks? [0-9,-]+: ")
# Relayed output of an enroot command: indented, or enroot's own [ERROR].
_RELAYED = re.compile(r"pyxis:(?: {2,}|\s*(?=\[ERROR\]))(?P<text>.*)$")
# Lines pyxis writes as errors that are not why a container did not start.
_BENIGN = re.compile(
    r"pyxis: (?:ignoring --|printing \S+ log file|received SIGTERM|if the image has an unusual"
    r"|child \d+ failed with error code)"
)
_IMAGE_FILE = r".+\.(?:sqsh|squashfs)"


@dataclass(frozen=True)
class PyxisFailure:
    cause: str  # one line: what failed where, pyxis's own words, what to do
    line: int  # the line (1-based) that shows it


@dataclass(frozen=True)
class _Entry:
    index: int  # 0-based line number
    node: str | None  # from slurmstepd-NODE, else the next `srun: error: NODE: task` line
    text: str  # `pyxis: ...`; a relayed line as `pyxis: WHAT ENROOT SAID`
    relayed: bool  # what an enroot command printed, relayed by pyxis


@dataclass(frozen=True)
class _Found:
    groups: dict[str, str]  # what the signature read from the line
    entry: _Entry
    entries: list[_Entry]

    @property
    def node(self) -> str:
        return self.entry.node or "a node"

    @property
    def said(self) -> str:
        return f'"{self.entry.text}"'

    def enroot_error(self) -> str:
        """Better than pyxis's words: enroot's own, relayed after them (an older pyxis
        relayed them before its own), an [ERROR] first."""
        after = [e.text for e in self.entries if e.index > self.entry.index and e.relayed]
        before = [e.text for e in self.entries if e.index < self.entry.index and e.relayed]
        relayed = after + before
        error = next((t for t in relayed if "[ERROR]" in t), None) or next(
            (t for t in relayed if "error" in t.lower() or "failed" in t.lower()), None
        )
        return f'"{error}"' if error else self.said

    def say(self, template: str) -> str:
        return template.format(
            **self.groups, node=self.node, said=self.said, enroot=self.enroot_error()
        )


def _entries(text: str) -> list[_Entry]:
    lines = text.split("\n")
    found: list[tuple[int, str | None, str]] = []
    nodes: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        srun = _SRUN_NODE.search(line)
        if srun:
            nodes.append((index, srun["node"]))
            continue
        match = _ERROR.match(line)
        if match:
            stepd = _STEPD_NODE.search(match["prefix"])
            found.append((index, stepd["node"] if stepd else None, match["msg"]))
    entries = []
    for index, node, msg in found:
        relayed = _RELAYED.match(msg)
        node = node or next((n for i, n in nodes if i > index), None)
        text = f"pyxis: {relayed['text'].strip()}" if relayed else msg
        entries.append(_Entry(index, node, text, relayed is not None))
    return entries


# Most specific first: a container that cannot start also says so in more general words.
# Each cause is a template: the signature's named groups, {node}, {said} (pyxis's line) and
# {enroot} (enroot's own error line, when pyxis relayed one; else pyxis's).
_SIGNATURES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r'pyxis: error: a container with name "(?P<name>[^"]*)" does not exist, and '
            r"--container-image is not set"
        ),
        (
            "pyxis found no container {name} on {node} to enter, and no image to "
            "create it from: {said}; the job's own step on that node did not start its container"
        ),
    ),
    (
        re.compile(r'pyxis: error: "create" flag .* already exists'),
        (
            "a container of that name already exists on {node}: {said}; an earlier job left "
            "it (enroot list, then enroot remove on that node)"
        ),
    ),
    (
        re.compile(r'pyxis: error: "exec" flag .* is not running'),
        "the named container is not running on {node}: {said}",
    ),
    (
        re.compile(r"pyxis: --container-mounts: source path does not exist: (?P<src>.+)$"),
        (
            "the container.mounts source {src} does not exist on {node}: {said}; "
            "create it on storage every node sees, or fix container.mounts"
        ),
    ),
    (
        re.compile(r"enroot-mount: failed to (?:\S+ )?mount: .* at "),
        "a container mount failed on {node}: {said}; check container.mounts",
    ),
    (
        re.compile(r"pyxis: couldn't chdir to (?:container cwd )?(?P<dir>.+?): [^:]+$"),
        (
            "pyxis could not enter the working directory {dir} in the container on "
            "{node}: {said}; set container.workdir to a dir inside the container, or mount "
            'the submit dir (e.g. --mount "$PWD")'
        ),
    ),
    (
        re.compile(
            rf"\[ERROR\] (?:No such file or directory|Invalid argument): (?P<path>{_IMAGE_FILE})$"
        ),
        (
            "container.image {path} does not exist on {node}: {said}; give the "
            "absolute path of a .sqsh file every node can read"
        ),
    ),
    (
        re.compile(r"\[ERROR\] Invalid image format: (?P<path>.+)$"),
        (
            "container.image {path} is not a squashfs image pyxis can start on "
            "{node}: {said}; make one with nrl-launch pull (enroot import)"
        ),
    ),
    (
        re.compile(r"pyxis: failed to import docker image: (?P<image>.+?)(?: \(importer: .*\))?$"),
        (
            "pyxis could not import container.image {image} on {node}: "
            "{enroot}; check the reference (a .sqsh file must start with / or .) and "
            "the registry's credentials (~/.config/enroot/.credentials)"
        ),
    ),
    (
        re.compile(r"pyxis: failed to create container filesystem for image: (?P<image>.+)$"),
        ("pyxis could not unpack container.image {image} on {node}: {enroot}"),
    ),
]


_GENERIC = "pyxis could not start the container on {node}: {enroot}"


def find(text: str) -> PyxisFailure | None:
    """The most specific pyxis failure in `text` (a step's stderr), or None."""
    entries = _entries(text)
    for pattern, cause in _SIGNATURES:
        for entry in entries:
            match = pattern.search(entry.text)
            if match:
                found = _Found(match.groupdict(), entry, entries)
                return PyxisFailure(found.say(cause), entry.index + 1)
    for entry in entries:
        if not entry.relayed and not _BENIGN.match(entry.text):
            return PyxisFailure(_Found({}, entry, entries).say(_GENERIC), entry.index + 1)
    return None
