"""The LLM judge in miniature: an OpenAI-compatible chat server that scores the toy task's answers,
as a reward model served beside training (N replicas behind one balancer, an nrl-launch model
pool), and the client GRPO scores with when `tiny_rl.judge_url` is set. Standard library only (no
torch): it starts in a fraction of a second.

`python -m tiny_rl.judge [--host 0.0.0.0] [--port P] [--model-name tiny-judge]` from
examples/tiny-rl; the port defaults to $NRL_POOL_PORT (nrl-launch sets it for each replica), else
8000 (0: a free one, which the start line names).

- `GET /health`: 200 `{"status": "ok"}`.
- `GET /v1/models`: the served model, as OpenAI lists models.
- `POST /v1/chat/completions`: a `chat.completion` whose `choices[0].message.content` is the score
  as a decimal string. The question is the last user message: the prompt and the answer as token
  ids, one line each (`question()` writes it):

      prompt: 3 1 4 1
      answer: 3 3 3 2

  The score is `task.reward`'s: the fraction of answer tokens equal to the prompt's first one
  (0.75 here), k/n written as Python writes the float; read as float32, it is the value
  `task.reward` computes. `model` may be left out; given, it must be the served one (404 else,
  as OpenAI's). A malformed request is answered 400 with OpenAI's error object.

Every answer names the replica that gave it, `HOST:PID`, as its `system_fingerprint` and in the
header `X-Judge-Replica`. The server logs one line to stderr when it listens and one when it
stops (SIGTERM or ^C) with how many answers it scored; none per request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 1 << 20
TOKENS = re.compile(r"[0-9]{1,12}(?:[ \t]+[0-9]{1,12})*")


def question(prompt: Sequence[int], answer: Sequence[int]) -> str:
    """The judge's question: what the client sends as its user message."""
    return f"prompt: {' '.join(map(str, prompt))}\nanswer: {' '.join(map(str, answer))}"


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def parse(content: str) -> tuple[list[int], list[int]]:
    """(prompt, answer) from a question; BadRequest when it is not one."""
    fields: dict[str, list[int]] = {}
    for line in content.strip().splitlines():
        name, colon, ids = (part.strip() for part in line.partition(":"))
        if not colon or name not in ("prompt", "answer") or name in fields:
            raise BadRequest(
                f"expected two lines, 'prompt: IDS' and 'answer: IDS' (token ids separated by "
                f"spaces); got the line {line.strip()!r}"
            )
        if not TOKENS.fullmatch(ids):
            raise BadRequest(f"{name}: expected token ids (integers >= 0) separated by spaces")
        fields[name] = [int(t) for t in ids.split()]
    if len(fields) != 2:
        raise BadRequest("expected two lines, 'prompt: IDS' and 'answer: IDS'")
    return fields["prompt"], fields["answer"]


def score(prompt: Sequence[int], answer: Sequence[int]) -> float:
    """task.reward without torch: the fraction of answer tokens equal to the prompt's first."""
    return sum(t == prompt[0] for t in answer) / len(answer)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's 5 drops the connections of a burst of questions (GRPO
    # sends 16 at a time), whose clients then wait 1 s to connect again.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], model: str) -> None:
        super().__init__(address, Handler)
        self.model = model
        self.replica = f"{socket.gethostname()}:{os.getpid()}"
        self.scored = 0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"  # keep-alive, for a balancer that reuses its connections
    # Headers and body go out as two writes: without TCP_NODELAY, on a kept-alive connection the
    # second may wait for the peer's delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        elif self.path == "/v1/models":
            model = {"id": self.server.model, "object": "model", "owned_by": "tiny-rl"}
            self.reply(200, {"object": "list", "data": [{**model, "created": 0}]})
        else:
            self.error(BadRequest(f"no route GET {self.path}", 404, "not_found"))

    def do_POST(self) -> None:
        try:
            prompt, answer = self.question()
        except BadRequest as err:
            return self.error(err)
        value = score(prompt, answer)
        with self.server.lock:
            self.server.scored += 1
        self.reply(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.server.model,
                "system_fingerprint": self.server.replica,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": repr(value)},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt) + len(answer),
                    "completion_tokens": 1,
                    "total_tokens": len(prompt) + len(answer) + 1,
                },
            },
        )

    def question(self) -> tuple[list[int], list[int]]:
        body = self.body()
        if self.path != "/v1/chat/completions":
            raise BadRequest(f"no route POST {self.path}", 404, "not_found")
        try:
            request = json.loads(body)
        except ValueError as err:
            raise BadRequest(f"the body is not JSON: {err}") from None
        if not isinstance(request, dict):
            raise BadRequest("expected a JSON object")
        model = request.get("model", self.server.model)
        if model != self.server.model:
            raise BadRequest(f"The model `{model}` does not exist.", 404, "model_not_found")
        return parse(self.user_message(request.get("messages")))

    def body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True  # what follows, if anything, was not read
            raise BadRequest(f"expected a Content-Length of at most {MAX_BODY} bytes")
        return self.rfile.read(int(length))

    @staticmethod
    def user_message(messages: Any) -> str:
        if not isinstance(messages, list):
            raise BadRequest("messages: expected a list of messages")
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise BadRequest("messages: no user message")
        content = users[-1].get("content")
        if not isinstance(content, str):
            raise BadRequest("messages: the last user message's content must be a string")
        return content

    def error(self, err: BadRequest) -> None:
        kind, code = "invalid_request_error", err.code
        self.reply(
            err.status, {"error": {"message": str(err), "type": kind, "param": None, "code": code}}
        )

    def reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Judge-Replica", self.server.replica)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass  # no line per request


