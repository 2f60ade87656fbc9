"""A model pool's load balancer: one HTTP address in front of the pool's N replicas.

A pool (an LLM judge, say) is N replicas, each an OpenAI-compatible HTTP server on its own
node(s). This program runs on the training job's head node, in the job's container; the driver
reaches the pool at `http://<head-ip>:<port>/v1`. Standard library only, for any Python >= 3.9:
the job script prints this file into the log dir and runs it with the container's python3
(`python3 pool_balancer.py --help`); the nrl_launch package never imports it.

An HTTP/1.1 reverse proxy (RFC 9112), one request per client connection: every answer says
`Connection: close`, and so does every request sent on. A request's body (Content-Length, or
chunked: de-chunked here) is read whole, so that it can be sent again; the answer streams back
as its bytes arrive (Server-Sent Events too), framed as the replica framed it. The replica is
the healthy one with fewest requests in flight (ties in turn). One that fails before any byte
of its answer has reached the client (refused, reset, closed, no connection within
--check-timeout, a malformed answer) is marked unhealthy at once and the request goes to
another; after that, a failure closes the client's connection. An answer is awaited without a
limit (a generation may take minutes; the client has its own timeout): health checks keep a
hung replica from new requests. With no healthy replica: 503 and an OpenAI-style error.

Every --check-interval s, `GET --health-path` on each replica: healthy iff 200 within
--check-timeout s; each starts unhealthy. `GET /health` is answered here: 200 while a replica
is healthy (503 with none), status "ok" only while all are. --state FILE: the replicas' health
as JSON, rewritten atomically (mode 0600) at start and whenever it changes. One stderr line per
event (start, why a replica is not healthy yet, a change of health, a retry), none per request.
SIGTERM/SIGINT: stop listening, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import http
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

HEAD_LIMIT = 64 * 1024  # a message's start line and header fields, at most
BODY_LIMIT = 1 << 30  # a request's body, held in memory
HEAD_TIMEOUT = 60.0  # s a client has to send its request's head
PIECE = 64 * 1024
CHUNKED, UNTIL_CLOSE = -2, -1  # an answer's framing, beside its Content-Length
# Connection-specific fields (RFC 9110 7.6.1), never sent on; and those of a request that the
# balancer writes itself (its body goes on with a Content-Length).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "upgrade"}
HOP_BY_HOP |= {"proxy-authenticate", "proxy-authorization"}
REQUEST_OWN = {"host", "content-length", "transfer-encoding", "trailer", "expect"}
Headers = list[tuple[str, str]]
Reader = asyncio.StreamReader
Writer = asyncio.StreamWriter
BROKEN = (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BackendFailed(Exception):
    """A replica failed before any byte of its answer reached the client."""


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Backend:
    def __init__(self, index: int, host: str, port: int) -> None:
        self.index, self.host, self.port = index, host, port
        self.address = hostport(host, port)
        self.healthy, self.since, self.in_flight = False, time.time(), 0


def digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not digits(port) or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def field(headers: Headers, name: str) -> list[str]:
    """The comma-separated values of every `name` field, lower-cased."""
    values = (v for k, v in headers if k.lower() == name)
    return [t.strip().lower() for v in values for t in v.split(",") if t.strip()]


def parse_head(head: bytes) -> tuple[list[str], Headers]:
    """The start line's words and the header fields of a head that ends in CRLF CRLF."""
    lines = head.decode("latin-1").lstrip("\r\n").split("\r\n")[:-2]
    if not lines or any(c in line for line in lines for c in "\r\n\0"):
        raise ValueError("an empty head, or a bare CR or LF or a NUL in it")
    headers: Headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or any(c in name for c in " \t"):  # obs-fold too: 400
            raise ValueError(f"bad header line {line[:80]!r}")
        headers.append((name, value.strip(" \t")))
    return lines[0].split(" ", 2), headers


def content_length(headers: Headers) -> int | None:
    values = field(headers, "content-length")
    if values and (len(set(values)) > 1 or not digits(values[0])):
        raise ValueError("bad Content-Length")
    return int(values[0]) if values else None


def chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    if not size or size.strip(b"0123456789abcdefABCDEF"):
        raise ValueError(f"bad chunk size line {line[:40]!r}")
    return int(size, 16)


