"""`dashboard JOBID --open` with a remote: an `ssh -N -L` tunnel from a port of this machine to
the job's Ray dashboard (on its head node, through the login node), held until Ctrl-C or the
job's end; a dropped connection is reopened on the same local port."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence

from nrl_launch import output, runner
from nrl_launch.backends.base import Phase
from nrl_launch.errors import RemoteError, UsageError
from nrl_launch.remote import ssh, words
from nrl_launch.remote.profiles import Remote
from nrl_launch.remote.words import Word

__all__ = ["hold"]

_STATUS_EVERY_S = 20.0  # how often the job is asked whether it still runs
_GIVE_UP_S = 300.0  # reopening stops after this long without a tunnel


def hold(remote: Remote, typed: Sequence[Word], job_id: str) -> int:
    """Hold the tunnel for `dashboard JOBID --open ...` (`typed`: its words after `dashboard`)."""
    port_flag = words.value(typed, "--port")
    own = words.texts(words.without(typed, "--port", "--open", "--json"))
    _, out = ssh.run(remote, ssh.command_line(remote, ["dashboard", *own, "--json"]), capture=True)
    where = json.loads(out)
    target, port = str(where.get("target") or where["head_node"]), int(where["port"])
    local = _local_port(port_flag, port)
    forward = f"127.0.0.1:{local}:{target}:{port}"
    options = ["-N", "-L", forward, "-o", "ExitOnForwardFailure=yes"]
    down_since: float | None = None
    wait = 1.0
    opened = False
    try:
        while True:
            said = ssh.Stderr(show=False)
            proc = runner.Piped(
                ssh.argv(remote, None, options=options), on_stderr=said, stdout=False
            )
            if _until_listening(proc, local):
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


def _local_port(flag: str | None, port: int) -> int:
    """--port, else the dashboard's own port when it is free here, else any free port."""
    if flag is not None:
        if not flag.isdigit() or not 0 < int(flag) < 65536:
            raise UsageError(f"--port {flag!r}: expected a TCP port, 1 to 65535")
        return int(flag)
    for candidate in (port, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise UsageError("--open: no free local port (give one with --port N)")


def _until_listening(proc: runner.Piped, local: int) -> bool:
    """Whether the tunnel came up (its local port accepts); False once ssh has exited."""
    while proc.poll() is None:
        if _accepts(local):
            return True
        time.sleep(0.2)
    return False


def _accepts(local: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", local), timeout=1):
            return True
    except OSError:
        return False


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
