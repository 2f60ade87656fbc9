"""The local end of `dashboard --open`'s tunnel: a port of 127.0.0.1 that THIS process binds and
holds from the first open to the end, each connection to it piped to the unix socket of the
ssh now running (`ssh -L SOCKET:HEAD:PORT`, the socket in a 0700 dir of this user's own).

A port that ssh itself listened on would be free between a dropped connection and its reopen,
and a port merely found answering could be anyone's: another user of the laptop who listens
there first serves the page the browser opens ("paste your token"). Here the URL printed is a
port this process has bound, so nothing else answers on it, before or between reconnects; a
port that cannot be bound is refused, never shared.
"""

from __future__ import annotations

import selectors
import socket
import threading

from nrl_launch.errors import UsageError

__all__ = ["Front"]

_CHUNK = 65536
_POLL_S = 0.2


class Front:
    """A port of 127.0.0.1 held until `close`: `asked` (--port), else the dashboard's own
    (`wanted`) when it is free, else any free one (`port`: which). `socket_path`: where its
    connections go now (None: the tunnel is down, and a connection is closed at once)."""

    def __init__(self, asked: int | None, wanted: int) -> None:
        self._listener = _bind(asked, wanted)
        self.port = int(self._listener.getsockname()[1])
        self.socket_path: str | None = None
        self._closed = threading.Event()
        self._listener.settimeout(_POLL_S)  # accept wakes up to see close()
        self._server = threading.Thread(target=self._serve, daemon=True)
        self._server.start()

    def close(self) -> None:
        """Let the port go (once the thread that accepts on it has seen it: within _POLL_S)."""
        self._closed.set()
        self._server.join()

    def _serve(self) -> None:
        with self._listener:
            while not self._closed.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                conn.settimeout(None)
                threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        path = self.socket_path
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if path is None:
                raise OSError("the tunnel is down")
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            return
        _pump(conn, up)


def _bind(asked: int | None, wanted: int) -> socket.socket:
    """A listening socket on 127.0.0.1: `asked` (--port), or else `wanted` when it is free,
    else any free port."""
    for port in [asked] if asked is not None else [wanted, 0]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Linux lets no other user's socket onto a port that is listened on, with or without
        # it; it lets a later run take this port again while old connections linger.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", port))
            listener.listen(16)
        except OSError as exc:
            listener.close()
            if asked is not None:
                raise UsageError(
                    f"--port {asked}: 127.0.0.1:{asked} cannot be held for the tunnel "
                    f"({exc.strerror}): another program (perhaps another user's) listens there, "
                    "and a browser sent there would reach it, not the dashboard; choose another "
                    "port, or leave --port out"
                ) from None
            continue
        return listener
    raise UsageError("--open: no free local port on 127.0.0.1 (give one with --port N)")


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Bytes both ways between `a` and `b` until both have ended (or one fails)."""
    with a, b, selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        open_ = 2
        try:
            while open_:
                for key, _ in selector.select():
                    source, sink = key.fileobj, key.data
                    assert isinstance(source, socket.socket)
                    data = source.recv(_CHUNK)
                    if data:
                        sink.sendall(data)
                        continue
                    selector.unregister(source)
                    sink.shutdown(socket.SHUT_WR)
                    open_ -= 1
        except OSError:  # a reset, or a side closed under it: the connection is over
            return
