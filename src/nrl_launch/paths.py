"""Every on-disk location nrl-launch reads or writes, in one place."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from nrl_launch.errors import ConfigError, UsageError

__all__ = [
    "PROFILE_ENV",
    "PROFILE_NAME",
    "STATE_ENV",
    "node_dir",
    "private_dir",
    "read_config_text",
    "read_text",
    "remote_dir",
    "remotes_file",
    "state_dir",
    "templates_dir",
    "user_profile",
    "write_atomically",
    "write_script",
]

PROFILE_ENV = "NRL_LAUNCH_PROFILE"
PROFILE_NAME = "nrl-launch.yaml"
STATE_ENV = "NRL_LAUNCH_STATE_DIR"


def user_profile(environ: Mapping[str, str]) -> Path:
    """The profile in the user's config dir (XDG), used when no other profile is found."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "nrl-launch" / "profile.yaml"


def remotes_file(environ: Mapping[str, str]) -> Path:
    """The remote clusters' profiles (--remote NAME), in the user's config dir (XDG)."""
    return user_profile(environ).with_name("remotes.yaml")


def remote_dir(environ: Mapping[str, str], name: str) -> Path:
    """What this machine keeps of remote cluster `name`: its jobs' records (<id>.json) and
    whether its nrl-launch was checked."""
    return state_dir(environ) / "remote" / name


def state_dir(environ: Mapping[str, str]) -> Path:
    """Where job records and submitted scripts live: $NRL_LAUNCH_STATE_DIR, else XDG's state dir."""
    if environ.get(STATE_ENV):
        return Path(environ[STATE_ENV])
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME", "~")) / ".local" / "state")
    return Path(base).expanduser() / "nrl-launch"


def templates_dir() -> Path:
    """Where the job templates are: in the package (src/nrl_launch/templates/), which the wheel
    carries as it carries the modules, and an editable install runs from."""
    return Path(__file__).parent / "templates"


def node_dir() -> Path:
    """Where the node program's files are (nrl_launch/node/: static bash, see node/__init__)."""
    return Path(__file__).parent / "node"


def private_dir(path: Path) -> None:
    """Make directory `path` (and its parents) if missing; those made are the user's alone
    (mode 0700): the state dir holds the job scripts and records. Raises OSError."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)


def write_atomically(path: Path, text: str, mode: int = 0o600) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never half,
    and a failed write leaves nothing behind. Raises OSError."""
    import tempfile  # stdlib, for a write only: not at `import nrl_launch.api`

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_script(path: Path, text: str, mode: int = 0o700) -> None:
    """Write atomically: a reader (or a failed write) never sees half a script. The job's own
    copy (in the state dir) is the user's alone; `render -o` writes a script where asked,
    runnable by all (0o755), as it always has."""
    if not path.parent.is_dir():
        raise UsageError(f"{path}: directory {path.parent} does not exist")
    try:
        write_atomically(path, text, mode=mode)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None


def read_text(path: Path) -> str:
    """The UTF-8 text of the regular file `path`. Anything else is refused, not read: a FIFO
    would block until something writes to it, a device might never end.
    Raises OSError (FileNotFoundError, IsADirectoryError, ...) or UnicodeDecodeError."""
    # O_NONBLOCK: opening a FIFO waits for a writer without it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket or device"
            raise OSError(errno.EINVAL, f"not a regular file but {kind}", str(path))
        with os.fdopen(fd, "rb") as f:
            fd = -1  # closed with f
            data = f.read()
    finally:
        if fd >= 0:
            os.close(fd)
    return data.decode("utf-8")


def read_config_text(path: Path, label: str) -> str:
    """`read_text` for a file the user named (a profile, a job file, a NeMo RL config): every
    failure is one ConfigError line that starts with `label`."""
    try:
        return read_text(path)
    except FileNotFoundError:
        raise ConfigError([f"{label}: no such file"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{label}: is a directory, not a YAML file"]) from None
    except UnicodeDecodeError as exc:
        byte = f"byte {exc.object[exc.start]:#04x} at offset {exc.start}"
        raise ConfigError([f"{label}: is not UTF-8 text ({byte})"]) from None
    except OSError as exc:
        raise ConfigError([f"{label}: cannot be read ({exc.strerror or exc})"]) from None
