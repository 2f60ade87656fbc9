"""tiny-rl's judge (examples/tiny-rl/tiny_rl/judge.py), a real server in a subprocess: it scores
as task.reward does, answers as OpenAI's API does, its client rides out a judge that is not up
yet, and a GRPO run (nrl-launch's local backend, real Ray) takes its rewards from it and learns."""

from __future__ import annotations

import importlib
import json
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import TINY_RL, wait_until


@dataclass
class Judge:
    process: subprocess.Popen[str]
    url: str = ""
    log: list[str] = field(default_factory=list)  # its stderr, line by line


@contextmanager
def judge_server(*args: str, env: dict[str, str] | None = None) -> Iterator[Judge]:
    """`python -m tiny_rl.judge --host 127.0.0.1 ARGS` (this venv's Python: the judge needs only
    the standard library), once it says where it listens; stopped (SIGTERM) after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tiny_rl.judge", "--host", "127.0.0.1", *args],
        cwd=TINY_RL,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    judge, first = Judge(process), threading.Event()

    def read() -> None:
        for line in process.stderr:
            judge.log.append(line)
            first.set()
        first.set()  # it ended

    reader = threading.Thread(target=read)
    reader.start()
    try:
        first.wait(timeout=10)
        found = re.search(r"listening on (http://\S+)", "".join(judge.log))
        assert found, judge.log
        judge.url = found.group(1)
        yield judge
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=10)
        process.stderr.close()


@pytest.fixture
def judge() -> Iterator[Judge]:
    with judge_server("--port", "0") as started:
        yield started


def scored(judge: Judge) -> int:
    """How many answers a stopped judge says it scored."""
    found = re.search(r"stopped after scoring (\d+) answer", "".join(judge.log))
    assert found, judge.log
    return int(found.group(1))


def call(url: str, body: object = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body, headers) of GET `url`, or of POST `body` there (bytes as they are)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read()), dict(reply.headers)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read()), dict(err.headers)


def ask(prompt: list[int], answer: list[int]) -> dict[str, Any]:
    content = f"prompt: {' '.join(map(str, prompt))}\nanswer: {' '.join(map(str, answer))}"
    return {"model": "tiny-judge", "messages": [{"role": "user", "content": content}]}


def float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def test_the_judge_scores_as_task_reward(judge: Judge, tiny_rl: Path) -> None:
    """300 random (prompt, answer) pairs, prompts of 1-8 tokens from vocabularies of 2-16 and
    answers anywhere from right to wrong: the judge's score, read as float32 (as GRPO reads it),
    is task.reward's, computed by tiny-rl itself in its own env (it needs torch)."""
    rng = random.Random(35)
    pairs = []
    for _ in range(300):
        length, vocab, right = rng.randint(1, 8), rng.randint(2, 16), rng.random()
        prompt = [rng.randrange(1, vocab) for _ in range(length)]
        answer = [prompt[0] if rng.random() < right else rng.randrange(vocab) for _ in prompt]
        pairs.append((prompt, answer))
    endpoint = f"{judge.url}/chat/completions"
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda pair: call(endpoint, ask(*pair)), pairs))
    reference = subprocess.run(
        [
            str(tiny_rl / ".venv" / "bin" / "python"),
            "-c",
            "import json, sys, torch; from tiny_rl import task\n"
            "pairs = json.load(sys.stdin)\n"
            "print(json.dumps([float(task.reward(torch.tensor([p + a]), len(p))[0]) "
            "for p, a in pairs]))",
        ],
        cwd=tiny_rl,
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rewards = json.loads(reference.stdout)
    assert len(set(rewards)) > 10 and 0.0 in rewards and 1.0 in rewards  # a spread, ends too
    assert [status for status, _, _ in replies] == [200] * len(pairs)
    scores = [float(body["choices"][0]["message"]["content"]) for _, body, _ in replies]
    assert [float32(s) for s in scores] == rewards

    # Each reply is a chat completion, and names the replica that answered.
    _, body, headers = replies[0]
    replica = f"{socket.gethostname()}:{judge.process.pid}"
    assert body["object"] == "chat.completion" and body["model"] == "tiny-judge"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["system_fingerprint"] == headers["X-Judge-Replica"] == replica
    judge.process.terminate()
    judge.process.wait(timeout=10)
    wait_until(lambda: "stopped after" in "".join(judge.log), timeout=10)
    assert scored(judge) == len(pairs)
    assert len(judge.log) == 2, judge.log  # listening, stopped: no line per request


def test_health_and_models(judge: Judge) -> None:
    base = judge.url.removesuffix("/v1")
    assert call(f"{base}/health")[:2] == (200, {"status": "ok"})
    status, listed, _ = call(f"{judge.url}/models")
    assert status == 200 and listed["object"] == "list"
    assert [(m["id"], m["object"]) for m in listed["data"]] == [("tiny-judge", "model")]


def user(content: object) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"not json", 400, "the body is not JSON"),
        ([1, 2], 400, "expected a JSON object"),
        ({"messages": "prompt: 1\nanswer: 1"}, 400, "messages: expected a list"),
        ({"messages": [{"role": "system", "content": "x"}]}, 400, "no user message"),
        (user([{"type": "text"}]), 400, "content must be a string"),
        (user("prompt: 3 1 4 1"), 400, "'prompt: IDS' and 'answer: IDS'"),
        (user("prompt: 3 1\nanswer: 3 x"), 400, "answer: expected token ids"),
        (user("prompt: 3 1\nanswer:"), 400, "answer: expected token ids"),
        (user("prompt: -3 1\nanswer: 3 3"), 400, "prompt: expected token ids (integers >= 0)"),
        (user("prompt: 3\nanswer: 3\nanswer: 3"), 400, "got the line 'answer: 3'"),
        ({**ask([3], [3]), "model": "gpt-9"}, 404, "The model `gpt-9` does not exist."),
    ],
    ids=[
        "not-json",
        "not-object",
        "messages-not-list",
        "no-user",
        "content-parts",
        "no-answer",
        "bad-token",
        "empty-answer",
        "negative-token",
        "answer-twice",
        "unknown-model",
    ],
)
def test_a_malformed_request_is_refused_as_openai_does(
    judge: Judge, body: object, status: int, says: str
) -> None:
    answered, error, _ = call(f"{judge.url}/chat/completions", body)
    assert answered == status
    assert error["error"]["type"] == "invalid_request_error"
    assert says in error["error"]["message"]
    # And the judge goes on serving.
    answered, completion, _ = call(f"{judge.url}/chat/completions", ask([3, 1], [3, 2]))
    assert (answered, completion["choices"][0]["message"]["content"]) == (200, "0.5")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_judge_listens_on_nrl_pool_port_and_starts_at_once() -> None:
    """nrl-launch gives each replica its port as NRL_POOL_PORT; the judge imports nothing past
    the standard library (no torch), so it listens well within a second."""
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "NRL_POOL_PORT": str(port)}
    began = time.monotonic()
    with judge_server("--model-name", "judge-x", env=env) as judge:
        started_s = time.monotonic() - began
        assert judge.url == f"http://127.0.0.1:{port}/v1"
        assert call(f"{judge.url}/models")[1]["data"][0]["id"] == "judge-x"
    assert started_s < 1.0, started_s
    imports = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; before = set(sys.modules); import tiny_rl.judge\n"
            "print(*sorted({m.split('.')[0] for m in set(sys.modules) - before}))",
        ],
        cwd=TINY_RL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    outside = set(imports.stdout.split()) - set(sys.stdlib_module_names) - {"tiny_rl"}
    assert not outside, outside


