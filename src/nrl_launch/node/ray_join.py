"""`ray start` on a worker node: begun once the head node is up, and said to have joined once
the GCS lists it alive. run_worker runs this with `python -c`: the head's GCS address, then
`ray start`'s arguments.

In the Ray versions that read the head node's directories from the GCS (2.55.1, NeMo RL
v0.7's, and 2.60 do; 2.46, 2.49 and 2.54 do not), a worker's `ray start` asks the GCS for the
head node and, until the head's raylet has registered, asks again every 2 s. The head's raylet
registers only once the head's dashboard is up, seconds after the GCS: a worker that asks just
before waits up to 2 s more, and so does every node's join. Here the worker asks every 0.1 s,
then runs `ray start` in this process, as the `ray` command would (Ray already imported).

Once this node's raylet has registered, `ray start` takes a while more (0.6 s on a busy node)
to print that the runtime started, which note_joined waits for. Here a thread asks the GCS
every 0.1 s for this node (its address and node manager port) and, once it is alive, prints
JOINED, which note_joined takes as the same.

Whatever of this is missing from this Ray, or fails, `ray start` runs as it would have: it
waits by itself, and note_joined waits for its line. Only Python's standard library and Ray;
it writes no file, and prints only that line.
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
        gcs = connect(address)
        wait_for_head(gcs)
        threading.Thread(target=say_when_alive, args=(gcs, args), daemon=True).start()
    except Exception:  # not this Ray's API: `ray start` waits by itself
        pass
    sys.argv = ["ray", *args]
    sys.exit(ray_command())


def connect(address: str) -> Any:
    """A client of the GCS at `address`, in the Ray versions whose `ray start` waits for the
    head (with the function it waits with)."""
    if not hasattr(ray("ray._private.utils"), "get_all_node_info_until_retrieved"):
        raise LookupError("this Ray's `ray start` does not wait for the head node")
    return ray("ray._raylet").GcsClient(address=address)


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