async def read_body(reader: Reader, writer: Writer, headers: Headers) -> bytes:
    """The request's body (RFC 9112 6), de-chunked; Expect: 100-continue is answered first.
    HttpError, ValueError, LimitOverrunError: a bad request."""
    codings, length = field(headers, "transfer-encoding"), content_length(headers)
    if codings and codings != ["chunked"]:
        raise HttpError(501 if codings[-1] == "chunked" else 400, "unsupported Transfer-Encoding")
    if codings and length is not None:
        raise HttpError(400, "both Transfer-Encoding and Content-Length")
    if (codings or length) and "100-continue" in field(headers, "expect"):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if not codings:
        if (length or 0) > BODY_LIMIT:
            raise HttpError(413, f"a body over {BODY_LIMIT} bytes")
        return await reader.readexactly(length or 0)
    body = bytearray()
    while size := chunk_size(await reader.readuntil(b"\n")):
        if len(body) + size > BODY_LIMIT:
            raise HttpError(413, f"a body over {BODY_LIMIT} bytes")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("no CRLF after a chunk's data")
    while (await reader.readuntil(b"\n")).strip():
        pass  # trailer fields are dropped (RFC 9112 7.1.2)
    return bytes(body)


async def copy(reader: Reader, writer: Writer, size: int) -> None:
    """Relay `size` bytes (UNTIL_CLOSE: all), each piece as soon as it arrives."""
    while size != 0:
        piece = await reader.read(PIECE if size == UNTIL_CLOSE else min(size, PIECE))
        if not piece and size == UNTIL_CLOSE:
            return
        if not piece:
            raise ConnectionResetError("the answer ended early")
        writer.write(piece)
        await writer.drain()
        size -= len(piece) if size > 0 else 0


async def relay_chunked(reader: Reader, writer: Writer) -> None:
    """Relay a chunked body as it came, chunk by chunk, to the end of its trailer section."""
    while True:
        line = await reader.readuntil(b"\n")
        writer.write(line)
        size = chunk_size(line)
        if size == 0:
            break
        await copy(reader, writer, size + 2)  # its data and CRLF
    while line.strip():  # the last chunk's line, then trailer lines, then an empty line
        line = await reader.readuntil(b"\n")
        writer.write(line)


async def answer_head(reader: Reader, method: str) -> tuple[bytes, int]:
    """The replica's answer's head, to relay, and its body's framing (RFC 9112 6.3). Interim
    answers (1xx) are dropped: no Expect is sent on, and OpenAI clients need no early hints."""
    status = 100
    while 100 <= status < 200:
        words, headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
        if len(words) < 2 or not words[0].startswith("HTTP/1.") or not digits(words[1]):
            raise ValueError(f"bad status line {' '.join(words)[:60]!r}")
        status = int(words[1])
        if status == 101:
            raise ValueError("101 Switching Protocols, but no Upgrade was sent on")
    codings = field(headers, "transfer-encoding")
    if method == "HEAD" or status in (204, 304):
        framing = 0
    elif codings:
        framing = CHUNKED if codings[-1] == "chunked" else UNTIL_CLOSE
    else:
        length = content_length(headers)
        framing = UNTIL_CLOSE if length is None else length
    drop = HOP_BY_HOP | set(field(headers, "connection"))
    lines = [
        f"HTTP/1.1 {words[1]} {words[2] if len(words) > 2 else ''}",  # SP even with no reason
        *(f"{k}: {v}" for k, v in headers if k.lower() not in drop),
    ]
    return "\r\n".join([*lines, "Connection: close", "", ""]).encode("latin-1"), framing


def say(writer: Writer, status: int, payload: object, head_only: bool = False) -> None:
    body = json.dumps(payload).encode()
    writer.write(
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + (b"" if head_only else body)
    )


def error_body(status: int, message: str, kind: str = "invalid_request_error") -> object:
    return {"error": {"message": message, "type": kind, "code": status}}


def describe(error: BaseException) -> str:
    if isinstance(error, asyncio.IncompleteReadError):
        return "closed the connection before answering"
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno).lower()
    return str(error) or type(error).__name__


