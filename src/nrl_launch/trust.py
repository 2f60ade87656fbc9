"""Who else can write a path: the checks that keep other users' files out of what nrl-launch
and its jobs run or believe.

On a shared cluster other users share the login node and the file system, and may share a Unix
group with you. A file they can write is one they can make say anything: a log dir they made
gets your job's token, a `<JOBID>-attach.sh` they wrote runs as you at `attach`. So:

- `replaceable(dir)`: someone else can rename or replace `dir`, or what is in it: it, or a
  directory above it, is writable by another user without the sticky bit (which keeps each
  entry its owner's). Nothing of a job may live there.
- `shared(dir)`: someone else can create entries in `dir` itself, sticky or not (pre-create the
  next job's log dir, or its Slurm output file).
- `not_mine(path)`: the login side reads or runs `path` only if it is this user's own, not a
  link, and writable by nobody else.
- `foreign_owner(dir)`: a directory on the way is owned by another user (not root), who can
  replace what is under it; said as a warning.

A group counts as nobody else when it is this user's private group (a group of their name with
no other member, as most sites make one per user). Each function returns one line saying why,
or None. Pure apart from stat calls, extended attributes and the user and group databases.

POSIX ACLs count, and fail closed: a path is writable by others when its mode says so (every
user, or a group of others: under an ACL the group bits are its mask, the most any entry but the
owner's may grant), when its ACL names a user or a group of others with write (whatever the
mask: whoever may change the ACL may widen the mask), when a directory's default ACL would give
them write to what is made in it, or when it has an ACL that cannot be read. NFSv4 and other
non-POSIX ACLs are not read.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
import struct
import sys
from pathlib import Path

__all__ = ["foreign_owner", "log_base_problem", "not_mine", "replaceable", "shared"]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def _private_group(gid: int) -> bool:
    """Whether group `gid` holds nobody but this user: a group of the user's name whose member
    list names no one else (a user-private group)."""
    me = _user_name(os.getuid())
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == me and set(group.gr_mem) <= {me}


# POSIX ACLs as Linux keeps them in these extended attributes (linux/posix_acl_xattr.h): a
# version (u32, 2), then entries of tag (u16), permissions (u16) and a user's or group's id (u32),
# little-endian.
_ACL_ACCESS = "system.posix_acl_access"
_ACL_DEFAULT = "system.posix_acl_default"
_ACL_VERSION = 2
_ACL_ENTRY = struct.Struct("<HHI")
_ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_OTHER = 0x02, 0x04, 0x08, 0x20
_ACL_WRITE = 0x02
# The file system keeps no POSIX ACL of this path (it has none, or cannot have one).
_NO_ACL = (errno.ENODATA, errno.EOPNOTSUPP, errno.ENOTSUP)


def _acl(path: Path, name: str) -> list[tuple[int, int, int]] | None:
    """The entries (tag, permissions, id) of `path`'s ACL `name` (links followed, as stat
    does); none when it has none; None when it cannot be read or is not one Linux writes."""
    if sys.platform != "linux":
        return []
    try:
        raw = os.getxattr(path, name)
    except OSError as exc:
        return [] if exc.errno in _NO_ACL else None
    body = raw[4:]
    if len(raw) < 4 or int.from_bytes(raw[:4], "little") != _ACL_VERSION or len(body) % 8:
        return None
    return list(_ACL_ENTRY.iter_unpack(body))


def _entry_writer(tag: int, ident: int, st: os.stat_result, default: bool) -> str | None:
    """Who besides its owner and this user an ACL entry that grants write lets write: a user or
    a group it names; in a default ACL also its owning group's and every user's entries (they
    become the modes of what is made in the directory). The access ACL's others are the mode's."""
    if tag == _ACL_USER:
        return None if ident in (st.st_uid, os.getuid()) else f"user {_user_name(ident)}"
    if tag == _ACL_GROUP:
        return None if _private_group(ident) else f"group {_group_name(ident)}"
    if default and tag == _ACL_GROUP_OBJ and not _private_group(st.st_gid):
        return f"group {_group_name(st.st_gid)}"
    if default and tag == _ACL_OTHER:
        return "every user"
    return None


def _acl_writers(path: Path, st: os.stat_result) -> str | None:
    """Who besides its owner and this user an ACL of `path` (or a directory's default ACL) lets
    write; "others" when one cannot be read; None when none does."""
    access = _acl(path, _ACL_ACCESS)
    default = _acl(path, _ACL_DEFAULT) if stat.S_ISDIR(st.st_mode) else []
    if access is None or default is None:
        return "others, as far as nrl-launch can tell (it cannot read its ACL)"
    for entries, of_default in ((access, False), (default, True)):
        for tag, perm, ident in entries:
            who = _entry_writer(tag, ident, st, of_default) if perm & _ACL_WRITE else None
            if who:
                return f"{who} through its {'default ACL' if of_default else 'ACL'}"
    return None


def _writers(path: Path, st: os.stat_result) -> str | None:
    """Who besides the owner may write `path` (of stat `st`): every user, or a group (not this
    user's private one), by its mode or an ACL; None when nobody is."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid):
        return f"group {_group_name(st.st_gid)}"
    return _acl_writers(path, st)


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}"


def _existing(path: Path) -> Path:
    """The deepest directory of `path` (absolute) that exists, resolved: links followed."""
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def replaceable(directory: Path) -> str | None:
    """Why another user could rename or replace `directory`, or an entry in it (it, or a
    directory above it, is writable by them without the sticky bit); None when none can. Of a
    directory that does not exist yet, its deepest existing parent is checked: the rest would be
    made by this user."""
    here = _existing(directory)
    for place in (here, *here.parents):
        try:
            st = place.stat()
        except OSError:
            continue
        writers = _writers(place, st)
        if writers and not st.st_mode & stat.S_ISVTX:
            return f"{place} is writable by {writers} ({_mode(st)}, no sticky bit)"
    return None


def shared(directory: Path) -> str | None:
    """Why another user could create entries in `directory` itself (writable by them, sticky or
    not); None when none can, or when it does not exist (this user would make it)."""
    try:
        st = Path(directory).stat()
    except OSError:
        return None
    writers = _writers(Path(directory), st)
    return f"{directory} is writable by {writers} ({_mode(st)})" if writers else None


def foreign_owner(directory: Path) -> str | None:
    """Why the owner of a directory on the way to `directory` could replace it: the first one
    (from the top) that belongs to neither root nor this user; None when there is none."""
    here = _existing(directory)
    me = os.getuid()
    for place in reversed((here, *here.parents)):
        try:
            owner = place.stat().st_uid
        except OSError:
            continue
        if owner not in (0, me):
            return f"{place} belongs to user {_user_name(owner)}"
    return None


def not_mine(path: Path) -> str | None:
    """Why `path` is not this user's own to read or run: it is a symbolic link, belongs to
    another user, or is writable by another; None when it is this user's own."""
    try:
        st = path.lstat()
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid != os.getuid():
        return f"{path} belongs to user {_user_name(st.st_uid)}, not you"
    writers = _writers(path, st)
    if writers:
        return f"{path} is writable by {writers} ({_mode(st)})"
    return None


def log_base_problem(base_dir: str, cwd: Path) -> str | None:
    """Why a job's log dirs under logs.base_dir `base_dir` (taken from `cwd`, where the job is
    submitted) would not be its owner's alone, as one line naming the key; None when they would
    be. The log dir holds the job's Ray token and the script every node runs."""
    base = (cwd / base_dir).resolve()
    why = replaceable(base) or shared(base)
    if why is None:
        return None
    shown = base_dir if Path(base_dir).is_absolute() else f"{base_dir} ({base})"
    return (
        f"logs.base_dir {shown}: {why}: another user could make or replace this job's log dir, "
        "and so change what its nodes run (and read a Ray job's token); use a directory only "
        "you can write (--log-dir DIR)"
    )
