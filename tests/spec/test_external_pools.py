"""NeMo RL's external vLLM pool contract (EXTERNAL_VLLM_POOLS and <POOL>_*) read as pools:
(spec/external_pools.py): the parity with NeMo RL's own pool_config.sh, run in a real bash
(tests/data/nemo_rl/tools/external_gym_vllm/, from NVIDIA-NeMo/RL at commit
11746b3b762caa921b09831b3bb260baa6a8e481), each variable's source, the bad values refused in one
line naming the variable, and the checks across the job. Every environment here starts as the
one pool_config.sh leaves (`contract`)."""

from __future__ import annotations

import functools
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from nrl_launch import api
from nrl_launch.errors import ConfigError
from nrl_launch.spec import layers
from nrl_launch.spec.external_pools import POOL_VARS
from nrl_launch.spec.pools import slices
from nrl_launch.spec.setting import Resolved
from tests.conftest import Cli
from tests.helpers import TEST_DATA

POOL_CONFIG = TEST_DATA / "nemo_rl" / "tools" / "external_gym_vllm" / "pool_config.sh"
IMAGE = "nvcr.io/nvidia/nemo-rl:v0.6.0"
COMMAND = (
    "uv run examples/nemo_gym/run_grpo_nemo_gym.py ++env.genrm.base_url=__GENRM_BASE_URL__ "
    "++env.safety.base_url=__SAFETY_BASE_URL__"
)

# A launcher as NeMo RL's README writes one: two pools registered, their env and vLLM args
# appended, then the environment sbatch would inherit (env -0) and, after a NUL, the slices
# run_in_allocation.sh cuts from it, restated: the pools in EXTERNAL_VLLM_POOLS' order, each at
# the running total (node_offsets), nodes_per_replica = TP / GPUS_PER_NODE (4 when unset), and
# replica r on external_nodes[offset + r * nodes_per_replica] and the nodes_per_replica after.
LAUNCHER = r"""
set -euo pipefail
source "$POOL_CONFIG"
EXTERNAL_VLLM_POOLS=""
register_external_vllm_pool GENRM --display-name "GenRM judge" \
  --model /lustre/models/genrm --container "$IMAGE" --python /opt/nemo_rl_venv/bin/python \
  --replicas 2 --tensor-parallel-size 8 --lb-port 9213 --url-placeholder __GENRM_BASE_URL__
register_external_vllm_pool SAFETY --display-name "Safety judge" \
  --model nvidia/safety-guard --container /lustre/images/vllm.sqsh \
  --python /opt/vllm/bin/python --replicas 1 --tensor-parallel-size 16 --lb-port 9215 \
  --served-model-name safety-judge --vllm-port 8100 --startup-timeout 7200 \
  --group-id stable-safety --shared-path /lustre/parsers/safety_parser.py \
  --url-placeholder __SAFETY_BASE_URL__
external_vllm_pool_env GENRM FLASHINFER_WORKSPACE_BASE=/tmp "VLLM_EXTRA=a b=c" NCCL_MNNVL_ENABLE=0
external_vllm_pool_env GENRM EMPTY=
external_vllm_pool_args GENRM --dtype bfloat16 \
  --reasoning-parser-plugin "/lustre/my parsers/p.py" \
  --override-generation-config '{"temperature": 0.6, "top_p": 0.95}'
external_vllm_pool_args SAFETY --attention-backend FLASH_ATTN --max-model-len=32768
export NUM_EXTERNAL_SERVICE_NODES="$EXTERNAL_VLLM_NUM_NODES"
env -0
printf '\0'
read -r -a pools <<< "$EXTERNAL_VLLM_POOLS"
offset=0
for pool in "${pools[@]}"; do
  replicas_var="${pool}_REPLICAS" tp_var="${pool}_TENSOR_PARALLEL_SIZE"
  per=$(( ${!tp_var} / ${GPUS_PER_NODE:-4} ))
  for (( r = 0; r < ${!replicas_var}; r++ )); do
    printf '%s %s %s %s\n' "${pool,,}" "$r" "$(( offset + r * per ))" "$per"
  done
  offset=$(( offset + ${!replicas_var} * per ))
done
"""

Cut = list[tuple[str, int, int, int]]


