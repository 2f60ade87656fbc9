"""`dashboard JOBID --open` with a remote: an `ssh -N -L` tunnel from this machine to the job's
Ray dashboard (on its head node, through the login node), held until Ctrl-C or the job's end; a
dropped connection is reopened behind the same local port.

ssh forwards from a unix socket in a 0700 dir of this user's own; the port the browser opens is
bound and held by this process (front.py), which pipes it to that socket: nothing else can
answer on the URL printed, and a --port another program holds is refused in one line."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from nrl_launch import output, runner
from nrl_launch.backends.base import Phase
from nrl_launch.errors import RemoteError, UsageError
from nrl_launch.remote import ssh, words
from nrl_launch.remote.front import Front
from nrl_launch.remote.profiles import Remote
from nrl_launch.remote.words import Word

__all__ = ["hold"]

_STATUS_EVERY_S = 20.0  # how often the job is asked whether it still runs
_GIVE_UP_S = 300.0  # reopening stops after this long without a tunnel


def hold(remote: Remote, typed: Sequence[Word], job_id: str) -> int:
    """Hold the tunnel for `dashboard JOBID --open ...` (`typed`: its words after `dashboard`)."""
    asked = _asked_port(words.value(typed, "--port"))
    own = words.texts(words.without(typed, "--port", "--open", "--json"))
    _, out = ssh.run(remote, ssh.command_line(remote, ["dashboard", *own, "--json"]), capture=True)
    where = json.loads(out)
    target, port = str(where.get("target") or where["head_node"]), int(where["port"])
    front = Front(asked, port)
    local = front.port
    sockets = Path(tempfile.mkdtemp(prefix="nrl-tunnel-"))  # 0700, this user's own
    proc: runner.Piped | None = None
    down_since: float | None = None
    wait = 1.0
    opened = False
    attempt = 0
    try:
        while True:
            attempt += 1
            path = sockets / f"s{attempt}"  # a new one each time: none left over is reused
            options = ["-N", "-L", f"{path}:{target}:{port}", "-o", "ExitOnForwardFailure=yes"]
            said = ssh.Stderr(show=False)
            proc = runner.Piped(
                ssh.argv(remote, None, options=options), on_stderr=said, stdout=False
            )
            if _until_listening(proc, path):
                front.socket_path = str(path)
                down_since, wait = None, 1.0
                if not opened:
                    opened = True
                    _announce(remote, where, local)
                else:
                    output.note(
                        f"tunnel reopened: http://127.0.0.1:{local} again reaches the dashboard"
                    )
                if _held(remote, proc, job_id):
                    return 0  # the job has ended
            front.socket_path = None
            code = proc.stop()
            if _ended(remote, job_id):
                output.note(f"job {job_id} has ended: tunnel closed")
                return 0
            down_since = down_since or time.monotonic()
            if time.monotonic() - down_since > _GIVE_UP_S:
                ssh.raise_for(remote, 255, said)
                raise RemoteError(
                    f"remote {remote.name}: the tunnel could not be reopened (ssh exit {code})"
                )
            output.note(
                f"connection to {remote.host} lost ({said.last or f'ssh exit {code}'}); "
                f"reopening the tunnel on 127.0.0.1:{local}"
            )
            time.sleep(wait)
            wait = min(wait * 2, 15.0)
    except KeyboardInterrupt:
        output.note("tunnel closed")
        return 0
    finally:
        if proc is not None:
            proc.stop()
        front.close()
        shutil.rmtree(sockets, ignore_errors=True)


def _announce(remote: Remote, where: dict[str, object], local: int) -> None:
    text = (
        f"Job {where.get('job_id')}'s Ray dashboard ({where['head_node']}:{where['port']} on "
        f"{remote.name}): open http://127.0.0.1:{local}\n"
        "The tunnel stays open until Ctrl-C or the job's end."
    )
    if where.get("token_path"):
        text += (
            f"\nIt asks for the job's token: the contents of {where['token_path']} on "
            f"{remote.host}."
        )
    output.emit_text(text)


def _asked_port(flag: str | None) -> int | None:
    """--port's value, a TCP port (None: not given)."""
    if flag is None:
        return None
    if not flag.isdigit() or not 0 < int(flag) < 65536:
        raise UsageError(f"--port {flag!r}: expected a TCP port, 1 to 65535")
    return int(flag)


def _until_listening(proc: runner.Piped, path: Path) -> bool:
    """Whether the tunnel came up (ssh's socket accepts); False once ssh has exited."""
    while proc.poll() is None:
        if path.is_socket() and _accepts(path):
            return True
        time.sleep(0.2)
    return False


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def _held(remote: Remote, proc: runner.Piped, job_id: str) -> bool:
    """Wait while the tunnel stays up; True once the job has ended, False when ssh exits."""
    asked = time.monotonic()
    while proc.poll() is None:
        time.sleep(0.5)
        if time.monotonic() - asked > _STATUS_EVERY_S:
            asked = time.monotonic()
            if _ended(remote, job_id):
                proc.stop()
                output.note(f"job {job_id} has ended: tunnel closed")
                return True
    return False


def _ended(remote: Remote, job_id: str) -> bool:
    """Whether the job is over (as far as the cluster can be asked now)."""
    try:
        _, out = ssh.run(
            remote,
            ssh.command_line(remote, ["status", job_id, "--json"]),
            capture=True,
            quiet_stderr=True,
        )
        jobs = json.loads(out).get("jobs") or []
    except (RemoteError, ValueError):
        return False
    return bool(jobs) and jobs[0].get("phase") in {p.value for p in Phase if p.terminal}
