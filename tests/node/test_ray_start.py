"""Every node's `ray start` (node/ray_start.py): the head's raylet starts while its dashboard
starts; a worker's begins once the GCS lists the head node alive; each says it joined once the
GCS lists its node alive. Ray here is a fake package with the few names ray_start.py uses, its
GCS and dashboard answering from files the test writes; the cluster tests run the real one
(test_slurm_jobs.py)."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nrl_launch import node
from tests.node.test_script import _node_functions

RAY_START = (Path(node.__file__).parent / "ray_start.py").read_text()

# `ray start`: starts the head's processes (Ray's Node), says what it was given, then runs until
# told to stop.
_SCRIPTS = """
import os, sys, time
def main():
    if "--head" in sys.argv:
        import ray._private.node
        ray._private.node.Node()
    print("ray command:", " ".join(sys.argv), flush=True)
    while not os.path.exists(os.environ["STATE"] + "/stop"):
        time.sleep(0.05)
    return int(os.environ.get("RC", "0"))
"""
# What ray_start.py reads of Ray's GCS: the head is alive once STATE/head exists, and the node at
# 10.0.0.5 on node manager port 1301 once STATE/this exists.
_INTERNALS = {
    "_private/utils.py": "def get_all_node_info_until_retrieved(): pass\n",
    "_raylet.py": """
import os
from types import SimpleNamespace
class GcsClient:
    def __init__(self, address):
        assert address == "10.0.0.1:1200", address
    def get_all_node_info(self, timeout, node_selectors):
        (selector,) = node_selectors
        state = os.environ["STATE"]
        if selector.is_head_node:
            return {b"h": SimpleNamespace(state=int(not os.path.exists(state + "/head")),
                                          node_manager_port=1301)}
        assert selector.node_ip_address == "10.0.0.5"
        return {b"w": SimpleNamespace(state=int(not os.path.exists(state + "/this")),
                                      node_manager_port=1301)}
""",
    "core/generated/gcs_pb2.py": """
class GcsNodeInfo:
    class GcsNodeState:
        ALIVE, DEAD = 0, 1
""",
    "core/generated/gcs_service_pb2.py": """
class GetAllNodeInfoRequest:
    class NodeSelector:
        is_head_node = False
        node_ip_address = ""
""",
    "util/__init__.py": "def get_node_ip_address(): return '10.0.0.5'\n",
}
# Ray's Node on the head, in Ray's order: the dashboard (a process that Ray starts with a
# parent-death signal, up once STATE/dashboard exists), then the raylet.
_NODE = """
import ctypes, os, signal, subprocess, sys, time
class Node:
    def __init__(self):
        self.start_head_processes()
        self.start_ray_processes()
    def start_head_processes(self):
        if not os.environ.get("NO_DASHBOARD"):
            self.start_api_server(include_dashboard=True, raise_on_failure=True)
    def start_api_server(self, *, include_dashboard, raise_on_failure):
        prctl = lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 preexec_fn=prctl)
        state = os.environ["STATE"]
        with open(state + "/dashboard.pid", "w") as f:
            f.write(str(child.pid))
        print("dashboard starting", flush=True)
        while not os.path.exists(state + "/dashboard"):
            time.sleep(0.05)
        if os.path.exists(state + "/dashboard-fails"):
            raise RuntimeError("the dashboard did not start")
        print("dashboard up", flush=True)
    def start_ray_processes(self):
        print("raylet started", flush=True)
