"""A model pool's load balancer (node/pool_balancer.py), as the job runs it: a real process in
front of real replica processes (a small standard-library OpenAI-style server written here), on
real sockets. Every wait is a bounded poll; none is a fixed sleep.

POOL_BALANCER_PYTHON=/path/to/python3.9 runs the balancer with another interpreter (the job
runs it with whatever python3 the container has; it must work from 3.9 on)."""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from nrl_launch import node

BALANCER = Path(node.__file__).parent / "pool_balancer.py"
PYTHON = os.environ.get("POOL_BALANCER_PYTHON") or sys.executable
BOUND = 30.0  # s: how long any wait may take before the test fails (a hang bound, not a target)

# A replica: `python3 replica.py NAME PORT DIR` serves /health (503 while DIR/NAME.sick exists),
# /v1/models and POST /v1/chat/completions, which echoes who answered and what it got; with
# {"stream": true} it sends `events` Server-Sent Events `gap` s apart, each saying when it was
# sent; with {"hang": NAME} it touches DIR/NAME.hanging and never answers; with {"die": NAME}
# it sends half an answer and exits. GET /v1/unframed answers until it closes. It writes the port it
# listens on to DIR/NAME.port.
REPLICA = r"""
import hashlib, json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME, PORT, DIR = sys.argv[1], int(sys.argv[2]), sys.argv[3]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            sick = os.path.exists(os.path.join(DIR, NAME + ".sick"))
            self.answer(503 if sick else 200, {"backend": NAME})
        elif self.path == "/v1/unframed":  # neither Content-Length nor chunked: ends at close
            self.send_response(200)
            self.end_headers()
            self.wfile.write(("unframed from " + NAME).encode() * 1000)
            self.close_connection = True
        else:
            self.answer(200, {"object": "list", "data": [{"id": "judge"}], **self.echo(b"")})

    def echo(self, body):
        return {
            "backend": NAME,
            "method": self.command,
            "path": self.path,
            "headers": [[k.lower(), v] for k, v in self.headers.items()],
            "bytes": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        ask = json.loads(body) if self.headers.get("Content-Type") == "application/json" else {}
        if ask.get("hang") == NAME:
            open(os.path.join(DIR, NAME + ".hanging"), "w").close()
            time.sleep(3600)
        if ask.get("die") == NAME:  # half an answer, then gone
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.wfile.flush()
            open(os.path.join(DIR, NAME + ".dying"), "w").close()
            os._exit(1)
        if not ask.get("stream"):
            return self.answer(200, self.echo(body))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index in range(ask["events"]):
            if index:
                time.sleep(ask["gap"])
            event = {"backend": NAME, "index": index, "sent": time.time()}
            self.chunk(("data: " + json.dumps(event) + "\n\n").encode())
        self.chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    do_PUT = do_POST

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.daemon_threads = True
port_file = os.path.join(DIR, NAME + ".port")
with open(port_file + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
"""

