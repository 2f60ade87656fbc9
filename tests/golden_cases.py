"""The golden renders' catalogue: every example job and command, the way test_golden renders
each, and what the pyxis flags of a rendered script are. Shared by the tests that use them."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli

GOLDEN = Path(__file__).parent / "golden"
# The seed scenarios name their NeMo RL configs as users do, from a NeMo RL checkout: they are
# rendered from one shaped like it.
NEMO_CHECKOUT = Path(__file__).parent / "data" / "nemo_rl"
# Scenarios that are not a Ray job: the command that submits them, before their files.
SCENARIO_COMMANDS = {
    # The output in /tmp, which every machine has (its dir must exist), --force: it may exist.
    "container-pull": [
        *("pull", "nvcr.io/nvidia/nemo-rl:v0.6.0.nemotron_3_nano", "--dry-run", "--force"),
        *("-o", "/tmp/nemo-rl.v0.4.0.nemotron_3_nano.sqsh"),
    ],
    "data-prep": ["run", "--dry-run"],
}
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
        *("--nodes", "2", "--container", "nvcr.io/nvidia/nemo-rl:v0.6.0"),
        *("--mount", f"{_ALICE}:{_ALICE}", "--log-dir", f"{_ALICE}/nrl-logs"),
        *("--", "nvidia-smi", "-L"),
    ],
    "pull-nemo-rl": [
        "pull",
        "nvcr.io/nvidia/nemo-rl:v0.6.0.nemotron_3_nano",
        *("-o", "/tmp/nemo-rl+v0.6.0.nemotron_3_nano.sqsh", "--force"),
        *("--account", "my_account", "--partition", "batch"),
        *("--set", f"caches.enroot={_ALICE}/.cache/enroot", "--log-dir", f"{_ALICE}/nrl-logs"),
    ],
}


@dataclass(frozen=True)
class Case:
    name: str  # the golden file is golden/<name>.sbatch
    args: tuple[str, ...]  # nrl-launch's argv
    cwd: Path | None = None


def _cases() -> list[Case]:
    cases = [Case(job.stem, ("render", "-f", str(job))) for job in sorted(EXAMPLES.glob("*.yaml"))]
    for scenario in sorted((EXAMPLES / "scenarios").iterdir()):
        files = ("--profile", str(scenario / "profile.yaml"), "-f", str(scenario / "job.yaml"))
        command = SCENARIO_COMMANDS.get(scenario.name, ["render"])
        cases.append(Case(f"scenarios/{scenario.name}", (*command, *files), NEMO_CHECKOUT))
    # --dry-run first: after `--` it would be the command's, and the job would be submitted.
    cases += [Case(name, (argv[0], "--dry-run", *argv[1:])) for name, argv in COMMANDS.items()]
    return cases


CASES = _cases()


def golden_path(case: Case) -> Path:
    return GOLDEN / f"{case.name}.sbatch"


def render(cli: Cli, case: Case, monkeypatch: pytest.MonkeyPatch) -> str:
    def refuse(argv: list[str], **_: object) -> None:
        raise AssertionError(f"a dry run ran {argv}")

    monkeypatch.setattr("nrl_launch.runner.run", refuse)
    if case.cwd is not None:
        monkeypatch.chdir(case.cwd)
    result = cli(*case.args)
    assert result.code == 0, result.err
    # The examples are what users copy: none of them may draw a warning.
    assert "warning" not in result.err, result.err
    return result.out


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


def container_args(script_path: Path, *call: str) -> dict[str, str]:
    """What the script's own set_container_args, run in bash (the script sourced: its values
    and functions, set -u, and what its batch step or attach script sets) with `call`, gives
    srun."""
    script = (
        'source "$1"\n'
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
