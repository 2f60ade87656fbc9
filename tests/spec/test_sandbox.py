"""The sandbox sidecar (sandbox:, ray.sub's SANDBOX_* variables): what the spec accepts and
refuses (one line each, exit 2), what the job script renders, and the node side of the script
run in a real bash with a small HTTP server as the sandbox (tests/cluster/sandbox_server.py;
tests/cluster/test_sandbox.py runs whole jobs on the dev cluster)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nrl_launch.backends import slurm
from nrl_launch.spec.sandbox import (
    SANDBOX_ENV_NAMES,
    SANDBOX_WORKER_PORTS,
    sandbox_mount_problems,
)
from tests.conftest import Cli, shellcheck, source_job
from tests.helpers import HOSTILE, TEST_DATA, TESTS, spec

SERVER = str((TESTS / "cluster" / "sandbox_server.py").resolve())
SUBMIT = ["render", "--container-runtime", "none", "-o", "job.sbatch"]
CMD = ["--", "python", "train.py"]
# A sandbox on the node itself (no image), as the jobs here run without a container.
COMMAND = ["--set", "sandbox.command=[python3, server.py]"]
SANDBOX = [*COMMAND, "--set", "sandbox.unsafe_on_host=true"]


def show(cli: Cli, *args: str) -> dict:  # type: ignore[type-arg]
    result = cli("config", "show", "--json", "--interactive", "--container-runtime", "none", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)  # type: ignore[no-any-return]


def refused(cli: Cli, *args: str) -> str:
    """The one error line a render with `args` fails with (exit 2, nothing written)."""
    result = cli(*SUBMIT, *args, *CMD)
    assert result.code == 2, result.out + result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert not Path("job.sbatch").exists()
    return result.err


# ---- The spec ----


def test_defaults_are_ray_sub_s(cli: Cli) -> None:
    sandbox = show(cli, *SANDBOX)["spec"]["sandbox"]
    assert sandbox == {
        "image": None,
        "command": ["python3", "server.py"],
        "mounts": [],
        "env": {},
        "port": 6000,
        "base_port": 6001,
        "ready_timeout_s": 300,
        "isolate_pids": True,
        "unsafe_on_host": True,
    }
    assert show(cli)["spec"]["sandbox"] is None


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        # Each Ray port against the sandbox's port and against its worker band.
        (["sandbox.port=1200"], "sandbox.port: sandbox.port 1200 overlap ray.ports.gcs (1200)"),
        (
            ["sandbox.port=2500"],
            "sandbox.port: sandbox.port 2500 overlap ray.ports.worker_min..worker_max (2000-2999)",
        ),
        (
            ["sandbox.base_port=8000"],
            "sandbox.base_port: the sandbox's worker ports 8000-8998 (sandbox.base_port and the "
            "998 after it) overlap ray.ports.dashboard (8265)",
        ),
        (
            ["ray.ports.dashboard=6500"],
            "sandbox.base_port: the sandbox's worker ports 6001-6999 (sandbox.base_port and the "
            "998 after it) overlap ray.ports.dashboard (6500)",
        ),
        (
            ["ray.ports.worker_min=5000", "ray.ports.worker_max=6000"],
            "sandbox.port: sandbox.port 6000 overlap ray.ports.worker_min..worker_max (5000-6000)",
        ),
        # The sandbox's own port inside its own band.
        (["sandbox.port=6500"], "sandbox.port: 6500 lies in the sandbox's worker ports 6001-6999"),
        (["sandbox.base_port=65000"], "leaves no room for the sandbox's 999 worker ports"),
        (["sandbox.port=0"], "sandbox.port: input should be greater than or equal to 1"),
        (["sandbox.ready_timeout_s=0"], "sandbox.ready_timeout_s: input should be greater"),
        (["sandbox.command=[]"], "sandbox.command: must be a non-empty argv list"),
        (["sandbox.env.NGINX_PORT=7000"], "sandbox.env: the job sets NGINX_PORT from sandbox.port"),
        (["sandbox.env.SLURM_X=1"], "'SLURM_X' cannot be set: SLURM_X is set by Slurm"),
        (["sandbox.mounts=[data]"], "'data' must be an absolute path"),
        (["sandbox.extra=1"], "sandbox.extra: unknown key"),
        (["env.NEMO_SKILLS_SANDBOX_PORT=6000"], "env.NEMO_SKILLS_SANDBOX_PORT: the job sets it"),
        # A secret's value would be written into the script, and handed to the model's code.
        (["sandbox.env.HF_TOKEN=x"], "sandbox.env.HF_TOKEN: HF_TOKEN is one of the job's secrets"),
        # So would any credential's, declared or not.
        (
            ["sandbox.env.OPENAI_API_KEY=sk-1"],
            "sandbox.env.OPENAI_API_KEY: its name says it holds a credential (KEY), and the "
            "sandbox runs code a model wrote",
        ),
        # An image and "on the host" contradict each other.
        (
            ["sandbox.image=/images/sandbox.sqsh"],
            "sandbox.unsafe_on_host: the sandbox runs in its image (sandbox.image), not on the "
            "node",
        ),
    ],
)
def test_a_bad_sandbox_value_is_one_line_naming_the_key(
    cli: Cli, sets: list[str], says: str
) -> None:
    args = [word for item in sets for word in ("--set", item)]
    err = refused(cli, *SANDBOX, *args)
    assert says in err


def test_a_sandbox_needs_its_command(cli: Cli) -> None:
    err = refused(cli, "--set", "sandbox.port=6100")
    assert "sandbox: no command: give the command each node's sandbox runs" in err


def test_the_sandbox_band_is_what_the_error_says_is_accepted(cli: Cli) -> None:
    """The band's edges: just outside Ray's worker ports and the dashboard is fine."""
    last = 8264 - (SANDBOX_WORKER_PORTS - 1)
    shown = show(cli, *SANDBOX, "--set", "sandbox.port=3000", "--set", f"sandbox.base_port={last}")
    assert shown["spec"]["sandbox"]["base_port"] == last
    err = refused(cli, *SANDBOX, "--set", f"sandbox.base_port={last + 1}")
    assert "overlap ray.ports.dashboard (8265)" in err


def test_a_container_job_s_sandbox_needs_an_image(cli: Cli) -> None:
    result = cli("render", "--container", "/images/rl.sqsh", "-o", "job.sbatch", *SANDBOX, *CMD)
    assert result.code == 2
    assert "sandbox.image is not set: the job runs in a container" in result.err


def test_a_sandbox_on_the_node_itself_is_refused_unless_accepted_and_then_warned_about(
    cli: Cli,
) -> None:
    """Without an image the model's code runs as the user, next to the log dir and the token:
    only when the user says they accept it, and then said at every render."""
    err = refused(cli, "--set", "sandbox.command=[python3, server.py]")
    assert (
        "sandbox.image is not set: the sandbox's code (a model's) would run on each node as you"
    ) in err
    assert "or set sandbox.unsafe_on_host: true to accept that" in err
    result = cli(*SUBMIT, *SANDBOX, *CMD)
    assert result.code == 0, result.err
    assert (
        "warning: sandbox.unsafe_on_host: the sandbox's code runs on each node as you, with your "
        "files, the job's log dir and its Ray token within reach"
    ) in result.err


def test_render_says_the_sandbox_answers_anyone_on_the_network(cli: Cli) -> None:
    """NeMo Skills' workers listen on 0.0.0.0 without authentication: said at every render, with
    NeMo Skills' network block, which the job turns on unless sandbox.env turns it off."""
    result = cli(*SUBMIT, *SANDBOX, *CMD)
    assert result.code == 0, result.err
    assert (
        "warning: sandbox: NeMo Skills' sandbox answers on every address of each node (ports "
        "6000, 6001-6999) with no authentication: anyone who can reach the nodes can run code in "
        "it, as you."
    ) in result.err
    assert "NEMO_SKILLS_SANDBOX_BLOCK_NETWORK=1 keeps the code it runs off the network" in (
        result.err
    )
    script = Path("job.sbatch").read_text()
    assert "NEMO_SKILLS_SANDBOX_BLOCK_NETWORK=1" in script
    off = cli(*SUBMIT, *SANDBOX, "--set", "sandbox.env.NEMO_SKILLS_SANDBOX_BLOCK_NETWORK=0", *CMD)
    assert off.code == 0, off.err
    assert "sandbox.env turns NeMo Skills' network block off" in off.err


