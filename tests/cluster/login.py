"""The dev cluster's login host (scripts/dev-cluster-login) as a user's laptop sees it.

`make_login_host` is the `login_host` fixture's work (tests/cluster/conftest.py): a key pair for
the "laptop" (this test process, outside the login host), its public key in nrl-user's
~/.ssh/authorized_keys, the login host's own host key pinned in a known_hosts file of the
laptop's (StrictHostKeyChecking yes: a host that answers with another key is refused), and an
ssh config whose `Host login` reaches it: `ssh -F <ssh_config> login CMD`.

nrl-launch is installed in nrl-user's environment there, as a user's own venv on their PATH:
~/.local/nrl-launch-venv, a venv of an interpreter nrl-user may run whose packages are this
checkout's src/ and the test venv's site-packages (the test venv's own interpreter may sit
under /root, which nrl-user cannot enter; its packages are world-readable). sshd takes the PATH
from ~/.ssh/environment (its config permits PATH alone): unlike ~/.bashrc, which Debian's
returns early from in a non-interactive shell, it holds for every `ssh login CMD`, whatever the
shell, and sbatch passes it on to the jobs submitted there.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO, unavailable

DEV_DIR = Path(os.environ.get("DEV_CLUSTER_DIR", "/var/lib/nrl-dev-cluster"))
LOGIN_IP = "10.77.0.2"
RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
# What the laptop's key says it is, in authorized_keys: the line the fixture adds and removes.
KEY_COMMENT = "nrl-launch-tests@laptop"


def process_children() -> dict[int, list[int]]:
    """Every process's children (pids as this machine sees them), by parent pid."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return children


def _is_sshd(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/exe").readlink().name.startswith("sshd")
    except OSError:
        return False


@dataclass(frozen=True)
class LoginHost:
    """The login host, reached from the laptop with `ssh -F ssh_config host`."""

    ssh_config: Path
    home: Path  # nrl-user's home, on the cluster's shared filesystem
    host: str = "login"
    user: str = "nrl-user"

    def ssh(self, command: str) -> list[str]:
        """The argv that runs `command` (a shell command line) on the login host."""
        return ["ssh", "-F", str(self.ssh_config), self.host, command]

    def run(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.ssh(command), capture_output=True, text=True, timeout=timeout, check=False
        )

    def drop_connections(self) -> int:
        """End every open ssh connection to the login host, as a dropped Wi-Fi would: its
        per-connection sshd processes die (the commands they ran do not), the listener stays,
        so a client can connect again. Returns how many connections it ended."""
        children = process_children()
        listeners = [
            pid
            for shell in children.get(int((DEV_DIR / "run" / "login.pid").read_text()), [])
            for pid in children.get(shell, [])
            if _is_sshd(pid)
        ]
        assert len(listeners) == 1, f"the login host's sshd is not running: {listeners}"
        connections = children.get(listeners[0], [])
        for connection in connections:
            stack = [connection]
            while stack:
                pid = stack.pop()
                stack.extend(children.get(pid, []))
                if _is_sshd(pid):
                    os.kill(pid, signal.SIGKILL)
        return len(connections)


def _as_user(user: str, *argv: str) -> None:
    done = subprocess.run([RUNUSER, "-u", user, "--", *argv], capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stderr}"


def _user_python(user: str) -> str:
    """An interpreter `user` may run, of this Python's version (the venv's packages are built
    for it): the test venv's own base, else the system's."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in (getattr(sys, "_base_executable", sys.executable), f"/usr/bin/python{version}"):
        probe = subprocess.run(
            [RUNUSER, "-u", user, "--", python, "-c", "import sys; print(sys.version[:5])"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0 and probe.stdout.startswith(version):
            return python
    unavailable(f"{user} can run no Python {version} for nrl-launch on the login host")
    raise AssertionError  # unreachable: unavailable() skips or fails


def _install_nrl_launch(user: str, home: Path) -> Path:
    """nrl-launch, ray and python in a venv of `user`'s (see the module's docstring); its bin."""
    venv = home / ".local" / "nrl-launch-venv"
    _as_user(user, _user_python(user), "-m", "venv", "--clear", "--without-pip", str(venv))
    (site,) = venv.glob("lib/python*/site-packages")
    paths = [REPO / "src", Path(sysconfig.get_paths()["purelib"])]
    (site / "nrl-launch-tests.pth").write_text("".join(f"{path}\n" for path in paths))
    for script in ("nrl-launch", "ray"):
        body = (Path(sys.prefix) / "bin" / script).read_text().split("\n", 1)[1]
        (venv / "bin" / script).write_text(f"#!{venv}/bin/python\n{body}")
        (venv / "bin" / script).chmod(0o755)
    for path in [site / "nrl-launch-tests.pth", venv / "bin" / "nrl-launch", venv / "bin" / "ray"]:
        shutil.chown(path, user, user)
    return venv / "bin"


def _write_private(path: Path, text: str, user: str) -> None:
    """A file of `user`'s that only they can read or write (what sshd's StrictModes wants)."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    shutil.chown(path.parent, user, user)
    path.write_text(text)
    path.chmod(0o600)
    shutil.chown(path, user, user)


def make_login_host(laptop: Path) -> Iterator[LoginHost]:
    """The login host with the laptop's key in (files in `laptop`), until the generator ends."""
    if not Path("/usr/sbin/sshd").exists():
        unavailable("the dev cluster has no login host: apt-get install openssh-server")
    host_key = DEV_DIR / "login" / "ssh_host_ed25519_key.pub"
    if not host_key.exists():
        unavailable("the dev cluster has no login host: restart it with scripts/dev-cluster")
    user = "nrl-user"
    home = Path(pwd.getpwnam(user).pw_dir)
    key = laptop / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", KEY_COMMENT, "-f", str(key)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    authorized = home / ".ssh" / "authorized_keys"
    others = _without_our_key(authorized)
    _write_private(authorized, others + (laptop / "id_ed25519.pub").read_text(), user)
    bin_dir = _install_nrl_launch(user, home)
    _write_private(
        home / ".ssh" / "environment", f"PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin\n", user
    )
    known_hosts = laptop / "known_hosts"
    key_type, key_text = host_key.read_text().split()[:2]
    known_hosts.write_text(f"login,{LOGIN_IP} {key_type} {key_text}\n")
    config = laptop / "ssh_config"
    config.write_text(
        "Host login\n"
        + "".join(
            f"  {option} {value}\n"
            for option, value in [
                ("HostName", LOGIN_IP),
                ("User", user),
                ("IdentityFile", key),
                ("IdentitiesOnly", "yes"),
                ("UserKnownHostsFile", known_hosts),
                ("GlobalKnownHostsFile", "/dev/null"),
                ("StrictHostKeyChecking", "yes"),
                ("UpdateHostKeys", "no"),
                ("BatchMode", "yes"),
                ("ConnectTimeout", 20),
            ]
        )
    )
    yield LoginHost(ssh_config=config, home=home, user=user)
    authorized.write_text(_without_our_key(authorized))


def _without_our_key(authorized: Path) -> str:
    """authorized_keys without the lines a test session added (its other keys stay)."""
    if not authorized.exists():
        return ""
    lines = authorized.read_text().splitlines(keepends=True)
    return "".join(line for line in lines if not line.rstrip().endswith(KEY_COMMENT))
