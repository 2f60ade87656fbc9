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
from nrl_launch.remote import ssh, words
from nrl_launch.remote.profiles import Remote
from nrl_launch.remote.words import Word

__all__ = ["follow"]

GIVE_UP_S = 300.0


def follow(remote: Remote, typed: Sequence[Word], job_id: str) -> int:
    """Follow `logs JOBID -f ...` (`typed`: its words after `logs`) there, through drops."""
    if words.given(typed, "--from-byte"):
        raise UsageError("--from-byte: logs -f over --remote sets it itself, on each reconnect")
    offset = 0
    tail = words.value(typed, "--tail")
    own = words.texts(words.without(typed, "--tail"))
    if tail is not None:  # its last lines, and the log's size then: the follow starts there
        shown = words.texts(words.without(typed, "--tail", "--follow"))
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
