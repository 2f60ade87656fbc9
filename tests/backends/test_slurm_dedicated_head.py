"""A dedicated CPU Ray head (ray.dedicated_head, ray.sub's DEDICATED_RAY_HEAD=1): one node more
than slurm.nodes runs the Ray head and the driver and offers Ray no GPUs. The allocation, the
node steps' resources and readiness (in a real bash, from the rendered script), status, the
records attach and logs read, plan, and the backends that refuse it. On the dev cluster:
tests/cluster/test_dedicated_head.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from nrl_launch.backends import slurm
from nrl_launch.cli.options import job_flags
from nrl_launch.errors import UsageError
from nrl_launch.jobs import record
from nrl_launch.jobs.status import read_log_dir
from tests.conftest import Cli, shellcheck
from tests.fakes import FakeSlurm
from tests.helpers import NONCOLOC_2N, spec

HEAD = {"dedicated_head": True}
JOB = ["--nodes", "2", "--container-runtime", "none", "--", "python", "train.py"]
SET_HEAD = ["--set", "ray.dedicated_head=true"]


# ---- The spec and the allocation ----


def test_the_head_is_a_node_more_than_slurm_nodes() -> None:
    assert spec(slurm={"nodes": 2}).allocated_nodes == 2
    assert spec(slurm={"nodes": 2}, ray=HEAD).allocated_nodes == 3


def test_the_flag_sets_the_key() -> None:
    flags = job_flags(dedicated_head=True)
    assert (flags.values, flags.labels) == (
        {"ray.dedicated_head": True},
        {"ray.dedicated_head": "--dedicated-head"},
    )
    assert job_flags().values == {}


def test_sbatch_gets_the_gpu_nodes_and_the_head(tmp_path: Path) -> None:
    request = slurm.plan(spec(slurm={"nodes": 2}, ray=HEAD))
    assert "--nodes=3" in request.argv
    lines = request.script.splitlines()
    assert "#SBATCH --nodes=3" in lines
    assert "NRL_NODES=3" in lines and "NRL_DEDICATED_HEAD=1" in lines
    script = tmp_path / "job.sbatch"
    script.write_text(request.script)
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout


def test_a_job_without_one_renders_none() -> None:
    lines = slurm.plan(spec(slurm={"nodes": 2})).script.splitlines()
    assert "NRL_NODES=2" in lines and "NRL_DEDICATED_HEAD=0" in lines


def test_a_plain_job_starts_no_ray_head_and_takes_slurm_nodes(cli: Cli) -> None:
    """`run` starts no Ray: a profile's dedicated head does not add a node to it."""
    result = cli("run", "--dry-run", *SET_HEAD, *JOB)
    assert result.code == 0, result.err
    assert "#SBATCH --nodes=2" in result.out.splitlines()
    assert "NRL_NODES=2" in result.out.splitlines()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--backend", "local"], "ray.dedicated_head: the local backend runs one node"),
        (["--backend", "lepton"], "ray.dedicated_head: not on lepton"),
    ],
)
def test_backends_without_a_cpu_head_refuse_it_in_one_line(
    cli: Cli, args: list[str], says: str
) -> None:
    result = cli("render", *args, *SET_HEAD, "--container-runtime", "none", "--", "python", "x.py")
    assert result.code == 2
    assert result.err.count("\n") == 1 and says in result.err, result.err


# ---- The node steps: what each node offers Ray, and readiness on the head ----


def _node_script(**values: object) -> str:
    script = slurm.plan(spec(slurm={"nodes": 2, "gpus_per_node": 8}, **values)).script
    return script[: script.rindex("\ncase ${1:-} in")]


def _bash(script: str, probe: str, log_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script + "\n" + probe],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": str(log_dir), **env},
        timeout=60,
        check=False,
    )


