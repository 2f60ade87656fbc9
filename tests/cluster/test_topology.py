"""What NeMo RL's placement reads about each node, read back through Ray on the dev cluster:
`nvlink_domain_<ClusterUUID>` and `topo_rank` (nemo_rl/distributed/virtual_cluster.py) and the
GPU -> CPU file of NRL_GPU_CPU_AFFINITY_FILE (numa_utils.py). The nodes have no GPUs: a
stand-in nvidia-smi (tests/cluster/standin/, made from real output) prints an HGX H100 node's
or a GB200 NVL72 node's answers, chosen per node by the job's setup command, which also sets
Slurm's topology address as a topology/block cluster would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status
from tests.conftest import Cli

pytestmark = pytest.mark.cluster
HERE = Path(__file__).resolve().parent
DRIVER = str(HERE / "topology_driver.py")
STANDIN = HERE / "standin"
RACK_A = "dc6e40c4-d722-4357-9ba6-5291dd461278"
RACK_B = "9c6f5af3-53bf-49b5-a436-b66766c413c3"
# The stand-in's NUMA node of each GPU (`nvidia-smi topo -m`, NUMA Affinity, first entry).
NUMA = {"hgx": [0, 0, 0, 0, 1, 1, 1, 1], "gb200": [0, 0, 1, 1]}


def _run(cli: Cli, cluster_job: list[str], nodes: int, per_node: str) -> tuple[dict, Path]:  # type: ignore[type-arg]
    flags = list(cluster_job)
    at = flags.index("--set") + 1
    # Ray's venv, then `per_node`: shell run on each node before Ray starts.
    flags[at] = f"{flags[at]}; {per_node}"
    result = cli("submit", "--wait", "--nodes", str(nodes), *flags, "--", "python", DRIVER)
    assert result.code == 0, result.out + result.err
    status = job_status(cli, result.out.split()[2])
    log_dir = Path(status["log_dir"])
    driver = (log_dir / "ray-driver.log").read_text()
    line = next(x for x in driver.splitlines() if x.startswith("TOPOLOGY "))
    return json.loads(line.removeprefix("TOPOLOGY ")), log_dir


def _expected_affinity(kind: str) -> str:
    """The file's lines for a node of `kind`: each GPU with the CPUs of its NUMA node, as this
    machine's kernel lists them (a GPU whose NUMA node this machine lacks has no line)."""
    lines = []
    for gpu, numa in enumerate(NUMA[kind]):
        cpulist = Path(f"/sys/devices/system/node/node{numa}/cpulist")
        if cpulist.exists() and cpulist.read_text().strip():
            lines.append(f"{gpu}:{cpulist.read_text().strip()}\n")
    return "".join(lines)


def _domains(resources: dict[str, float]) -> list[str]:
    return [key for key in resources if key.startswith("nvlink_domain_")]


def test_each_node_advertises_its_nvlink_domain_topo_rank_and_gpu_cpu_map(
    cli: Cli, cluster_job: list[str]
) -> None:
    # Two GB200 racks and an HGX node; blocks rack1 (node0, node1) and rack2 (node2, node3).
    per_node = (
        f"export PATH={STANDIN}:$PATH; case $SLURMD_NODENAME in "
        f"node0|node1) export NVSMI_STANDIN=gb200 NVSMI_STANDIN_UUID={RACK_A} B=rack1 ;; "
        f"node2) export NVSMI_STANDIN=gb200 NVSMI_STANDIN_UUID={RACK_B} B=rack2 ;; "
        "*) export NVSMI_STANDIN=hgx B=rack2 ;; esac; "
        "export SLURM_TOPOLOGY_ADDR=$B.$SLURMD_NODENAME SLURM_TOPOLOGY_ADDR_PATTERN=block.node"
    )
    report, log_dir = _run(cli, cluster_job, 4, per_node)
    assert sorted(report) == ["node0", "node1", "node2", "node3"]
    res = {name: node["resources"] for name, node in report.items()}
    # ray.sub's rule: block digits x 10^10 + node digits.
    assert {name: r["topo_rank"] for name, r in res.items()} == {
        "node0": 10000000000,
        "node1": 10000000001,
        "node2": 20000000002,
        "node3": 20000000003,
    }
    assert _domains(res["node0"]) == _domains(res["node1"]) == [f"nvlink_domain_{RACK_A}"]
    assert _domains(res["node2"]) == [f"nvlink_domain_{RACK_B}"]
    # An HGX board's all-zero ClusterUUID is no NVLink domain.
    assert _domains(res["node3"]) == []
    for r in res.values():
        assert r["worker_units"] == 8 and r["GPU"] == 8
    # Every node's workers are pointed at one path, with that node's own map in it.
    paths = {node["affinity_file"] for node in report.values()}
    assert len(paths) == 1 and paths != {""}
    for name, node in report.items():
        kind = "hgx" if name == "node3" else "gb200"
        assert node["affinity"] == _expected_affinity(kind), name
    assert "warning: topology" not in (log_dir / "ray-head.log").read_text()


@pytest.mark.parametrize("addresses", ["colliding", "none"])
def test_topo_rank_stays_unique_when_block_digits_collide_or_slurm_has_no_blocks(
    cli: Cli, cluster_job: list[str], addresses: str
) -> None:
    if addresses == "colliding":
        # "rack-A1.n1" and "rack-B1.n1" are both 10000000001 by ray.sub's digits-only rule.
        per_node = (
            "case $SLURMD_NODENAME in node0) B=rack-A1 ;; *) B=rack-B1 ;; esac; "
            "export SLURM_TOPOLOGY_ADDR=$B.n1 SLURM_TOPOLOGY_ADDR_PATTERN=block.node"
        )
    else:
        per_node = "true"  # Slurm's own address: the node name, pattern "node"
    report, log_dir = _run(cli, [*cluster_job, *ON_NODE0_AND_1[2:]], 2, per_node)
    ranks = {name: node["resources"]["topo_rank"] for name, node in report.items()}
    head_log = (log_dir / "ray-head.log").read_text()
    if addresses == "colliding":
        # By block name (rack-A1 before rack-B1), then by the node's place in the job.
        assert ranks == {"node0": 10000000001, "node1": 20000000002}
        assert "warning: topology: ray.sub's topo_rank rule gives rack-B1.n1" in head_log
    else:
        # ray.sub's ranks of its head and workers: the head 1, node K K+1.
        assert ranks == {"node0": 1, "node1": 2}
        assert "warning: topology" not in head_log
    # No nvidia-smi on these nodes: no NVLink domain, an empty GPU -> CPU map.
    for node in report.values():
        assert _domains(node["resources"]) == [] and node["affinity"] == ""
