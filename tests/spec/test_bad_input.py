"""The bad-input catalogue: every way a user can get a command wrong, and what they get back.

Each row of CASES is one mistake: the command line, the exit code docs/exit-codes.md gives it,
and the text each error line must hold (one line per problem, naming the key, flag or file).
Every case runs with fake Slurm commands alone on PATH (tests/fakes.py; sbatch would accept
and queue), and asserts, besides its own lines:

- stderr holds exactly those error lines (and nothing that is not nrl-launch's: no traceback);
- nothing is queued: sbatch is never called (the rows where sbatch itself fails say so);
- nothing is left behind: no job record, no script, no -o output, no log dir, no temp file:
  every file and directory under the test's scratch dir is the same before and after.

The dynamic cases (a log dir deleted under a running `logs -f`) follow the table.
After them, EXIT_2_CASES: the spec mistakes `render` refuses (exit 2, one line, no Slurm asked).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nrl_launch.errors import ExitCode
from nrl_launch.jobs import record
from tests.conftest import Cli
from tests.fakes import FakeSlurm, install

BAD_INPUT, SCHEDULER, NOT_FOUND = ExitCode.BAD_INPUT, ExitCode.SCHEDULER, ExitCode.NOT_FOUND
CMD = ["--", "python", "train.py"]
SUBMIT = ["submit", "--container-runtime", "none"]


@dataclass(frozen=True)
class Env:
    """What a case's setup may prepare: the scratch dir, the fakes, the environment."""

    tmp: Path
    fake: FakeSlurm
    monkeypatch: pytest.MonkeyPatch


Setup = Callable[[Env], None]


@dataclass(frozen=True)
class Case:
    id: str
    args: list[str]  # after `nrl-launch`; {tmp} is the scratch dir
    code: int
    says: list[str]  # what each error line holds, in order: one line per problem
    files: dict[str, str | bytes] = field(default_factory=dict)  # written under {tmp} first
    setup: Setup | None = None
    sbatch_runs: bool = False  # sbatch is called (and fails): the case is about its failure


# ---- setups ----


def fifo(name: str) -> Setup:
    def make(env: Env) -> None:
        os.mkfifo(env.tmp / name)

    return make


def env_var(name: str, value: str) -> Setup:
    def make(env: Env) -> None:
        env.monkeypatch.setenv(name, value.replace("{tmp}", str(env.tmp)))

    return make


def job_record(job_id: str = "77", kind: record.JobKind = "ray") -> Setup:
    """A submitted 2-node Slurm job with its log dir under {tmp}/logs (not started yet)."""

    def make(env: Env) -> None:
        (env.tmp / "logs").mkdir(exist_ok=True)
        record.save(
            record.JobRecord(
                job_id=job_id,
                backend="slurm",
                job_name="j",
                nodes=2,
                submitted_at=1.0,
                submit_dir=str(env.tmp),
                log_dir=str(env.tmp / "logs" / f"{job_id}-logs"),
                script_path=str(env.tmp / "job.sh"),
                argv=["sbatch", str(env.tmp / "job.sh")],
                spec={},
                kind=kind,
            ),
            env.tmp / "state",
        )

    return make


def corrupt_record(job_id: str, content: str) -> Setup:
    def make(env: Env) -> None:
        jobs = env.tmp / "state" / "jobs"
        jobs.mkdir(parents=True)
        (jobs / f"{job_id}.json").write_text(content)

    return make


def answer(name: str, stdout: str = "", stderr: str = "", code: int = 0) -> Setup:
    def make(env: Env) -> None:
        env.fake.answer(name, stdout, stderr, code)

    return make


def uninstall(name: str) -> Setup:
    def make(env: Env) -> None:
        env.fake.remove(name)

    return make


def both(*setups: Setup) -> Setup:
    def make(env: Env) -> None:
        for setup in setups:
            setup(env)

    return make


def extra_args(yaml_list: str) -> dict[str, str | bytes]:
    return {"extra.yaml": f"slurm:\n  extra_args: {yaml_list}\n"}


EXTRA = [*SUBMIT, "-f", "{tmp}/extra.yaml", *CMD]
GRPO = [*SUBMIT, "--config", "{tmp}/cfg.yaml", "grpo"]
CFG = {"cfg.yaml": "policy:\n  model_name: m\n"}
FAILED_SBATCH = (
    "sbatch: error: Batch job submission failed: Invalid account or account/partition "
    "combination specified"
)
NO_CONTROLLER = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"

