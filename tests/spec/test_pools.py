"""Model pools beside training (pools:, spec/pools.py) as a user meets them: a job file read
through the layers (`spec.layers.load`, as every command reads it) and `nrl-launch render`.
Each bad input is one line naming the key (exit 2, no traceback, nothing written); a good spec
gives the nodes and slices NeMo RL would cut (tests/spec/test_external_pools.py holds the
parity with NeMo RL's own pool_config.sh)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from nrl_launch.errors import ConfigError
from nrl_launch.spec import LaunchSpec, layers
from nrl_launch.spec.pools import Slice, slices
from tests.conftest import Cli

MODELS = "/lustre/models"
# Two pools as NeMo RL's launchers register them: a GenRM judge (2 replicas of one node) and a
# safety judge (1 replica of two nodes), beside two training nodes of 8 GPUs.
JOB: dict[str, Any] = {
    "slurm": {"nodes": 2, "gpus_per_node": 8},
    "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": ["/lustre:/lustre"]},
    "logs": {"base_dir": "/lustre/logs"},
    "driver": {
        "command": [
            "uv",
            "run",
            "examples/nemo_gym/run_grpo_nemo_gym.py",
            "++env.genrm.base_url=__GENRM_URL__",
            "++env.safety.base_url=__SAFETY_BASE_URL__",
        ]
    },
    "pools": {
        "genrm": {
            "replicas": 2,
            "gpus_per_replica": 8,
            "vllm": {"model": f"{MODELS}/genrm", "args": ["--dtype", "bfloat16"]},
            "balancer_port": 9213,
        },
        "safety": {
            "replicas": 1,
            "gpus_per_replica": 16,
            "vllm": {"model": f"{MODELS}/safety", "python": "/opt/vllm/bin/python"},
            "balancer_port": 9215,
            "url_placeholder": "__SAFETY_BASE_URL__",
        },
    },
}

Edit = Callable[[dict[str, Any]], None]


def job(edit: Edit | None = None) -> Path:
    """JOB, changed by `edit`, as ./job.yaml (the test's own cwd)."""
    data = copy.deepcopy(JOB)
    if edit is not None:
        edit(data)
    path = Path("job.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load(edit: Edit | None = None, sets: tuple[str, ...] = ()) -> LaunchSpec:
    resolved = layers.load(
        profile=None,
        job_files=[job(edit)],
        environ={},
        cwd=Path.cwd(),
        flags=[],
        sets=sets,
    )
    return resolved.spec


def problem(edit: Edit | None = None, sets: tuple[str, ...] = ()) -> str:
    """The one problem the layers find in the job."""
    with pytest.raises(ConfigError) as caught:
        load(edit, sets)
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def refused(cli: Cli, edit: Edit | None = None, *sets: str) -> str:
    """The one error line `nrl-launch render -f job.yaml` fails with: exit 2, no traceback,
    nothing written."""
    args = [item for s in sets for item in ("--set", s)]
    result = cli("render", "-f", str(job(edit)), "-o", "job.sbatch", *args)
    assert result.code == 2, result.out + result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert result.err.startswith("nrl-launch: error: "), result.err
    assert not Path("job.sbatch").exists()
    return result.err


def pool(name: str, **values: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["pools"][name].update(values)

    return edit


def drop(name: str, *keys: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for key in keys:
            del data["pools"][name][key]

    return edit


def command(*words: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["driver"]["command"] = ["uv", "run", "train.py", *words]

    return edit


def no_containers(data: dict[str, Any]) -> None:
    data["container"] = {"runtime": "none"}


def with_sandbox(data: dict[str, Any]) -> None:
    data["sandbox"] = {"image": "nemo-skills.sqsh", "command": ["/start-with-nginx.sh"]}


# ---- Good specs: nodes and slices ----


def test_the_pools_nodes_and_slices_are_nemo_rl_s() -> None:
    """Pools in the spec's order, each pool's replicas one after another; a replica takes
    gpus_per_replica / gpus_per_node whole nodes (NeMo RL's hetgroup 1 split)."""
    spec = load()
    assert spec.pool_nodes == 2 * 1 + 1 * 2
    assert spec.allocated_nodes == 2  # the training cluster's nodes stay its own
    assert slices(spec) == [
        Slice("genrm", 0, 0, 1),
        Slice("genrm", 1, 1, 1),
        Slice("safety", 0, 2, 2),
    ]
    assert list(slices(spec)[2].indices) == [2, 3]


def test_the_order_of_the_pools_is_the_order_of_the_slices() -> None:
    def safety_first(data: dict[str, Any]) -> None:
        data["pools"] = dict(reversed(list(data["pools"].items())))

    assert [(s.pool, s.first, s.nodes) for s in slices(load(safety_first))] == [
        ("safety", 0, 2),
        ("genrm", 2, 1),
        ("genrm", 3, 1),
    ]


def test_without_gpus_per_replica_a_replica_takes_one_node_and_its_gpus() -> None:
    spec = load(drop("genrm", "gpus_per_replica"))
    genrm = spec.pools["genrm"]
    assert genrm.nodes_per_replica(8) == 1 and genrm.tensor_parallel(8) == 8
    assert spec.pool_nodes == 4


@pytest.mark.parametrize(("gpus", "nodes"), [(8, 4), (4, 2 * 2 + 1 * 4), (2, 2 * 4 + 1 * 8)])
def test_the_pools_nodes_follow_the_nodes_gpus(gpus: int, nodes: int) -> None:
    assert load(sets=(f"slurm.gpus_per_node={gpus}",)).pool_nodes == nodes


def test_a_pool_s_url_placeholder_defaults_to_its_name() -> None:
    spec = load()
    assert spec.pools["genrm"].placeholder("genrm") == "__GENRM_URL__"
    assert spec.pools["safety"].placeholder("safety") == "__SAFETY_BASE_URL__"


def test_a_pool_takes_nemo_rl_s_defaults() -> None:
    genrm = load().pools["genrm"]
    assert (genrm.port, genrm.startup_timeout_s, genrm.health_path) == (8000, 3600, "/health")
    assert genrm.required is True and genrm.image is None and genrm.env == {}
    assert genrm.vllm is not None
    assert (genrm.vllm.python, genrm.vllm.served_model_name) == ("python3", "model")


def test_vllm_s_command_holds_what_the_job_sets_then_the_args() -> None:
    spec = load()
    genrm, safety = spec.pools["genrm"], spec.pools["safety"]
    assert genrm.server_command(8) == (
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        f"--model={MODELS}/genrm",
        "--tensor-parallel-size=8",
        "--port=8000",
        "--served-model-name=model",
        "--dtype",
        "bfloat16",
    )
    # A replica of two nodes runs vLLM over Ray.
    argv = safety.server_command(8)
    assert argv[0] == "/opt/vllm/bin/python"
    assert "--tensor-parallel-size=16" in argv and argv[-1] == "--distributed-executor-backend=ray"


def test_a_pool_may_run_its_own_server_in_its_own_image() -> None:
    edit = pool("genrm", command=["/opt/judge/serve", "--listen", "8000"], image="judge.sqsh")

    def no_vllm(data: dict[str, Any]) -> None:
        edit(data)
        del data["pools"]["genrm"]["vllm"]

    genrm = load(no_vllm).pools["genrm"]
    assert genrm.server_command(8) == ("/opt/judge/serve", "--listen", "8000")
    assert genrm.image == "judge.sqsh"


def test_ports_at_the_edges_of_the_band_are_taken() -> None:
    spec = load(sets=("pools.genrm.balancer_port=1024", "pools.safety.balancer_port=32767"))
    assert (spec.pools["genrm"].balancer_port, spec.pools["safety"].balancer_port) == (1024, 32767)
    # Replicas are on nodes of their own: two pools may share a replica port, and a replica's
    # port may be another pool's balancer port.
    spec = load(sets=("pools.safety.port=8000", "pools.genrm.port=9215"))
    assert spec.pools["genrm"].port == 9215


def test_a_job_without_pools_has_no_pool_nodes() -> None:
    def none(data: dict[str, Any]) -> None:
        del data["pools"]

    spec = load(none)
    assert spec.pools == {} and spec.pool_nodes == 0 and slices(spec) == []


# ---- Bad specs: one line naming the key ----


def test_a_pool_s_name_is_lowercase(cli: Cli) -> None:
    def upper(data: dict[str, Any]) -> None:
        data["pools"]["GenRM"] = data["pools"].pop("genrm")

    assert "pools.GenRM: a pool's name is a lowercase letter, then lowercase letters" in (
        refused(cli, upper)
    )


@pytest.mark.parametrize("name", ["1judge", "judge-rm", "_judge", "j" * 33])
def test_a_pool_s_name_is_a_file_name_part_and_a_variable_prefix(name: str) -> None:
    def rename(data: dict[str, Any]) -> None:
        data["pools"][name] = data["pools"].pop("genrm")

    assert problem(rename).startswith(f"pools.{name}: a pool's name is a lowercase letter")


def test_a_replica_takes_whole_nodes(cli: Cli) -> None:
    err = refused(cli, pool("genrm", gpus_per_replica=12))
    assert (
        "pools.genrm.gpus_per_replica: 12 is not a multiple of slurm.gpus_per_node (8): each "
        "replica takes whole nodes"
    ) in err


def test_a_replica_of_fewer_gpus_than_a_node_is_refused() -> None:
    assert problem(pool("genrm", gpus_per_replica=4)).startswith(
        "pools.genrm.gpus_per_replica: 4 is not a multiple of slurm.gpus_per_node (8)"
    )


def test_gpus_per_replica_on_nodes_without_gpus_is_refused() -> None:
    assert problem(sets=("slurm.gpus_per_node=0",)).startswith(
        "pools.genrm.gpus_per_replica: 8 GPUs, but slurm.gpus_per_node is 0"
    )


BAD_PORTS = [
    ("genrm", "balancer_port", 80, "80 is outside 1024-32767"),
    ("genrm", "balancer_port", 1023, "1023 is outside 1024-32767"),
    ("genrm", "balancer_port", 32768, "32768 is outside 1024-32767"),
    ("safety", "port", 40000, "40000 is outside 1024-32767"),
    ("genrm", "balancer_port", 7000, "7000 lies in vLLM's engine rendezvous ports 7000-7999"),
    ("safety", "port", 7999, "7999 lies in vLLM's engine rendezvous ports 7000-7999"),
    ("genrm", "balancer_port", 8265, "8265 is taken by ray.ports.dashboard (8265)"),
    ("genrm", "balancer_port", 1200, "1200 is taken by ray.ports.gcs (1200)"),
    ("safety", "port", 1311, "1311 is taken by ray.ports.dashboard_agent_listen (1311)"),
    ("genrm", "port", 2500, "2500 is taken by ray.ports.worker_min..worker_max (2000-2999)"),
    ("safety", "balancer_port", 9213, "9213 is taken by pools.genrm.balancer_port (9213)"),
]


@pytest.mark.parametrize(
    ("name", "key", "port", "says"), BAD_PORTS, ids=[f"{c[1]}-{c[2]}" for c in BAD_PORTS]
)
def test_a_pool_s_ports_stay_clear_of_the_job_s(
    cli: Cli, name: str, key: str, port: int, says: str
) -> None:
    err = refused(cli, None, f"pools.{name}.{key}={port}")
    assert f"pools.{name}.{key}: {says}" in err


def test_a_balancer_port_in_the_sandbox_s_band_is_refused() -> None:
    assert problem(with_sandbox, ("pools.genrm.balancer_port=6500",)) == (
        "pools.genrm.balancer_port: 6500 is taken by sandbox.base_port (6001-6999); move one "
        "of them"
    )


def test_a_balancer_port_out_of_range_is_a_field_error() -> None:
    assert problem(pool("genrm", balancer_port=70000)).startswith("pools.genrm.balancer_port: ")


def test_a_pool_without_a_balancer_port_is_refused() -> None:
    assert problem(drop("genrm", "balancer_port")).startswith("pools.genrm.balancer_port: ")


def test_two_pools_with_one_placeholder_are_refused(cli: Cli) -> None:
    err = refused(cli, pool("safety", url_placeholder="__GENRM_URL__"))
    assert "pools.safety.url_placeholder: __GENRM_URL__ is pools.genrm's too" in err


def test_a_placeholder_missing_from_the_driver_s_command_is_refused(cli: Cli) -> None:
    err = refused(cli, command("++env.genrm.base_url=__GENRM_URL__"))
    assert (
        "pools.safety.url_placeholder: __SAFETY_BASE_URL__ is not in the driver's command; put "
        "it where the pool's URL goes (e.g. ++env.safety.base_url=__SAFETY_BASE_URL__)"
    ) in err


def test_a_stray_placeholder_in_the_driver_s_command_is_refused(cli: Cli) -> None:
    edit = command("x=__GENRM_URL__", "y=__SAFETY_BASE_URL__", "z=__JUDGE_URL__")
    err = refused(cli, edit)
    assert (
        "driver.command: __JUDGE_URL__ reads as a pool's URL placeholder, but no pool has it "
        "(pools have: __GENRM_URL__, __SAFETY_BASE_URL__)"
    ) in err


def test_placeholders_in_a_ray_sub_command_string_count() -> None:
    """ray.sub's COMMAND is one shell string (bash -c): its placeholders are found in it."""
    line = "uv run train.py ++a=__GENRM_URL__ ++b=__SAFETY_BASE_URL__"
    assert load(sets=(f"driver.command=[bash, -c, '{line}']",)).pools
    assert "__SAFETY_BASE_URL__ is not in the driver's command" in problem(
        sets=("driver.command=[bash, -c, 'uv run train.py ++a=__GENRM_URL__']",)
    )


def test_command_and_vllm_are_one_or_the_other(cli: Cli) -> None:
    err = refused(cli, pool("genrm", command=["/opt/judge/serve"]))
    assert "pools.genrm: command and vllm are both set: give one of them" in err
    assert problem(drop("genrm", "vllm")).startswith(
        "pools.genrm: no server: give the one each replica runs, command (an argv list) or vllm"
    )


def test_an_empty_command_is_refused() -> None:
    def empty(data: dict[str, Any]) -> None:
        del data["pools"]["genrm"]["vllm"]
        data["pools"]["genrm"]["command"] = []

    assert problem(empty).startswith("pools.genrm: command must be a non-empty argv list")


@pytest.mark.parametrize(
    ("arg", "given", "key"),
    [
        ("--port=9000", "--port", "the pool's port"),
        ("--port", "--port", "the pool's port"),
        ("--model=/x", "--model", "vllm.model"),
        ("--tensor-parallel-size=4", "--tensor-parallel-size", "gpus_per_replica"),
        ("--served-model-name", "--served-model-name", "vllm.served_model_name"),
        ("--distributed-executor-backend=mp", "--distributed-executor-backend", "the replica"),
        # vLLM's parser reads _ as - in a long option, and -tp as --tensor-parallel-size.
        ("--tensor_parallel_size=4", "--tensor_parallel_size", "gpus_per_replica"),
        ("--served_model_name", "--served_model_name", "vllm.served_model_name"),
        ("-tp", "-tp", "gpus_per_replica"),
        ("-tp=4", "-tp", "gpus_per_replica"),
    ],
)
def test_vllm_args_that_set_what_the_job_sets_are_refused(
    cli: Cli, arg: str, given: str, key: str
) -> None:
    vllm = {"model": f"{MODELS}/genrm", "args": ["--dtype", "bfloat16", arg, "4"]}
    err = refused(cli, pool("genrm", vllm=vllm))
    assert f"pools.genrm.vllm.args: {given} is set by the job (from {key}" in err


def test_vllm_args_that_only_look_alike_are_taken() -> None:
    args = ["--port-range=1", "--model-loader-extra-config={}", "-O3", "--tp", "x=--port"]
    vllm = {"model": "m", "args": args}
    assert load(pool("genrm", vllm=vllm)).pools["genrm"].vllm.args == tuple(args)  # type: ignore[union-attr]


def test_a_pool_image_in_a_job_without_containers_is_refused(cli: Cli) -> None:
    def edit(data: dict[str, Any]) -> None:
        no_containers(data)
        data["pools"]["genrm"]["image"] = "vllm.sqsh"

    err = refused(cli, edit)
    assert "pools.genrm.image: the job runs without containers (container.runtime none)" in err


def test_a_job_without_containers_runs_its_pools_without_either() -> None:
    assert load(no_containers).pools["genrm"].image is None


def test_a_secret_in_a_pool_s_env_is_refused(cli: Cli) -> None:
    err = refused(cli, pool("genrm", env={"HF_TOKEN": "x"}))
    assert "pools.genrm.env.HF_TOKEN: HF_TOKEN is one of the job's secrets" in err
    assert "'x'" not in err


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "JUDGE_PASSWORD", "GITHUB_PAT", "MYTOKEN"])
def test_a_credential_in_a_pool_s_env_is_refused(name: str) -> None:
    said = problem(pool("genrm", env={name: "s3cr3t-value"}))
    assert said.startswith(f"pools.genrm.env.{name}: its name says it holds a credential")
    assert "s3cr3t-value" not in said


def test_a_pool_s_env_takes_what_a_job_s_env_takes() -> None:
    env = {"VLLM_USE_V1": 1, "NCCL_MNNVL_ENABLE": "0", "TOKENIZERS_PARALLELISM": "false"}
    assert load(pool("genrm", env=env)).pools["genrm"].env == {
        "VLLM_USE_V1": "1",
        "NCCL_MNNVL_ENABLE": "0",
        "TOKENIZERS_PARALLELISM": "false",
    }


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"replicas": 0}, "pools.genrm.replicas: "),
        ({"replicas": "two"}, "pools.genrm.replicas: "),
        ({"gpus_per_replica": 0}, "pools.genrm.gpus_per_replica: "),
        ({"startup_timeout_s": 0}, "pools.genrm.startup_timeout_s: "),
        ({"health_path": "health"}, "pools.genrm.health_path: "),
        ({"url_placeholder": "__A B__"}, "pools.genrm.url_placeholder: "),
        ({"env": {"1BAD": "x"}}, "pools.genrm.env.1BAD: '1BAD' is not an environment variable"),
        ({"replica": 2}, "pools.genrm.replica: unknown key"),
    ],
)
def test_a_bad_value_names_its_key(cli: Cli, values: dict[str, Any], key: str) -> None:
    assert key in refused(cli, pool("genrm", **values))