T = TypeVar("T")


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    bound: float = BOUND,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> T:
    """Poll `probe` until it returns something true; fail after `bound` s, saying what for, or
    as soon as `process` has exited (showing its `log`)."""
    deadline = time.monotonic() + bound
    while True:
        value = probe()
        if value:
            return value
        if process is not None and process.poll() is not None:
            said = log.read_text() if log else ""
            pytest.fail(f"exited {process.returncode} while waiting for {what}:\n{said}")
        assert time.monotonic() < deadline, f"waited {bound:g} s for {what}"
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    port: int,
    method: str = "POST",
    path: str = "/v1/chat/completions",
    body: Any = None,
    headers: dict[str, str] | None = None,
    **options: Any,
) -> Answer:
    """One request to 127.0.0.1:`port` (a dict body is sent as JSON)."""
    headers = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=BOUND)
    try:
        conn.request(method, path, body=body, headers=headers, **options)
        response = conn.getresponse()
        return Answer(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        conn.close()


def raw(port: int, data: bytes) -> bytes:
    """Send `data` as it is; everything the balancer sends back until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND) as sock:
        sock.sendall(data)
        return b"".join(iter(lambda: sock.recv(65536), b""))


class Replica:
    def __init__(self, pool: Pool, name: str, port: int = 0) -> None:
        self.name = name
        port_file = pool.dir / f"{name}.port"
        port_file.unlink(missing_ok=True)
        self.process = pool.start(
            [sys.executable, str(pool.script), name, str(port), str(pool.dir)]
        )
        self.port = int(
            wait_for(
                f"replica {name} to listen",
                lambda: port_file.exists() and port_file.read_text(),
                process=self.process,
                log=pool.dir / "replicas.log",
            )
        )
        self.address = f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=BOUND)


class Balancer:
    def __init__(self, pool: Pool, ports: list[int], *flags: str) -> None:
        self.pool, self.log, self.state_file = (
            pool,
            pool.dir / "balancer.log",
            pool.dir / "state.json",
        )
        backends = [arg for port in ports for arg in ("--backend", f"127.0.0.1:{port}")]
        command = [PYTHON, str(BALANCER), "--pool", "judge", "--listen", "127.0.0.1:0", *backends]
        command += ["--state", str(self.state_file), "--check-timeout", "2", *flags]
        self.process = pool.start(command, stderr=self.log)
        url = wait_for(
            "the balancer's state file",
            lambda: self.state_file.exists() and self.state()["url"],
            process=self.process,
            log=self.log,
        )
        self.port = int(url.rsplit(":", 1)[1].removesuffix("/v1"))

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text())

    def health(self) -> Answer:
        return call(self.port, "GET", "/health")

    def wait_healthy(self, k: int) -> Answer:
        """Wait until k replicas are healthy: /health's answer."""

        def probe() -> Answer | None:
            answer = self.health()
            return answer if answer.json()["healthy_backends"] == k else None

        return wait_for(f"{k} healthy replicas", probe)

    def lines(self, text: str = "") -> list[str]:
        return [line for line in self.log.read_text().splitlines() if text in line]


class Pool:
    """Replicas and a balancer in front of them; every process is killed at the test's end."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.script = tmp_path / "replica.py"
        self.script.write_text(REPLICA)
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, command: list[str], stderr: Path | None = None) -> subprocess.Popen[bytes]:
        with open(stderr or self.dir / "replicas.log", "ab") as err:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        self.processes.append(process)
        return process

    def replica(self, name: str, port: int = 0) -> Replica:
        return Replica(self, name, port)

    def balancer(self, replicas: list[Replica] | list[int], *flags: str) -> Balancer:
        ports = [r if isinstance(r, int) else r.port for r in replicas]
        return Balancer(self, ports, *flags)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=BOUND)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    made = Pool(tmp_path)
    try:
        yield made
    finally:
        made.close()


def who(answer: Answer) -> str:
    assert answer.status == 200, answer
    backend: str = answer.json()["backend"]
    return backend


ASK = {"model": "judge", "messages": [{"role": "user", "content": "hi"}]}


def test_requests_spread_over_the_replicas_and_the_state_file_says_where_the_pool_is(
    pool: Pool,
) -> None:
    a, b = pool.replica("a"), pool.replica("b")
    balancer = pool.balancer([a, b], "--check-interval", "0.2")
    health = balancer.wait_healthy(2)
    assert (health.status, health.json()) == (
        200,
        {"status": "ok", "pool": "judge", "healthy_backends": 2, "total_backends": 2},
    )
    logged = len(balancer.lines())
    served = Counter(who(call(balancer.port, body=ASK)) for _ in range(10))
    assert set(served) == {"a", "b"} and min(served.values()) >= 3, served
    assert len(balancer.lines()) == logged  # no line per request
    state = balancer.state()
    assert state["url"] == f"http://127.0.0.1:{balancer.port}/v1"
    assert (state["pool"], state["healthy"], state["total"]) == ("judge", 2, 2)
    assert [(r["address"], r["healthy"]) for r in state["backends"]] == [
        (a.address, True),
        (b.address, True),
    ]
    assert all(time.time() - 60 < r["since"] <= state["updated"] for r in state["backends"])
    assert balancer.state_file.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in pool.dir.glob(".state.json*")] == []  # no temp file left
    (started,) = balancer.lines("started")
    assert started.startswith("[pool judge] ")
    assert f"127.0.0.1:{balancer.port}" in started and a.address in started and b.address in started


def test_a_killed_replica_is_routed_around_at_once(pool: Pool) -> None:
    """Checks far apart: the requests themselves find the dead replica, and are sent on."""
    a, b = pool.replica("a"), pool.replica("b")
    balancer = pool.balancer([a, b], "--check-interval", "300")
    balancer.wait_healthy(2)
    a.kill()
    assert [who(call(balancer.port, body=ASK)) for _ in range(6)] == ["b"] * 6
    (retry,) = balancer.lines("retrying")
    assert f"{a.address} failed (connection refused); retrying on {b.address}" in retry
    assert balancer.lines(f"replica {a.address} is unhealthy (connection refused); 1/2 healthy")
    health = balancer.health()
    assert (health.status, health.json()["status"], health.json()["healthy_backends"]) == (
        200,
        "unhealthy",
        1,
    )
    state = balancer.state()
    assert (state["healthy"], [r["healthy"] for r in state["backends"]]) == (1, [False, True])


def test_with_no_healthy_replica_503_and_a_replica_that_comes_back_is_used_again(
    pool: Pool,
) -> None:
    a, b = pool.replica("a"), pool.replica("b")
    balancer = pool.balancer([a, b], "--check-interval", "0.2")
    balancer.wait_healthy(2)
    a.kill()
    b.kill()
    health = balancer.wait_healthy(0)
    assert (health.status, health.json()["status"]) == (503, "unhealthy")
    answer = call(balancer.port, body=ASK)
    assert answer.status == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "error": {
            "message": "pool judge: no healthy replica (0/2)",
            "type": "service_unavailable",
            "code": 503,
        }
    }
    assert balancer.state()["healthy"] == 0
    back = pool.replica("a", a.port)
    assert balancer.wait_healthy(1).status == 200
    assert [who(call(balancer.port, body=ASK)) for _ in range(3)] == ["a"] * 3
    assert len(balancer.lines(f"replica {back.address} is healthy")) == 2  # at start, and now
    assert [r["healthy"] for r in balancer.state()["backends"]] == [True, False]


def test_a_replica_whose_health_check_fails_gets_no_requests(pool: Pool) -> None:
    a, b = pool.replica("a"), pool.replica("b")
    balancer = pool.balancer([a, b], "--check-interval", "0.2")
    balancer.wait_healthy(2)
    (pool.dir / "a.sick").touch()
    balancer.wait_healthy(1)
    assert {who(call(balancer.port, body=ASK)) for _ in range(4)} == {"b"}
    (why,) = balancer.lines(f"replica {a.address} is unhealthy")
    assert "GET /health answered 'HTTP/1.1 503 Service Unavailable'" in why
    (pool.dir / "a.sick").unlink()
    balancer.wait_healthy(2)
    assert {who(call(balancer.port, body=ASK)) for _ in range(4)} == {"a", "b"}


def test_a_busy_replica_is_passed_over_and_one_that_dies_mid_request_is_retried(
    pool: Pool,
) -> None:
    a = pool.replica("a")
    b_port = free_port()
    balancer = pool.balancer([a.port, b_port], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    with concurrent.futures.ThreadPoolExecutor(1) as background:
        hung = background.submit(call, balancer.port, body={**ASK, "hang": "a"})
        wait_for("the request to reach a", (pool.dir / "a.hanging").exists)
        b = pool.replica("b", b_port)
        balancer.wait_healthy(2)
        assert [who(call(balancer.port, body=ASK)) for _ in range(4)] == ["b"] * 4  # a is busy
        a.kill()
        assert who(hung.result(timeout=BOUND)) == "b"
    (not_yet,) = balancer.lines("not healthy yet")
    assert f"replica {b.address} is not healthy yet (GET /health: connection refused)" in not_yet
    (retry,) = balancer.lines("retrying")
    assert f"POST /v1/chat/completions: {a.address} failed (" in retry
    assert retry.endswith(f"; retrying on {b.address}")


def test_once_the_client_has_bytes_a_failure_closes_its_connection_and_is_not_retried(
    pool: Pool,
) -> None:
    a = pool.replica("a")
    b = pool.replica("b")
    balancer = pool.balancer([a, b], "--check-interval", "300")
    balancer.wait_healthy(2)
    # Whichever replica gets it first: each dies only for its own name, so ask a to die and
    # send until a has answered (b answers in full meanwhile).
    for _ in range(2):
        try:
            answer = call(balancer.port, body={**ASK, "die": "a"})
        except http.client.IncompleteRead as cut:
            assert cut.partial == b"x" * 10
            break
        assert who(answer) == "b"
    else:
        pytest.fail("a never got the request")
    assert (pool.dir / "a.dying").exists()
    assert balancer.lines("retrying") == []
    # Not marked unhealthy by the cut (its health checks are 300 s apart): the next request
    # that goes to a finds it gone and is sent on.
    assert [who(call(balancer.port, body=ASK)) for _ in range(3)] == ["b"] * 3
    (retry,) = balancer.lines("retrying")
    assert f"{a.address} failed (connection refused); retrying on {b.address}" in retry


def test_an_answer_without_framing_is_relayed_until_the_replica_closes(pool: Pool) -> None:
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    answer = call(balancer.port, "GET", "/v1/unframed")
    assert (answer.status, answer.body) == (200, b"unframed from a" * 1000)
    assert "content-length" not in answer.headers and answer.headers["connection"] == "close"


def test_a_stream_reaches_the_client_event_by_event(pool: Pool) -> None:
    """The first event reaches the client before the replica has sent the last (gap s later)."""
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    body = json.dumps({**ASK, "stream": True, "events": 4, "gap": 0.7}).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    first_seen = None
    received = b""
    with socket.create_connection(("127.0.0.1", balancer.port), timeout=BOUND) as sock:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        while piece := sock.recv(65536):
            received += piece
            if first_seen is None and b'"index": 0' in received:
                first_seen = time.time()
    head, _, chunked = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nTransfer-Encoding: chunked\r\n" in head and b"\r\nConnection: close" in head
    events = dechunk(chunked).decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    sent = [json.loads(e.removeprefix("data: "))["sent"] for e in events[:-2]]
    assert len(sent) == 4
    assert first_seen is not None and first_seen < sent[-1], (first_seen, sent)


def dechunk(data: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert data == b"\r\n", data  # no trailers, and nothing after
            return out
        out, data = out + data[:size], data[size:]
        assert data.startswith(b"\r\n")
        data = data[2:]


BIG = os.urandom(1 << 20)


@pytest.mark.parametrize("framing", ["content-length", "chunked", "expect-100-continue"])
def test_a_large_body_arrives_intact(pool: Pool, framing: str) -> None:
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    if framing == "content-length":
        answer = call(balancer.port, body=BIG)
    elif framing == "chunked":
        pieces = (BIG[i : i + 100_003] for i in range(0, len(BIG), 100_003))
        answer = call(balancer.port, body=pieces, encode_chunked=True)
    else:
        with socket.create_connection(("127.0.0.1", balancer.port), timeout=BOUND) as sock:
            sock.sendall(b"PUT /v1/x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n")
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(BIG))
            assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(BIG)
            received = b"".join(iter(lambda: sock.recv(65536), b""))
        assert received.startswith(b"HTTP/1.1 200 OK\r\n")
        answer = Answer(200, {}, received.partition(b"\r\n\r\n")[2])
    echo = answer.json()
    assert (answer.status, echo["bytes"], echo["sha256"]) == (
        200,
        len(BIG),
        hashlib.sha256(BIG).hexdigest(),
    )
    if framing == "expect-100-continue":
        assert echo["method"] == "PUT" and "expect" not in dict(echo["headers"])


def test_method_path_query_and_headers_go_on_and_hop_by_hop_ones_do_not(pool: Pool) -> None:
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    headers = {
        "Connection": "keep-alive, X-Hop",
        "X-Hop": "1",
        "Keep-Alive": "timeout=5",
        "Authorization": "Bearer t0ken",
        "X-Keep": "kept",
    }
    answer = call(balancer.port, "GET", "/v1/models?limit=2&after=x", headers=headers)
    assert answer.status == 200 and answer.headers["connection"] == "close"
    echo = answer.json()
    assert (echo["method"], echo["path"]) == ("GET", "/v1/models?limit=2&after=x")
    got = dict(echo["headers"])
    assert got["host"] == a.address and got["connection"] == "close"
    assert (got["authorization"], got["x-keep"]) == ("Bearer t0ken", "kept")
    assert "x-hop" not in got and "keep-alive" not in got


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"NONSENSE\r\n\r\n", 400),
        (b"POST /v1/x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST /v1/x HTTP/1.1\r\nContent-Length: x1\r\n\r\n", 400),
        (b"POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
        (b"POST /v1/x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"GET /v1/x HTTP/1.1\r\n folded: header\r\n\r\n", 400),
        (b"POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ],
    ids=["request-line", "te-and-cl", "bad-cl", "chunked-not-last", "gzip", "obs-fold", "chunk"],
)
def test_a_bad_request_is_answered_with_its_error_and_never_sent_on(
    pool: Pool, request_head: bytes, status: int
) -> None:
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    head, _, body = raw(balancer.port, request_head).partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].startswith(b"HTTP/1.1 %d " % status)
    error = json.loads(body)["error"]
    assert error["code"] == status and error["message"], error


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_stops_it_at_once_with_exit_0(pool: Pool, sig: signal.Signals) -> None:
    a = pool.replica("a")
    balancer = pool.balancer([a], "--check-interval", "0.2")
    balancer.wait_healthy(1)
    balancer.process.send_signal(sig)
    assert balancer.process.wait(timeout=BOUND) == 0
    assert balancer.lines(f"stopped ({sig.name})")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", balancer.port), timeout=BOUND).close()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--listen", "nowhere", "--backend", "127.0.0.1:1"], "--listen"),
        (["--listen", "127.0.0.1:0"], "--backend"),
        (["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:70000"], "--backend"),
        (
            ["--listen", "127.0.0.1:0", "--backend", "h:1", "--check-interval", "0"],
            "--check-interval",
        ),
        (
            ["--listen", "127.0.0.1:0", "--backend", "h:1", "--check-timeout", "x"],
            "--check-timeout",
        ),
        (
            ["--listen", "127.0.0.1:0", "--backend", "h:1", "--health-path", "health"],
            "--health-path",
        ),
        (["--listen", "127.0.0.1:0", "--backend", "h:1", "--backend", "h:1"], "--backend"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it_and_exit_2(args: list[str], flag: str) -> None:
    done = subprocess.run(
        [PYTHON, str(BALANCER), "--pool", "judge", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("pool_balancer.py: error: ") and flag in line, line


def test_it_is_standard_library_python_3_9() -> None:
    """It runs with whatever python3 a container has: 3.9's syntax, the standard library only."""
    tree = ast.parse(BALANCER.read_text(), feature_version=(3, 9))
    assert ast.get_docstring(tree)
    imported = {
        name.split(".")[0]
        for each in ast.walk(tree)
        if isinstance(each, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in each.names] if isinstance(each, ast.Import) else [each.module or ""]
        )
    }
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