CASES: list[Case] = [
    # ---- files: profile, job file, NeMo RL config ----
    Case(
        "profile-invalid-yaml",
        [*SUBMIT, "--profile", "{tmp}/p.yaml", *CMD],
        BAD_INPUT,
        ["profile {tmp}/p.yaml: invalid YAML at line 2, column 1: expected ',' or ']'"],
        {"p.yaml": "slurm: {nodes: [1\n"},
    ),
    Case(
        "job-invalid-yaml",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/j.yaml: invalid YAML at line 2, column 1: found character '\\t'"],
        {"j.yaml": "slurm:\n\tnodes: 2\n"},
    ),
    Case(
        "job-key-twice",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/j.yaml: invalid YAML at line 3, column 1: 'slurm' is given twice"],
        {"j.yaml": "slurm:\n  nodes: 2\nslurm:\n  time: 10\n"},
    ),
    Case(
        "job-not-a-mapping",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/j.yaml: must be a mapping of keys, got a list"],
        {"j.yaml": "- slurm\n"},
    ),
    Case(
        "job-missing",
        [*SUBMIT, "-f", "{tmp}/nope.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/nope.yaml: no such file"],
    ),
    Case(
        "profile-missing",
        [*SUBMIT, "--profile", "{tmp}/nope.yaml", *CMD],
        BAD_INPUT,
        ["--profile {tmp}/nope.yaml: no such file"],
    ),
    Case(
        "profile-env-missing",
        [*SUBMIT, *CMD],
        BAD_INPUT,
        ["NRL_LAUNCH_PROFILE={tmp}/gone.yaml: no such file"],
        setup=env_var("NRL_LAUNCH_PROFILE", "{tmp}/gone.yaml"),
    ),
    # Unreadable, even for root (for whom chmod 000 hides nothing): a directory, a FIFO (which
    # used to block for ever), bytes that are not UTF-8.
    Case(
        "job-is-a-directory",
        [*SUBMIT, "-f", "{tmp}", *CMD],
        BAD_INPUT,
        ["job file {tmp}: is a directory, not a YAML file"],
    ),
    Case(
        "profile-is-a-directory",
        [*SUBMIT, "--profile", "{tmp}", *CMD],
        BAD_INPUT,
        ["profile {tmp}: is a directory, not a YAML file"],
    ),
    Case(
        "job-is-a-fifo",
        [*SUBMIT, "-f", "{tmp}/fifo.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/fifo.yaml: cannot be read (not a regular file but a FIFO)"],
        setup=fifo("fifo.yaml"),
    ),
    Case(
        "job-not-utf8",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/j.yaml: is not UTF-8 text (byte 0xff at offset 8)"],
        {"j.yaml": b"slurm: {\xff}\n"},
    ),
    Case(
        "config-missing",
        [*SUBMIT, "--config", "{tmp}/nope.yaml", "grpo"],
        BAD_INPUT,
        ["--config {tmp}/nope.yaml: no such file"],
    ),
    Case(
        "config-invalid-yaml",
        GRPO,
        BAD_INPUT,
        ["--config {tmp}/cfg.yaml: invalid YAML"],
        {"cfg.yaml": "policy: [1\n"},
    ),
    Case(
        "config-is-a-fifo",
        GRPO,
        BAD_INPUT,
        ["--config {tmp}/cfg.yaml: cannot be read (not a regular file but a FIFO)"],
        setup=fifo("cfg.yaml"),
    ),
    Case(
        "config-defaults-loop",
        GRPO,
        BAD_INPUT,
        ["{tmp}/cfg.yaml (in the defaults of {tmp}/base.yaml): defaults form a loop"],
        {"cfg.yaml": "defaults: base.yaml\n", "base.yaml": "defaults: cfg.yaml\n"},
    ),
    # ---- keys and types ----
    Case(
        "job-unknown-key",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["slurm.node: unknown key (from job file {tmp}/j.yaml); did you mean 'nodes'?"],
        {"j.yaml": "slurm:\n  node: 2\n"},
    ),
    # A key of one section written at another level: the hint is its full path.
    Case(
        "job-key-at-the-top",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["nodes: unknown key (from job file {tmp}/j.yaml); did you mean 'slurm.nodes'?"],
        {"j.yaml": "nodes: 2\n"},
    ),
    Case(
        "job-key-in-another-section",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        [
            "slurm.image: unknown key (from job file {tmp}/j.yaml); "
            "did you mean 'container.image' or 'sandbox.image'?"
        ],
        {"j.yaml": "slurm:\n  image: nvcr.io/nvidia/nemo-rl:v0.6.0\n"},
    ),
    Case(
        "job-misspelt-key-at-the-top",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        [
            "gpu_per_node: unknown key (from job file {tmp}/j.yaml); "
            "did you mean 'slurm.gpus_per_node'?"
        ],
        {"j.yaml": "gpu_per_node: 4\n"},
    ),
    Case(
        "profile-unknown-section",
        [*SUBMIT, "--profile", "{tmp}/p.yaml", *CMD],
        BAD_INPUT,
        ["slrum: unknown key (from profile {tmp}/p.yaml); did you mean 'slurm'?"],
        {"p.yaml": "slrum:\n  account: a\n"},
    ),
    Case(
        "set-unknown-key",
        [*SUBMIT, "--set", "ray.timeouts.join=60", *CMD],
        BAD_INPUT,
        ["ray.timeouts.join: unknown key (from --set ray.timeouts.join); did you mean 'join_s'?"],
    ),
    Case(
        "job-wrong-type",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["slurm.nodes: input should be a valid integer"],
        {"j.yaml": "slurm:\n  nodes: many\n"},
    ),
    Case(
        "env-not-a-mapping",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["env: must be a mapping of keys (KEY: VALUE) (from job file {tmp}/j.yaml)"],
        {"j.yaml": "env: [A=1]\n"},
    ),
    Case(
        "bool-not-a-bool",
        [*SUBMIT, "--set", "slurm.exclusive=maybe", *CMD],
        BAD_INPUT,
        ["slurm.exclusive: input should be a valid boolean"],
    ),
    Case(
        "flag-not-an-int",
        [*SUBMIT, "--nodes", "many", *CMD],
        BAD_INPUT,
        ["Invalid value for '-N' / '--nodes': Input should be a valid integer"],
    ),
    Case(
        "nodes-zero",
        [*SUBMIT, "--nodes", "0", *CMD],
        BAD_INPUT,
        ["slurm.nodes: input should be greater than or equal to 1 (got 0, from --nodes)"],
    ),
    Case(
        "nodes-negative",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["slurm.nodes: input should be greater than or equal to 1 (got -2, from job file"],
        {"j.yaml": "slurm:\n  nodes: -2\n"},
    ),
    Case(
        "two-problems-two-lines",
        [*SUBMIT, "--nodes", "0", "--gpus-per-node", "-1", *CMD],
        BAD_INPUT,
        ["slurm.nodes: input should be", "slurm.gpus_per_node: input should be"],
    ),
    # ---- Ray ports ----
    Case(
        "ports-collide",
        [*SUBMIT, "--set", "ray.ports.dashboard=1200", *CMD],
        BAD_INPUT,
        ["gcs and dashboard are both 1200; every Ray port must differ"],
    ),
    Case(
        "port-in-worker-range",
        [*SUBMIT, "--set", "ray.ports.gcs=2500", *CMD],
        BAD_INPUT,
        ["gcs=2500 lies inside the worker port range 2000-2999"],
    ),
    Case(
        "worker-range-too-narrow",
        [*SUBMIT, "--set", "ray.ports.worker_max=2050", *CMD],
        BAD_INPUT,
        ["ray.ports.worker_min..worker_max: 2000-2050 holds 51 ports; need at least 128"],
    ),
    Case(
        "port-out-of-range",
        [*SUBMIT, "--set", "ray.ports.dashboard=70000", *CMD],
        BAD_INPUT,
        ["ray.ports.dashboard: input should be less than or equal to 65535"],
    ),
    # ---- time, mounts, env ----
    Case(
        "time-malformed",
        [*SUBMIT, "--time", "an hour", *CMD],
        BAD_INPUT,
        [
            "slurm.time: must be a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
            "D-HH:MM:SS"
        ],
    ),
    Case(
        "time-seconds-61",
        [*SUBMIT, "--time", "1:00:61", *CMD],
        BAD_INPUT,
        ["slurm.time: minutes and seconds must be < 60"],
    ),
    Case(
        "mount-relative",
        [*SUBMIT, "--mount", "data:/data", *CMD],
        BAD_INPUT,
        ["container.mounts: source 'data' must be an absolute path"],
    ),
    Case(
        "mount-malformed",
        [*SUBMIT, "--mount", "/a:/b:ro:x", *CMD],
        BAD_INPUT,
        ["container.mounts: '/a:/b:ro:x' is not SRC:DST[:FLAGS]"],
    ),
    Case(
        "mount-bad-flags",
        [*SUBMIT, "--mount", "/a:/b:read-only", *CMD],
        BAD_INPUT,
        ["container.mounts: flags 'read-only' must be pyxis mount flags"],
    ),
    Case(
        "env-invalid-name",
        [*SUBMIT, "--env", "1BAD=x", *CMD],
        BAD_INPUT,
        ["env.1BAD: '1BAD' is not an environment variable name"],
    ),
    Case(
        "env-reserved-slurm",
        [*SUBMIT, "--env", "SLURM_JOB_ID=1", *CMD],
        BAD_INPUT,
        ["env.SLURM_JOB_ID: 'SLURM_JOB_ID' cannot be set: SLURM_JOB_ID is set by Slurm"],
    ),
    Case(
        "env-reserved-script",
        [*SUBMIT, "--set", "env.NRL_LOG_DIR=/x", *CMD],
        BAD_INPUT,
        ["env.NRL_LOG_DIR: 'NRL_LOG_DIR' cannot be set: the NRL_ prefix belongs to the job script"],
    ),
    Case(
        "env-without-value",
        [*SUBMIT, "--env", "NOVALUE", *CMD],
        BAD_INPUT,
        ["--env 'NOVALUE': expected NAME=VALUE"],
    ),
    # ---- recipes, overrides, chains, the command line ----
    Case(
        "recipe-unknown",
        [*SUBMIT, "--config", "{tmp}/cfg.yaml", "grop"],
        BAD_INPUT,
        ["nemo_rl: recipe 'grop' is not known; accepted: grpo, sft, dpo"],
        CFG,
    ),
    Case(
        "timer-class-not-module-colon-class",
        [*SUBMIT, "--set", "nemo_rl.timer_class=nemo_rl.utils.timer.TimeoutChecker", *CMD],
        BAD_INPUT,
        [
            "nemo_rl.timer_class: 'nemo_rl.utils.timer.TimeoutChecker' is not module:Class, "
            "e.g. nemo_rl.utils.timer:TimeoutChecker"
        ],
    ),
    Case(
        "recipe-without-config",
        [*SUBMIT, "grpo"],
        BAD_INPUT,
        ["RECIPE grpo: give the NeMo RL config with --config FILE"],
    ),
    Case(
        "override-without-value",
        [*GRPO, "policy.model_name"],
        BAD_INPUT,
        ["override 'policy.model_name': no value; write policy.model_name=VALUE"],
        CFG,
    ),
    Case(
        "override-unknown-key",
        [*GRPO, "policy.modle_name=x"],
        BAD_INPUT,
        ["override 'policy.modle_name=x': "],
        CFG,
    ),
    Case("chain-zero", [*SUBMIT, "--chain", "0", *CMD], BAD_INPUT, ["--chain 0: expected"]),
    Case(
        "chain-local",
        ["submit", "--backend", "local", "--chain", "2", *CMD],
        BAD_INPUT,
        ["--chain: the local backend has no scheduler to chain jobs on"],
    ),
    Case(
        "retries-negative",
        [*SUBMIT, "--retries", "-1", *CMD],
        BAD_INPUT,
        ["slurm.retries"],
    ),
    Case(
        "retries-local",
        ["submit", "--backend", "local", "--retries", "1", *CMD],
        BAD_INPUT,
        ["slurm.retries: backend local cannot retry a job"],
    ),
    Case(
        "retries-with-chain",
        [*SUBMIT, "--retries", "1", "--chain", "2", *CMD],
        BAD_INPUT,
        ["--retries with --chain: "],
    ),
    Case(
        "set-without-value",
        [*SUBMIT, "--set", "slurm.nodes", *CMD],
        BAD_INPUT,
        ["--set 'slurm.nodes': expected KEY.PATH=VALUE"],
    ),
    Case(
        "unknown-flag",
        [*SUBMIT, "--nodez", "2", *CMD],
        BAD_INPUT,
        ["No such option: --nodez (Possible options: --nodes)"],
    ),
    Case(
        "interactive-and-driver",
        [*SUBMIT, "--interactive", *CMD],
        BAD_INPUT,
        ["--interactive and a driver command after -- cannot be combined"],
    ),
    Case(
        "no-driver",
        SUBMIT,
        BAD_INPUT,
        ["driver.command is not set: give the driver after `--`"],
    ),
    Case(
        "log-dir-under-a-file",
        [*SUBMIT, "--log-dir", "{tmp}/taken/logs", *CMD],
        BAD_INPUT,
        ["cannot create {tmp}/taken/logs: Not a directory"],
        {"taken": "a file\n"},
    ),
    Case(
        "render-output-dir-missing",
        ["render", "--interactive", "-o", "{tmp}/no/job.sbatch"],
        BAD_INPUT,
        ["{tmp}/no/job.sbatch: directory {tmp}/no does not exist"],
    ),
    # ---- slurm.extra_args: what nrl-launch owns, in sbatch's spellings ----
    Case(
        "extra-nodes",
        EXTRA,
        BAD_INPUT,
        [
            "slurm.extra_args: '--nodes=4' is sbatch's --nodes, which nrl-launch owns: "
            "use slurm.nodes / --nodes (from job file {tmp}/extra.yaml)"
        ],
        extra_args("[--nodes=4]"),
    ),
    Case(
        "extra-nodes-bundled",
        EXTRA,
        BAD_INPUT,
        ["slurm.extra_args: '-vN4' is sbatch's --nodes, which nrl-launch owns"],
        extra_args("[-vN4]"),
    ),
    Case(
        "extra-nodes-ambiguous-prefix",
        EXTRA,
        BAD_INPUT,
        ["slurm.extra_args: '--nod=4' abbreviates several sbatch options"],
        extra_args("[--nod=4]"),
    ),
    Case(
        "extra-job-name-prefix",
        EXTRA,
        BAD_INPUT,
        ["'--job x' is sbatch's --job-name, which nrl-launch owns: use slurm.job_name"],
        extra_args("[--job, x]"),
    ),
    Case(
        "extra-export",
        EXTRA,
        BAD_INPUT,
        ["'--export=NONE' is sbatch's --export, which nrl-launch owns: secrets travel"],
        extra_args("[--export=NONE]"),
    ),
    Case(
        "extra-chdir",
        EXTRA,
        BAD_INPUT,
        ["'-D /tmp' is sbatch's --chdir, which nrl-launch owns"],
        extra_args("[-D, /tmp]"),
    ),
    Case(
        "extra-gpus",
        EXTRA,
        BAD_INPUT,
        ["'--gres=gpu:4' is sbatch's --gres, which nrl-launch owns: use slurm.gpus_per_node"],
        extra_args("['--gres=gpu:4']"),
    ),
    Case(
        "extra-signal-and-output",
        EXTRA,
        BAD_INPUT,
        ["'--signal=B:USR1@60' is sbatch's --signal", "'-o /tmp/out' is sbatch's --output"],
        extra_args("['--signal=B:USR1@60', --constraint=h100, -o, /tmp/out]"),
    ),
    Case(
        "extra-bare-word",
        EXTRA,
        BAD_INPUT,
        ["'evil.sh' is not an option: sbatch would run it as the job script"],
        extra_args("[--exclusive, evil.sh]"),
    ),
    Case(
        "extra-newline",
        EXTRA,
        BAD_INPUT,
        ["slurm.extra_args: must be a single line"],
        extra_args('["--comment=a\\nb"]'),
    ),
    Case(
        "extra-nul",
        EXTRA,
        BAD_INPUT,
        ["slurm.extra_args: must not contain a NUL byte"],
        extra_args('["--comment=a\\0b"]'),
    ),
    Case(
        "extra-arg-without-its-value",
        [*SUBMIT, "--set", "slurm.extra_args=[--mem]", *CMD],
        BAD_INPUT,
        [
            "slurm.extra_args: '--mem' needs a value (sbatch would take the job script's path "
            "for it): give it in the same word, as --mem=VALUE (from --set slurm.extra_args)"
        ],
    ),
    # ---- Slurm failing ----
    Case(
        "sbatch-fails",
        [*SUBMIT, "--log-dir", "{tmp}/new/logs", *CMD],
        SCHEDULER,
        [f"sbatch failed (exit 1): {FAILED_SBATCH}"],
        setup=answer("sbatch", stderr=FAILED_SBATCH + "\n", code=1),
        sbatch_runs=True,
    ),
    Case(
        "sbatch-prints-no-id",
        [*SUBMIT, *CMD],
        SCHEDULER,
        ["sbatch printed no job id (stdout: 'Submitted batch job')"],
        setup=answer("sbatch", stdout="Submitted batch job\n"),
        sbatch_runs=True,
    ),
    Case(
        "sbatch-missing",
        [*SUBMIT, *CMD],
        SCHEDULER,
        ["sbatch: command not found (is Slurm installed on this machine?)"],
        setup=uninstall("sbatch"),
    ),
    Case(
        "squeue-fails",
        ["status", "77"],
        SCHEDULER,
        [f"squeue failed (exit 1): {NO_CONTROLLER}"],
        setup=both(job_record(), answer("squeue", stderr=NO_CONTROLLER, code=1)),
    ),
    Case(
        "squeue-missing",
        ["status", "77"],
        SCHEDULER,
        ["squeue: command not found"],
        setup=both(job_record(), uninstall("squeue")),
    ),
    # ---- job ids and records ----
    Case("status-unknown-job", ["status", "99"], NOT_FOUND, ["no job '99' was submitted"]),
    Case("logs-unknown-job", ["logs", "99"], NOT_FOUND, ["no job '99' was submitted"]),
    Case("cancel-unknown-job", ["cancel", "99"], NOT_FOUND, ["no job '99' was submitted"]),
    Case("status-malformed-id", ["status", "12;rm"], BAD_INPUT, ["JOBID '12;rm': expected"]),
    Case(
        "status-corrupt-record",
        ["status", "66"],
        NOT_FOUND,
        ["job record {tmp}/state/jobs/66.json is unreadable: not a JSON job record"],
        setup=corrupt_record("66", "{half"),
    ),
    Case(
        "logs-not-started",
        ["logs", "77"],
        NOT_FOUND,
        ["{tmp}/logs/77-logs/ray-driver.log does not exist yet: has job 77 started?"],
        setup=job_record(),
    ),
    Case(
        "logs-node-out-of-range",
        ["logs", "77", "--node", "5"],
        BAD_INPUT,
        ["--node '5': expected driver, head, or a node index 0..1"],
        setup=job_record(),
    ),
    Case(
        "attach-plain-job",
        ["attach", "77"],
        BAD_INPUT,
        ["job 77 runs a plain command (nrl-launch run or pull), without Ray"],
        setup=job_record(kind="plain"),
    ),
    Case(
        "status-watch-json",
        ["status", "77", "--watch", "--json"],
        BAD_INPUT,
        ["--watch and --json cannot be combined"],
        setup=job_record(),
    ),
    Case(
        "secret-missing",
        [*SUBMIT, "--secret", "MY_API_KEY", *CMD],
        BAD_INPUT,
        ["secrets.MY_API_KEY: MY_API_KEY is not set in this shell and the job requires it"],
    ),
    Case(
        "secret-empty",
        [*SUBMIT, "--secret", "MY_API_KEY", *CMD],
        BAD_INPUT,
        ["secrets.MY_API_KEY: MY_API_KEY is not set in this shell and the job requires it"],
        setup=env_var("MY_API_KEY", ""),
    ),
    Case(
        "secret-bad-need",
        [*SUBMIT, "--set", "secrets.HF_TOKEN=maybe", *CMD],
        BAD_INPUT,
        ["secrets.HF_TOKEN: input should be 'required', 'optional' or 'off'"],
    ),
    Case(
        "ray-auth-bad-value",
        [*SUBMIT, "--set", "ray.auth=password", *CMD],
        BAD_INPUT,
        ["ray.auth: input should be 'token' or 'off'"],
    ),
    # ---- the driver without its `--`, an override without its `=` ----
    Case(
        "driver-without-dashes",
        [*SUBMIT, "uv", "run", "examples/run_grpo.py", "--config", "{tmp}/c.yaml", "a.b=1"],
        BAD_INPUT,
        [
            "'uv' is a program, not a RECIPE: nrl-launch's --config takes a RECIPE and "
            "overrides; a driver command takes its own --config, after the options and --: "
            "nrl-launch ... -- uv run examples/run_grpo.py --config {tmp}/c.yaml a.b=1"
        ],
    ),
    Case(  # the same words reach nrl-launch with the `--` given: the same advice holds
        "config-before-the-dashes",
        [*SUBMIT, "--config", "{tmp}/c.yaml", "--", "python", "x.py"],
        BAD_INPUT,
        [
            "'python' is a program, not a RECIPE: nrl-launch's --config takes a RECIPE and "
            "overrides; a driver command takes its own --config, after the options and --: "
            "nrl-launch ... -- python x.py --config {tmp}/c.yaml"
        ],
    ),
    Case(
        "driver-script-as-recipe",
        [*SUBMIT, "--config", "{tmp}/c.yaml", "examples/run_grpo.py"],
        BAD_INPUT,
        ["'examples/run_grpo.py' is a program, not a RECIPE"],
    ),
    Case(
        "a-second-config-as-recipe",
        [*SUBMIT, "--config", "{tmp}/c.yaml", "examples/configs/sft.yaml"],
        BAD_INPUT,
        [
            "'examples/configs/sft.yaml' is a config file, not a RECIPE: a job takes one config, "
            "with --config (NeMo RL layers configs through the defaults: key of the one you give)"
        ],
    ),
    Case(
        "override-without-equals",
        [*SUBMIT, "--config", "{tmp}/c.yaml", "cluster.num_nodes", "2"],
        BAD_INPUT,
        ["override 'cluster.num_nodes': no value; write cluster.num_nodes=VALUE"],
    ),
    Case(  # an option of the driver, the driver given without `--`: where `--` goes
        "driver-options-without-dashes",
        ["render", "-N", "2", "python", "-m", "torch.distributed.run", "train.py", "--lr", "3"],
        BAD_INPUT,
        [
            "No such option: -m; options of the driver (or command) go after `--`: nrl-launch "
            "render -N 2 -- python -m torch.distributed.run train.py --lr 3"
        ],
    ),
    Case(
        "command-options-without-dashes",
        ["run", "--dry-run", "ls", "-la"],
        BAD_INPUT,
        [
            "No such option: -l; options of the driver (or command) go after `--`: nrl-launch run "
            "--dry-run -- ls -la"
        ],
    ),
    # ---- YAML's booleans, numbers and depth; a file given as the other kind ----
    Case(
        "yaml-booleans-as-numbers",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        [
            f"{key}: must be a number, not a yes/no/on/off/true/false, which YAML reads as a "
            "boolean (got True, from job file {tmp}/j.yaml)"
            for key in ("slurm.nodes", "slurm.gpus_per_node", "ray.timeouts.join_s")
        ],
        {
            "j.yaml": "slurm:\n  nodes: yes\n  gpus_per_node: on\n"
            "ray:\n  timeouts:\n    join_s: true\n"
        },
    ),
    Case(
        "yaml-boolean-as-a-secret-s-need",
        [*SUBMIT, "--set", "secrets.HF_TOKEN=yes", *CMD],
        BAD_INPUT,
        [
            "secrets.HF_TOKEN: input should be 'required', 'optional' or 'off' (YAML reads "
            "yes/no/on/off/true/false as a boolean: quote the word) (got True, from --set "
            "secrets.HF_TOKEN)"
        ],
    ),
    Case(
        "yaml-nested-too-deeply",
        [*SUBMIT, "-f", "{tmp}/j.yaml", *CMD],
        BAD_INPUT,
        ["job file {tmp}/j.yaml: nested too deeply to be a job spec"],
        {"j.yaml": "[" * 5000},
    ),
    Case(
        "a-list-written-as-a-string",
        [*SUBMIT, "-f", "{tmp}/j.yaml"],
        BAD_INPUT,
        [
            "driver.command: must be a list, e.g. [a, b] (got 'uv run x.py', from job file "
            "{tmp}/j.yaml)"
        ],
        {"j.yaml": 'driver:\n  command: "uv run x.py"\n'},
    ),
    Case(
        "nemo-rl-config-as-a-job-file",
        [*SUBMIT, "-f", "{tmp}/c.yaml", *CMD],
        BAD_INPUT,
        [
            "job file {tmp}/c.yaml looks like a NeMo RL config (policy:, cluster:), not an "
            "nrl-launch job spec: give it with --config {tmp}/c.yaml"
        ],
        {"c.yaml": "policy:\n  model_name: x\ncluster:\n  num_nodes: 1\n"},
    ),
    Case(
        "job-file-as-the-nemo-rl-config",
        [*SUBMIT, "grpo", "--config", "{tmp}/j.yaml"],
        BAD_INPUT,
        [
            "--config {tmp}/j.yaml looks like an nrl-launch job file (slurm:, container:), not "
            "a NeMo RL config: give it with -f {tmp}/j.yaml"
        ],
        {"j.yaml": "slurm:\n  nodes: 2\ncontainer:\n  image: x\n"},
    ),
    Case(
        "override-with-a-malformed-interpolation",
        [*SUBMIT, "grpo", "--config", "{tmp}/c.yaml", "policy.model_name=${oops"],
        BAD_INPUT,
        [
            "override 'policy.model_name=${oops': its value cannot be read: no viable "
            "alternative at input '${oops'"
        ],
        {"c.yaml": "policy:\n  model_name: x\ncluster:\n  num_nodes: 1\n  gpus_per_node: 8\n"},
    ),
    # ---- Slurm's own keys ----
    Case(
        "gpus-per-node-beyond-a-node",
        [*SUBMIT, "--gpus-per-node", "99", *CMD],
        BAD_INPUT,
        [
            "slurm.gpus_per_node: 99 GPUs per node is more than the Ray worker ports 2000-2999 "
            "serve (62 at 16 ports each)"
        ],
    ),
    Case(
        "partition-with-a-space",
        [*SUBMIT, "-p", "batch debug", "--exclude", "node1 node2", *CMD],
        BAD_INPUT,
        [
            "slurm.partition: must have no spaces: Slurm reads a name, or a list of them joined "
            "by commas (a,b), as one word (got 'batch debug', from --partition)",
            "slurm.exclude: must have no spaces",
        ],
    ),
    Case(
        "requeue-not-a-bool",
        [*SUBMIT, "--set", "slurm.requeue=maybe", *CMD],
        BAD_INPUT,
        ["slurm.requeue: input should be a valid boolean"],
    ),
    Case(
        "constraint-twice",
        [*SUBMIT, "--set", "slurm.constraint=h100", "--set", "slurm.extra_args=[-C, a100]", *CMD],
        BAD_INPUT,
        ["slurm.extra_args: '-C a100' would replace slurm.constraint"],
    ),
    Case(
        "constraint-two-lines",
        [*SUBMIT, "-f", "{tmp}/job.yaml", *CMD],
        BAD_INPUT,
        ["slurm.constraint: must be a single line"],
        files={"job.yaml": 'slurm:\n  constraint: "h100\\nib"\n'},
    ),
]


