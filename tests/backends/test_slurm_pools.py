"""Model pools on Slurm (pools:): the heterogeneous job's two components in sbatch's argv and in
the script's #SBATCH lines, Slurm's answers about such a job (its `N+K` components), and what
status, logs and attach make of a pool job's log dir. On the dev cluster:
tests/cluster/test_pools.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nrl_launch.backends import local, rules, slurm
from nrl_launch.errors import UsageError
from nrl_launch.jobs import record
from nrl_launch.jobs.status import read_log_dir
from tests.helpers import make_record, sbatch_reads, spec

POOL = {"replicas": 2, "command": ["serve"], "balancer_port": 8100}
WITH_POOL = {
    "driver": {"command": ["python", "train.py", "++judge=__JUDGE_URL__"]},
    "slurm": {"nodes": 2, "gpus_per_node": 8, "time": "1:00:00", "account": "acct"},
    "pools": {"judge": POOL},
}


def test_a_pool_job_is_two_components_in_the_argv_and_in_the_script() -> None:
    request = slurm.plan(spec(**WITH_POOL))
    argv = list(request.argv)
    first, second = argv[: argv.index(":")], argv[argv.index(":") + 1 : -1]
    assert "--nodes=2" in first and "--nodes=2" in second
    # The second component: where, how long and how its nodes are asked for; the job's name,
    # output and export are the whole job's, given once.
    assert set(second) == {
        "--account=acct",
        "--exclusive",
        "--gres=gpu:8",
        "--job-name=nrl-launch",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--time=1:00:00",
    }
    lines = [line for line in request.script.splitlines() if line.startswith("#SBATCH")]
    split = lines.index("#SBATCH hetjob")
    assert [line.removeprefix("#SBATCH ") for line in lines[split + 1 :]] == second
    assert [line.removeprefix("#SBATCH ") for line in lines[:split]] == first[2:]


def test_without_pools_nothing_changes() -> None:
    request = slurm.plan(spec())
    assert ":" not in request.argv and "hetjob" not in request.script
    assert "NRL_HAS_POOLS=0" in request.script and "pool_server()" not in request.script


def test_a_dedicated_head_is_the_first_component_s() -> None:
    request = slurm.plan(spec(**WITH_POOL, ray={"dedicated_head": True}))
    argv = list(request.argv)
    assert "--nodes=3" in argv[: argv.index(":")] and "--nodes=2" in argv[argv.index(":") :]


def test_the_header_holds_each_pool_and_its_server(tmp_path: Path) -> None:
    """Read back by bash from the rendered script: the arrays and the server's argv, hostile
    words and all."""
    hostile = ["serve", "a b", "$(id)", "'q'", ""]
    pools = {
        "judge": {**POOL, "command": hostile, "env": {"MODE": "x y"}},
        "rm": {"replicas": 1, "gpus_per_replica": 16, "vllm": {"model": "/m"},
               "balancer_port": 8101, "required": False},
    }  # fmt: skip
    data = {**WITH_POOL, "pools": pools}
    data["driver"] = {"command": ["python", "__JUDGE_URL__", "__RM_URL__"]}
    path = tmp_path / "job.sbatch"
    path.write_text(slurm.plan(spec(**data)).script)
    shown = subprocess.run(
        ["bash", "-c", 'source "$1"; set -u\n'
         'printf "%s\\n" "${NRL_POOLS[*]}" "${NRL_POOL_NODES_PER_REPLICA[*]}" '
         '"${NRL_POOL_REQUIRED[*]}" "${NRL_POOL_PLACEHOLDERS[*]}"\n'
         'pool_server judge; printf "<%s>" "${NRL_POOL_SERVER[@]}"; echo " $MODE"\n'
         'pool_server rm; printf "%s\\n" "${NRL_POOL_SERVER[*]}"',
         "bash", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert shown[:4] == ["judge rm", "1 2", "1 0", "__JUDGE_URL__ __RM_URL__"]
    assert shown[4] == "<serve><a b><$(id)><'q'><> x y"
    assert shown[5].startswith("python3 -m vllm.entrypoints.openai.api_server --model=/m ")
    assert "--tensor-parallel-size=16" in shown[5]
    assert "--distributed-executor-backend=ray" in shown[5]  # 2 nodes a replica


# ---- Slurm's answers about a heterogeneous job ----


def test_squeue_s_components_are_one_job() -> None:
    text = "325+0|RUNNING|None|1|node0\n325+1|RUNNING|None|2|node[1-2]\n7|PENDING|Priority|1|\n"
    views = slurm.parse_squeue(text)
    assert set(views) == {"325", "7"}
    assert views["325"].nodes == "node0"  # training's: the head is its first node


def test_sacct_s_and_scontrol_s_components_are_one_job() -> None:
    sacct = "325+0|FAILED|1:0\n325+0.batch|FAILED|1:0\n325+1|CANCELLED|0:15\n"
    assert slurm.parse_sacct(sacct)["325"].state == "FAILED"
    shown = (
        "JobId=325 HetJobId=325 HetJobOffset=0 JobState=COMPLETED Reason=None ExitCode=0:0\n"
        "JobId=326 HetJobId=325 HetJobOffset=1 JobState=CANCELLED Reason=None ExitCode=0:15\n"
    )
    views = slurm.parse_scontrol_job(shown)
    assert set(views) == {"325"} and views["325"].state == "COMPLETED"


# ---- What status, logs and attach read ----


def _pool_log_dir(tmp_path: Path, healthy: int) -> Path:
    log_dir = tmp_path / "9-logs"
    log_dir.mkdir(mode=0o700)
    state = {"pool": "judge", "url": "http://10.0.0.1:8100/v1", "healthy": healthy, "total": 2,
             "backends": []}  # fmt: skip
    (log_dir / "pool-judge.json").write_text(json.dumps(state))
    return log_dir


def test_status_reads_each_pool_from_its_balancer_s_state(tmp_path: Path) -> None:
    (pool,) = read_log_dir(_pool_log_dir(tmp_path, 1)).pools
    assert pool.line() == "pool judge: 1/2 replicas healthy, http://10.0.0.1:8100/v1"
    assert pool.line(over=True) == "pool judge: 2 replica(s), served at http://10.0.0.1:8100/v1"
    (tmp_path / "9-logs" / "pool-judge.gone").touch()
    assert read_log_dir(tmp_path / "9-logs").pools[0].line() == (
        "pool judge: every replica has exited"
    )


def test_a_half_written_state_is_skipped(tmp_path: Path) -> None:
    log_dir = _pool_log_dir(tmp_path, 2)
    (log_dir / "pool-rm.json").write_text('{"pool": "rm", "healthy"')
    assert [p.name for p in read_log_dir(log_dir).pools] == ["judge"]


@pytest.mark.parametrize(
    ("node", "found"),
    [("judge", ("judge", None)), ("judge.1", ("judge", 1)), ("head", None), ("1", None)],
)
def test_node_names_a_pool_or_its_replica(node: str, found: object) -> None:
    rec = make_record("9").model_copy(update={"spec": spec(**WITH_POOL).model_dump(mode="json")})
    assert record.pool_of(rec, node) == found


def test_a_replica_the_pool_lacks_is_one_line() -> None:
    rec = make_record("9").model_copy(update={"spec": spec(**WITH_POOL).model_dump(mode="json")})
    with pytest.raises(UsageError, match=r"pool judge has replicas judge\.0 to judge\.1"):
        record.pool_of(rec, "judge.2")


# ---- The local backend: replicas as processes here ----


def test_local_replicas_listen_on_the_port_and_the_ones_after_it() -> None:
    data = {**WITH_POOL, "backend": "local", "container": {"runtime": "none"}}
    data["slurm"] = {"nodes": 1, "gpus_per_node": 0}
    assert "NRL_HAS_POOLS=1" in local.plan(spec(**data)).script
    clash = {"judge": {**POOL, "port": 8099}}  # replica 1 on 8100, the balancer's
    with pytest.raises(ValueError, match=r"replica 1 listens on 8100 \(port \+ 1\)"):
        rules.check(spec(**{**data, "pools": clash}))


def test_a_word_hetjob_of_the_user_s_stays_a_word() -> None:
    """Only the job's own separator is a bare `hetjob`: one in the extra args is quoted, with
    pools and without (sbatch would split the job there)."""
    for data in (WITH_POOL, {}):
        extra = {"extra_args": ["--comment", "hetjob", "--comment=packjob"]}
        slurm_spec = {**data.get("slurm", {}), **extra}  # type: ignore[dict-item]
        request = slurm.plan(spec(**{**data, "slurm": slurm_spec}))
        bare = [line for line in request.script.splitlines() if line == "#SBATCH hetjob"]
        assert len(bare) == (1 if data else 0)
        assert '#SBATCH --comment "hetjob"' in request.script
        if not data:  # a job of one component: sbatch reads back every flag of the argv
            assert sbatch_reads(request.script) == list(request.argv[2:-1])
