"""The node steps' helpers, run in a real bash from a rendered script: finding Ray's Python,
which of a node's enroot containers a pyxis job removes when it ends, and the environment Ray
starts in (ray.sub's: no MPI or Slurm variables, 65535 open files, no CI, private compile
caches)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nrl_launch.backends import Request, slurm
from nrl_launch.spec import LaunchSpec
from tests.conftest import OTHER_UID
from tests.helpers import bash_values, spec

PYXIS = {"image": "/shared/images/nemo-rl.sqsh", "mounts": ["/shared"], "workdir": "/shared"}


def _ray_python(path: Path) -> str:
    """What the rendered script's ray_python prints with `path` first on PATH."""
    script = slurm.plan(spec()).script
    return bash_values(script, f'PATH={path}:$PATH; printf "%s\\0" "$(ray_python)"')[0]


def test_ray_python_is_the_venv_s_when_ray_is_a_symlink_into_it(tmp_path: Path) -> None:
    """`ray` on PATH is /usr/local/bin/ray -> /opt/venv/bin/ray, and a Python without Ray sits
    next to the link: the counter must run the venv's."""
    venv = tmp_path / "opt" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "ray").write_text(f"#!{venv / 'python'}\nimport ray\n")
    (venv / "ray").chmod(0o755)
    links = tmp_path / "usr" / "local" / "bin"
    links.mkdir(parents=True)
    (links / "ray").symlink_to(venv / "ray")
    (links / "python").write_text("#!/bin/sh\necho not the venv's\n")
    (links / "python").chmod(0o755)
    assert _ray_python(links) == str(venv / "python")


