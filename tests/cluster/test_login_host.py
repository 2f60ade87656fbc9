"""The dev cluster's login host, from the laptop (this test process) over real ssh: the user's
key gets in, root does not, Slurm and nrl-launch work there, and a dropped connection ends the
client's session while the host keeps listening for the next one."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster.login import LoginHost

pytestmark = pytest.mark.cluster


def test_the_login_host_over_ssh(login_host: LoginHost) -> None:
    there = login_host.run(
        "hostname; id -un; sinfo -h -o %P | sort | tr '\\n' ' '; echo; nrl-launch --version;"
        " command -v nrl-launch ray python;"
        " srun -N1 -w node1 -t 1 bash -c 'echo $(hostname) $(id -un) $(command -v nrl-launch)'"
    )
    assert there.returncode == 0, there.stderr
    host, user, partitions, version, *found, job = there.stdout.splitlines()
    assert (host, user) == ("login", "nrl-user")
    assert partitions.split() == ["batch*", "debug", "urgent"]
    assert version.startswith("nrl-launch ")
    bin_dir = f"{login_host.home}/.local/nrl-launch-venv/bin"
    assert found == [f"{bin_dir}/{name}" for name in ("nrl-launch", "ray", "python")]
    # A job submitted there runs as the user, with their PATH.
    assert job == f"node1 nrl-user {bin_dir}/nrl-launch"

    # Not root, though the key is right; and sshd listens on the login host's address alone.
    root = subprocess.run(
        ["ssh", "-F", str(login_host.ssh_config), "-l", "root", login_host.host, "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert root.returncode == 255 and "Permission denied" in root.stderr, root.stderr
    listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=True)
    assert not [line for line in listening.stdout.splitlines() if ":22 " in line]

    # A dropped connection: the client's session ends (ssh's 255), the next one gets in.
    with subprocess.Popen(
        login_host.ssh("echo $$; exec sleep 600"), stdout=subprocess.PIPE, text=True
    ) as live:
        assert live.stdout is not None
        pid = live.stdout.readline().strip()
        assert login_host.drop_connections() >= 1
        assert live.wait(timeout=60) == 255
    again = login_host.run(f"kill {pid} && echo reconnected to $(hostname)")
    assert again.stdout == "reconnected to login\n", again.stderr
