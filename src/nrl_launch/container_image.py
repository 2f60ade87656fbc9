"""The job's image, before the job is queued: where pyxis will read it from (a file or a
registry) and, for a Ray job with token authentication, whether its Ray has that. The findings
are `container_checks`' (a `Finding` each); `container_checks.findings` asks for them.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from nrl_launch import enroot, runner
from nrl_launch.errors import SchedulerError
from nrl_launch.image_ray import ImageRay, image_ray
from nrl_launch.spec import LaunchSpec
from nrl_launch.storage import node_local_root

__all__ = ["IMAGE_FILE", "NO_CHECK", "Finding", "exists", "image_findings", "image_ray_findings"]

IMAGE_FILE = (".sqsh", ".squashfs")
NO_CHECK = "--no-check"


@dataclass(frozen=True)
class Finding:
    """One problem: `message` is its whole line and starts with `key`."""

    key: str
    message: str
    error: bool = False

    def __str__(self) -> str:
        return self.message


def image_ray_findings(spec: LaunchSpec, *, on_host: bool, profile: bool = False) -> list[Finding]:
    """A Ray job with token authentication (ray.auth token) in an image whose Ray has none
    (before 2.52): refused now, not after the queue wait, in one line with the choice. A .sqsh
    file is known by its listing where it can be read (`on_host`: submit), else by its name
    when that names a NeMo RL release (render too). A Ray that cannot be known here is said at
    submit (`on_host`), where the head will check it. For a `profile` (init), a warning that
    names what works there: its jobs are refused until then."""
    image = spec.container.image
    if spec.container.runtime != "pyxis" or not image or spec.ray.auth != "token":
        return []
    listing = None
    if on_host and image.startswith(("/", ".")) and exists(image):
        listing = _listing(image)
    found = image_ray(image, listing)
    if image.startswith(("/", ".")) and listing is None and found.has_auth is None:
        if not on_host:
            return []
        found = ImageRay(None, "no unsquashfs here (Debian's squashfs-tools) to list it")
    key = "container.image"
    if found.has_auth is False and profile:
        return [
            Finding(
                key,
                f"{key} {image}: its Ray is {found.version} ({found.how}), which has no token "
                "authentication (Ray 2.52 or later has), so jobs of this profile are refused "
                "while ray.auth is token: use an image with a newer Ray (NeMo RL v0.6.0 or "
                "later), or add 'ray: {auth: \"off\"}' to the profile (or --set ray.auth=off "
                "per job; then anyone who can reach the job's Ray ports can run code as you)",
            )
        ]
    if found.has_auth is False:
        return [
            Finding(
                key,
                f"{key} {image}: its Ray is {found.version} ({found.how}), which has no token "
                "authentication (Ray 2.52 or later has; ray.auth is token): use an image with "
                "a newer Ray (NeMo RL v0.6.0 or later), or set ray.auth: off (--set "
                "ray.auth=off; then anyone who can reach the job's Ray ports can run code as "
                "you)",
                error=True,
            )
        ]
    if found.has_auth is None and on_host:
        return [
            Finding(
                key,
                f"{key} {image}: which Ray it holds cannot be known here ({found.how}); the job "
                "checks it on the head when it starts (token authentication needs Ray 2.52)",
            )
        ]
    return []


def _listing(image: str) -> str | None:
    """The file listing of the squashfs file `image` (`unsquashfs -l`, which reads only its
    directory table), or None when it cannot be listed here."""
    try:
        done = runner.run(["unsquashfs", "-l", "-no-progress", image], check=False, timeout=120)
    except SchedulerError:  # not installed, or it took too long
        return None
    return done.stdout if done.returncode == 0 else None


def image_findings(
    key: str, image: str, submit_dir: str, home: str | None, on_host: bool
) -> list[Finding]:
    """What keeps pyxis from using `image` (the value of `key`) as the job means it."""
    scheme = image.partition("://")[0] if "://" in image else None
    if scheme is not None and scheme != "docker":
        return []  # dockerd:// and podman://: a local daemon's images, named as it names them
    if not image.startswith(("/", ".")):
        # pyxis reads an image as a file only when it starts with / or . (strspn(image, "./")).
        if not image.lower().endswith(IMAGE_FILE) and not image.startswith("~"):
            return _reference(key, image)
        if image.startswith("~/") and home:
            absolute = home.rstrip("/") + image[1:]
        else:
            absolute = posixpath.normpath(posixpath.join(submit_dir, image))
        return [
            Finding(
                key,
                f"{key} {image!r}: pyxis takes an image for a file only when it starts with / "
                f"or ., and would pull this one from a registry; give the absolute path, "
                f"e.g. {absolute}",
                error=True,
            )
        ]
    path = posixpath.normpath(posixpath.join(submit_dir, image))
    root = node_local_root(path)
    problem = _file_problem(path) if on_host else None
    if problem is not None:
        return [
            Finding(
                key,
                f"{key} {image}: {problem} (pyxis reads a path that starts with / or . as a "
                "squashfs file on each node); give a .sqsh file every node can read",
                error=True,
            )
        ]
    if root is not None:
        return [
            Finding(
                key,
                f"{key} {image}: {root} is local to each node, so each node needs its own copy "
                "there; keep the image on storage every node shares",
            )
        ]
    return []


def _reference(key: str, image: str) -> list[Finding]:
    """A registry image that enroot could not pull: refused here, not on every node later."""
    try:
        enroot.parse(image)
    except ValueError as exc:
        message = (
            f"{key} {image!r}: {exc}; expected a registry image ({enroot.EXAMPLE}) or a .sqsh "
            "file's path starting with / or ."
        )
        return [Finding(key, message, error=True)]
    return []


def _file_problem(path: str) -> str | None:
    """What keeps the steps from reading the file `path`, as this machine sees it."""
    if not exists(path):
        return "no such file"
    if Path(path).is_dir():
        return "a directory, not a .sqsh file"
    if not os.access(path, os.R_OK):
        return "not readable"
    return None


def exists(path: str) -> bool:
    """Whether `path` exists on this machine (a broken symlink does not)."""
    return Path(path).exists()
