"""Where a path lives: on storage every node shares, or on each node's own.

One list of node-local roots for every check that asks (the caches, NeMo RL's log and
checkpoint dirs, container mounts and images), and a reader of /proc/self/mountinfo for the
filesystem a path is on. Pure apart from `filesystem_type`, which reads mountinfo.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "LOCAL_FILESYSTEMS",
    "NODE_LOCAL_ROOTS",
    "filesystem_type",
    "is_under",
    "node_local_root",
    "parse_mountinfo",
]

# Where nodes keep files of their own: what one node writes there, no other node sees.
NODE_LOCAL_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/scratch/local", "/local")

# Filesystems on this machine's own memory or disks. Storage the nodes share is a network or
# parallel filesystem (nfs, lustre, gpfs, beegfs, cephfs, wekafs...), which the login node
# mounts under its own type too.
LOCAL_FILESYSTEMS = frozenset(
    ["tmpfs", "ramfs", "devtmpfs", "overlay", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs"]
)


def is_under(path: str, root: str) -> bool:
    """Whether `path` is `root` or inside it (as text: both absolute, neither resolved)."""
    root = root.rstrip("/")
    path = path.rstrip("/") or "/"
    return root == "" or path == root or path.startswith(root + "/")


def node_local_root(path: str) -> str | None:
    """The node-local root that holds the absolute `path` (/tmp for /tmp/x), or None."""
    return next((root for root in NODE_LOCAL_ROOTS if is_under(path, root)), None)


_OCTAL = re.compile(r"\\([0-7]{3})")


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) of each line of /proc/PID/mountinfo, in its order.

    A line is `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER`;
    the kernel writes a space, tab, newline or backslash in a path as an octal escape.
    """
    found = []
    for line in text.split("\n"):
        fields, sep, rest = line.partition(" - ")
        parts, after = fields.split(), rest.split()
        if not sep or len(parts) < 5 or not after:
            continue
        point = _OCTAL.sub(lambda m: chr(int(m[1], 8)), parts[4])
        found.append((point, after[0]))
    return found


def filesystem_type(path: str, mounts: list[tuple[str, str]] | None = None) -> str | None:
    """The type of the filesystem that holds the absolute `path` (the deepest mount point
    above it; the last of several mounted at one point), or None when mountinfo is unreadable.
    `mounts` is `parse_mountinfo`'s answer; by default this process's own mountinfo is read."""
    if mounts is None:
        try:
            mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None
    best: tuple[int, str] | None = None
    for point, kind in mounts:
        if is_under(path, point) and (best is None or len(point.rstrip("/")) >= best[0]):
            best = (len(point.rstrip("/")), kind)
    return best[1] if best else None
