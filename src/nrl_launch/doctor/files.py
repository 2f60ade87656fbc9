"""doctor's file checks, as this machine sees the files: the container image and the mounts'
sources, and the dirs every node must share (the log dir and each cache dir), which the job
must be able to write in or create; and who else can write what the job runs or keeps its token
in (`trust_checks`): the log and cache dirs, the submit dir, PATH and the files setup sources.

Doctor creates nothing the user did not ask for: the only files it writes are probe files that
it removes at once.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from nrl_launch import trust
from nrl_launch.doctor.verdicts import Check, _fail, _ok, _warn
from nrl_launch.shell import sourced
from nrl_launch.spec import LaunchSpec

__all__ = [
    "PROBE_PREFIX",
    "container_checks",
    "dir_check",
    "dir_checks",
    "shared_dirs",
    "trust_checks",
]

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


# ---- Who else can write it: what the job runs, and where it keeps its token ----


def _cache_trust_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    checks = []
    for key, path in shared_dirs(spec, cwd)[1:]:  # the log dir is submit's own check's
        why = trust.shared(path) or trust.replaceable(path)
        if why:
            checks.append(
                _warn(
                    key,
                    f"{path}: {why}: another user could put code there that your job runs "
                    "(a uv wheel, a model's remote code); use a directory only you can write",
                )
            )
    return checks


def _submit_dir_check(cwd: Path) -> list[Check]:
    why = trust.replaceable(cwd)
    if not why:
        return []
    return [
        _warn(
            "submit dir",
            f"{cwd}: {why}: the job runs here, and relative paths in setup and the driver "
            "resolve here: another user could replace what it runs; submit from a directory "
            "only you can write",
        )
    ]


def _path_checks(environ: Mapping[str, str]) -> list[Check]:
    """Each entry of this shell's PATH, which the job inherits: a relative one finds commands
    in the submit dir, one that another user can write holds commands they chose."""
    checks = []
    for entry in dict.fromkeys(environ.get("PATH", "").split(os.pathsep)):
        if not Path(entry).is_absolute():
            shown = repr(entry) + (" (empty)" if not entry else "")
            checks.append(
                _warn(
                    "PATH",
                    f"{shown} is relative: the job's commands are looked up in the dir it runs "
                    "in (the submit dir), where another user may put one; remove it from PATH",
                )
            )
            continue
        path = Path(entry)
        if not path.is_dir():
            continue
        why = trust.replaceable(path) or trust.shared(path)
        if why:
            checks.append(
                _warn(
                    "PATH",
                    f"{entry}: {why}: another user could put a command there that your job "
                    "runs as you; remove it from PATH, or make it writable by you alone",
                )
            )
    return checks


# Shell words that may come before a command: `if ...; then source x; fi`.
def _sourced_file_problem(path: Path) -> str | None:
    """Why `path` (a file setup sources) is not safe to run as the user: not theirs (a file of
    root's counts as theirs unless someone else can write it), or in a dir another user can
    replace it in; None when it is."""
    try:
        st = path.lstat()
    except OSError:
        st = None
    why = None
    if st is not None:
        root_s = st.st_uid == 0 and not stat.S_ISLNK(st.st_mode)
        why = trust.shared(path) if root_s else trust.not_mine(path)
    return why or trust.replaceable(path.parent)


def _setup_checks(spec: LaunchSpec, cwd: Path) -> list[Check]:
    if not spec.setup:
        return []
    inside = spec.container.runtime == "pyxis"
    start = Path(spec.container.workdir) if inside and spec.container.workdir else cwd
    checks = []
    for word, moved in dict.fromkeys(sourced(spec.setup)):
        where = Path(word).expanduser()
        if not where.is_absolute():
            if moved:  # after a cd: not known from here where it is
                continue
            where = start / where
        path = Path(_host_path(spec, os.path.normpath(where)))
        if inside and not path.exists():
            continue  # in the image, as far as this machine can tell
        why = _sourced_file_problem(path)
        if why:
            checks.append(
                _warn(
                    "setup",
                    f"source {word}: {why}: another user could change what your "
                    "job runs as you; keep the file, and the dirs it is in, writable by you "
                    "alone",
                )
            )
    return checks


def trust_checks(spec: LaunchSpec, cwd: Path, environ: Mapping[str, str]) -> Iterator[Check]:
    """Who besides the user can write what the job runs or keeps its Ray token in: the log
    dir (a fail, as at submit), the cache dirs, the submit dir, each PATH entry and each file
    the setup command sources (warnings). Nothing is said of what only the user can write."""
    yield from _cache_trust_checks(spec, cwd)
    yield from _submit_dir_check(cwd)
    yield from _path_checks(environ)
    yield from _setup_checks(spec, cwd)