def test_ray_python_follows_the_link_when_the_first_line_names_no_python(tmp_path: Path) -> None:
    """pip writes a /bin/sh trampoline when the interpreter's path is too long for `#!`."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "ray").write_text("#!/bin/sh\n'''exec' \"$0\" \"$@\"\n' '''\n")
    (venv / "ray").chmod(0o755)
    links = tmp_path / "bin"
    links.mkdir()
    (links / "ray").symlink_to(venv / "ray")
    assert _ray_python(links) == str(venv / "python")


def _removed_on_a_node(tmp_path: Path, containers: list[str], running: str | None) -> list[str]:
    """What remove_containers_node asks enroot to remove, given what `enroot list` shows and
    the job ids squeue lists (None: squeue fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = shlex.join(["printf", "%s\\n", *containers]) if containers else "true"
    (bin_dir / "enroot").write_text(
        "#!/bin/bash\n"
        f"case $1 in\n  list) {listing} ;;\n"
        "  remove) shift; while [[ $1 == -* ]]; do shift; done\n"
        f'    printf "%s\\n" "$@" >{tmp_path / "removed"} ;;\nesac\n'
    )
    squeue = f'printf "%s\\n" {running}' if running is not None else "exit 1"
    (bin_dir / "squeue").write_text(f"#!/bin/bash\n{squeue}\n")
    for tool in ("enroot", "squeue"):
        (bin_dir / tool).chmod(0o755)
    script = slurm.plan(spec(container=PYXIS)).script
    probe = f"PATH={bin_dir}:$PATH NRL_CONTAINER_NAME=nrl-42 remove_containers_node"
    done = subprocess.run(
        ["bash", "-c", script.split("# ---- Batch step")[0] + "\n" + probe],
        capture_output=True,
        text=True,
        env={**os.environ, "NRL_LOG_DIR": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    removed = tmp_path / "removed"
    return removed.read_text().splitlines() if removed.exists() else []


def test_a_node_removes_this_job_s_container_under_either_scope(tmp_path: Path) -> None:
    containers = ["pyxis_nrl-42", "pyxis_42_nrl-42", "pyxis_nrl-420", "pyxis_mine", "other"]
    removed = _removed_on_a_node(tmp_path, containers, running="42 420")
    assert removed == ["pyxis_nrl-42", "pyxis_42_nrl-42"]


def test_a_node_removes_containers_of_nrl_jobs_that_no_longer_run(tmp_path: Path) -> None:
    """A job that scancel ended could not remove its containers: the next job does."""
    containers = ["pyxis_nrl-42", "pyxis_nrl-7", "pyxis_nrl-8-1", "pyxis_nrl-9", "pyxis_x-7"]
    removed = _removed_on_a_node(tmp_path, containers, running="42 9")
    assert removed == ["pyxis_nrl-42", "pyxis_nrl-7", "pyxis_nrl-8-1"]


def test_without_squeue_only_this_job_s_containers_go(tmp_path: Path) -> None:
    removed = _removed_on_a_node(tmp_path, ["pyxis_nrl-42", "pyxis_nrl-7"], running=None)
    assert removed == ["pyxis_nrl-42"]


def test_a_node_with_no_container_of_the_job_removes_nothing(tmp_path: Path) -> None:
    assert _removed_on_a_node(tmp_path, ["pyxis_mine"], running="42") == []


# ---- Bring-up: each node marks its join; the head counts the marks ----


def _node_functions(
    probe: str, log_dir: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`probe` in a real bash after every definition of a rendered 2-node script (all but its
    final dispatch), with the job's log dir at `log_dir` and `args` as $1...."""
    return subprocess.run(
        ["bash", "-c", _node_functions_text() + "\n" + probe, "bash", *args],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": str(log_dir), **env},
        timeout=60,
        check=False,
    )


def test_the_head_counts_the_nodes_whose_join_is_marked(tmp_path: Path) -> None:
    (tmp_path / "joined").mkdir()
    (tmp_path / "joined" / "0").write_text("node0.cluster 8 100.25\n")
    (tmp_path / "joined" / "1").write_text("node1.cluster 8 101.5\n")
    (tmp_path / "joined" / ".1").write_text("half-written\n")  # a mark being written
    done = _node_functions("wait_for_nodes", tmp_path, NRL_NODE_LIST="node0.cluster node1.cluster")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Number of actors online: 16/16\n"
    readiness = json.loads((tmp_path / "readiness.json").read_text())
    assert readiness == {"nodes": 2, "nodes_expected": 2, "gpus": 16, "gpus_expected": 16}
    timeline = sorted((tmp_path / "timeline").read_text().splitlines())
    assert timeline == ["joined:node0 100.25", "joined:node1 101.5"]


def test_a_node_that_never_marks_its_join_fails_the_job_at_the_join_timeout(
    tmp_path: Path,
) -> None:
    (tmp_path / "joined").mkdir()
    (tmp_path / "joined" / "0").write_text("node0 8 100.25\n")
    (tmp_path / "timeline").write_text("submitted 1.0\n")
    done = _node_functions(
        "NRL_JOIN_TIMEOUT=1; wait_for_nodes", tmp_path, NRL_NODE_LIST="node0 node1"
    )
    assert done.returncode == 1, done.stderr
    assert "Number of actors online: 8/16\n" in done.stdout
    assert (tmp_path / "ENDED").read_text() == (
        "not every node joined within 1s: node1 (node 1) missing; see ray-worker-1.log\n"
    )
    assert json.loads((tmp_path / "readiness.json").read_text())["nodes"] == 1


@pytest.mark.parametrize(
    # Ray's own line, and ray_start.py's once the GCS lists the node (sooner than Ray's)
    "line",
    ["Ray runtime started.", "nrl-launch: the GCS lists this node alive"],
)
def test_a_node_marks_its_join_once_ray_says_it_started(tmp_path: Path, line: str) -> None:
    """Only a line written after this `ray start` began counts (an earlier attempt's does
    not); a `ray start` that exits without it leaves no mark."""
    log = tmp_path / "ray-worker-1.log"
    log.write_text(f"{line}\n(an earlier attempt)\n")
    probe = (
        "NRL_NODE_LOG=$1 NRL_NODE_INDEX=1 NRL_NODE_NAME=node1 NRL_NODE_GPUS=8\n"
        'from=$(stat -c %s -- "$NRL_NODE_LOG")\n'
        "sleep 0.5 & quiet=$!\n"
        'note_joined "$from" "$quiet"\n'
        "[[ ! -e $NRL_LOG_DIR/joined/1 ]] || exit 3\n"
        "sleep 10 & ray=$!\n"
        f'(sleep 0.3; echo "{line}" >>"$NRL_NODE_LOG") &\n'
        'note_joined "$from" "$ray"\n'
        'kill "$ray"\n'
    )
    done = _node_functions(probe, tmp_path, str(log))
    assert done.returncode == 0, done.stderr
    _assert_node1_marked(tmp_path)


def test_a_join_is_marked_however_much_ray_prints_after_it(tmp_path: Path) -> None:
    """The scripts run under pipefail: a reader that stops at the match must not fail the
    look when Ray has printed a lot after it (RAY_LOG_TO_STDERR=1, say)."""
    log = tmp_path / "ray-worker-1.log"
    log.write_text("Ray runtime started.\n" + ("y" * 99 + "\n") * 3000)  # 300 KB after it
    probe = (
        "set -euo pipefail\n"
        "NRL_NODE_LOG=$1 NRL_NODE_INDEX=1 NRL_NODE_NAME=node1 NRL_NODE_GPUS=8\n"
        "sleep 10 & ray=$!\n"
        'note_joined 0 "$ray"\n'
        'kill "$ray"\n'
    )
    done = _node_functions(probe, tmp_path, str(log))
    assert done.returncode == 0, done.stderr
    _assert_node1_marked(tmp_path)


def test_a_join_written_in_pieces_is_marked_and_the_looks_start_no_process(
    tmp_path: Path,
) -> None:
    """The log is read by bash itself every 0.1 s (with 16 nodes on 2 cores, a tail and a grep
    per look on every node took the CPU Ray's agents needed to start in their 15 s): the wait
    runs with nothing on PATH but what marks the join, and a line that arrives in pieces, its
    first piece before the wait began, still counts."""
    log = tmp_path / "ray-worker-1.log"
    log.write_text("Ray runtime started.\n(an earlier attempt)\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("mkdir", "date", "mv"):
        (tools / tool).symlink_to(subprocess.check_output(["which", tool], text=True).strip())
    probe = (
        "set -euo pipefail\n"
        "NRL_NODE_LOG=$1 NRL_NODE_INDEX=1 NRL_NODE_NAME=node1 NRL_NODE_GPUS=8\n"
        'from=$(stat -c %s -- "$NRL_NODE_LOG")\n'
        'printf "Ray runtime" >>"$NRL_NODE_LOG"\n'
        "sleep 10 & ray=$!\n"
        '(sleep 0.3; printf " start" >>"$NRL_NODE_LOG"; sleep 0.3\n'
        ' printf "ed.\\n" >>"$NRL_NODE_LOG") &\n'
        f'PATH={tools} note_joined "$from" "$ray"\n'
        'kill "$ray"\n'
    )
    done = _node_functions(probe, tmp_path, str(log))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    _assert_node1_marked(tmp_path)


def _assert_node1_marked(log_dir: Path) -> None:
    name, gpus, at = (log_dir / "joined" / "1").read_text().split()
    assert (name, gpus) == ("node1", "8") and float(at) > 0
    assert not (log_dir / "joined" / ".1").exists()


def _node_functions_text() -> str:
    script = slurm.plan(spec(slurm={"nodes": 2, "gpus_per_node": 8})).script
    return script[: script.rindex("\ncase ${1:-} in")]


def test_a_worker_whose_raylet_dies_before_it_joins_retries_at_once(tmp_path: Path) -> None:
    """Ray's raylet aborts when its agents are slow to come up, and `ray start` would wait 30 s
    more for it: the worker sees the raylet gone, stops that `ray start`, says so, and joins on
    a later attempt."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    # A process whose name is `raylet` (a script's name is its process name), gone in 3 s.
    (bin_dir / "raylet").write_text("#!/bin/bash\nsleep 3\n")
    (bin_dir / "ray").write_text(
        "#!/bin/bash\n"
        "[[ $1 == start ]] || exit 0\n"
        'n=$(($(cat "$STATE/attempts" 2>/dev/null || echo 0) + 1)); echo $n >"$STATE/attempts"\n'
        # The first attempt's raylet dies and `ray start` hangs on; the second joins.
        'if ((n == 1)); then "$BIN/raylet" & sleep 60; exit 1; fi\n'
        'echo "Ray runtime started."; sleep 60\n'
    )
    for tool in ("raylet", "ray"):
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "ray-worker-1.log"
    log.touch()
    # The head's GCS port answers (workers start Ray once it does): a socket of this test's.
    gcs = socket.socket()
    gcs.bind(("127.0.0.1", 0))
    gcs.listen()
    probe = (
        "NRL_NODE_LOG=$1 NRL_NODE_INDEX=1 NRL_NODE_NAME=node1 NRL_NODE_GPUS=8 NRL_NODE_CPUS=4\n"
        f"NRL_RESOURCES={{}} NRL_HEAD_IP=127.0.0.1 NRL_GCS_PORT={gcs.getsockname()[1]}\n"
        "NRL_RAY_AUTH=token\n"
        "NRL_HEAD_START_TIMEOUT=60 NRL_JOIN_TIMEOUT=60\n"
        # The job ends once this node has joined: the worker then stops Ray and exits 0.
        "(until [[ -e $NRL_LOG_DIR/joined/1 ]]; do sleep 0.1; done\n"
        ' echo done >"$NRL_LOG_DIR/ENDED") &\n'
        'run_worker >>"$NRL_NODE_LOG" 2>&1\n'
    )
    with gcs:
        done = _node_functions(
            probe,
            tmp_path,
            str(log),
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            BIN=str(bin_dir),
            STATE=str(state),
        )
    assert done.returncode == 0, log.read_text() + done.stderr
    text = log.read_text()
    assert "the raylet exited before this node joined" in text, text
    assert "(attempt 2)" in text and "(attempt 3)" not in text, text
    assert (state / "attempts").read_text() == "2\n"
    _assert_node1_marked(tmp_path)


def test_the_batch_step_sees_a_step_that_ended_before_it_began_to_wait(tmp_path: Path) -> None:
    """bash's `wait -n` does not return for a child that had already ended: a step srun refused
    at once would go unseen until another ended."""
    probe = (
        "(exit 3) & early=$!\n"
        "sleep 30 & late=$!\n"
        "sleep 0.5\n"
        'rc=0; first_to_end "$late" "$early" || rc=$?\n'
        'kill "$late"; echo "rc=$rc"\n'
    )
    started = time.monotonic()
    done = _node_functions(probe, tmp_path)
    assert done.stdout == "rc=3\n", done.stderr
    assert time.monotonic() - started < 10


def test_nap_waits_its_time_and_falls_back_to_sleep_without_its_pipe(tmp_path: Path) -> None:
    """The job script's 0.1 s waits: a read that times out (no process), and, where that pipe
    cannot be had, `sleep`: a nap never returns at once (a wait loop would spin)."""
    probe = (
        "set -euo pipefail\n"
        "start=$EPOCHREALTIME; nap 0.3; printf '%s\\n' \"$start $EPOCHREALTIME\"\n"
        "NRL_NAP_FD=-; start=$EPOCHREALTIME; nap 0.3; printf '%s\\n' \"$start $EPOCHREALTIME\"\n"
    )
    done = _node_functions(probe, tmp_path)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        start, end = map(float, line.split())
        assert 0.28 <= end - start < 5, line
    assert len(done.stdout.splitlines()) == 2


# ---- The node's environment before Ray starts, as ray.sub leaves it ----

STEP_ENV = {
    "PMI_RANK": "0",
    "PMI_SIZE": "2",
    "PMIX_RANK": "0",
    "PMIX_NAMESPACE": "slurm.pmix.42.0",
    "MPI_LOCALRANKID": "0",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_MCA_plm": "slurm",
    "SLURM_JOB_ID": "42",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "0",
    # Not the step's MPI or Slurm variables: kept.
    "SLURMD_NODENAME": "node0",
    "SLURMX": "kept",
    "MPICH_X": "kept",
    "XMPI_Y": "kept",
    "MY_SLURM_JOB": "kept",
}


def _clean_step_env(tmp_path: Path, limits: str) -> tuple[set[str], str, str]:
    """What a process clean_step_env's node starts sees: the names in its environment that the
    test set, its soft open-files limit; and what the step logged. `limits` runs first (ulimit)."""
    probe = (
        f"{limits}\n"
        "clean_step_env\n"
        # A child's view: what Ray's daemons, and the driver and workers, inherit.
        'echo "names: $(env | cut -d= -f1 | sort | tr "\\n" " ")"\n'
        'echo "soft: $(bash -c "ulimit -Sn")"\n'
    )
    done = _node_functions(probe, tmp_path, **STEP_ENV)
    if done.returncode == 77:
        pytest.skip(f"the open-files limit cannot be set so here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    names = next(x for x in lines if x.startswith("names: ")).removeprefix("names: ").split()
    soft = next(x for x in lines if x.startswith("soft: ")).removeprefix("soft: ")
    logged = "\n".join(x for x in lines if not x.startswith(("names: ", "soft: ")))
    return set(names) & set(STEP_ENV), soft, logged


def test_clean_step_env_clears_the_step_s_mpi_and_slurm_variables(tmp_path: Path) -> None:
    names, _, _ = _clean_step_env(tmp_path, "")
    assert names == {"SLURMD_NODENAME", "SLURMX", "MPICH_X", "XMPI_Y", "MY_SLURM_JOB"}


def test_clean_step_env_raises_the_open_files_limit_to_65535(tmp_path: Path) -> None:
    # The hard limit must allow it: raised first where this user may (root with
    # CAP_SYS_RESOURCE), else it must already be 65535 or more.
    limits = (
        'ulimit -Hn 70000 2>/dev/null || (("$(ulimit -Hn)" >= 65535)) ||\n'
        '  { echo "its hard limit is $(ulimit -Hn); it may not be raised" >&2; exit 77; }\n'
    )
    _, soft, logged = _clean_step_env(tmp_path, limits + "ulimit -Sn 1024")
    assert soft == "65535"
    assert logged == ""


def test_clean_step_env_raises_it_to_a_lower_hard_limit_and_says_so(tmp_path: Path) -> None:
    _, soft, logged = _clean_step_env(tmp_path, "ulimit -Sn 1024 && ulimit -Hn 4096 || exit 77")
    assert soft == "4096"  # as far as the hard limit goes
    (line,) = logged.splitlines()
    assert line.startswith("[nrl-launch ")
    assert line.endswith(
        "] warning: the open-files limit is 4096, below 65535 (its hard limit is 4096); Ray may "
        "run out of file descriptors"
    )


@pytest.mark.parametrize("plan", [slurm.plan, slurm.plan_plain], ids=["ray", "plain"])
@pytest.mark.parametrize(
    ("values", "expected"),
    [({}, "unset"), ({"env": {"CI": "1"}}, "1"), ({"secrets": {"CI": "required"}}, "true")],
    ids=["unset", "env", "secret"],
)
def test_job_env_drops_a_login_shell_s_ci_unless_the_job_sets_it(
    plan: Callable[[LaunchSpec], Request], values: dict[str, object], expected: str
) -> None:
    """vLLM takes a CI in its environment for its own CI (NeMo RL #3293); a job that names CI
    as a secret gets the submitting shell's (test_fuzz found it dropped)."""
    script = plan(spec(**values)).script
    probe = 'export CI=true; job_env; printf "%s\\0" "${CI-unset}" "$(printenv CI || echo unset)"'
    assert bash_values(script, probe) == [expected, expected]


# ---- Compile caches: on the node's own disk, in a dir of the user's own ----


def _in_private_tmp(probe: str) -> subprocess.CompletedProcess[str]:
    """`probe` after the node functions, in a real bash with a /tmp of its own (a tmpfs in a
    mount namespace of its own): compile_caches' path, /tmp/nrl-compile-cache-$(id -u), is made
    there and nowhere else, and this machine's own (a job's, or another test's) is never
    touched."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed (util-linux)")
    as_root = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    private = "mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 77\n"
    done = subprocess.run(
        [unshare, *as_root, "--mount", "--propagation", "private", "bash", "-c", private + probe],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": "/logs/42-logs"},
        timeout=60,
        check=False,
    )
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip(f"no /tmp of a test's own here (a mount namespace): {done.stderr.strip()}")
    return done


CACHE_VARS = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
SHOW_CACHES = "".join(f'printf "%s\\n" "${{{name}-unset}}"\n' for name in CACHE_VARS)


def test_compile_caches_go_to_a_private_dir_on_the_node() -> None:
    probe = (
        _node_functions_text()
        + "\ncompile_caches\n"
        + SHOW_CACHES
        + 'stat -c "%a %u" "/tmp/nrl-compile-cache-$(id -u)"\n'
        + "id -u\n"
        # A child (vLLM, torch) inherits them.
        + 'bash -c "printenv VLLM_CACHE_ROOT"\n'
    )
    done = _in_private_tmp(probe)
    assert done.returncode == 0, done.stderr
    *caches, mode, uid, child = done.stdout.splitlines()
    base = f"/tmp/nrl-compile-cache-{uid}"
    assert caches == [f"{base}/vllm", f"{base}/inductor", f"{base}/triton"]
    assert mode == f"700 {uid}"
    assert child == f"{base}/vllm"


def test_compile_caches_keep_what_the_shell_or_the_job_set() -> None:
    probe = (
        _node_functions_text()
        + "\nexport VLLM_CACHE_ROOT=/lustre/me/vllm TRITON_CACHE_DIR=/lustre/me/triton\n"
        + "compile_caches\n"
        + SHOW_CACHES
        + "id -u\n"
    )
    done = _in_private_tmp(probe)
    assert done.returncode == 0, done.stderr
    vllm, inductor, triton, uid = done.stdout.splitlines()
    assert (vllm, triton) == ("/lustre/me/vllm", "/lustre/me/triton")
    assert inductor == f"/tmp/nrl-compile-cache-{uid}/inductor"


@pytest.mark.parametrize("how", ["another user's", "a symlink"])
def test_compile_caches_are_left_alone_in_a_dir_not_the_user_s_own(how: str) -> None:
    """Another user made the path first (a shared node's /tmp): their compiled code is not
    taken, and nothing is written there."""
    if how == "another user's" and os.geteuid() != 0:
        pytest.skip("only root can give a dir to another user")
    make = (
        f'mkdir -m 777 "$dir" && chown {OTHER_UID} "$dir"'
        if how == "another user's"
        else 'mkdir -m 700 /tmp/elsewhere && ln -s /tmp/elsewhere "$dir"'
    )
    probe = (
        _node_functions_text()
        + "\nid -u\ndir=/tmp/nrl-compile-cache-$(id -u)\n"
        + make
        + "\ncompile_caches\n"
        + SHOW_CACHES
        + 'ls -A "$dir/"\n'
    )
    done = _in_private_tmp(probe)
    assert done.returncode == 0, done.stderr
    uid, warning, *caches = done.stdout.splitlines()
    assert caches == ["unset"] * 3  # and nothing listed in the dir: nothing was written there
    assert warning.startswith("[nrl-launch ")
    assert warning.endswith(
        f"] warning: /tmp/nrl-compile-cache-{uid} is not yours alone: the compile caches stay "
        "where they default"
    )
