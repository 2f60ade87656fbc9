"""Every bad input: one line on stderr naming the key or flag, exit code 2, no traceback,
nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import Cli

CMD = ["--", "python", "train.py"]

# (id, arguments, text the error line must contain). `{tmp}` is a scratch dir; files named
# in FILES are written there first.
CASES: list[tuple[str, list[str], str]] = [
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

FILES = {
    "typo.yaml": "slurm:\n  node: 2\n",
    "section.yaml": "slrum:\n  nodes: 2\n",
    "type.yaml": "slurm:\n  nodes: many\n",
    "broken.yaml": "slurm:\n  nodes: [2\n",
    "list.yaml": "- slurm\n",
    "mounts.yaml": "container:\n  mounts: 7\n",
}


@pytest.mark.parametrize(("args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(cli: Cli, tmp_path: Path, args: list[str], expected: str) -> None:
    for name, text in FILES.items():
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
