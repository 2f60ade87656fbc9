"""A stand-in for NeMo Skills' sandbox in the sandbox tests (tests/cluster/test_sandbox.py): an
HTTP server on $NGINX_PORT (the port the job gives a sandbox, as ray.sub does) that answers
GET /health with 200 and its node's name, and logs a line per request.

Knobs, from the sandbox's environment (sandbox.env), each for the nodes named in
SANDBOX_ON_NODES (comma-separated; empty or unset: every node):
  SANDBOX_DELAY_S      wait this long before listening (a sandbox that is slow to start)
  SANDBOX_EXIT_AFTER_S exit with code 3 this long after listening (a sandbox that dies)
  SANDBOX_SILENT=1     never listen (a sandbox that never answers)
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NODE = os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def log(message: str) -> None:
    print(f"[sandbox_server {NODE}] {message}", flush=True)


def here() -> bool:
    """Whether the knobs apply to this node."""
    nodes = [n for n in os.environ.get("SANDBOX_ON_NODES", "").split(",") if n]
    return not nodes or NODE in nodes


def what_it_sees() -> str:
    """What this sandbox can see of its node and its job, as one JSON line: the processes it can
    see (a sandbox in PID and user namespaces of its own sees only its own), its environment's
    names, and what is beside its exchange dir (SANDBOX_PORTS_DIR: in a container, /nrl-sandbox,
    and no file of the job's log dir beside it)."""
    pids = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    ports_dir = Path(os.environ.get("SANDBOX_PORTS_DIR", "/nonexistent"))
    seen = {
        "processes": len(pids),
        "pid_1": Path("/proc/1/comm").read_text().strip() if Path("/proc/1/comm").exists() else "",
        "env": sorted(os.environ),
        "ports_dir": str(ports_dir),
        "beside_ports_dir": sorted(p.name for p in ports_dir.parent.iterdir())
        if ports_dir.parent.is_dir()
        else [],
    }
    return json.dumps(seen, sort_keys=True)


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/health":
            self.send_error(404)
            return
        body = f"ok {NODE}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log(f"{self.address_string()} {format % args}")


def main() -> None:
    port = int(os.environ["NGINX_PORT"])
    knobs = here()
    log(f"starting: port {port}, workers from {os.environ.get('SANDBOX_WORKER_BASE_PORT')}")
    log(f"sees {what_it_sees()}")
    if knobs and os.environ.get("SANDBOX_SILENT") == "1":
        log("silent: never listening")
        while True:
            time.sleep(3600)
    delay = float(os.environ.get("SANDBOX_DELAY_S", "0")) if knobs else 0.0
    if delay:
        log(f"waiting {delay:g} s before listening")
        time.sleep(delay)
    server = ThreadingHTTPServer(("0.0.0.0", port), Health)
    exit_after = float(os.environ.get("SANDBOX_EXIT_AFTER_S", "0")) if knobs else 0.0
    if exit_after:

        def die() -> None:
            time.sleep(exit_after)
            log(f"exiting with code 3 after {exit_after:g} s, as asked")
            os._exit(3)

        threading.Thread(target=die, daemon=True).start()
    log(f"listening on port {port}")
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
