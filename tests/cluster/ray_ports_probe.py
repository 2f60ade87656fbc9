"""Knocks on every Ray port of a job's nodes without its token, as another user of the cluster
would (tests/cluster/test_attacks.py): one cheap call per server, and what each answered.

    python ray_ports_probe.py HOST [HOST...]     prints one JSON object: {"HOST:PORT": answer}

An answer is "refused: <how>" (gRPC UNAUTHENTICATED, HTTP 401/403, nothing listening), or
"answered: <what>" when the call went through. The ports are the job's defaults (RayPorts in
src/nrl_launch/spec.py) and Ray's own fixed metrics ports; the core workers' are found by trying
the worker range. Ray's own client helpers add the token from RAY_AUTH_* when they are set: this
uses plain gRPC and HTTP, and the caller's environment holds no token.
"""

from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
from ray.core.generated import (
    core_worker_pb2,
    core_worker_pb2_grpc,
    gcs_service_pb2,
    gcs_service_pb2_grpc,
    node_manager_pb2,
    node_manager_pb2_grpc,
    ray_client_pb2,
    ray_client_pb2_grpc,
    reporter_pb2,
    reporter_pb2_grpc,
)

GCS, CLIENT, DASHBOARD = 1200, 1201, 8265
NODE_MANAGER, OBJECT_MANAGER, RUNTIME_ENV_AGENT = 1301, 1303, 1305
AGENT_GRPC, METRICS, AGENT_HTTP = 1307, 1309, 1311
WORKERS = range(2000, 3000)
# Ray's own, not the job's: the dashboard head's and the autoscaler's Prometheus metrics.
RAY_METRICS = (44227, 44217)


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def grpc_call(host: str, port: int, call: Callable[[grpc.Channel], Any]) -> str:
    if not listening(host, port):
        return "refused: nothing listening"
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        call(channel)
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return "refused: UNAUTHENTICATED"
        return f"answered: gRPC {code.name}"
    finally:
        channel.close()
    return "answered: OK"


def http_call(host: str, port: int, path: str, body: bytes | None = None) -> tuple[str, bytes]:
    if not listening(host, port):
        return "refused: nothing listening", b""
    request = urllib.request.Request(f"http://{host}:{port}{path}", data=body)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return f"answered: HTTP {answer.status}", answer.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (401, 403):
            return f"refused: HTTP {exc.code}", b""
        return f"answered: HTTP {exc.code}", b""


def probe(host: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def put(port: int, answer: str) -> None:
        found[f"{host}:{port}"] = answer

    calls: dict[int, Callable[[grpc.Channel], Any]] = {
        GCS: lambda ch: gcs_service_pb2_grpc.NodeInfoGcsServiceStub(ch).GetAllNodeInfo(
            gcs_service_pb2.GetAllNodeInfoRequest(), timeout=10
        ),
        CLIENT: lambda ch: ray_client_pb2_grpc.RayletDriverStub(ch).ClusterInfo(
            ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING),
            timeout=10,
        ),
        NODE_MANAGER: lambda ch: node_manager_pb2_grpc.NodeManagerServiceStub(ch).GetNodeStats(
            node_manager_pb2.GetNodeStatsRequest(), timeout=10
        ),
        # No Python stub: the raw method, with an empty request (refused before it is read).
        OBJECT_MANAGER: lambda ch: ch.unary_unary("/ray.rpc.ObjectManagerService/Pull")(
            b"", timeout=10
        ),
        AGENT_GRPC: lambda ch: reporter_pb2_grpc.ReporterServiceStub(ch).HealthCheck(
            reporter_pb2.HealthCheckRequest(), timeout=10
        ),
    }
    for port, call in calls.items():
        put(port, grpc_call(host, port, call))
    for path in ("/api/version", "/api/jobs/", "/nodes?view=summary"):
        found[f"{host}:{DASHBOARD}{path}"] = http_call(host, DASHBOARD, path)[0]
    found[f"{host}:{AGENT_HTTP}/api/job_agent/jobs/x/logs"] = http_call(
        host, AGENT_HTTP, "/api/job_agent/jobs/x/logs"
    )[0]
    found[f"{host}:{RUNTIME_ENV_AGENT}/get_runtime_envs_info"] = http_call(
        host, RUNTIME_ENV_AGENT, "/get_runtime_envs_info", b""
    )[0]
    workers = [p for p in WORKERS if listening(host, p)]
    for port in workers:
        put(
            port,
            grpc_call(
                host,
                port,
                lambda ch: core_worker_pb2_grpc.CoreWorkerServiceStub(ch).NumPendingTasks(
                    core_worker_pb2.NumPendingTasksRequest(), timeout=10
                ),
            ),
        )
    # Prometheus metrics: what they answer is kept whole, for the test to search.
    metrics = {}
    for port in (METRICS, *RAY_METRICS):
        answer, body = http_call(host, port, "/metrics")
        put(port, answer)
        metrics[str(port)] = body.decode("utf-8", errors="replace")
    found[f"{host}:metrics"] = metrics
    found[f"{host}:workers"] = workers
    return found


def main() -> None:
    report: dict[str, Any] = {}
    for host in sys.argv[1:]:
        report |= probe(host)
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
