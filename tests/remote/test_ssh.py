"""The remote command line: hostile words reach the remote nrl-launch exactly (a real bash is
the remote shell); ssh's failure and a missing nrl-launch are one line each, exit 7."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nrl_launch import __version__
from tests.conftest import Cli
from tests.helpers import HOSTILE
from tests.remote.conftest import FakeSsh


@pytest.mark.usefixtures("fake_ssh")
def test_hostile_words_survive_the_remote_shell(cli: Cli) -> None:
    result = cli("--remote", "dev", "cancel", *HOSTILE, "~/x")
    assert result.code == 0, result.err
    assert result.out.split("\0")[:-1] == ["cancel", *HOSTILE, "~/x"]
    assert not Path("/tmp/nrl-pwned").exists()


def test_the_first_use_checks_the_install_once(cli: Cli, fake_ssh: FakeSsh) -> None:
    assert cli("--remote", "dev", "logs", "1").code == 0
    assert cli("--remote", "dev", "logs", "1").code == 0
    versions = [c for c in fake_ssh.calls() if "--version" in c]
    assert len(versions) == 1  # remembered after the first


def test_another_version_there_is_one_warning(cli: Cli, fake_ssh: FakeSsh) -> None:
    nrl = fake_ssh.home / "bin" / "nrl-launch"
    nrl.write_text(nrl.read_text().replace(f"nrl-launch {__version__}", "nrl-launch 0.0.1"))
    result = cli("--remote", "dev", "logs", "1")
    assert result.code == 0
    assert "runs nrl-launch 0.0.1, this machine" in result.err


@pytest.mark.usefixtures("fake_ssh")
def test_ssh_failing_is_one_line_with_its_error(cli: Cli) -> None:
    result = cli("--remote", "unreachable", "status", "1")
    assert result.code == 7
    assert result.err == (
        "nrl-launch: error: remote unreachable: ssh to unreachable failed: ssh: Could not "
        "resolve hostname unreachable: Name or service not known\n"
    )


def test_nrl_launch_missing_there_is_one_clear_line(cli: Cli, fake_ssh: FakeSsh) -> None:
    (fake_ssh.home / "bin" / "nrl-launch").unlink()
    for _ in range(2):  # every time, not only on first use
        result = cli("--remote", "dev", "status", "1")
        assert result.code == 7
        (line,) = result.err.splitlines()
        assert "remote dev: nrl-launch is not installed on dev-login (or not on the PATH" in line
    assert os.environ["NRL_LAUNCH_STATE_DIR"]