@functools.cache
def _launched(gpus: str | None) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    env = {"PATH": "/usr/bin:/bin", "POOL_CONFIG": str(POOL_CONFIG), "IMAGE": IMAGE}
    # ray.sub's own variables, which NeMo RL's launchers export beside the pools'.
    env.update(CONTAINER=IMAGE, MOUNTS="/lustre:/lustre", COMMAND=COMMAND)
    if gpus is not None:
        env["GPUS_PER_NODE"] = gpus
    result = subprocess.run(["bash", "-c", LAUNCHER], capture_output=True, env=env, check=False)
    assert result.returncode == 0, result.stderr.decode()
    exported, _, cut = result.stdout.decode().partition("\0\0")
    pairs = tuple(
        (name, value) for name, _, value in (e.partition("=") for e in exported.split("\0"))
    )
    return pairs, tuple(cut.splitlines())


def launched(gpus: str | None = "8") -> tuple[dict[str, str], Cut]:
    """The environment pool_config.sh leaves, and run_in_allocation.sh's slices of it:
    (pool, replica, first node, nodes)."""
    pairs, lines = _launched(gpus)
    environ = {**dict(pairs), "HOME": os.environ["HOME"]}  # the test's own HOME
    return environ, [(p, int(r), int(f), int(n)) for p, r, f, n in (x.split() for x in lines)]


def contract(**changes: str | None) -> dict[str, str]:
    """The environment of `launched`, with `changes` set (or, None, dropped)."""
    environ = launched()[0]
    for name, value in changes.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return environ


def resolve(environ: dict[str, str], *sets: str, job_files: tuple[Path, ...] = ()) -> Resolved:
    """The spec the layers make of `environ`, as every command reads it."""
    return layers.load(
        profile=None, job_files=job_files, environ=environ, cwd=Path.cwd(), flags=[], sets=sets
    )


def problem(environ: dict[str, str], *sets: str) -> str:
    """The one problem the layers find."""
    with pytest.raises(ConfigError) as caught:
        resolve(environ, *sets)
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def slices_of(resolved: Resolved) -> Cut:
    return [(s.pool, s.replica, s.first, s.nodes) for s in slices(resolved.spec)]


# ---- Parity with NeMo RL's pool_config.sh, run in bash ----


def test_pool_config_sh_is_nemo_rl_s_with_its_license() -> None:
    text = POOL_CONFIG.read_text(encoding="utf-8")
    assert text.startswith("#!/bin/bash\n# Copyright (c) 2026, NVIDIA CORPORATION.")
    assert "Licensed under the Apache License, Version 2.0" in text
    for function in ("register_external_vllm_pool", "external_vllm_pool_env"):
        assert f"\n{function}() {{\n" in text


def test_parity_with_pool_config_sh() -> None:
    environ, cut = launched()
    resolved = resolve(environ)
    spec = resolved.spec
    assert environ["EXTERNAL_VLLM_POOLS"] == "GENRM SAFETY" and list(spec.pools) == [
        "genrm",
        "safety",
    ]
    assert spec.pool_nodes == int(environ["EXTERNAL_VLLM_NUM_NODES"]) == 4
    assert (
        slices_of(resolved) == cut == [("genrm", 0, 0, 1), ("genrm", 1, 1, 1), ("safety", 0, 2, 2)]
    )
    for name, pool in spec.pools.items():
        var = {suffix: environ[f"{name.upper()}_{suffix}"] for suffix in POOL_VARS}
        assert pool.placeholder(name) == var["URL_PLACEHOLDER"]
        assert (pool.balancer_port, pool.port) == (int(var["LB_PORT"]), int(var["VLLM_PORT"]))
        assert (pool.replicas, pool.gpus_per_replica, pool.startup_timeout_s) == (
            int(var["REPLICAS"]),
            int(var["TENSOR_PARALLEL_SIZE"]),
            int(var["STARTUP_TIMEOUT"]),
        )
        assert pool.image == var["CONTAINER"] and pool.required is True and pool.command is None
        assert pool.vllm is not None
        assert (pool.vllm.model, pool.vllm.python, pool.vllm.served_model_name) == (
            var["MODEL"],
            var["VLLM_PYTHON"],
            var["SERVED_MODEL_NAME"],
        )
    genrm, safety = spec.pools["genrm"], spec.pools["safety"]
    assert genrm.vllm is not None and safety.vllm is not None
    assert genrm.vllm.args == (
        "--dtype",
        "bfloat16",
        "--reasoning-parser-plugin",
        "/lustre/my parsers/p.py",
        "--override-generation-config",
        '{"temperature": 0.6, "top_p": 0.95}',
    )
    assert genrm.env == {
        "FLASHINFER_WORKSPACE_BASE": "/tmp",
        "VLLM_EXTRA": "a b=c",
        "NCCL_MNNVL_ENABLE": "0",
        "EMPTY": "",
    }
    assert safety.vllm.args == ("--attention-backend", "FLASH_ATTN", "--max-model-len=32768")
    assert (safety.vllm.served_model_name, safety.port, safety.startup_timeout_s) == (
        "safety-judge",
        8100,
        7200,
    )
    assert safety.env == {} and genrm.vllm.served_model_name == "model" and genrm.port == 8000