# ---- The client GRPO scores with (tiny_rl.judge.Client): standard library, so here ----


@pytest.fixture
def client_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(TINY_RL))
    return importlib.import_module("tiny_rl.judge")


PAIRS = [([3, 1, 4, 1], [3, 3, 3, 2]), ([2, 7], [7, 7]), ([5], [5])]


def test_the_client_waits_for_a_judge_that_is_starting(client_module: ModuleType) -> None:
    """Questions sent before the judge listens are retried until it does (its first pauses
    are 0.25, 0.5 and 1 s)."""
    port = free_port()
    client = client_module.Client(f"http://127.0.0.1:{port}/v1")
    with ThreadPoolExecutor(1) as pool:
        scores = pool.submit(client.scores, PAIRS)
        time.sleep(0.5)
        assert not scores.done()
        with judge_server("--port", str(port)) as judge:
            assert scores.result(timeout=30) == [0.75, 0.0, 1.0]
    assert scored(judge) == len(PAIRS)


def test_the_client_retries_a_balancer_with_no_healthy_replica_yet(
    client_module: ModuleType, judge: Judge
) -> None:
    """A balancer in front of the judge answers 503 twice (no replica healthy yet), then
    forwards: each question is asked again until it is answered."""
    seen: list[int] = []

    class Balancer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(len(seen))
            if len(seen) <= 2:
                status, reply = 503, b'{"error": {"message": "no healthy replica"}}'
            else:
                status, answer, _ = call(judge.url + self.path.removeprefix("/v1"), body)
                reply = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    balancer = ThreadingHTTPServer(("127.0.0.1", 0), Balancer)
    serving = threading.Thread(target=balancer.serve_forever)
    serving.start()
    try:
        client = client_module.Client(f"http://127.0.0.1:{balancer.server_port}/v1", workers=1)
        assert client.scores(PAIRS[:1]) == [0.75]
    finally:
        balancer.shutdown()
        serving.join(timeout=10)
        balancer.server_close()
    assert len(seen) == 3


def test_the_client_fails_in_one_line_naming_the_judge(
    client_module: ModuleType, judge: Judge
) -> None:
    """Nothing listening: the question is asked 5 times over ~4 s, then one line says where
    and why. A refused question (400) is not asked again: the line gives the judge's reason."""
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    began = time.monotonic()
    with pytest.raises(client_module.JudgeError) as failed:
        client_module.Client(nowhere).scores(PAIRS)
    assert time.monotonic() - began < 10
    assert re.fullmatch(
        rf"judge at {nowhere} unreachable: /chat/completions: .*Connection refused.* "
        r"\(5 attempts over \d\.\d s\)",
        str(failed.value),
    ), failed.value

    began = time.monotonic()
    with pytest.raises(client_module.JudgeError) as refused:
        client_module.Client(judge.url).scores([([1, 2], [])])
    assert time.monotonic() - began < 1
    assert str(refused.value) == (
        f"judge at {judge.url}: /chat/completions answered HTTP 400: "
        "answer: expected token ids (integers >= 0) separated by spaces"
    )

    with pytest.raises(client_module.JudgeError, match="expected a URL, http://HOST:PORT/v1"):
        client_module.Client("__JUDGE_URL__")  # a placeholder that nothing filled in
