"""remotes.yaml: every bad profile is one line naming the file and the key, exit 2, and
nothing runs; --remote HOST that is not a profile is an ssh destination with the defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nrl_launch.remote import profiles
from tests.conftest import Cli


def _remotes(text: str) -> Path:
    path = Path.home() / ".config" / "nrl-launch" / "remotes.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dev:\n  host: login\n  hostt: x\n", "dev.hostt: unknown key (accepted: host,"),
        ("dev:\n  workdir: /x\n", "dev.host: required"),
        ("dev:\n  host: login\n  ssh_options: -F x\n", "dev.ssh_options: must be a list"),
        ("dev: login\n", "dev: must be a mapping of keys (host, ssh_options"),
        ("dev:\n  host: -oProxyCommand=x\n", "dev.host '-oProxyCommand=x': expected an ssh"),
        ("a/b:\n  host: login\n", "a/b: a remote's name is letters"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_key(cli: Cli, text: str, expected: str) -> None:
    path = _remotes(text)
    result = cli("--remote", "dev", "status")
    assert result.code == 2, result.err
    (line,) = result.err.splitlines()
    assert line.startswith(f"nrl-launch: error: {path}: ") or "--remote" in line
    assert expected in line
    assert "Traceback" not in result.err


def test_a_host_that_is_no_profile_is_an_ssh_destination() -> None:
    _remotes("dev:\n  host: login\n  ssh_options: [-F, /cfg]\n")
    assert profiles.resolve("dev", os.environ).ssh_options == ("-F", "/cfg")
    there = profiles.resolve("me@cluster.example.org", os.environ)
    assert (there.host, there.workdir, there.command) == (
        "me@cluster.example.org",
        "~/nrl-launch/code",
        "nrl-launch",
    )


def test_an_option_like_host_is_refused(cli: Cli) -> None:
    result = cli("--remote", "-oProxyCommand=touch /tmp/x", "status")
    assert result.code == 2
    assert "expected an ssh destination" in result.err
