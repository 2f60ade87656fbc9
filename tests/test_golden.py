"""Golden renders of every example job: the script users get, pinned byte for byte.

To accept a deliberate change, rerun with NRL_LAUNCH_ACCEPT_GOLDEN=1 and review the diff:

    NRL_LAUNCH_ACCEPT_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli, shellcheck

GOLDEN = Path(__file__).parent / "golden"
JOBS = sorted(EXAMPLES.glob("*.yaml"))
_ALICE = "/lustre/fs1/users/alice"
# Seed 000's data preparation job as one command, run in the data dir. (No `$` in it: a value
# is single-quoted on purpose, and shellcheck would say a `$` in it does not expand.)
_PREPARE = (
    "set -e; uvx --from huggingface-hub hf download nvidia/Nemotron-3-Nano-RL-Training-Blend "
    "--repo-type dataset --local-dir .; "
    "python3 create_nanov3_jsonl.py --input train.jsonl --output train-full.jsonl; "
    "head -n -1000 train-full.jsonl >train-split.jsonl; "
    "tail -n 1000 train-full.jsonl >val-split.jsonl"
)
# The scripts `run` and `pull` submit (their --dry-run prints them), by golden name. pull's
# output is in /tmp, which every machine has (it must exist), with --force (it may exist).
COMMANDS: dict[str, list[str]] = {
    "run-prepare-data": [
        "run",
        *("--job-name", "prepare-data", "--account", "my_account", "--partition", "batch"),
        *("--time", "00:20:00", "--gpus-per-node", "0", "--set", "slurm.exclusive=false"),
        *("--secret", "HF_TOKEN", "--set", f"caches.hf_home={_ALICE}/.cache/huggingface"),
        *("--set", f"driver.workdir={_ALICE}/RL-nano-v3/data", "--log-dir", f"{_ALICE}/nrl-logs"),
        *("--", "bash", "-c", _PREPARE),
    ],
    "run-2node-container": [
        "run",
        *("--nodes", "2", "--container", "nvcr.io/nvidia/nemo-rl:v0.4.0"),
        *("--mount", f"{_ALICE}:{_ALICE}", "--log-dir", f"{_ALICE}/nrl-logs"),
        *("--", "nvidia-smi", "-L"),
    ],
    "pull-nemo-rl": [
        "pull",
        "nvcr.io/nvidia/nemo-rl:v0.4.0.nemotron_3_nano",
        *("-o", "/tmp/nemo-rl+v0.4.0.nemotron_3_nano.sqsh", "--force"),
        *("--account", "my_account", "--partition", "batch"),
        *("--set", f"caches.enroot={_ALICE}/.cache/enroot", "--log-dir", f"{_ALICE}/nrl-logs"),
    ],
}


def golden_path(job: Path) -> Path:
    return GOLDEN / f"{job.stem}.sbatch"


def test_every_example_has_a_golden() -> None:
    assert len(JOBS) >= 4
    known = {golden_path(j).name for j in JOBS} | {f"{name}.sbatch" for name in COMMANDS}
    stale = {p.name for p in GOLDEN.glob("*.sbatch")} - known
    assert not stale, f"golden files with no example: {sorted(stale)}"


def check_golden(golden: Path, rendered: str, what: str) -> None:
    if os.environ.get("NRL_LAUNCH_ACCEPT_GOLDEN"):
        golden.write_text(rendered, encoding="utf-8")
    expected = golden.read_text(encoding="utf-8") if golden.exists() else ""
    if rendered != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                rendered.splitlines(keepends=True),
                str(golden),
                "rendered",
            )
        )
        pytest.fail(
            f"{what} renders differently from {golden.name}:\n{diff}\n"
            "If the change is intended: NRL_LAUNCH_ACCEPT_GOLDEN=1 python -m pytest "
            "tests/test_golden.py"
        )


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_render_matches_golden(cli: Cli, job: Path) -> None:
    result = cli("render", "-f", str(job))
    assert result.code == 0, result.err
    check_golden(golden_path(job), result.out, job.name)


@pytest.mark.parametrize("name", COMMANDS)
def test_command_dry_run_matches_golden(
    cli: Cli, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(argv: list[str], **_: object) -> None:
        raise AssertionError(f"a dry run ran {argv}")

    monkeypatch.setattr("nrl_launch.runner.run", refuse)
    # --dry-run first: after `--` it would be the command's, and the job would be submitted.
    command, *args = COMMANDS[name]
    result = cli(command, "--dry-run", *args)
    assert result.code == 0, result.err
    check_golden(GOLDEN / f"{name}.sbatch", result.out, f"nrl-launch {COMMANDS[name][0]}")


@pytest.mark.parametrize("name", COMMANDS)
def test_command_golden_is_valid_bash_and_shellcheck_clean(name: str) -> None:
    golden = GOLDEN / f"{name}.sbatch"
    syntax = subprocess.run(["bash", "-n", str(golden)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    checked = shellcheck(golden)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_golden_is_valid_bash(job: Path) -> None:
    result = subprocess.run(["bash", "-n", str(golden_path(job))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_golden_is_shellcheck_clean(job: Path) -> None:
    result = shellcheck(golden_path(job))
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_render_is_deterministic(cli: Cli, job: Path) -> None:
    first, second = cli("render", "-f", str(job)), cli("render", "-f", str(job))
    assert first.out == second.out


def test_header_names_version_and_submit_command(cli: Cli) -> None:
    from nrl_launch import __version__

    lines = cli("render", "-f", str(EXAMPLES / "grpo-2node.yaml")).out.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[1].startswith(f"# Rendered by nrl-launch {__version__}")
    assert lines[2].startswith("# Submit with: sbatch --parsable ")
    assert lines[2].endswith(" nrl-launch.sbatch")


def test_sbatch_flags_are_sorted_and_complete(cli: Cli) -> None:
    result = cli("render", "--json", "-f", str(EXAMPLES / "nemotron-3-nano-30b-32node.yaml"))
    import json

    argv = json.loads(result.out)["argv"]
    flags = argv[2:-1]
    assert argv[:2] == ["sbatch", "--parsable"]
    assert flags == sorted(flags)
    assert "--nodes=32" in flags
    assert "--gres=gpu:8" in flags
    assert "--account=my_account" in flags
    assert "--job-name=nemotron-nano-30b" in flags
    assert "--time=8:00:00" in flags
    assert "--exclusive" in flags
    assert "--export=ALL" in flags  # secrets travel by name in the exported environment


# Every flag pyxis adds to srun (`srun --help` with pyxis loaded; pyxis wiki, "Usage").
PYXIS_FLAGS = {
    "--container-image",
    "--container-mounts",
    "--container-workdir",
    "--container-name",
    "--container-save",
    "--container-mount-home",
    "--no-container-mount-home",
    "--container-remap-root",
    "--no-container-remap-root",
    "--container-entrypoint",
    "--no-container-entrypoint",
    "--container-env",
    "--container-writable",
    "--container-readonly",
}
PYXIS_JOBS = [j for j in JOBS if "--container-image=" in golden_path(j).read_text()]


def container_args(script_path: Path, *call: str) -> dict[str, str]:
    """What the script's own set_container_args, run in bash (set -u, with only what the job
    script or its attach script sets) with `call`, gives srun."""
    script = (
        'eval "$(sed -n "/^set_container_args() {/,/^}/p" "$1")"\n'
        "set -u; NRL_LOG_DIR=/shared/logs/77-logs NRL_SUBMIT_DIR=/submit\n"
        'set_container_args "${@:2}" && printf "%s\\n" "${NRL_CONTAINER_ARGS[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(script_path), *call],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(a.partition("=")[::2] for a in done.stdout.splitlines())


@pytest.mark.parametrize("job", PYXIS_JOBS, ids=lambda p: p.stem)
def test_golden_container_args_are_pyxis_flags(job: Path) -> None:
    """Run the golden's own set_container_args in bash: every argument it gives srun is a pyxis
    flag, the image and workdir are set, and every mount (the log dir included) is SRC:DST[:FLAGS]
    with absolute paths."""
    args = container_args(golden_path(job), "ray-head")
    assert set(args) <= PYXIS_FLAGS, set(args) - PYXIS_FLAGS
    assert args["--container-image"] and args["--container-workdir"].startswith("/")
    assert args["--container-name"] == "ray-head"
    mounts = args["--container-mounts"].split(",")
    assert "/shared/logs/77-logs:/shared/logs/77-logs" in mounts
    for mount in mounts:
        src, dst, *flags = mount.split(":")
        assert src.startswith("/") and dst.startswith("/") and len(flags) <= 1, mount


@pytest.mark.parametrize("job", PYXIS_JOBS, ids=lambda p: p.stem)
def test_golden_attach_reenters_the_named_container_without_an_image(job: Path) -> None:
    """Attach names the node's container and gives no image: pyxis enters the container the
    job's step made, importing (pulling) nothing."""
    args = container_args(golden_path(job), "ray-worker", "attach")
    assert set(args) <= PYXIS_FLAGS and "--container-image" not in args
    assert args["--container-name"] == "ray-worker"


def test_attach_without_a_container_workdir_runs_on_a_login_node(cli: Cli, tmp_path: Path) -> None:
    """No container.workdir: the workdir is the submit dir, which attach knows from its script
    (no SLURM_SUBMIT_DIR on a login node)."""
    script = tmp_path / "job.sbatch"
    image = "nvcr.io/nvidia/nemo-rl:v0.5.0"
    assert cli("render", "--interactive", "--container", image, "-o", str(script)).code == 0
    args = container_args(script, "ray-head", "attach")
    assert args["--container-workdir"] == "/submit" and "--container-image" not in args


def test_some_example_uses_pyxis() -> None:
    assert len(PYXIS_JOBS) >= 2


def test_local_render_is_valid_and_shellcheck_clean(cli: Cli, tmp_path: Path) -> None:
    """The local backend's script (run for real in test_local_backend.py) passes the same
    checks as the Slurm goldens."""
    script = tmp_path / "local.sh"
    result = cli("render", "--backend", "local", "-o", str(script), "--", "python", "x.py")
    assert result.code == 0, result.err
    assert result.out.strip() == f"bash {script} JOBID"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout
