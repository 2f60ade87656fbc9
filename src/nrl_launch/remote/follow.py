"""`logs -f` of a remote job, through connections that drop: the bytes received are counted,
and after a drop the remote `logs -f --from-byte N` starts exactly where the output stopped
(no line lost, none printed twice). Reconnecting waits 1, 2, 4, ... up to 15 s between tries
and gives up after 5 minutes without a connection; it ends with the job's exit code, as local
`logs -f` does."""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Sequence

from nrl_launch import output
from nrl_launch.errors import RemoteError, UsageError
from nrl_launch.remote import ssh
from nrl_launch.remote.profiles import Remote

__all__ = ["follow"]

GIVE_UP_S = 300.0


def follow(remote: Remote, args: Sequence[str], job_id: str) -> int:
    own = list(args[1:])
    if "--from-byte" in own or any(a.startswith("--from-byte=") for a in own):
        raise UsageError("--from-byte: logs -f over --remote sets it itself, on each reconnect")
    offset = 0
    tail = _tail(own)
    if tail is not None:  # its last lines, and the log's size then: the follow starts there
        i = own.index("--tail") if "--tail" in own else -1
        own = own[:i] + own[i + 2 :] if i >= 0 else [a for a in own if not a.startswith("--tail=")]
        shown = [w for w in own if w not in ("-f", "--follow")]
        _, out = ssh.run(
            remote,
            ssh.command_line(remote, ["logs", *shown, "--tail", tail, "--json"]),
            capture=True,
        )
        data = json.loads(out)
        output.write(data["text"])
        offset = int(data.get("bytes") or 0)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    waits = _Waits()

    def received(chunk: bytes) -> None:
        nonlocal offset
        offset += len(chunk)
        output.write(decoder.decode(chunk))

    while True:
        line = ssh.command_line(remote, ["logs", *own, "--from-byte", str(offset)])
        code, _, said = ssh.run_raw(remote, line, on_stdout=received, check=False)
        if code != 255:
            ssh.raise_for(remote, code, said)
            return code
        if said.started:  # it was connected: the time without one counts from now
            waits.reset()
        if not waits.more():
            ssh.raise_for(remote, code, said)  # ssh's own line
            raise RemoteError(f"remote {remote.name}: the connection to {remote.host} broke")
        output.note(
            f"connection to {remote.host} lost ({said.last or 'ssh exited 255'}); "
            f"reconnecting to follow job {job_id} from byte {offset}"
        )
        waits.sleep()


def _tail(own: Sequence[str]) -> str | None:
    for i, arg in enumerate(own):
        if arg == "--tail" and i + 1 < len(own):
            return own[i + 1]
        if arg.startswith("--tail="):
            return arg.removeprefix("--tail=")
    return None


class _Waits:
    """Bounded backoff between reconnects: 1, 2, 4, 8, 15, 15... s; none left once the
    connection has been down for GIVE_UP_S."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._next = 1.0
        self._since = time.monotonic()

    def more(self) -> bool:
        return time.monotonic() - self._since < GIVE_UP_S

    def sleep(self) -> None:
        time.sleep(self._next)
        self._next = min(self._next * 2, 15.0)
