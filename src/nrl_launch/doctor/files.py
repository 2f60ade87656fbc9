"""doctor's file checks, as this machine sees the files: the container image and the mounts'
sources, and the dirs every node must share (the log dir and each cache dir), which the job
must be able to write in or create.

Doctor creates nothing the user did not ask for: the only files it writes are probe files that
it removes at once.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from nrl_launch.doctor.verdicts import Check, _fail, _ok, _warn
from nrl_launch.spec import LaunchSpec

__all__ = ["PROBE_PREFIX", "container_checks", "dir_check", "dir_checks", "shared_dirs"]

# Every file doctor or its probe job writes starts with this: a user can always tell them apart.
PROBE_PREFIX = ".nrl-doctor-"


def _is_image_path(image: str) -> bool:
    return image.startswith(("/", "./")) or image.endswith(".sqsh")


def container_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    container = spec.container
    if container.runtime != "pyxis":
        if container.mounts:
            return [
                _warn(
                    "container.mounts",
                    "set, but container.runtime is none: the job runs without a container "
                    "and mounts nothing",
                )
            ]
        return []
    checks = []
    image = container.image or ""
    if _is_image_path(image):
        path = cwd / image
        if not path.exists():
            checks.append(_fail("container.image", f"{image}: no such file"))
        elif not path.is_file():
            checks.append(_fail("container.image", f"{image}: not a file"))
        elif not os.access(path, os.R_OK):
            checks.append(_fail("container.image", f"{image}: not readable"))
        else:
            checks.append(_ok("container.image", f"{image}: a readable file"))
    else:
        checks.append(
            _ok("container.image", f"{image}: pulled by pyxis at job start (not checked here)")
        )
    for mount in container.mounts:
        if Path(mount.src).exists():
            checks.append(_ok("container.mounts", f"{mount.src} exists (mounted at {mount.dst})"))
        else:
            checks.append(
                _fail("container.mounts", f"source {mount.src} does not exist (mount {mount})")
            )
    return checks


def _cache_dirs(spec: LaunchSpec) -> list[tuple[str, str]]:
    """(key, path) of every cache dir set. Every field of `caches` is a dir that all nodes
    must share, so a cache added to the spec is checked without a change here."""
    caches = spec.caches
    found = []
    for name in type(caches).model_fields:
        value = getattr(caches, name)
        if isinstance(value, str) and value:
            found.append((f"caches.{name}", value))
    return found


def _host_path(spec: LaunchSpec, path: str) -> str:
    """Where a cache dir the job uses inside its container is on the nodes' own file system:
    through the mount that holds it; the same path without a container, or when no mount
    holds it (the job then mounts it at its own path: backends.slurm.container_mounts)."""
    if spec.container.runtime != "pyxis":
        return path
    # The deepest mount first: /data/hf under both /data and /data/hf is /data/hf's.
    for mount in sorted(spec.container.mounts, key=lambda m: len(m.dst), reverse=True):
        dst = mount.dst.rstrip("/")  # "" for a mount at /, which holds every path
        if path == dst or path.startswith(dst + "/"):
            return mount.src.rstrip("/") + path[len(dst) :]
    return path


def shared_dirs(spec: LaunchSpec, cwd: Path) -> list[tuple[str, Path]]:
    """The dirs every node must share, as host paths: the log dir, then each cache dir."""
    dirs = [("logs.base_dir", cwd / spec.logs.base_dir)]
    return dirs + [(key, Path(_host_path(spec, path))) for key, path in _cache_dirs(spec)]


def _existing(path: Path) -> Path:
    """`path` if it exists, else its nearest existing parent (what a mkdir -p would create in)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_write(directory: Path) -> str | None:
    """Create and remove a private file in `directory`; None if that worked, else why not."""
    probe = directory / f"{PROBE_PREFIX}{socket.gethostname()}-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def dir_check(key: str, path: Path, created_by: str) -> Check:
    """Whether the job can write in `path`; a dir that does not exist yet must be creatable
    (its nearest existing parent writable): `created_by` says what creates it."""
    if path.is_dir():
        problem = _probe_write(path)
        if problem:
            return _fail(key, f"{path} is not writable ({problem})")
        return _ok(key, f"{path} is writable")
    if path.exists():
        return _fail(key, f"{path} exists but is not a directory")
    parent = _existing(path)
    if not parent.is_dir():
        return _fail(key, f"{path} cannot be created: {parent} is not a directory")
    problem = _probe_write(parent)
    if problem:
        return _fail(key, f"{path} does not exist, and {parent} is not writable ({problem})")
    return _ok(key, f"{path} does not exist yet; {created_by} creates it in {parent} (writable)")


def dir_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    checks = []
    for key, path in shared_dirs(spec, cwd):
        created_by = "submit" if key == "logs.base_dir" else "its first use"
        checks.append(dir_check(key, path, created_by))
    return checks