def test_parity_through_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """api.load_spec reads the shell's environment, as the CLI does."""
    environ, cut = launched()
    for name in set(os.environ) - {"HOME", "XDG_CONFIG_HOME"}:
        monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        spec = api.load_spec(settings={"logs.base_dir": "/lustre/logs"}).launch
    assert any("NeMo RL's pool variables set in your shell" in str(w.message) for w in said)
    assert spec.pool_nodes == int(environ["EXTERNAL_VLLM_NUM_NODES"])
    assert [(s.pool, s.replica, s.first, s.nodes) for s in slices(spec)] == cut


def test_parity_when_gpus_per_node_is_left_to_pool_config_sh() -> None:
    """Registered without GPUS_PER_NODE, pool_config.sh (and run_in_allocation.sh) count 4 GPUs
    a node: nrl-launch, 8 unless told, says so in one line, and cuts the same slices once told."""
    environ, cut = launched(gpus=None)
    assert "GPUS_PER_NODE" not in environ and environ["EXTERNAL_VLLM_NUM_NODES"] == "8"
    assert problem(environ) == (
        "environment variable EXTERNAL_VLLM_NUM_NODES=8 (pool_config.sh's count of the pools' "
        "nodes), but GENRM, SAFETY take 4 at slurm.gpus_per_node 8 (from default): it counted "
        "at another GPUS_PER_NODE (4 when unset), or a pool changed after it was registered; "
        "export GPUS_PER_NODE (the nodes' GPUs) before register_external_vllm_pool, or give "
        "them as slurm.gpus_per_node (--gpus-per-node)"
    )
    resolved = resolve(environ, "slurm.gpus_per_node=4")
    assert resolved.spec.pool_nodes == 8
    assert (
        slices_of(resolved) == cut == [("genrm", 0, 0, 2), ("genrm", 1, 2, 2), ("safety", 0, 4, 4)]
    )


# ---- The contract as nrl-launch's keys ----


def test_each_value_s_source_is_its_variable() -> None:
    sources = resolve(contract()).sources
    for suffix, key in POOL_VARS.items():
        if suffix not in ("ENV_VARS", "VLLM_ARGS"):
            assert sources[f"pools.genrm.{key}"] == f"env GENRM_{suffix}"
    assert sources["pools.genrm.vllm.args"] == "env GENRM_VLLM_ARGS"
    assert sources["pools.genrm.env.VLLM_EXTRA"] == "env GENRM_ENV_VARS"
    assert sources["pools.safety.required"] == "env EXTERNAL_VLLM_POOLS"
    assert sources["pools.safety.health_path"] == "default"


def test_not_read_without_external_vllm_pools() -> None:
    for value in (None, "", "  "):
        spec = resolve(contract(EXTERNAL_VLLM_POOLS=value, COMMAND="python train.py")).spec
        assert spec.pools == {} and spec.pool_nodes == 0


def test_only_the_pools_listed_are_read() -> None:
    nodes = dict.fromkeys(("EXTERNAL_VLLM_NUM_NODES", "NUM_EXTERNAL_SERVICE_NODES"), "2")
    environ = contract(EXTERNAL_VLLM_POOLS="SAFETY", COMMAND="x __SAFETY_BASE_URL__", **nodes)
    assert list(resolve(environ).spec.pools) == ["safety"]


