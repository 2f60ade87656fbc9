"""A fake `ssh` first on PATH for the remote unit tests: it runs the remote command line with a
real bash (the "remote shell"), in a home of its own whose bin/ holds a fake remote nrl-launch;
destination `unreachable` fails as ssh does (exit 255, its one error line). And another user of
the machine (uid 4001, through setpriv), with a dir both can reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nrl_launch import __version__
from tests.conftest import need_tool, unavailable
from tests.helpers import git

_SSH = """#!/bin/bash
printf '%s\\n' "$*" >> "$FAKE_SSH_LOG"
forward=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  [ "$1" = -L ] && forward=$2
  shift
done
shift
host=$1; shift
if [ "$host" = unreachable ]; then
  echo "ssh: Could not resolve hostname unreachable: Name or service not known" >&2
  exit 255
fi
if [ -n "$forward" ]; then
  exec python3 "$(dirname "$0")/forward.py" "$forward"
fi
export HOME="$FAKE_REMOTE_HOME" PATH="$FAKE_REMOTE_PATH"
cd "$HOME" || exit 1
exec bash -c "$1"
"""

# ssh -L LOCAL:HOST:PORT (LOCAL: ADDR:PORT, or a unix socket's path) as ssh does it with
# ExitOnForwardFailure: after connecting, it binds LOCAL (failing: its error, exit 255), then
# pipes each connection to HOST:PORT; its pid is added to the remote home's `tunnels`.
_FORWARD = """\
import os, socket, sys, threading, time

local, host, port = sys.argv[1].rsplit(":", 2)
time.sleep(0.3)  # ssh connects and authenticates before it binds
if local.startswith("/"):
    listener, where = socket.socket(socket.AF_UNIX), local
else:
    addr, _, local_port = local.rpartition(":")
    listener, where = socket.socket(), (addr, int(local_port))
try:
    listener.bind(where)
    listener.listen(8)
except OSError as exc:
    print(f"bind [{local}]: {exc.strerror}", file=sys.stderr)
    print("Could not request local forwarding.", file=sys.stderr)
    sys.exit(255)
with open(os.path.join(os.environ["FAKE_REMOTE_HOME"], "tunnels"), "a") as pids:
    pids.write(f"{os.getpid()}\\n")


def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(conn):
    with conn, socket.create_connection((host, int(port))) as up:
        there = threading.Thread(target=pump, args=(conn, up))
        there.start()
        pump(up, conn)
        there.join()


while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"""

# The remote's nrl-launch: its version, a list of one job, a submit that keeps what it was
# given (its args NUL-separated, its cwd) and answers job 4242 (or $HOME/submit-answer), and any
# other command: its args, NUL-separated.
_NRL = f"""#!/bin/bash
case "$1" in
  --version) echo "nrl-launch {__version__}" ;;
  list) echo '{{"nrl_launch_json": 1, "command": "list", "ok": true, "jobs": [
    {{"job_id": "77", "job_name": "there", "nodes": 2, "submitted_at": 5,
      "status": {{"phase": "RUNNING", "detail": "2/2 nodes"}}}}]}}' ;;
  submit)
    pwd > "$HOME/submit-cwd"; printf '%s\\0' "$@" > "$HOME/submit-args"
    [ -f "$HOME/submit-answer" ] && exec cat "$HOME/submit-answer"
    echo '{{"nrl_launch_json": 1, "command": "submit", "ok": true, "job_id": "4242",
      "log_dir": "/logs/4242-logs", "argv": []}}' ;;
  *) printf '%s\\0' "$@" ;;
esac
"""


@dataclass(frozen=True)
class FakeSsh:
    home: Path  # the remote's home
    log: Path  # one line per ssh run: its arguments

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def answer_submit(self, answer: dict[str, object]) -> None:
        """The remote's submit answers `answer` (its --json object, with the envelope)."""
        body = {"nrl_launch_json": 1, "command": "submit", "ok": True, **answer}
        (self.home / "submit-answer").write_text(json.dumps(body) + "\n")


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSsh:
    laptop_bin = tmp_path / "laptop-bin"
    remote = tmp_path / "remote-home"
    for directory in (laptop_bin, remote / "bin"):
        directory.mkdir(parents=True)
    (laptop_bin / "ssh").write_text(_SSH)
    (laptop_bin / "forward.py").write_text(_FORWARD)
    (remote / "bin" / "nrl-launch").write_text(_NRL)
    for script in (laptop_bin / "ssh", remote / "bin" / "nrl-launch"):
        script.chmod(0o755)
    log = tmp_path / "ssh.log"
    monkeypatch.setenv("PATH", f"{laptop_bin}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    monkeypatch.setenv("FAKE_REMOTE_HOME", str(remote))
    monkeypatch.setenv("FAKE_REMOTE_PATH", f"{remote / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    remotes = Path.home() / ".config" / "nrl-launch" / "remotes.yaml"
    remotes.parent.mkdir(parents=True)
    remotes.write_text("dev:\n  host: dev-login\n  workdir: ~/code\nother:\n  host: other-login\n")
    return FakeSsh(remote, log)


def git_project(tmp_path: Path) -> Path:
    """A git checkout with a commit: train.py, an ignored file, an empty sub/."""
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "train.py").write_text("print('synced')\n")
    (proj / ".gitignore").write_text("ignored.txt\n")
    (proj / "ignored.txt").write_text("x")
    git(proj, "init", "-q")
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "one")
    return proj


@dataclass(frozen=True)
class OtherUser:
    """Another user of this machine: uid (and gid) 4001, in no other group."""

    uid: int = 4001

    def argv(self, *args: str) -> list[str]:
        ids = [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        return [need_tool("setpriv"), *ids, *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=60)


@pytest.fixture
def other_user() -> OtherUser:
    if os.getuid() != 0:
        unavailable("running as another uid (setpriv) needs root")
    return OtherUser()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A dir of this user's that every user can reach (0755, under /tmp): tmp_path's parents
    are not (pytest makes them 0700)."""
    path = Path(tempfile.mkdtemp(prefix="nrl-remote-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