def snapshot(root: Path) -> set[str]:
    """Every file and directory under `root`, but the fakes' own and the state dir's (empty)
    subdirectories, which may stay."""
    state = root / "state"
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.is_relative_to(root / "fake-bin")
        and p.name != "fake-slurm-calls"
        and not (p.is_dir() and p.is_relative_to(state))
    }


def test_the_catalogue_is_large_and_each_case_is_named_once() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(tmp_path, monkeypatch)
    fake.answer("sbatch", stdout="4242\n")  # were anything submitted, it would be queued
    for name, content in case.files.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    if case.setup is not None:
        case.setup(Env(tmp_path, fake, monkeypatch))
    before = snapshot(tmp_path)
    records = sorted((tmp_path / "state").rglob("*.json"))  # only those a setup wrote
    result = cli(*[a.replace("{tmp}", str(tmp_path)) for a in case.args])

    assert result.code == case.code, result.err
    assert "Traceback" not in result.err
    # Every line is nrl-launch's own; a warning may come first (an optional secret not set).
    assert all(line.startswith("nrl-launch: ") for line in result.err.splitlines()), result.err
    errors = [line for line in result.err.splitlines() if line.startswith("nrl-launch: error: ")]
    assert len(errors) == len(case.says), result.err
    for line, says in zip(errors, case.says, strict=True):
        assert says.replace("{tmp}", str(tmp_path)) in line, result.err
    if "--json" in case.args:  # the errors again, as a JSON object on stdout
        said = [e.removeprefix("nrl-launch: error: ") for e in errors]
        assert json.loads(result.out)["errors"] == said
    else:
        assert result.out == ""
    assert len(fake.calls("sbatch")) == (1 if case.sbatch_runs else 0)
    assert sorted((tmp_path / "state").rglob("*.json")) == records
    assert not list((tmp_path / "state").glob("scripts/*"))
    assert snapshot(tmp_path) == before


