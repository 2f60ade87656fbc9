"""Remote clusters: `--remote NAME` names a profile in ~/.config/nrl-launch/remotes.yaml; any
other value is an ssh destination (as `ssh` takes it) with the defaults.

    dev:
      host: login                  # as `ssh` takes it: ~/.ssh/config, ProxyJump, agent apply
      ssh_options: [-F, ~/.ssh/dev_config]   # optional: more arguments for ssh
      workdir: ~/nrl-launch/code   # where submit's synced code goes (the cluster's shared storage)
      command: nrl-launch          # how to run nrl-launch there

Nothing secret is stored: ssh is the user's own, with the user's own keys and config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nrl_launch import paths
from nrl_launch.errors import ConfigError, UsageError
from nrl_launch.spec.layers import load_yaml_mapping

__all__ = ["ENV", "Remote", "load", "resolve"]

ENV = "NRL_LAUNCH_REMOTE"
# A profile's name is a directory name of the laptop's records, and a word in printed commands.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
_KEYS = "host, ssh_options, workdir, command"


class Remote(BaseModel):
    """One remote cluster: its login node and how nrl-launch runs there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""  # the profile's name, or the host given as --remote HOST
    host: Annotated[str, Field(min_length=1)]
    ssh_options: tuple[str, ...] = ()
    workdir: Annotated[str, Field(min_length=1)] = "~/nrl-launch/code"
    command: Annotated[str, Field(min_length=1)] = "nrl-launch"


def load(environ: Mapping[str, str]) -> dict[str, Remote]:
    """Every profile in remotes.yaml (none when it is missing); a bad one is one ConfigError
    line per problem, each naming the file and the key."""
    path = paths.remotes_file(environ)
    if not path.exists():
        return {}
    data = load_yaml_mapping(path, "remotes file")
    problems: list[str] = []
    remotes: dict[str, Remote] = {}
    for name, body in data.items():
        where = f"{path}: {name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(f"{where}: a remote's name is letters, digits and . _ @ - ")
            continue
        if not isinstance(body, dict):
            problems.append(f"{where}: must be a mapping of keys ({_KEYS})")
            continue
        try:
            remotes[name] = Remote.model_validate({**body, "name": name})
        except ValidationError as exc:
            problems += [_line(where, err) for err in exc.errors()]
    if problems:
        raise ConfigError(problems)
    for remote in remotes.values():
        _check_host(remote.host, f"{path}: {remote.name}.host")
    return remotes


def _line(where: str, err: object) -> str:
    assert isinstance(err, dict)
    key = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
    if key == "name":
        return f"{where}: unknown key name (accepted: {_KEYS})"
    if err["type"] == "extra_forbidden":
        return f"{where}.{key}: unknown key (accepted: {_KEYS})"
    if err["type"] == "missing":
        return f"{where}.{key}: required (the login node, as ssh takes it)"
    message = str(err["msg"])
    if err["type"] in ("tuple_type", "list_type"):
        message = "must be a list of ssh's arguments, e.g. [-F, ~/.ssh/config]"
    return f"{where}.{key}: {message[:1].lower()}{message[1:]} (got {err['input']!r})"


def _check_host(host: str, label: str) -> None:
    # ssh would read a destination starting with '-' as an option.
    if host.startswith("-") or any(c.isspace() for c in host) or not host.isprintable():
        raise UsageError(
            f"{label} {host!r}: expected an ssh destination (host, user@host or an alias of "
            "your ~/.ssh/config), not starting with '-' and without spaces"
        )


def resolve(value: str, environ: Mapping[str, str]) -> Remote:
    """The remote `--remote VALUE` names: a profile of remotes.yaml, else VALUE as an ssh
    destination with the defaults."""
    remotes = load(environ)
    if value in remotes:
        return remotes[value]
    _check_host(value, "--remote")
    if not _NAME.fullmatch(value):
        raise UsageError(
            f"--remote {value!r}: not a remote of {paths.remotes_file(environ)} "
            f"({', '.join(remotes) or 'it names none'}), nor an ssh destination "
            "(letters, digits and . _ @ -)"
        )
    return Remote(name=value, host=value)
