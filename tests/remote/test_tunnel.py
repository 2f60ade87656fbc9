"""`dashboard --open` over --remote: the URL it prints is a port this process holds, piped to its
own ssh's socket, so another user of the laptop (uid 4001) who listens there first is refused
in one line, never announced; and the port stays held through a dropped connection."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nrl_launch import __version__
from nrl_launch.remote import tunnel
from tests.conftest import Cli, unavailable, wait_until
from tests.remote.conftest import FakeSsh, OtherUser

DASHBOARD_PAGE = b"the Ray dashboard of job 4242"
# The remote's nrl-launch: where job 4242's dashboard is, and its phase ($HOME/phase).
_NRL = """#!/bin/bash
case "$1" in
  --version) echo "nrl-launch $VERSION" ;;
  dashboard) echo '{"nrl_launch_json": 1, "command": "dashboard", "ok": true, "job_id": "4242",
    "head_node": "node1", "target": "127.0.0.2", "port": PORT, "token_path": "/logs/t"}' ;;
  status) printf '{"jobs": [{"job_id": "4242", "phase": "%s"}]}\\n' "$(cat "$HOME/phase")" ;;
esac
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class _Dashboard(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(DASHBOARD_PAGE)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def job(fake_ssh: FakeSsh) -> Iterator[Path]:
    """Job 4242 on dev, RUNNING, its dashboard on 127.0.0.2 (the head node, seen from the login
    node); returns the file that holds its phase."""
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    nrl = fake_ssh.home / "bin" / "nrl-launch"
    nrl.write_text(
        _NRL.replace("PORT", str(server.server_address[1])).replace("$VERSION", __version__)
    )
    phase = fake_ssh.home / "phase"
    phase.write_text("RUNNING\n")
    yield phase
    server.shutdown()
    server.server_close()


@pytest.fixture
def listening(open_dir: Path, other_user: OtherUser) -> Iterator[int]:
    """A port of 127.0.0.1 where uid 4001 serves a page of its own, first."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        unavailable("uid 4001 needs a python3 it can run: /usr/bin/python3")
    (open_dir / "index.html").write_text("paste your token here\n")
    port = _free_port()
    server = subprocess.Popen(
        other_user.argv(str(python), "-m", "http.server", str(port), "--bind", "127.0.0.1"),
        cwd=open_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _accepts(port), timeout=30)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_port_another_user_listens_on_is_refused(
    cli: Cli, fake_ssh: FakeSsh, job: Path, listening: int
) -> None:
    job.write_text("CANCELLED\n")  # (today's code announces it, then closes: nothing hangs)
    result = cli("--remote", "dev", "dashboard", "4242", "--open", "--port", str(listening))
    assert result.err.splitlines() == [
        f"nrl-launch: error: --port {listening}: 127.0.0.1:{listening} cannot be held for the "
        "tunnel (Address already in use): another program (perhaps another user's) listens "
        "there, and a browser sent there would reach it, not the dashboard; choose another "
        "port, or leave --port out"
    ]
    assert result.code == 2
    assert "http://" not in result.out
    assert not [c for c in fake_ssh.calls() if " -N " in c]  # no tunnel was opened


def test_the_url_is_held_by_the_tunnel_through_a_drop(
    cli: Cli,
    fake_ssh: FakeSsh,
    job: Path,
    other_user: OtherUser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tunnel, "_STATUS_EVERY_S", 0.5)
    port = _free_port()
    seen: list[object] = []
    tunnels = fake_ssh.home / "tunnels"

    def fetch() -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            return bytes(page.read())

    def reaches_dashboard() -> bool:
        try:
            return fetch() == DASHBOARD_PAGE
        except OSError:
            return False

    def taken_by_other_user() -> bool:
        # uid 4001 tries to listen on the port (as the attacker would, between reconnects).
        code = f"import socket; socket.socket().bind(('127.0.0.1', {port}))"
        return other_user.run("/usr/bin/python3", "-c", code).returncode == 0

    def browse() -> None:
        try:
            wait_until(reaches_dashboard, timeout=30)  # (the tunnel is up: the URL printed)
            seen.append(fetch())
            seen.append(taken_by_other_user())
            first = int(tunnels.read_text().split()[0])
            os.kill(first, signal.SIGKILL)  # the connection drops
            seen.append(taken_by_other_user())
            wait_until(lambda: len(tunnels.read_text().split()) == 2, timeout=30)
            wait_until(reaches_dashboard, timeout=30)
            seen.append(fetch())
        except Exception as exc:
            seen.append(exc)
        finally:
            job.write_text("CANCELLED\n")

    browser = threading.Thread(target=browse)
    browser.start()
    result = cli("--remote", "dev", "dashboard", "4242", "--open", "--port", str(port))
    browser.join(timeout=60)
    assert seen == [DASHBOARD_PAGE, False, False, DASHBOARD_PAGE]
    assert result.code == 0, result.err
    assert f"open http://127.0.0.1:{port}" in result.out
    assert "reopening the tunnel on 127.0.0.1" in result.err
    assert "job 4242 has ended: tunnel closed" in result.err
    assert not _accepts(port)  # let go at the end
    assert len([c for c in fake_ssh.calls() if " -N " in c]) == 2