def test_unset_optional_variables_take_nemo_rl_s_defaults() -> None:
    optional = ["SERVED_MODEL_NAME", "VLLM_PORT", "STARTUP_TIMEOUT", "ENV_VARS", "VLLM_ARGS"]
    safety = resolve(contract(**dict.fromkeys((f"SAFETY_{s}" for s in optional), None)))
    pool = safety.spec.pools["safety"]
    assert (pool.port, pool.startup_timeout_s, pool.env) == (8000, 3600, {})
    assert pool.vllm is not None and (pool.vllm.served_model_name, pool.vllm.args) == ("model", ())


def test_blank_lines_are_skipped_and_the_last_of_a_name_wins() -> None:
    """As run_in_allocation.sh reads them: each non-empty line an argv entry, or exported."""
    args, env = "\n--dtype\n\nbfloat16\n", "A=1\n\nB=x=y\nA=2\n\n"
    pool = resolve(contract(GENRM_VLLM_ARGS=args, GENRM_ENV_VARS=env)).spec.pools["genrm"]
    assert pool.vllm is not None and pool.vllm.args == ("--dtype", "bfloat16")
    assert pool.env == {"A": "2", "B": "x=y"}


def test_the_env_layer_sits_over_job_files_and_under_flags(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("pools: {genrm: {replicas: 5, health_path: /ready}}\n", encoding="utf-8")
    resolved = resolve(contract(), "pools.safety.balancer_port=9300", job_files=(job,))
    genrm, safety = resolved.spec.pools["genrm"], resolved.spec.pools["safety"]
    assert genrm.replicas == 2 and genrm.health_path == "/ready"
    assert safety.balancer_port == 9300
    assert resolved.sources["pools.safety.balancer_port"] == "--set pools.safety.balancer_port"


def test_a_job_file_s_pools_come_first_and_the_contract_s_after(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("pools: {judge: {command: [serve], balancer_port: 9400}}\n", encoding="utf-8")
    command = f"{COMMAND} ++env.judge.base_url=__JUDGE_URL__"
    environ = contract(COMMAND=command, NUM_EXTERNAL_SERVICE_NODES="5")
    assert [s[::2] for s in slices_of(resolve(environ, job_files=(job,)))] == [
        ("judge", 0),
        ("genrm", 1),
        ("genrm", 2),
        ("safety", 3),
    ]


def test_display_name_and_group_id_are_taken_and_ignored() -> None:
    """Whatever they hold (pool_config.sh would refuse this GROUP_ID): nrl-launch has no key
    for them, and they change nothing the job runs."""
    plain = resolve(contract(GENRM_DISPLAY_NAME=None, SAFETY_GROUP_ID=None)).spec
    assert resolve(contract(GENRM_DISPLAY_NAME="any: label", SAFETY_GROUP_ID="x/y")).spec == plain


# ---- Bad values: one line naming the variable ----


@pytest.mark.parametrize(
    ("suffix", "option"),
    [
        ("MODEL", "--model"),
        ("CONTAINER", "--container"),
        ("VLLM_PYTHON", "--python"),
        ("REPLICAS", "--replicas"),
        ("TENSOR_PARALLEL_SIZE", "--tensor-parallel-size"),
        ("LB_PORT", "--lb-port"),
        ("URL_PLACEHOLDER", "--url-placeholder"),
    ],
)
@pytest.mark.parametrize("value", [None, ""])
def test_a_required_variable_missing_is_named(suffix: str, option: str, value: str | None) -> None:
    assert problem(contract(**{f"SAFETY_{suffix}": value})) == (
        f"environment variable SAFETY_{suffix} is not set, but SAFETY is in EXTERNAL_VLLM_POOLS: "
        f"each pool needs it (register_external_vllm_pool SAFETY {option} ...); register the "
        "pool with it, or take SAFETY out of EXTERNAL_VLLM_POOLS"
    )


@pytest.mark.parametrize(
    ("pools", "says"),
    [
        ("GENRM safety", "'safety' is not a pool's name: an uppercase shell identifier"),
        ("GENRM 2ND", "'2ND' is not a pool's name"),
        ("GENRM SAFETY-2", "'SAFETY-2' is not a pool's name"),
        ("GENRM " + "S" * 33, f"'{'S' * 33}' is not a pool's name"),
        ("GENRM SAFETY GENRM", "GENRM is listed twice; each pool once"),
    ],
)
def test_a_bad_pool_list_is_named(pools: str, says: str) -> None:
    said = problem(contract(EXTERNAL_VLLM_POOLS=pools))
    assert said.startswith(f"environment variable EXTERNAL_VLLM_POOLS={pools!r}: {says}")


@pytest.mark.parametrize("suffix", ["REPLICAS", "TENSOR_PARALLEL_SIZE", "LB_PORT", "VLLM_PORT"])
@pytest.mark.parametrize("value", ["two", "0", "-1", "8.0", " 8"])
def test_a_number_that_is_none_is_named(suffix: str, value: str) -> None:
    assert problem(contract(**{f"GENRM_{suffix}": value})) == (
        f"environment variable GENRM_{suffix}={value!r}: must be a positive integer, as "
        "register_external_vllm_pool requires"
    )


def test_a_port_out_of_range_names_its_key_and_variable() -> None:
    said = problem(contract(GENRM_VLLM_PORT="70000"))
    assert said.startswith("pools.genrm.port: ") and "from env GENRM_VLLM_PORT" in said


def test_an_env_line_without_a_value_is_refused_and_not_said_back() -> None:
    assert problem(contract(GENRM_ENV_VARS="A=1\nhf_abcdefghijklmnop")) == (
        "environment variable GENRM_ENV_VARS: line 2 has no '=': each line is NAME=value, as "
        "external_vllm_pool_env writes them"
    )


def test_an_env_name_the_spec_refuses_names_the_variable() -> None:
    said = problem(contract(GENRM_ENV_VARS="1BAD=x"))
    assert said.startswith("pools.genrm.env.1BAD: '1BAD' is not an environment variable name")
    assert "from env GENRM_ENV_VARS" in said
    said = problem(contract(GENRM_ENV_VARS="OPENAI_API_KEY=sk-not-said"))
    assert said.startswith("pools.genrm.env.OPENAI_API_KEY: its name says it holds a credential")
    assert "sk-not-said" not in said


def test_the_spec_s_rules_hold_for_the_contract_s_pools() -> None:
    """What pool_config.sh lets through (or refuses, set by hand) and the spec refuses."""
    assert problem(contract(GENRM_VLLM_ARGS="--dtype\nbfloat16\n--port\n9000")) == (
        "pools.genrm.vllm.args: --port is set by the job (from the pool's port); drop it here "
        "(from env GENRM_VLLM_ARGS)"
    )
    assert problem(contract(SAFETY_LB_PORT="8265")).startswith(
        "pools.safety.balancer_port: 8265 is taken by ray.ports.dashboard (8265)"
    )
    assert problem(contract(COMMAND="uv run train.py __GENRM_BASE_URL__")).startswith(
        "pools.safety.url_placeholder: __SAFETY_BASE_URL__ is not in the driver's command"
    )
    assert problem(contract(GENRM_TENSOR_PARALLEL_SIZE="12")).startswith(
        "pools.genrm.gpus_per_replica: 12 is not a multiple of slurm.gpus_per_node (8)"
    )


def test_a_services_only_job_is_refused() -> None:
    assert problem(contract(EXTERNAL_VLLM_SERVICES_ONLY="1")) == (
        "environment variable EXTERNAL_VLLM_SERVICES_ONLY=1: a job of the pools alone is not "
        "supported: nrl-launch runs the pools beside training, in the one job; unset it (or "
        "submit the services-only job with NeMo RL's run_in_allocation.sh)"
    )
    assert problem(contract(EXTERNAL_VLLM_SERVICES_ONLY="yes")) == (
        "environment variable EXTERNAL_VLLM_SERVICES_ONLY='yes': must be 0 or 1, as for "
        "NeMo RL's run_in_allocation.sh"
    )
    assert resolve(contract(EXTERNAL_VLLM_SERVICES_ONLY="0")).spec.pool_nodes == 4


def test_attaching_to_a_services_job_beside_the_pools_is_refused() -> None:
    assert problem(contract(EXTERNAL_VLLM_SERVICES_DIR="/lustre/logs/123-logs")).startswith(
        "environment variable EXTERNAL_VLLM_SERVICES_DIR='/lustre/logs/123-logs' is set beside "
        "EXTERNAL_VLLM_POOLS: to use the pools of that services-only job, unset "
        "EXTERNAL_VLLM_POOLS"
    )


# ---- Across the job: node counts and paths ----


def test_the_expected_pool_nodes_are_checked() -> None:
    assert problem(contract(NUM_EXTERNAL_SERVICE_NODES="3")) == (
        "environment variable NUM_EXTERNAL_SERVICE_NODES=3: the job's pools take 4 nodes "
        "(genrm 2, safety 2) at slurm.gpus_per_node 8 (from env GPUS_PER_NODE); set it to 4, or "
        "change the pools"
    )
    assert problem(contract(NUM_EXTERNAL_SERVICE_NODES="four")).startswith(
        "environment variable NUM_EXTERNAL_SERVICE_NODES='four': must be a positive integer"
    )
    assert resolve(contract(NUM_EXTERNAL_SERVICE_NODES=None)).spec.pool_nodes == 4


def test_a_pool_changed_by_a_flag_is_the_job_s_and_one_changed_in_the_shell_is_not() -> None:
    """--set changes the job's pools: NUM_EXTERNAL_SERVICE_NODES must say so; pool_config.sh's
    own count is of its variables, and one changed after registering no longer matches it."""
    assert resolve(contract(NUM_EXTERNAL_SERVICE_NODES="5"), "pools.genrm.replicas=3").spec
    assert problem(contract(), "pools.genrm.replicas=3").startswith(
        "environment variable NUM_EXTERNAL_SERVICE_NODES=4: the job's pools take 5 nodes"
    )
    assert problem(contract(SAFETY_REPLICAS="2", NUM_EXTERNAL_SERVICE_NODES="6")).startswith(
        "environment variable EXTERNAL_VLLM_NUM_NODES=4 (pool_config.sh's count of the pools' "
        "nodes), but GENRM, SAFETY take 6 at slurm.gpus_per_node 8 (from env GPUS_PER_NODE)"
    )


def test_shared_paths_and_the_model_must_be_mounted() -> None:
    assert resolve(contract(SAFETY_SHARED_PATHS="/lustre/a\n/lustre/b c")).spec.pools
    said = problem(contract(MOUNTS="/lustre/fsw:/lustre/fsw", GENRM_MODEL="/lustre/fsw/genrm"))
    assert said == (
        "environment variable SAFETY_SHARED_PATHS: /lustre/parsers/safety_parser.py is under "
        "none of the job's container.mounts (mounted: /lustre/fsw), and a pool's container sees "
        "only those (NeMo RL mounted EXTERNAL_VLLM_SHARED_ROOT); mount a directory that holds it "
        "(MOUNTS, --mount)"
    )
    # What the container sees is the mount's destination.
    for mounts in ("/data:/data", "/lustre:/mnt"):
        said = problem(contract(MOUNTS=mounts, SAFETY_SHARED_PATHS=""))
        assert said.startswith("pools.genrm.vllm.model (from env GENRM_MODEL): /lustre/models/")
    assert problem(contract(SAFETY_SHARED_PATHS="parsers/p.py")) == (
        "environment variable SAFETY_SHARED_PATHS: 'parsers/p.py' is not an absolute path, as "
        "register_external_vllm_pool requires"
    )


def test_every_problem_across_the_job_is_said() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(contract(NUM_EXTERNAL_SERVICE_NODES="2", MOUNTS="/data"))
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "environment variable NUM_EXTERNAL_SERVICE_NODES=2",
        "pools.genrm.vllm.model (from env GENRM_MODEL)",
        "environment variable SAFETY_SHARED_PATHS",
    ]


# ---- Through the CLI ----


def test_render_reads_the_contract_and_says_so(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in contract().items():
        monkeypatch.setenv(name, value)
    result = cli("render", "--log-dir", "/lustre/logs", "-o", "job.sbatch")
    assert result.code == 0, result.err
    assert (
        "nrl-launch: warning: NeMo RL's pool variables set in your shell are used: "
        "EXTERNAL_VLLM_POOLS (pools.genrm, pools.safety), 4 nodes beside training"
    ) in result.err


def test_render_refuses_a_bad_contract_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in contract(GENRM_LB_PORT=None).items():
        monkeypatch.setenv(name, value)
    result = cli("render", "--log-dir", "/lustre/logs", "-o", "job.sbatch")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith("nrl-launch: error: environment variable GENRM_LB_PORT is not")
    assert not Path("job.sbatch").exists()