"""
_ARGS = ["start", "--block", "--address=10.0.0.1:1200", "--node-manager-port=1301"]


def _fake_ray(root: Path, *, internals: bool) -> Path:
    files = {
        "scripts/scripts.py": _SCRIPTS,
        "_private/node.py": _NODE,
        **(_INTERNALS if internals else {}),
    }
    for name, text in files.items():
        path = root / "ray" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in [root / "ray", *(p for p in (root / "ray").rglob("*") if p.is_dir())]:
        (package / "__init__.py").touch()
    return root


@contextlib.contextmanager
def _ray_start(
    tmp_path: Path, *, internals: bool, args: list[str] = _ARGS, **env: str
) -> Iterator[subprocess.Popen[str]]:
    """ray_start.py running with the fake Ray (`internals`: with what it reads of Ray's GCS),
    `args` after the head's address; killed at the end if still running."""
    state = tmp_path / "state"
    state.mkdir()
    with subprocess.Popen(
        [sys.executable, "-c", RAY_START, "10.0.0.1:1200", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(_fake_ray(tmp_path / "site", internals=internals)),
            "STATE": str(state),
            **env,
        },
    ) as proc:
        try:
            yield proc
        finally:
            proc.kill()


def _stop(proc: subprocess.Popen[str], tmp_path: Path) -> int:
    """Tells the fake `ray start` to stop; its exit code."""
    (tmp_path / "state" / "stop").touch()
    return proc.wait(timeout=10)


def _lines_after(proc: subprocess.Popen[str], seconds: float) -> list[str]:
    """What `proc` printed within `seconds` (it keeps running)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + seconds
    text = b""
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:  # it exited
                break
            text += chunk
    return text.decode().splitlines()


def test_the_worker_starts_ray_once_the_head_is_alive_and_says_it_joined_once_it_is(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with _ray_start(tmp_path, internals=True) as proc:
        assert _lines_after(proc, 1.5) == []  # the head is not up: no `ray start` yet
        (state / "head").touch()
        assert _lines_after(proc, 1.5) == ["ray command: ray " + " ".join(_ARGS)]
        (state / "this").touch()  # the GCS lists this node alive
        assert _lines_after(proc, 1.5) == ["nrl-launch: the GCS lists this node alive"]
        assert _stop(proc, tmp_path) == 0


_HEAD_ARGS = ["start", "--head", "--block", "--port=1200", "--node-manager-port=1301"]


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (is there and no zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_head_starts_its_raylet_while_its_dashboard_starts_and_says_it_joined(
    tmp_path: Path,
) -> None:
    """Ray would start the raylet (and the head node join) only once the dashboard is up; here
    the raylet starts at once, and `ray start` goes on once the dashboard is up. The
    dashboard's process outlives the thread's start of it (Ray kills a process whose starting
    thread ends: its parent-death signal)."""
    state = tmp_path / "state"
    with _ray_start(tmp_path, internals=True, args=_HEAD_ARGS) as proc:
        assert sorted(_lines_after(proc, 1.5)) == ["dashboard starting", "raylet started"]
        (state / "head").touch()  # the GCS lists the head node alive
        assert _lines_after(proc, 1.5) == ["nrl-launch: the GCS lists this node alive"]
        (state / "dashboard").touch()
        assert _lines_after(proc, 1.5) == [
            "dashboard up",
            "ray command: ray " + " ".join(_HEAD_ARGS),
        ]
        assert _alive(int((state / "dashboard.pid").read_text()))
        assert _stop(proc, tmp_path) == 0


def test_the_head_s_ray_start_fails_as_ray_s_would_when_its_dashboard_fails(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with _ray_start(tmp_path, internals=True, args=_HEAD_ARGS) as proc:
        (state / "dashboard-fails").touch()
        (state / "dashboard").touch()
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode != 0
        assert "RuntimeError: the dashboard did not start" in out
        assert "ray command" not in out


def test_a_head_that_starts_no_dashboard_does_not_wait_for_one(tmp_path: Path) -> None:
    """A Ray that no longer starts its dashboard where ray_start.py expects it: `ray start`
    goes on as Ray's own would."""
    with _ray_start(tmp_path, internals=True, args=_HEAD_ARGS, NO_DASHBOARD="1") as proc:
        assert _lines_after(proc, 1.5) == [
            "raylet started",
            "ray command: ray " + " ".join(_HEAD_ARGS),
        ]
        assert _stop(proc, tmp_path) == 0


@pytest.mark.parametrize(
    ("internals", "extra"),
    # a Ray this was not read against; resource isolation (Ray moves what started before the
    # raylet into the raylet's cgroup)
    [(False, []), (True, ["--enable-resource-isolation"])],
)
def test_the_head_starts_in_ray_s_own_order_where_it_must(
    tmp_path: Path, internals: bool, extra: list[str]
) -> None:
    state = tmp_path / "state"
    with _ray_start(tmp_path, internals=internals, args=[*_HEAD_ARGS, *extra]) as proc:
        assert _lines_after(proc, 1.5) == ["dashboard starting"]
        (state / "dashboard").touch()
        assert _lines_after(proc, 1.5) == [
            "dashboard up",
            "raylet started",
            "ray command: ray " + " ".join([*_HEAD_ARGS, *extra]),
        ]
        assert _stop(proc, tmp_path) == 0


def test_without_ray_s_internals_the_worker_runs_ray_start_at_once_and_its_exit_code(
    tmp_path: Path,
) -> None:
    """A Ray whose `ray start` does not wait for the head (or whose GCS client is not where
    ray_start.py looks): `ray start` runs at once, waits by itself, and its exit is the step's."""
    with _ray_start(tmp_path, internals=False, RC="3") as proc:
        assert _lines_after(proc, 1.5) == ["ray command: ray " + " ".join(_ARGS)]
        assert _stop(proc, tmp_path) == 3


def _ray_start_argv(tmp_path: Path, first_lines: str, *args: str) -> list[str]:
    """The argv that start_ray gives the Python (`python` here, a recorder) with `ray` on PATH
    starting with `first_lines`, or `ray` itself where that is not pip's script."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    record = f'#!/bin/bash\nprintf "%s\\0" "$0" "$@" >"{tmp_path}/argv"\n'
    (bin_dir / "python").write_text(record)
    (bin_dir / "ray").write_text(first_lines.replace("{bin}", str(bin_dir)) + "\n" + record)
    for tool in ("python", "ray"):
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "ray-worker-1.log"
    log.touch()
    probe = (
        "NRL_NODE_LOG=$1 NRL_NODE_INDEX=1 NRL_NODE_NAME=node1 NRL_NODE_GPUS=8\n"
        "NRL_HEAD_IP=10.0.0.1 NRL_GCS_PORT=1200\n"
        'start_ray "${@:2}"\n'
        'wait "$NRL_RAY_PID"\n'
    )
    done = _node_functions(probe, tmp_path, str(log), *args, PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    return (tmp_path / "argv").read_text().split("\0")[:-1]


@pytest.mark.parametrize(
    "first_lines",
    # pip's script, and its /bin/sh trampoline where the Python's path is too long for `#!`
    ["#!{bin}/python", "#!/bin/sh\n'''exec' \"{bin}/python\" \"$0\" \"$@\"\n' '''"],
)
@pytest.mark.parametrize(
    "args", [["--block", "--address=10.0.0.1:1200"], ["--head", "--block", "--port=1200"]]
)
def test_a_node_s_ray_start_runs_in_the_python_of_the_ray_command(
    tmp_path: Path, first_lines: str, args: list[str]
) -> None:
    argv = _ray_start_argv(tmp_path, first_lines, *args)
    assert argv[0] == str(tmp_path / "bin" / "python")
    assert argv[1:2] == ["-c"] and argv[2] == RAY_START.rstrip("\n")
    assert argv[3:] == ["10.0.0.1:1200", "start", *args]


def test_a_ray_that_is_no_python_script_runs_as_the_ray_command(tmp_path: Path) -> None:
    """A `ray` that is a wrapper (a site's, say) is what runs."""
    argv = _ray_start_argv(tmp_path, "#!/bin/bash", "--block")
    assert argv == [str(tmp_path / "bin" / "ray"), "start", "--block"]