def serve(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tiny_rl.judge", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=int(os.environ.get("NRL_POOL_PORT") or 8000))
    parser.add_argument("--model-name", default="tiny-judge")
    args = parser.parse_args(argv)
    server = Server((args.host, args.port), args.model_name)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops as ^C does
    url = f"http://{args.host}:{server.server_port}/v1"
    log(f"{args.model_name}: listening on {url} (replica {server.replica})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        log(f"{args.model_name}: stopped after scoring {server.scored} answer(s)")
    return 0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ---- The client: GRPO's rewards from the judge ----


class JudgeError(RuntimeError):
    """The judge stayed unreachable, or refused a question; the message names its URL."""


class Client:
    """Scores (prompt, answer) pairs on the judge at `url` (`http://HOST:PORT/v1`): one request
    per pair, `workers` at a time. A connection error, a timeout or a 5xx (the balancer in front
    may briefly have no healthy replica) is retried after each pause of BACKOFF_S; another
    answer, or the last failure, is a JudgeError. The judge runs on the job's own nodes: no
    proxy (http_proxy and the like are for the world outside)."""

    BACKOFF_S = (0.25, 0.5, 1.0, 2.0)  # 5 attempts, 3.75 s of pauses

    def __init__(self, url: str, workers: int = 16, timeout_s: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise JudgeError(f"tiny_rl.judge_url={url!r}: expected a URL, http://HOST:PORT/v1")
        self.url = url.rstrip("/")
        self.workers, self.timeout_s = workers, timeout_s
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def model(self) -> str:
        """The served model's name (GET /models): also checks that the judge answers."""
        listed = self.call("/models")
        try:
            return str(listed["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise JudgeError(f"judge at {self.url}: /models lists no model") from None

    def scores(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[float]:
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge")
        try:
            return list(pool.map(lambda pair: self.score(*pair), pairs))
        finally:  # on a failure, the questions not yet sent are dropped
            pool.shutdown(wait=True, cancel_futures=True)

    def score(self, prompt: Sequence[int], answer: Sequence[int]) -> float:
        body = {"messages": [{"role": "user", "content": question(prompt, answer)}]}
        completion = self.call("/chat/completions", body)
        try:
            return float(completion["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError, ValueError):
            raise JudgeError(f"judge at {self.url}: its answer holds no score") from None

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        began, why = time.monotonic(), ""
        for pause in (*self.BACKOFF_S, None):
            request = urllib.request.Request(self.url + path, data, headers)
            try:
                with self.opener.open(request, timeout=self.timeout_s) as reply:
                    answer = reply.read()
                break
            except urllib.error.HTTPError as err:
                with err:
                    why = ": ".join(filter(None, [f"HTTP {err.code}", message(err.read())]))
                if err.code < 500:
                    raise JudgeError(f"judge at {self.url}: {path} answered {why}") from None
            except (OSError, http.client.HTTPException) as err:
                why = str(getattr(err, "reason", None) or err) or type(err).__name__
            if pause is not None:
                time.sleep(pause)
        else:
            raise JudgeError(
                f"judge at {self.url} unreachable: {path}: {why} "
                f"({len(self.BACKOFF_S) + 1} attempts over {time.monotonic() - began:.1f} s)"
            )
        try:
            return json.loads(answer)
        except ValueError:
            raise JudgeError(f"judge at {self.url}: {path} answered with no JSON") from None


def message(body: bytes) -> str:
    """An OpenAI error body's message, else nothing."""
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return ""


if __name__ == "__main__":
    sys.exit(serve())