def test_a_sandbox_mount_that_shows_the_log_dir_is_refused(cli: Cli, tmp_path: Path) -> None:
    """A mount of logs.base_dir, or of a directory above it, would hand the sandbox the script
    every node runs and the Ray token: refused, one line naming the mount."""
    logs = tmp_path / "work" / "logs"
    image = ["--set", "sandbox.image=/images/sandbox.sqsh", "--set", "sandbox.command=[x]"]
    for mount in (str(logs), str(tmp_path / "work"), f"{tmp_path}:/outside:ro"):
        err = refused(cli, *image, "--log-dir", str(logs), "--set", f"sandbox.mounts=[{mount}]")
        assert f"sandbox.mounts: {mount if ':' in mount else mount + ':' + mount}" in err
        assert "shows the sandbox the job's log dirs" in err
    beside = cli(
        *SUBMIT,
        *image,
        "--log-dir",
        str(logs),
        "--set",
        f"sandbox.mounts=[{tmp_path / 'data'}]",
        *CMD,
    )
    assert beside.code == 0, beside.err


def test_the_local_backend_refuses_a_sandbox(cli: Cli) -> None:
    err = refused(cli, "--backend", "local", *SANDBOX)
    assert "sandbox: backend local cannot run a sandbox beside Ray" in err