def _offered(tmp_path: Path, role: str, node: str, **values: object) -> tuple[str, dict]:  # type: ignore[type-arg]
    """The GPUs and resources node_main gives `ray start` on `node` of node0..node2 as `role`
    (Ray itself replaced by a print; no nvidia-smi, no Slurm topology address)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("ray", "nvidia-smi"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    out = tmp_path / f"{node}.out"
    probe = (
        f'run_{role}() {{ printf \'%s\\n%s\\n\' "$NRL_NODE_GPUS" "$NRL_RESOURCES" >{out}; }}\n'
        f"node_main {role}\n"
    )
    done = _bash(
        _node_script(ray={"auth": "off", **values}),
        probe,
        tmp_path,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        SLURMD_NODENAME=node,
        NRL_NODE_LIST="node0 node1 node2",
    )
    assert done.returncode == 0, done.stderr
    gpus, resources = out.read_text().splitlines()
    return gpus, json.loads(resources)


def test_the_dedicated_head_offers_no_gpus_and_only_ray_head(tmp_path: Path) -> None:
    assert _offered(tmp_path, "head", "node0", **HEAD) == (
        "0",
        {"slurm_managed_ray_cluster": 1, "ray_head": 1},
    )
    log = (tmp_path / "ray-head.log").read_text()
    assert "a dedicated CPU head: Ray gets no GPUs and no worker_units on this node" in log


def test_gpu_nodes_offer_their_gpus_worker_units_and_topo_rank(tmp_path: Path) -> None:
    assert _offered(tmp_path, "worker", "node1", **HEAD) == (
        "8",
        {"slurm_managed_ray_cluster": 1, "worker_units": 8, "topo_rank": 2},
    )


def test_without_one_the_head_offers_its_gpus(tmp_path: Path) -> None:
    assert _offered(tmp_path, "head", "node0") == (
        "8",
        {"slurm_managed_ray_cluster": 1, "worker_units": 8, "topo_rank": 1},
    )


def _joined(log_dir: Path, marks: dict[int, str]) -> None:
    (log_dir / "joined").mkdir()
    for index, line in marks.items():
        (log_dir / "joined" / str(index)).write_text(line + "\n")


def test_readiness_counts_every_node_and_the_gpu_nodes_gpus(tmp_path: Path) -> None:
    _joined(tmp_path, {0: "node0 0 100.0", 1: "node1 8 101.0", 2: "node2 8 102.0"})
    done = _bash(
        _node_script(ray=HEAD), "wait_for_nodes", tmp_path, NRL_NODE_LIST="node0 node1 node2"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Number of actors online: 16/16\n"
    assert json.loads((tmp_path / "readiness.json").read_text()) == {
        "nodes": 3,
        "nodes_expected": 3,
        "gpus": 16,
        "gpus_expected": 16,
        "dedicated_head": 1,
    }


def test_a_gpu_node_that_never_joins_is_named_at_the_join_timeout(tmp_path: Path) -> None:
    _joined(tmp_path, {0: "node0 0 100.0", 1: "node1 8 101.0"})
    (tmp_path / "timeline").write_text("submitted 1.0\n")
    done = _bash(
        _node_script(ray=HEAD),
        "NRL_JOIN_TIMEOUT=1; wait_for_nodes",
        tmp_path,
        NRL_NODE_LIST="node0 node1 node2",
    )
    assert done.returncode == 1, done.stderr
    assert "Number of actors online: 8/16\n" in done.stdout
    assert (tmp_path / "ENDED").read_text() == (
        "not every node joined within 1s: node2 (node 2) missing; see ray-worker-2.log\n"
    )
    readiness = json.loads((tmp_path / "readiness.json").read_text())
    assert (readiness["nodes"], readiness["nodes_expected"]) == (2, 3)


def test_block_ranks_are_the_gpu_nodes_alone(tmp_path: Path) -> None:
    """The head writes no topology address: the GPU nodes rank among themselves at once
    (without waiting for the head's address until topo_rank's 60 s bound)."""
    (tmp_path / "topology").mkdir()
    (tmp_path / "topology" / "2").write_text("rack1.node2\n")
    done = _bash(
        _node_script(ray=HEAD),
        "NRL_NODE_INDEX=1; topo_rank",
        tmp_path,
        SLURM_TOPOLOGY_ADDR="rack1.node1",
        SLURM_TOPOLOGY_ADDR_PATTERN="block.node",
    )
    assert (done.returncode, done.stdout) == (0, "10000000001"), done.stderr


# ---- What the login node reads: status, records, attach and logs ----


def test_the_log_dir_says_whether_the_head_is_dedicated(tmp_path: Path) -> None:
    ready = '{"nodes": 1, "nodes_expected": 3, "gpus": 0, "gpus_expected": 16%s}\n'
    (tmp_path / "readiness.json").write_text(ready % ', "dedicated_head": 1')
    assert read_log_dir(tmp_path).dedicated_head is True
    (tmp_path / "readiness.json").write_text(ready % "")
    assert read_log_dir(tmp_path).dedicated_head is False


def _record(kind: record.JobKind = "ray", nodes: int = 3) -> record.JobRecord:
    return record.JobRecord(
        job_id="7",
        backend="slurm",
        job_name="j",
        nodes=nodes,
        submitted_at=1.0,
        submit_dir="/submit",
        log_dir="/logs/7-logs",
        script_path="/submit/job.sbatch",
        argv=["sbatch", "job.sbatch"],
        spec=spec(slurm={"nodes": 2}, ray=HEAD).model_dump(mode="json"),
        kind=kind,
    )


def test_attach_and_logs_reach_the_head_and_every_gpu_node() -> None:
    rec = _record()
    assert [rec.node_index(v) for v in ("head", "0", "1", "2")] == [0, 0, 1, 2]
    with pytest.raises(UsageError, match=r"--node '3': expected head, or a node index 0\.\.2"):
        rec.node_index("3")


def test_submit_status_and_logs_of_a_dedicated_head_job(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    slurm.answer("sbatch", stdout="13\n")
    result = cli("submit", "-q", "--log-dir", str(tmp_path / "logs"), *SET_HEAD, *JOB)
    assert result.code == 0, result.err
    assert "--nodes=3" in slurm.calls("sbatch")[0].split()
    # The record counts the allocation, head included: status, attach and logs read it.
    assert record.load("13", Path(os.environ["NRL_LAUNCH_STATE_DIR"])).nodes == 3
    log_dir = tmp_path / "logs" / "13-logs"
    log_dir.mkdir()
    (log_dir / "STARTED_RAY_HEAD").touch()
    (log_dir / "readiness.json").write_text(
        '{"nodes": 2, "nodes_expected": 3, "gpus": 8, "gpus_expected": 16, "dedicated_head": 1}\n'
    )
    (log_dir / "ray-head.log").write_text("on the head\n")
    (log_dir / "ray-worker-2.log").write_text("on GPU node 2\n")
    slurm.answer("squeue", stdout="13|RUNNING|None|3|node[0-2]\n")
    job = json.loads(cli("status", "13", "--json").out)["jobs"][0]
    assert job["phase"] == "JOINING"
    assert job["detail"] == "2/3 nodes joined (1 CPU head + 2 GPU nodes), 8/16 GPUs"
    assert (job["nodes_joined"], job["nodes_expected"]) == (2, 3)
    assert cli("logs", "13", "--node", "head").out == "on the head\n"
    assert cli("logs", "13", "--node", "2").out == "on GPU node 2\n"


# ---- plan ----


def test_plan_shows_the_head_and_its_idle_gpus(cli: Cli) -> None:
    result = cli("plan", "--config", str(NONCOLOC_2N), "--dedicated-head")
    assert result.code == 0, result.err
    assert (
        "Allocation:  3 Slurm nodes: 1 CPU Ray head (its GPUs idle) + 2 GPU node(s) x 8 GPU(s) "
        "= 16 GPU(s) (cluster.num_nodes=2)"
    ) in result.out
    assert "0     ray-head              0         0" in result.out
    assert "1     training              8         0" in result.out
    assert "2     generation            0         8" in result.out


def test_plan_json_counts_the_head_apart(cli: Cli) -> None:
    result = cli("plan", "--config", str(NONCOLOC_2N), "--dedicated-head", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert (data["nodes"], data["slurm_nodes"], data["dedicated_head"]) == (2, 3, True)
    assert [(n["node"], n["role"]) for n in data["layout"]] == [
        (0, "ray-head"),
        (1, "training"),
        (2, "generation"),
    ]
    plain = json.loads(cli("plan", "--config", str(NONCOLOC_2N), "--json").out)
    assert (plain["slurm_nodes"], plain["dedicated_head"]) == (2, False)
