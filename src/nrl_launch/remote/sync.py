"""The project's code, to the cluster: the git checkout holding the cwd (its files as git lists
them: tracked, and untracked ones not ignored, as they are on disk) streamed as tar through one
ssh into a new directory of the user's own, `<workdir>/<checkout>-<stamp>-<random>` (0700,
never reused), under a workdir checked as a log base is (upload.sh: nobody else may write it or
a dir above it); and the command's arguments with paths into the checkout pointed at the copy."""

from __future__ import annotations

import os
import secrets
import shlex
import stat
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nrl_launch import paths
from nrl_launch.errors import RemoteError, UsageError
from nrl_launch.jobs import snapshot
from nrl_launch.remote import ssh
from nrl_launch.remote.profiles import Remote

__all__ = ["Project", "find_project", "rewrite", "upload"]

_REFUSED = "nrl-launch-workdir: "  # upload.sh's line for a workdir others could write


@dataclass(frozen=True)
class Project:
    """The checkout to sync, and where in it the command was given."""

    root: Path
    cwd: Path  # relative to root
    commit: str | None
    dirty: bool


def find_project(cwd: Path, command: str) -> Project:
    """The git checkout holding `cwd`; outside one, one line."""
    root = snapshot._toplevel(cwd)
    if root is None:
        raise UsageError(
            f"--remote: {command} sends the git checkout holding the current directory to the "
            f"cluster, and {cwd} is in none (or git is not installed): run it in your project "
            "(git init it first)"
        )
    commit, dirty = snapshot._commit(root)
    return Project(root, Path(os.path.realpath(cwd)).relative_to(root), commit, dirty)


def _tar(project: Project) -> tempfile._TemporaryFileWrapper[bytes]:
    """The checkout's files as a tar: modes 0600 (0700 executable), links as links, no
    owner (the cluster's user owns what it unpacks)."""
    names = snapshot._listed(project.root)
    spool = tempfile.NamedTemporaryFile(prefix="nrl-launch-sync-", suffix=".tar")  # noqa: SIM115 - returned open
    with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if project.cwd != Path():  # the command runs there, even if git lists nothing in it
            info = tarfile.TarInfo(project.cwd.as_posix())
            info.type, info.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(info)
        for name in names:
            path = project.root / name
            try:
                st = path.lstat()
            except FileNotFoundError:  # a tracked file deleted from the tree stays out
                continue
            info = tarfile.TarInfo(name)
            info.mtime = int(st.st_mtime)
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, str(path.readlink()), 0o777
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                info.mode = 0o700 if st.st_mode & stat.S_IXUSR else 0o600
                with path.open("rb") as f:
                    tar.addfile(info, f)
    spool.flush()
    spool.seek(0)
    return spool


def upload(remote: Remote, project: Project) -> str:
    """Send the checkout to a new dir under the remote's workdir; returns the dir's path on the
    cluster. A workdir another user could write (or replace) is refused in one line naming the
    profile key, before anything is copied (upload.sh)."""
    name = f"{project.root.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    script = Path(__file__).with_name("upload.sh").read_text(encoding="utf-8")
    line = ssh.raw_line(
        f"sh -c {shlex.quote(script)} nrl-launch-sync {ssh.word(remote.workdir)} "
        f"{shlex.quote(name)}"
    )
    with _tar(project) as spool:
        code, out = ssh.run(remote, line, capture=True, stdin=spool)  # type: ignore[arg-type]
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if code == 3 and last.startswith(_REFUSED):
        raise UsageError(
            f"remote {remote.name}: workdir {remote.workdir}: {last.removeprefix(_REFUSED)}: "
            "another user could replace the code synced there before the job runs it; set "
            f"`workdir:` of remote {remote.name} in {paths.remotes_file(os.environ)} to a "
            "directory only you can write"
        )
    if code != 0 or not last:
        raise RemoteError(
            f"remote {remote.name}: the project could not be copied to {remote.workdir}/{name} "
            f"on {remote.host} (exit {code}; its error is above)"
        )
    return last


def rewrite(args: Sequence[str], root: Path, there: str) -> list[str]:
    """`args` with each absolute path into the checkout `root` (alone, or as the value of
    `--flag=PATH` or `key=PATH`) made the same path in its copy `there`; other words as they
    are (relative paths work as they are: the command runs in the copy of the cwd)."""
    return [_rewritten(arg, root, there) for arg in args]


def _rewritten(arg: str, root: Path, there: str) -> str:
    if arg.startswith("/"):
        return _moved(arg, root, there) or arg
    key, eq, value = arg.partition("=")
    if eq and value.startswith("/"):
        moved = _moved(value, root, there)
        if moved is not None:
            return f"{key}={moved}"
    return arg


def _moved(path: str, root: Path, there: str) -> str | None:
    try:
        rel = Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return None
    return there if rel == Path() else f"{there}/{rel.as_posix()}"