def test_run_refuses_a_sandbox_and_pull_ignores_a_profile_s(cli: Cli, tmp_path: Path) -> None:
    result = cli("run", "--dry-run", *SANDBOX, "--", "hostname")
    assert result.code == 2
    assert "run starts no Ray job for a sandbox to serve" in result.err
    profile = tmp_path / "p.yaml"
    profile.write_text("sandbox: {command: [python3, server.py]}\n")
    pulled = cli(
        "pull", "--profile", str(profile), "--dry-run", "--json", "nvcr.io/nvidia/nemo-rl:v0.6.0"
    )
    assert pulled.code == 0, pulled.err
    # The spec the job is started with (NRL_JOB_SPEC, its spec.json) has no sandbox.
    assert json.loads(json.loads(pulled.out)["environment"]["NRL_JOB_SPEC"])["sandbox"] is None


# ---- ray.sub's variables ----


def test_ray_sub_s_sandbox_variables_are_its_keys(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_CONTAINER", "nvcr.io/nvidia/nemo-skills-sandbox:latest")
    monkeypatch.setenv("SANDBOX_COMMAND", "/start-with-nginx.sh --x")
    monkeypatch.setenv("SANDBOX_EXTRA_MOUNTS", "/data:/data:ro,/scratch")
    monkeypatch.setenv("SANDBOX_ENV_VARS", "NUM_WORKERS=8,STATEFUL_SANDBOX=0")
    monkeypatch.setenv("NEMO_SKILLS_SANDBOX_PORT", "6100")
    monkeypatch.setenv("SANDBOX_BASE_PORT", "6101")
    result = cli("config", "show", "--json", "--interactive")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["spec"]["sandbox"] == {
        "image": "nvcr.io/nvidia/nemo-skills-sandbox:latest",
        "command": ["bash", "-c", "/start-with-nginx.sh --x"],
        "mounts": ["/data:/data:ro", "/scratch:/scratch"],
        "env": {"NUM_WORKERS": "8", "STATEFUL_SANDBOX": "0"},
        "port": 6100,
        "base_port": 6101,
        "ready_timeout_s": 300,
        "isolate_pids": True,
        "unsafe_on_host": False,
    }
    assert shown["sources"]["sandbox.port"] == "env NEMO_SKILLS_SANDBOX_PORT"
    assert "SANDBOX_CONTAINER (sandbox.image)" in result.err  # named as used


@pytest.mark.parametrize(
    ("given", "missing"),
    [("SANDBOX_CONTAINER", "SANDBOX_COMMAND"), ("SANDBOX_COMMAND", "SANDBOX_CONTAINER")],
)
def test_one_of_ray_sub_s_two_sandbox_variables_alone_is_refused_naming_both(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, given: str, missing: str
) -> None:
    monkeypatch.setenv(given, "x")
    err = refused(cli)
    assert f"environment variable {given} is set but {missing} is not" in err


def test_ray_sub_s_other_sandbox_variables_alone_change_nothing(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in ray.sub: without its image and command there is no sandbox, and the port reaches
    the job through sbatch's --export=ALL."""
    monkeypatch.setenv("NEMO_SKILLS_SANDBOX_PORT", "6100")
    monkeypatch.setenv("SANDBOX_BASE_PORT", "6101")
    assert show(cli)["spec"]["sandbox"] is None


def test_sandbox_env_vars_that_are_not_name_value_are_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_CONTAINER", "/images/sandbox.sqsh")
    monkeypatch.setenv("SANDBOX_COMMAND", "/start-with-nginx.sh")
    monkeypatch.setenv("SANDBOX_ENV_VARS", "A=1,oops")
    err = refused(cli)
    assert "SANDBOX_ENV_VARS='A=1,oops': 'oops' is not NAME=VALUE" in err


# ---- The job script ----


def _script(**sandbox: object) -> str:
    values: dict[str, object] = {
        "command": ["python3", "server.py"],
        "unsafe_on_host": True,
        **sandbox,
    }
    return slurm.plan(spec(sandbox=values, slurm={"nodes": 2})).script


def _function(script: str, name: str) -> str:
    """Function `name` of `script` as bash defines it once the script is sourced."""
    done = subprocess.run(
        ["bash", "-c", 'source /dev/stdin <<<"$1"; declare -f "$2"', "bash", script, name],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _sandbox_srun(script: str, tmp_path: Path) -> list[str]:
    """The arguments the script's start_sandbox_step (sourced, in real bash) gives srun."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text('#!/bin/sh\nprintf "%s\\n" "$@" >"$NRL_TEST_ARGV"\n', encoding="utf-8")
    srun.chmod(0o755)
    argv = tmp_path / "argv"
    (tmp_path / "1-logs").mkdir()
    code = (
        'source /dev/stdin <<<"$1"; NRL_LOG_DIR=$2/1-logs; log() { :; }\n'
        'start_sandbox_step && wait "$NRL_SANDBOX_PID"\n'
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NRL_TEST_ARGV": str(argv)}
    subprocess.run(["bash", "-c", code, "bash", script, str(tmp_path)], env=env, check=True)
    return argv.read_text(encoding="utf-8").splitlines()


def test_no_sandbox_renders_none_of_it() -> None:
    script = slurm.plan(spec()).script
    assert "sandbox_main" not in script and "NEMO_SKILLS" not in script


def test_the_sandbox_step_and_gate_are_rendered_and_the_job_finds_the_sandbox() -> None:
    script = _script(port=6100, base_port=6101)
    assert "start_sandbox_step ||" in script
    assert 'sandbox_step_ended "$rc" "$head_pid"' in script
    # The sandbox step is one of the steps the batch step waits for the first of.
    assert "\nNRL_SANDBOX=1\n" in script
    assert (
        'first_to_end "$head_pid" ${worker_pid:+"$worker_pid"} '
        '${NRL_SANDBOX_PID:+"$NRL_SANDBOX_PID"}' in script
    )
    assert "elif ((NRL_SANDBOX)) && ! wait_for_sandboxes; then" in script
    assert "export NEMO_SKILLS_SANDBOX_HOST=127.0.0.1 NEMO_SKILLS_SANDBOX_PORT=6100" in script
    # The step comes before the head's, and its output is one file per node.
    assert script.index("start_sandbox_step ||") < script.index(
        'bash "$NRL_LOG_DIR/job.sbatch" head'
    )
    # srun reads % in --output as a pattern: a log dir's own is doubled.
    assert '--output="${NRL_LOG_DIR//%/%%}/sandbox-%N.log"' in script
    # It runs a program given on its command line, never the log dir's job.sbatch (which the
    # sandbox could rewrite were it in reach): nothing in the job runs the script as `sandbox`.
    step = _function(script, "start_sandbox_step")
    assert 'bash -c "$(sandbox_program)" nrl-sandbox "${NRL_SANDBOX_COMMAND[@]}"' in step
    code = [line for line in step.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "job.sbatch" in line]
    assert "\n  sandbox)" not in script


def test_a_pyxis_sandbox_has_its_own_image_and_mounts_and_no_container_name(
    tmp_path: Path,
) -> None:
    values = {
        "container": {"image": "/images/rl.sqsh", "mounts": ["/shared"]},
        "sandbox": {
            "image": "/images/sandbox.sqsh",
            "command": ["/start-with-nginx.sh"],
            "mounts": ["/data:/data:ro"],
        },
    }
    script = slurm.plan(spec(**values)).script
    argv = _sandbox_srun(script, tmp_path)
    assert "--container-image=/images/sandbox.sqsh" in argv
    assert not [a for a in argv if a.startswith("--container-name")]
    assert not [a for a in argv if "/shared" in a]
    # Of the log dir, only its exchange dir; not root in its container.
    mounts = f"--container-mounts=/data:/data:ro,{tmp_path}/1-logs/sandbox:/nrl-sandbox"
    assert mounts in argv
    assert "export NRL_SANDBOX_DIR=/nrl-sandbox" in script
    assert "--no-container-remap-root" in argv


def test_the_sandbox_s_environment_is_a_list_of_names_without_the_job_s() -> None:
    """srun --export passes the sandbox these and nothing else: no secret (declared, off or
    never named), no token path, none of the job's env; sandbox.env's names are in it."""
    script = slurm.plan(
        spec(
            sandbox={"command": ["x"], "unsafe_on_host": True, "env": {"NUM_WORKERS": "8"}},
            secrets={"MY_SECRET": "required", "OFF_TOKEN": "off"},
            env={"JOB_ONLY": "1"},
        )
    ).script
    line = next(x for x in script.splitlines() if x.startswith("NRL_SANDBOX_EXPORT="))
    names = shlex.split(line.split("=", 1)[1])[0].split(",")
    # The list nrl-launch keeps (the ports, its wrapper's values, PATH and the like), then
    # sandbox.env's names: nothing of the job's.
    assert names == [*SANDBOX_ENV_NAMES, "NUM_WORKERS"]
    assert {"PATH", "NGINX_PORT", "SANDBOX_PORTS_DIR"} <= set(names)
    step = _function(script, "start_sandbox_step")
    assert '--export="$NRL_SANDBOX_EXPORT"' in step
    body = _function(script, "sandbox_env")
    for name in ("HF_TOKEN", "MY_SECRET", "OFF_TOKEN", "WANDB_API_KEY", "JOB_ONLY", "RAY_AUTH"):
        assert name not in body and name not in line


def test_plan_names_the_sandbox(cli: Cli) -> None:
    config = TEST_DATA / "nemo_rl" / "examples" / "configs" / "grpo_base.yaml"
    result = cli("plan", "--config", str(config), *SANDBOX)
    assert result.code == 0, result.err
    where = "on every node, without a container; ports 6000, 6001-6999"
    assert f"Sandbox:     python3 server.py {where}" in result.out
    data = json.loads(cli("plan", "--config", str(config), *SANDBOX, "--json").out)
    assert data["sandbox"]["command"] == ["python3", "server.py"]


def test_hostile_sandbox_values_are_quoted_and_the_script_is_shellcheck_clean(
    tmp_path: Path,
) -> None:
    env = {f"V{i}": value for i, value in enumerate(HOSTILE) if "\x00" not in value}
    script = _script(command=["python3", *HOSTILE[:5]], env=env)
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    checked = shellcheck(path)
    assert checked.returncode == 0, checked.stdout


# ---- The node side, in a real bash, with the test server as the sandbox ----


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _definitions(script: str) -> str:
    """The script's values and functions, as bash has them once it sources the script."""
    return source_job(script)


# What the batch step's srun does for one node (nodeX): the sandbox's environment, and only the
# names NRL_SANDBOX_EXPORT lists (srun --export) besides Slurm's own, then the program.
_SANDBOX_TASK = """
sandbox_env
args=(SLURMD_NODENAME=nodeX)
IFS=, read -r -a names <<<"$NRL_SANDBOX_EXPORT"
for name in "${names[@]}"; do [[ -z ${!name+x} ]] || args+=("$name=${!name}"); done
exec env -i "${args[@]}" bash -c "$(sandbox_program)" nrl-sandbox "${NRL_SANDBOX_COMMAND[@]}"
"""


def _node_side(
    tmp_path: Path,
    env: dict[str, str],
    *,
    timeout_s: int = 5,
    stopped_after: float | None = None,
    port: int | None = None,
    outer: dict[str, str] | None = None,
) -> tuple[int, Path, float]:
    """Runs one node's sandbox task as the batch step's srun would (node nodeX): returns its exit
    code, the log dir and how long it ran. `stopped_after`: the job's end stops the step (srun's
    SIGTERM) after that long. `outer`: more of the job's environment, which must not reach it."""
    port = port or _free_port()
    script = _script(
        command=[sys.executable, SERVER],
        port=port,
        base_port=port + 1,  # an ephemeral port: the band stays under 65535, clear of Ray's
        env=env,
        ready_timeout_s=timeout_s,
    )
    log_dir = tmp_path / "1-logs"
    (log_dir / "sandbox").mkdir(parents=True)
    started = time.monotonic()
    task = subprocess.Popen(
        ["bash", "-c", _definitions(script) + _SANDBOX_TASK],
        env={**os.environ, **(outer or {}), "NRL_LOG_DIR": str(log_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if stopped_after is not None:
        time.sleep(stopped_after)
        task.terminate()
    out, _ = task.communicate(timeout=60)
    (log_dir / "sandbox-nodeX.log").write_text(out)
    return task.returncode, log_dir, time.monotonic() - started


def _sees(log_dir: Path) -> dict[str, Any]:
    """What the test server logged it could see of its node and job (sandbox_server.py)."""
    log = (log_dir / "sandbox-nodeX.log").read_text()
    line = next(x for x in log.splitlines() if " sees {" in x)
    return json.loads(line.split(" sees ", 1)[1])  # type: ignore[no-any-return]


def _ended_by_batch_step(log_dir: Path) -> str:
    """ENDED as the batch step writes it once the sandbox step has ended first (nodeX's)."""
    probe = """
    (exit 1) & NRL_SANDBOX_PID=$!; wait "$NRL_SANDBOX_PID" || true
    sandbox_step_ended 1 ""
    """
    result = subprocess.run(
        ["bash", "-c", _definitions(_script(ready_timeout_s=3)) + probe],
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": str(log_dir), "NRL_NODE_LIST": "nodeX"}
        | {"SLURM_JOB_ID": "1", "NRL_SANDBOX_PORT_SHOWN": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return (log_dir / "ENDED").read_text().strip()


def test_the_node_marks_its_sandbox_ready_once_it_answers_and_stops_it_when_the_job_ends(
    tmp_path: Path,
) -> None:
    rc, log_dir, _ = _node_side(tmp_path, {"SANDBOX_DELAY_S": "2"}, stopped_after=5)
    log = (log_dir / "sandbox-nodeX.log").read_text()
    assert rc == 143, log  # stopped by srun's SIGTERM, as at every job's end
    ready = float((log_dir / "sandbox" / "READY.nodeX").read_text())
    started = float((log_dir / "sandbox" / "STARTED.nodeX").read_text())
    assert ready - started >= 2  # not before the server listened
    assert "listening on port" in log and "answers on port" in log
    assert not (log_dir / "sandbox" / "FAILED.nodeX").exists()


def test_the_sandbox_sees_only_its_own_processes_environment_and_exchange_dir(
    tmp_path: Path,
) -> None:
    """In PID and user namespaces of its own (the host's unshare here), it sees its own
    processes only; its environment is the exported names, never the job's (a secret, a
    credential nobody declared, the token's path)."""
    outer = {
        "HF_TOKEN": "hf_SENTINEL",
        "OPENAI_API_KEY": "sk-SENTINEL",
        "RAY_AUTH_TOKEN_PATH": "/x/ray-auth-token",
    }
    rc, log_dir, _ = _node_side(tmp_path, {}, stopped_after=3, outer=outer)
    seen = _sees(log_dir)
    assert seen["processes"] <= 2, seen  # the server (PID 1 there), and nothing of the node
    assert seen["pid_1"].startswith("python")
    assert not set(seen["env"]) & set(outer), seen["env"]
    assert "SENTINEL" not in (log_dir / "sandbox-nodeX.log").read_text()
    assert rc == 143


def test_a_sandbox_that_exits_ends_the_job_naming_its_node(tmp_path: Path) -> None:
    rc, log_dir, took = _node_side(tmp_path, {"SANDBOX_EXIT_AFTER_S": "2"})
    assert rc == 1
    assert (log_dir / "sandbox" / "READY.nodeX").exists()
    assert (log_dir / "sandbox" / "FAILED.nodeX").read_text() == "exited 3\n"
    assert _ended_by_batch_step(log_dir) == (
        "the sandbox on node nodeX exited with code 3; see sandbox-nodeX.log"
    )
    assert took < 15


def test_a_sandbox_that_never_answers_ends_the_job_naming_its_node_and_port(
    tmp_path: Path,
) -> None:
    rc, log_dir, took = _node_side(tmp_path, {"SANDBOX_SILENT": "1"}, timeout_s=3)
    assert rc == 1
    assert not (log_dir / "sandbox" / "READY.nodeX").exists()
    ended = _ended_by_batch_step(log_dir)
    assert ended.startswith("the sandbox on node nodeX did not answer on port ")
    assert "within 3 s; see sandbox-nodeX.log" in ended
    assert took < 15


def test_a_sandbox_port_already_taken_ends_the_job_before_the_sandbox_starts(
    tmp_path: Path,
) -> None:
    """Another job's sandbox on a shared node would otherwise answer for this one."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        rc, log_dir, _ = _node_side(tmp_path, {}, port=port)
    assert rc == 1
    assert (log_dir / "sandbox" / "FAILED.nodeX").read_text() == "port-in-use \n"
    assert "listening on port" not in (log_dir / "sandbox-nodeX.log").read_text()


@pytest.mark.parametrize(
    "written",
    [
        "exited $(touch INJECTED)",  # words, never run
        "exited 3 a[$(touch INJECTED)]",
        "nonsense",
        "exited 99999",
        "x" * 10000,
    ],
)
def test_what_a_sandbox_writes_is_data_the_batch_step_checks(tmp_path: Path, written: str) -> None:
    """FAILED.<node> is in the exchange dir, which the sandbox's code can write: the batch step
    takes only the words it knows from it, runs nothing, and says its own reason otherwise."""
    log_dir = tmp_path / "1-logs"
    (log_dir / "sandbox").mkdir(parents=True)
    (log_dir / "sandbox" / "STARTED.nodeX").write_text("1\n")
    (log_dir / "sandbox" / "FAILED.nodeX").write_text(written + "\n")
    os.chdir(tmp_path)
    ended = _ended_by_batch_step(log_dir)
    assert ended == (
        "the sandbox step ended (exit 1) while the job was running; see sandbox-*.log and "
        "slurm-1.out"
    )
    assert not (tmp_path / "INJECTED").exists() and not (log_dir / "INJECTED").exists()


# ---- The batch step: the sandbox step's end, after its `wait -n` ----


def _batch_side(tmp_path: Path, probe: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script's definitions (nodeA and nodeB), then `probe`, in a real bash."""
    log_dir = tmp_path / "1-logs"
    (log_dir / "sandbox").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "NRL_LOG_DIR": str(log_dir),
        "NRL_NODE_LIST": "nodeA nodeB",
        "SLURM_JOB_ID": "1",
    }
    result = subprocess.run(
        ["bash", "-c", _definitions(_script()) + "\n" + probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, log_dir


def test_a_sandbox_step_that_ends_first_ends_the_job_naming_the_nodes_it_never_reached(
    tmp_path: Path,
) -> None:
    (tmp_path / "1-logs" / "sandbox").mkdir(parents=True)
    (tmp_path / "1-logs" / "sandbox" / "STARTED.nodeA").write_text("1\n")
    # (`wait -n` sees only a child that ends after it is called: batch_main checks first.)
    probe = """
    (sleep 0.5; exit 1) & NRL_SANDBOX_PID=$!
    sleep 30 & head=$!
    rc=0; wait -n || rc=$?
    sandbox_step_ended "$rc" "$head"
    kill "$head"
    """
    result, log_dir = _batch_side(tmp_path, probe)
    assert result.returncode == 0, result.stderr
    assert (log_dir / "ENDED").read_text().strip() == (
        "the sandbox step ended (exit 1) while the job was running (no sandbox started on: "
        "nodeB); see sandbox-*.log and slurm-1.out"
    )


def test_a_sandbox_step_that_ends_with_the_job_leaves_the_head_to_end_by_itself(
    tmp_path: Path,
) -> None:
    """The driver is done (ENDED): the sandboxes stop within a second, the head may still be
    stopping Ray. The head is not cut short (no SIGTERM), and ENDED keeps the job's reason."""
    probe = """
    echo "driver exited with code 0" >"$NRL_LOG_DIR/ENDED"
    (sleep 0.5; exit 0) & NRL_SANDBOX_PID=$!
    sleep 3 & head=$!
    rc=0; wait -n || rc=$?
    sandbox_step_ended "$rc" "$head"
    kill -0 "$head" 2>/dev/null && echo "head still running"
    wait "$head"; echo "head exit $?"
    """
    started = time.monotonic()
    result, log_dir = _batch_side(tmp_path, probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "head exit 0"
    assert 2 < time.monotonic() - started < 30
    assert (log_dir / "ENDED").read_text().strip() == "driver exited with code 0"


def test_a_sandbox_image_file_that_is_not_there_is_refused_before_submitting(
    cli: Cli, tmp_path: Path
) -> None:
    """As the job's own image: pyxis would fail the sandbox step on every node after the queue."""
    image = tmp_path / "sandbox.sqsh"
    args = ["submit", "--container-runtime", "none", *COMMAND, "--set", f"sandbox.image={image}"]
    result = cli(*args, *CMD)
    assert result.code == 2
    assert f"sandbox.image {image}: no such file" in result.err
    assert "Traceback" not in result.err and result.out == ""
    # pyxis takes a name without / or . for a registry's, even one ending in .sqsh.
    result = cli(*args[:-1], "sandbox.image=sandbox.sqsh", *CMD)
    assert result.code == 2
    assert "sandbox.image 'sandbox.sqsh': pyxis takes an image for a file only" in result.err


@pytest.mark.parametrize("where", ["home", "above", "inside", "state env"])
def test_a_sandbox_mount_that_shows_the_state_dir_is_refused(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """`sandbox.mounts=[$HOME:/home]` with the secrets in a file: the sandbox (code a model
    wrote) would read the file of the secrets' values, and every job's script, in nrl-launch's
    state dir. Refused, one line naming the mount and the state dir, whether the mount holds
    the state dir or is inside it, wherever NRL_LAUNCH_STATE_DIR puts it."""
    home = Path(os.environ["HOME"])
    state = home / ".local" / "state" / "nrl-launch"
    if where == "state env":
        state = tmp_path / "elsewhere" / "state"
        monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(state))
    source = {
        "home": home,
        "above": home.parent,
        "inside": state / "scripts",
        "state env": state.parent,
    }[where]
    image = ["--set", "sandbox.image=/images/sandbox.sqsh", "--set", "sandbox.command=[x]"]
    err = refused(
        cli,
        *image,
        "--log-dir",
        "/lustre/logs",
        "--set",
        "slurm.secrets_via=file",
        "--set",
        f"sandbox.mounts=[{source}:/home]",
    )
    assert (
        f"sandbox.mounts: {source}:/home shows the sandbox nrl-launch's state dir ({state})" in err
    )
    assert "file of its secrets' values" in err


def test_sandbox_mount_problems_names_each_mount_once(tmp_path: Path) -> None:
    """The one check every door calls, on a hand-made spec: a mount that shows both the log
    dirs and the state dir is one line saying both; a mount of data beside them, none."""
    home = tmp_path / "home"
    made = spec(
        logs={"base_dir": str(home / "logs")},
        sandbox={
            "image": "/images/sandbox.sqsh",
            "command": ["x"],
            "mounts": [f"{home}:/h", f"{tmp_path / 'data'}:/data"],
        },
    )
    problems = sandbox_mount_problems(made, tmp_path, {"HOME": str(home)})
    assert len(problems) == 1
    assert problems[0].startswith(f"sandbox.mounts: {home}:/h shows the sandbox the job's log dirs")
    assert "and nrl-launch's state dir" in problems[0]
    assert problems[0].endswith("mount a directory that holds neither")