class Balancer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.pool: str = args.pool
        self.listen: tuple[str, int] = args.listen
        self.backends = [Backend(i, host, port) for i, (host, port) in enumerate(args.backend)]
        self.path: str = args.health_path
        self.interval: float = args.check_interval
        self.timeout: float = args.check_timeout
        self.state: str | None = args.state
        self.turn = 0

    def log(self, text: str) -> None:
        print(f"[pool {self.pool}] {time.strftime('%F %T')} {text}", file=sys.stderr, flush=True)

    def healthy(self) -> int:
        return sum(b.healthy for b in self.backends)

    def set_health(self, backend: Backend, healthy: bool, why: str) -> None:
        if backend.healthy != healthy:
            backend.healthy, backend.since = healthy, time.time()
            count = f"{self.healthy()}/{len(self.backends)} healthy"
            self.log(
                f"replica {backend.address} is {'' if healthy else 'un'}healthy ({why}); {count}"
            )
            self.write_state()

    def write_state(self) -> None:
        if not self.state:
            return
        replicas = [
            {"address": b.address, "healthy": b.healthy, "since": b.since} for b in self.backends
        ]
        state = {
            "pool": self.pool,
            "url": f"http://{hostport(*self.listen)}/v1",
            "healthy": self.healthy(),
            "total": len(self.backends),
            "backends": replicas,
            "updated": time.time(),
        }
        target, temp = Path(self.state), None
        try:
            fd, temp = tempfile.mkstemp(dir=target.absolute().parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "w") as out:  # mode 0600, as mkstemp made it
                json.dump(state, out, indent=1)
            Path(temp).replace(target)
        except OSError as failure:
            self.log(f"cannot write the state file {target}: {failure}")
            if temp:
                Path(temp).unlink(missing_ok=True)

    def choose(self, tried: set[int]) -> Backend | None:
        """The healthy replica not yet tried with fewest requests in flight; ties in turn."""
        ready = [b for b in self.backends if b.healthy and b.index not in tried]
        self.turn += 1
        n = len(self.backends)
        return min(ready, key=lambda b: (b.in_flight, (b.index - self.turn) % n), default=None)

    async def check(self, backend: Backend) -> str | None:
        """Why `backend` is unhealthy (None: it is healthy)."""

        async def status_line() -> bytes:
            reader, writer = await asyncio.open_connection(backend.host, backend.port)
            request = f"GET {self.path} HTTP/1.1\r\nHost: {backend.address}\r\nConnection: close"
            writer.write(f"{request}\r\n\r\n".encode())
            try:
                return await reader.readline()
            finally:
                writer.close()

        try:
            line = await asyncio.wait_for(status_line(), self.timeout)
        except asyncio.TimeoutError:
            return f"no answer to GET {self.path} in {self.timeout:g} s"
        except BROKEN as failure:
            return f"GET {self.path}: {describe(failure)}"
        words = line.split()
        if len(words) < 2 or words[1] != b"200":
            return f"GET {self.path} answered {line.strip()[:60].decode('latin-1')!r}"
        return None

    async def watch(self, backend: Backend) -> None:
        first = True
        while True:
            why = await self.check(backend)
            if first and why:  # it starts unhealthy: no change to log, but say why once
                self.log(f"replica {backend.address} is not healthy yet ({why})")
            self.set_health(backend, why is None, why or f"GET {self.path} answered 200")
            first = False
            await asyncio.sleep(self.interval)

    async def handle(self, reader: Reader, writer: Writer) -> None:
        """One client connection: one request, one answer."""
        try:
            await self.serve(reader, writer)
        except BROKEN:
            pass  # the client or the replica went away, or the replica's framing broke
        finally:
            writer.close()

    async def serve(self, reader: Reader, writer: Writer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except (asyncio.IncompleteReadError, asyncio.TimeoutError):
            return  # closed, or idle
        except asyncio.LimitOverrunError:
            return say(writer, 431, error_body(431, "request head too large"))
        method = ""
        try:
            words, headers = parse_head(head)
            if len(words) != 3 or not words[2].startswith("HTTP/1.") or not words[0].isalpha():
                raise ValueError(f"bad request line {' '.join(words)[:80]!r}")
            method, target, _ = words
            body = await read_body(reader, writer, headers)
        except (HttpError, ValueError, asyncio.LimitOverrunError) as failure:
            status = failure.status if isinstance(failure, HttpError) else 400
            return say(writer, status, error_body(status, describe(failure)), method == "HEAD")
        if method in ("GET", "HEAD") and target == "/health":
            k, n = self.healthy(), len(self.backends)
            ok = "ok" if k == n else "unhealthy"
            health = {"status": ok, "pool": self.pool, "healthy_backends": k, "total_backends": n}
            return say(writer, 200 if k else 503, health, method == "HEAD")
        await self.forward(method, target, headers, body, writer)

    async def forward(
        self, method: str, target: str, headers: Headers, body: bytes, writer: Writer
    ) -> None:
        drop = HOP_BY_HOP | REQUEST_OWN | set(field(headers, "connection"))
        kept = "".join(f"{k}: {v}\r\n" for k, v in headers if k.lower() not in drop)
        if body or field(headers, "content-length") or field(headers, "transfer-encoding"):
            kept += f"Content-Length: {len(body)}\r\n"
        tried: set[int] = set()
        backend = self.choose(tried)
        while backend is not None:
            tried.add(backend.index)
            start = f"{method} {target} HTTP/1.1\r\nHost: {backend.address}\r\n"
            request = f"{start}{kept}Connection: close\r\n\r\n".encode("latin-1") + body
            backend.in_flight += 1
            try:
                return await self.exchange(backend, request, method, writer)
            except BackendFailed as failure:
                why = str(failure)
                self.set_health(backend, False, why)
            finally:
                backend.in_flight -= 1
            failed, backend = backend, self.choose(tried)
            if backend is not None:
                what = f"{method} {target.split('?')[0]}: {failed.address} failed ({why})"
                self.log(f"{what}; retrying on {backend.address}")
        message = f"pool {self.pool}: no healthy replica ({self.healthy()}/{len(self.backends)})"
        say(writer, 503, error_body(503, message, "service_unavailable"), method == "HEAD")

    async def exchange(self, backend: Backend, request: bytes, method: str, writer: Writer) -> None:
        """Send `request` to `backend` and relay its answer; BackendFailed: nothing relayed."""
        try:
            reader, upstream = await asyncio.wait_for(
                asyncio.open_connection(backend.host, backend.port, limit=HEAD_LIMIT), self.timeout
            )
        except asyncio.TimeoutError:
            raise BackendFailed(f"no connection in {self.timeout:g} s") from None
        except OSError as failure:
            raise BackendFailed(describe(failure)) from None
        try:
            try:
                upstream.write(request)
                await upstream.drain()
                head, framing = await answer_head(reader, method)
            except BROKEN as failure:
                raise BackendFailed(describe(failure)) from None
            writer.write(head)
            await (
                relay_chunked(reader, writer)
                if framing == CHUNKED
                else copy(reader, writer, framing)
            )
            await writer.drain()
        finally:
            upstream.close()


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")  # one line, without the usage


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(description="A model pool's HTTP load balancer (standard library only).")
    parser.add_argument("--pool", required=True, help="the pool's name, for logs and errors")
    parser.add_argument("--listen", required=True, type=address, metavar="HOST:PORT")
    parser.add_argument(
        "--backend", required=True, type=address, metavar="HOST:PORT", action="append"
    )
    parser.add_argument("--health-path", default="/health", metavar="PATH")
    parser.add_argument("--check-interval", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument("--check-timeout", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--state", metavar="FILE", help="the replicas' health, as JSON")
    args = parser.parse_args(argv)
    if not args.health_path.startswith("/") or any(c.isspace() for c in args.health_path):
        parser.error(f"argument --health-path: expected a path, got {args.health_path!r}")
    for flag in ("--check-interval", "--check-timeout"):
        if not 0 < getattr(args, flag[2:].replace("-", "_")) < float("inf"):
            parser.error(f"argument {flag}: expected seconds above 0")
    if len(set(args.backend)) < len(args.backend):
        parser.error("argument --backend: a replica given twice")
    return args


async def run(args: argparse.Namespace) -> int:
    balancer = Balancer(args)
    host, port = args.listen
    try:
        # backlog: a driver may open hundreds of connections at once (asyncio's default: 100).
        server = await asyncio.start_server(
            balancer.handle, host, port, limit=HEAD_LIMIT, backlog=1024
        )
    except OSError as failure:
        balancer.log(f"cannot listen on {host}:{port}: {failure}")
        return 1
    balancer.listen = (host, server.sockets[0].getsockname()[1])  # port 0: the one bound
    signals: asyncio.Queue[str] = asyncio.Queue()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, signals.put_nowait, sig.name)
    backends = ", ".join(b.address for b in balancer.backends)
    checks = f"GET {balancer.path} every {balancer.interval:g} s"
    balancer.log(f"started: listening on {hostport(*balancer.listen)}; {backends}; {checks}")
    balancer.write_state()
    watchers = [asyncio.ensure_future(balancer.watch(b)) for b in balancer.backends]
    name = await signals.get()
    server.close()
    for watcher in watchers:
        watcher.cancel()
    balancer.log(f"stopped ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run(arguments(None))))
