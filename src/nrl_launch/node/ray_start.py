"""`ray start` on every node, run by start_ray with `python -c`: the head's GCS address, then
`ray start`'s arguments. It runs the `ray` command's own entry point in this process (Ray
already imported), after changing, where this Ray is one it knows, when Ray starts things.

The head: Ray starts the head's raylet only once its dashboard answers (its 9 module processes
up, 1.5 to 2 s on a busy node), and the head node joins only with its raylet. Here the raylet
starts while the dashboard starts, and `ray start` then waits for the dashboard as before; the
thread that starts the dashboard lives as long as `ray start` (see dashboard_beside_raylet).

A worker: in the Ray versions that read the head node's directories from the GCS (2.55.1,
NeMo RL v0.7's, 2.57 and 2.60 do; 2.46, 2.49 and 2.54 do not), a worker's `ray start` asks the
GCS for the head node and, until the head's raylet has registered, asks again every 2 s: a
worker that asks just before waits up to 2 s more, and so does every node's join. Here the
worker asks every 0.1 s, then runs `ray start`.

Once a node's raylet has registered, `ray start` takes a while more (0.6 s on a busy node) to
print that the runtime started, which note_joined waits for (on the head, longer: it waits
for the dashboard too). Here a thread asks the GCS every 0.1 s for this node (the head node;
a worker's address and node manager port) and, once it is alive, prints JOINED, which
note_joined takes as the same.

Whatever of this is missing from this Ray, or fails, `ray start` runs as it would have. Only
Python's standard library and Ray; it writes no file, and prints only that line.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from typing import Any

JOINED = "nrl-launch: the GCS lists this node alive"


def main() -> None:
    address, *args = sys.argv[1:]
    ray_command = ray("ray.scripts.scripts").main  # what the `ray` command runs

    try:
        # The Rays this was read against are those that wait for the head node (2.55.1 on).
        if not hasattr(ray("ray._private.utils"), "get_all_node_info_until_retrieved"):
            raise LookupError("this Ray's `ray start` does not wait for the head node")
        if "--head" in args:
            dashboard_beside_raylet(address, args)
        else:
            gcs = ray("ray._raylet").GcsClient(address=address)
            wait_for_head(gcs)
            threading.Thread(target=say_when_alive, args=(gcs, args), daemon=True).start()
    except Exception:  # not this Ray's API: `ray start` runs as Ray's own
        pass
    sys.argv = ["ray", *args]
    sys.exit(ray_command())


def dashboard_beside_raylet(address: str, args_of_start: list[str]) -> None:
    """Makes the head's `ray start` start its dashboard in a thread, start its raylet (and
    print JOINED once the GCS lists the head node alive), then wait for the dashboard and
    raise what starting it raised. Not with resource isolation, where Ray moves the processes
    started before the raylet into the raylet's cgroup."""
    if any(a.startswith("--enable-resource-isolation") for a in args_of_start):
        return
    node = ray("ray._private.node").Node
    start_dashboard, start_rest = node.start_api_server, node.start_ray_processes
    started: list[threading.Event] = []
    failed: list[BaseException] = []

    def dashboard_in_a_thread(self: Any, *args: Any, **kwargs: Any) -> None:
        done = threading.Event()

        def start() -> None:
            try:
                start_dashboard(self, *args, **kwargs)
            except BaseException as error:  # raised where Ray would have
                failed.append(error)
            done.set()
            # Ray starts its processes with a parent-death signal, which the kernel sends when
            # the thread that started them ends: this one lasts as long as `ray start`.
            threading.Event().wait()

        started.append(done)
        threading.Thread(target=start, daemon=True).start()

    def raylet_then_dashboard(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            gcs = ray("ray._raylet").GcsClient(address=address)
            say = threading.Thread(target=say_when_alive, args=(gcs, args_of_start), daemon=True)
            say.start()
        except Exception:  # `ray start`'s own line still comes
            pass
        result = start_rest(self, *args, **kwargs)
        for event in started:  # none where this Ray started no dashboard
            event.wait()
        if failed:
            raise failed[0]
        return result

    node.start_api_server = dashboard_in_a_thread
    node.start_ray_processes = raylet_then_dashboard


def wait_for_head(gcs: Any) -> None:
    """Returns once the GCS lists the head node alive."""
    head = ray("ray.core.generated.gcs_service_pb2").GetAllNodeInfoRequest.NodeSelector()
    head.is_head_node = True
    while not alive(gcs, head):
        time.sleep(0.1)


def say_when_alive(gcs: Any, args: list[str]) -> None:
    """Prints JOINED once the GCS lists this node alive: at this node's address (as `ray start`
    finds it) and node manager port (from `args`). Gives up quietly after 2 minutes (Ray gives
    a raylet 30 s to register) or on an error."""
    try:
        ports = [a.split("=", 1)[1] for a in args if a.startswith("--node-manager-port=")]
        this = ray("ray.core.generated.gcs_service_pb2").GetAllNodeInfoRequest.NodeSelector()
        if "--head" in args:
            this.is_head_node = True
        else:
            this.node_ip_address = ray("ray.util").get_node_ip_address()
        deadline = time.monotonic() + 120
        while ports and time.monotonic() < deadline:
            if alive(gcs, this, int(ports[0])):
                print(JOINED, flush=True)
                return
            time.sleep(0.1)
    except Exception:  # `ray start`'s own line still comes
        pass


def alive(gcs: Any, selector: Any, port: int = 0) -> bool:
    """Whether the GCS lists a node that `selector` picks (and on node manager port `port`,
    unless 0) alive."""
    alive_state = ray("ray.core.generated.gcs_pb2").GcsNodeInfo.GcsNodeState.ALIVE
    nodes = gcs.get_all_node_info(timeout=10, node_selectors=[selector]).values()
    return any(node.state == alive_state and port in (0, node.node_manager_port) for node in nodes)


def ray(module: str) -> Any:
    """One of Ray's modules (Ray's internals have no types to check against)."""
    return importlib.import_module(module)


main()
