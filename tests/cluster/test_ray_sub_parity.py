"""ray.sub's knobs (NeMo RL main) given as ray.sub users give them, in the shell, on a real job
of the dev cluster: RAY_DEBUG=legacy, RAY_LOG_SYNC_FREQUENCY, the GCS headroom settings (a
value of the user's own wins), and the start times NeMo RL's logger reads."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status
from tests.conftest import Cli

pytestmark = pytest.mark.cluster
DRIVER = str(Path(__file__).resolve().parent / "parity_driver.py")


def test_ray_sub_s_debugger_log_sync_and_gcs_settings_reach_every_node(
    cli: Cli, cluster_job: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_DEBUG", "legacy")
    monkeypatch.setenv("RAY_LOG_SYNC_FREQUENCY", "1")
    monkeypatch.setenv("RAY_num_server_call_thread", "3")
    monkeypatch.setenv("CI", "true")  # a CI system's, in the shell that submits
    monkeypatch.setenv("OMPI_MCA_x", "1")  # as an MPI launcher's: reaches the step, not Ray
    # ray.sub's --mpi=pmix, asked for (the dev cluster's Slurm has PMIx).
    mpi = ["--set", "slurm.mpi=pmix"]
    result = cli("submit", "--wait", *ON_NODE0_AND_1, *cluster_job, *mpi, "--", "python", DRIVER)
    assert result.code == 0, result.out + result.err
    # Each ray.sub variable used is named.
    assert "RAY_DEBUG (ray.external_debugger)" in result.err
    assert "RAY_LOG_SYNC_FREQUENCY (ray.log_sync_s)" in result.err
    log_dir = Path(job_status(cli, result.out.split()[2])["log_dir"])
    driver = (log_dir / "ray-driver.log").read_text()
    report = json.loads(next(x for x in driver.splitlines() if x.startswith("PARITY "))[7:])
    assert sorted(report["nodes"]) == ["node0", "node1"]
    assert json.loads((log_dir / "spec.json").read_text())["slurm"]["mpi"] == "pmix"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for where in [*report["nodes"].values(), report["driver"]]:
        # As ray.sub: no MPI or Slurm variable of the step, no CI, 65535 open files (or the
        # hard limit), compile caches on the node's own disk.
        assert where["step_vars"] == [] and where["CI"] is None, where
        assert where["job_spec_env"] is False, where  # in spec.json, not in every process
        assert where["nofile"] >= min(65535, hard), where
        assert where["compile_cache"].startswith("/tmp/nrl-compile-cache-"), where
    for node in report["nodes"].values():
        assert node["debugger_external"] is True
        # 16 CPUs per dev-cluster node: ray.sub's threads = CPUs; the user's own value wins.
        assert node["RAY_gcs_server_rpc_server_thread_num"] == "16"
        assert node["RAY_num_server_call_thread"] == "3"
    start, ready = (
        float(report["driver"][k]) for k in ("NRL_JOB_START_EPOCH", "NRL_RAY_READY_EPOCH")
    )
    assert 0 < ready - start < 300
    # Every node's Ray session logs were copied into the log dir, the last copy at the end.
    for node in ("node0", "node1"):
        raylet = list((log_dir / "ray" / node).glob("session_*/logs/raylet.out"))
        assert raylet and raylet[0].stat().st_size > 0, node
