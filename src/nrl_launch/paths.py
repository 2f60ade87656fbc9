"""Every on-disk location nrl-launch reads or writes, in one place."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "PROFILE_ENV",
    "PROFILE_NAME",
    "STATE_ENV",
    "state_dir",
    "templates_dir",
    "user_profile",
    "write_atomically",
]

PROFILE_ENV = "NRL_LAUNCH_PROFILE"
PROFILE_NAME = "nrl-launch.yaml"
STATE_ENV = "NRL_LAUNCH_STATE_DIR"


def user_profile(environ: Mapping[str, str]) -> Path:
    """The profile in the user's config dir (XDG), used when no other profile is found."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "nrl-launch" / "profile.yaml"


def state_dir(environ: Mapping[str, str]) -> Path:
    """Where job records and submitted scripts live: $NRL_LAUNCH_STATE_DIR, else XDG's state dir."""
    if environ.get(STATE_ENV):
        return Path(environ[STATE_ENV])
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME", "~")) / ".local" / "state")
    return Path(base).expanduser() / "nrl-launch"


def templates_dir() -> Path:
    """Where the job templates are: inside the installed package, else the source checkout.

    The wheel carries them as package data (pyproject's force-include); an editable install
    runs from the source tree, where they sit at the top of the repository.
    """
    packaged = Path(__file__).parent / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never half,
    and a failed write leaves nothing behind. Raises OSError."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