# ---- a log dir deleted under a running `logs -f` ----


def test_logs_f_ends_in_one_line_when_the_log_dir_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job is running (squeue says so) and its driver log grows; `logs -f` follows it. The
    log dir is deleted under it: one line, exit 4, instead of following nothing for ever."""
    fake = install(tmp_path, monkeypatch)
    fake.answer("squeue", "77|RUNNING|None|2|node[0-1]\n")
    job_record()(Env(tmp_path, fake, monkeypatch))
    log_dir = tmp_path / "logs" / "77-logs"
    log_dir.mkdir()
    (log_dir / "ray-driver.log").write_text("step 1\n")
    follow = subprocess.Popen(
        [sys.executable, "-m", "nrl_launch", "logs", "-f", "77"],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        assert follow.stdout.readline() == "step 1\n"  # it follows the job now
        time.sleep(1)
        shutil.rmtree(log_dir)
        out, err = follow.communicate(timeout=30)
    finally:
        follow.kill()
    assert follow.returncode == ExitCode.NOT_FOUND
    assert out == ""
    assert err == f"nrl-launch: error: the log dir {log_dir} was removed while following it\n"


# ---- Exit 2 (bad input): one line on stderr naming the key or flag, no traceback, nothing
# written. (These were tests/test_errors.py, "every bad input" too.)

# (id, arguments, text the error line must contain). `{tmp}` is a scratch dir; files named
# in EXIT_2_FILES are written there first.
EXIT_2_CASES: list[tuple[str, list[str], str]] = [
    (
        "nodes-zero",
        ["--nodes", "0", *CMD],
        "slurm.nodes: input should be greater than or equal to 1 (got 0, from --nodes)",
    ),
    ("nodes-negative", ["--nodes", "-3", *CMD], "slurm.nodes"),
    (
        "nodes-not-int",
        ["--nodes", "many", *CMD],
        "Invalid value for '-N' / '--nodes': Input should be a valid integer",
    ),
    ("gpus-negative", ["--gpus-per-node", "-1", *CMD], "slurm.gpus_per_node"),
    (
        "port-zero",
        ["--set", "ray.ports.gcs=0", *CMD],
        "ray.ports.gcs: input should be greater than or equal to 1",
    ),
    (
        "port-too-big",
        ["--set", "ray.ports.dashboard=70000", *CMD],
        "ray.ports.dashboard: input should be less than or equal to 65535",
    ),
    (
        "ports-collide",
        ["--set", "ray.ports.dashboard=1200", *CMD],
        "gcs and dashboard are both 1200",
    ),
    (
        "port-in-worker-range",
        ["--set", "ray.ports.gcs=2500", *CMD],
        "gcs=2500 lies inside the worker port range 2000-2999",
    ),
    (
        "worker-range-narrow",
        ["--set", "ray.ports.worker_max=2050", *CMD],
        "holds 51 ports; need at least 128",
    ),
    (
        "worker-range-inverted",
        ["--set", "ray.ports.worker_min=3000", "--set", "ray.ports.worker_max=2999", *CMD],
        "worker_max=2999 is below worker_min=3000",
    ),
    ("time-seconds", ["--time", "25:00:61", *CMD], "slurm.time: minutes and seconds must be < 60"),
    ("time-hours", ["--time", "1-25", *CMD], "slurm.time: hours must be < 24"),
    (
        "time-words",
        ["--time", "an hour", *CMD],
        "must be a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
    ),
    ("time-unlimited", ["--time", "UNLIMITED", *CMD], "slurm.time"),
    ("time-zero", ["--time", "0", *CMD], "must be longer than zero"),
    ("mount-relative", ["--mount", "data:/data", *CMD], "source 'data' must be an absolute path"),
    ("mount-too-many-parts", ["--mount", "/a:/b:ro:x", *CMD], "is not SRC:DST[:FLAGS]"),
    (
        "mount-bad-flags",
        ["--mount", "/a:/b:read-only", *CMD],
        "flags 'read-only' must be pyxis mount flags",
    ),
    ("mount-comma", ["--mount", "/a,b:/c", *CMD], "must not contain ','"),
    ("env-name", ["--env", "1BAD=x", *CMD], "'1BAD' is not an environment variable name"),
    (
        "env-bash-name",
        ["--env", "IFS=,", *CMD],
        "env.IFS: 'IFS' cannot be set: IFS is set by bash itself",
    ),
    (
        "env-slurm-name",
        ["--env", "SLURM_JOB_ID=1", *CMD],
        "'SLURM_JOB_ID' cannot be set: SLURM_JOB_ID is set by Slurm",
    ),
    (
        "env-script-name",
        ["--set", "env.NRL_LOG_DIR=/x", *CMD],
        "the NRL_ prefix belongs to the job script",
    ),
    ("env-no-equals", ["--env", "NOVALUE", *CMD], "--env 'NOVALUE': expected NAME=VALUE"),
    (
        "env-bool",
        ["--set", "env.FLAG=yes", *CMD],
        "env.FLAG: must be a string (quote yes/no/true/false in YAML)",
    ),
    (
        "secret-name",
        ["--secret", "HF-TOKEN", *CMD],
        "'HF-TOKEN' is not an environment variable name",
    ),
    (
        "secret-also-env",
        ["--secret", "HF_TOKEN", "--env", "HF_TOKEN=abc", *CMD],
        "env.HF_TOKEN: HF_TOKEN is listed in secrets",
    ),
    # Names bash keeps for itself, which the fuzzer found a job could not pass on.
    (
        "env-funcnest",
        ["--env", "FUNCNEST=1", *CMD],
        "env.FUNCNEST: 'FUNCNEST' cannot be set: FUNCNEST limits how deep the job script's "
        "functions may nest",
    ),
    ("env-shlvl", ["--env", "SHLVL=2", *CMD], "'SHLVL' cannot be set: SHLVL is set by bash"),
    ("env-dirstack", ["--env", "DIRSTACK=/x", *CMD], "'DIRSTACK' cannot be set"),
    ("secret-pipestatus", ["--secret", "PIPESTATUS", *CMD], "'PIPESTATUS' cannot be set"),
    ("env-mapfile", ["--env", "MAPFILE=x", *CMD], "'MAPFILE' cannot be set"),
    ("env-coproc", ["--env", "COPROC=x", *CMD], "'COPROC' cannot be set"),
    # The caches' variables are exported after the env's: the env's would be lost.
    (
        "env-set-by-caches",
        ["--env", "HF_HOME=/mine", "--set", "caches.dir=/c", *CMD],
        "env.HF_HOME: the caches set HF_HOME (to '/c/huggingface'); say where that cache goes "
        "under caches (hf_home, uv, megatron, enroot) instead",
    ),
    (
        "secret-set-by-caches",
        ["--secret", "UV_CACHE_DIR", "--set", "caches.uv=/u", *CMD],
        "secrets.UV_CACHE_DIR: the caches set UV_CACHE_DIR (to '/u')",
    ),
    (
        "runtime-unknown",
        ["--container-runtime", "docker", *CMD],
        "container.runtime: input should be 'pyxis' or 'none'",
    ),
    (
        "backend-unknown",
        ["--backend", "lcoal", *CMD],
        "backend: input should be 'slurm', 'local' or 'lepton' (got 'lcoal', from --backend)",
    ),
    (
        "local-many-nodes",
        ["--backend", "local", "--nodes", "2", *CMD],
        "slurm.nodes: the local backend runs one node on this machine, not 2",
    ),
    (
        "local-pyxis",
        ["--backend", "local", "--container", "nvcr.io/nvidia/nemo-rl:v0.6.0", *CMD],
        "container.runtime: the local backend runs without a container",
    ),
    (
        "reuse-not-a-bool",
        ["--set", "container.reuse=maybe", *CMD],
        "container.reuse: input should be a valid boolean",
    ),
    (
        "pyxis-no-image",
        ["--container-runtime", "pyxis", *CMD],
        "runtime is pyxis but container.image is not set",
    ),
    (
        "image-without-runtime",
        ["--container", "img", "--container-runtime", "none", *CMD],
        "container.image is set but container.runtime is none",
    ),
    ("no-driver", [], "driver.command is not set: give the driver after `--`"),
    (
        "stall-min-zero",
        ["--set", "driver.stall_min=0", *CMD],
        "driver.stall_min: input should be greater than 0 (got 0, from --set driver.stall_min)",
    ),
    (
        "stall-min-not-a-number",
        ["--set", "driver.stall_min=ten", *CMD],
        "driver.stall_min: input should be a valid number",
    ),
    (
        "interactive-and-driver",
        ["--interactive", *CMD],
        "--interactive and a driver command after -- cannot be combined",
    ),
    (
        "set-no-equals",
        ["--set", "slurm.nodes", *CMD],
        "--set 'slurm.nodes': expected KEY.PATH=VALUE",
    ),
    (
        "set-unknown-key",
        ["--set", "slurm.node=2", *CMD],
        "slurm.node: unknown key (from --set slurm.node); did you mean 'nodes'?",
    ),
    (
        "job-name-newline",
        ["--job-name", "a\nb", *CMD],
        "slurm.job_name: must not contain control characters",
    ),
    ("job-name-empty", ["--job-name", " ", *CMD], "slurm.job_name: must not be empty"),
    # Each goes on an #SBATCH line, which sbatch reads line by line.
    ("account-two-lines", ["--account", "a\nb", *CMD], "slurm.account: must be a single line"),
    (
        "extra-arg-empty",
        ["--set", "slurm.extra_args=['--comment', '']", *CMD],
        "an empty argument cannot be written on an #SBATCH line",
    ),
    (
        "log-dir-percent",
        ["--log-dir", "/logs/%u", *CMD],
        "logs.base_dir: must not contain '%' or '\\'",
    ),
    (
        "log-dir-pyxis-colon",
        ["--container", "img", "--log-dir", "/a:b", *CMD],
        "logs.base_dir: '/a:b' holds ',' or ':', which pyxis cannot mount",
    ),
    (
        "cache-relative",
        ["--set", "caches.hf_home=.cache", *CMD],
        "hf_home '.cache' must be an absolute path",
    ),
    ("unknown-flag", ["--nodez", "2", *CMD], "No such option: --nodez (Possible options: --nodes)"),
    (
        "job-unknown-key",
        ["-f", "{tmp}/typo.yaml", *CMD],
        "slurm.node: unknown key (from job file {tmp}/typo.yaml); did you mean 'nodes'?",
    ),
    (
        "job-unknown-section",
        ["-f", "{tmp}/section.yaml", *CMD],
        "slrum: unknown key (from job file {tmp}/section.yaml); did you mean 'slurm'?",
    ),
    (
        "job-wrong-type",
        ["-f", "{tmp}/type.yaml", *CMD],
        "slurm.nodes: input should be a valid integer",
    ),
    (
        "job-invalid-yaml",
        ["-f", "{tmp}/broken.yaml", *CMD],
        "job file {tmp}/broken.yaml: invalid YAML at line 3, column 1: expected ','",
    ),
    (
        "job-not-mapping",
        ["-f", "{tmp}/list.yaml", *CMD],
        "job file {tmp}/list.yaml: must be a mapping of keys, got a list",
    ),
    ("job-missing", ["-f", "{tmp}/nope.yaml", *CMD], "job file {tmp}/nope.yaml: no such file"),
    ("job-is-dir", ["-f", "{tmp}", *CMD], "is a directory, not a YAML file"),
    (
        "profile-missing",
        ["--profile", "{tmp}/nope.yaml", *CMD],
        "--profile {tmp}/nope.yaml: no such file",
    ),
    ("mounts-not-list", ["-f", "{tmp}/mounts.yaml", *CMD], "container.mounts"),
]

EXIT_2_FILES = {
    "typo.yaml": "slurm:\n  node: 2\n",
    "section.yaml": "slrum:\n  nodes: 2\n",
    "type.yaml": "slurm:\n  nodes: many\n",
    "broken.yaml": "slurm:\n  nodes: [2\n",
    "list.yaml": "- slurm\n",
    "mounts.yaml": "container:\n  mounts: 7\n",
}


@pytest.mark.parametrize(
    ("args", "expected"), [c[1:] for c in EXIT_2_CASES], ids=[c[0] for c in EXIT_2_CASES]
)
def test_bad_input_exits_2(cli: Cli, tmp_path: Path, args: list[str], expected: str) -> None:
    for name, text in EXIT_2_FILES.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out.sbatch"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = cli("render", "-o", str(out), *args)
    lines = result.err.splitlines()
    assert result.code == 2, result.err
    assert len(lines) == 1, result.err
    assert lines[0].startswith("nrl-launch: error: ")
    assert expected.replace("{tmp}", str(tmp_path)) in lines[0]
    assert "Traceback" not in result.err
    assert result.out == ""
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_profile_env_var_naming_a_missing_file(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NRL_LAUNCH_PROFILE", str(tmp_path / "gone.yaml"))
    result = cli("render", "--interactive")
    assert result.code == 2
    assert (
        result.err == f"nrl-launch: error: NRL_LAUNCH_PROFILE={tmp_path}/gone.yaml: no such file\n"
    )


def test_ray_sub_env_var_errors_name_the_variable(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUS_PER_NODE", "eight")
    result = cli("render", "--interactive")
    assert result.code == 2
    assert "slurm.gpus_per_node" in result.err
    assert "from env GPUS_PER_NODE" in result.err


def test_several_problems_give_one_line_each(cli: Cli) -> None:
    result = cli("render", "--nodes", "0", "--gpus-per-node", "-1", "--", "python")
    assert result.code == 2
    lines = result.err.splitlines()
    assert len(lines) == 2
    assert {line.split(":")[2].strip() for line in lines} == {"slurm.nodes", "slurm.gpus_per_node"}


def test_output_dir_missing(cli: Cli, tmp_path: Path) -> None:
    result = cli("render", "--interactive", "-o", str(tmp_path / "no" / "job.sbatch"))
    assert result.code == 2
    assert "does not exist" in result.err
    assert "Traceback" not in result.err


def test_debug_after_the_driver_is_the_driver_s(cli: Cli) -> None:
    result = cli("render", "--nodes", "0", "--", "python", "train.py", "--debug")
    assert result.code == 2
    assert result.err.startswith("nrl-launch: error: slurm.nodes")


def test_debug_shows_the_traceback_and_keeps_the_exit_code_and_json(cli: Cli) -> None:
    """--debug adds the traceback; scripts still read the documented code and the JSON."""
    result = cli("--debug", "render", "--nodes", "0", "--", "python")
    assert result.code == 2
    assert result.err.startswith("Traceback (most recent call last):")
    assert result.err.splitlines()[-1].startswith("nrl-launch: error: slurm.nodes")
    result = cli("render", "--json", "--debug", "--nodes", "0", "--", "python")
    assert result.code == 2
    assert json.loads(result.out)["exit_code"] == 2
    assert "Traceback" in result.err


def test_help_and_version_exit_zero(cli: Cli) -> None:
    from nrl_launch import __version__

    assert cli("--version").out == f"nrl-launch {__version__}\n"
    assert cli("render", "--help").code == 0
    assert "--gpus-per-node" in cli("render", "--help").out


# A metavar names what to give, in capitals (N, FILE, KEY=VALUE, SRC:DST[:FLAGS]), or lists the
# words accepted (slurm|local|lepton).
_METAVAR = re.compile(
    r"[A-Z][A-Z0-9_]*(?:[=:][A-Z][A-Z0-9_]*)*(?:\[:[A-Z]+\])?|[a-z-]+(?:\|[a-z-]+)+"
)


_EVERY_COMMAND = [
    *("submit", "run", "pull", "status", "logs", "attach", "stop", "cancel", "dashboard"),
    *("list", "render", "plan", "doctor", "init", "config show"),
]


@pytest.mark.parametrize("command", _EVERY_COMMAND)
def test_metavars_are_in_one_style(cli: Cli, command: str) -> None:
    """Options and arguments alike: `--nodes N`, `JOBID`, never a Python type (`<str>`)."""
    result = cli(*command.split(), "--help")
    assert result.code == 0, result.err
    rows, section = [], None
    for line in result.out.split("\n  Examples:")[0].splitlines():
        if line and not line.startswith(" "):
            section = line if line.endswith(":") else None  # "Options:", not "Usage: ..."
        elif section and line[2:3].strip():
            rows.append(line[2:].split("  ")[0])  # the name column of a row
    assert rows
    for row in rows:
        words = row.split(", ")[-1].split(" ")
        name = words[1] if row.startswith("-") and len(words) > 1 else words[0]
        if row.startswith("-") and (len(words) == 1 or " / --no-" in row):
            continue  # a switch, or a pair of them (--exclusive / --no-exclusive)
        assert _METAVAR.fullmatch(name), row
        assert "<" not in row, row
