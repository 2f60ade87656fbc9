"""Ray's token auth and secrets, in the rendered script run by a real bash: the token is made
per job and read from a 0600 file, never printed; secrets travel by name only."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from nrl_launch import backends
from nrl_launch.backends import local, slurm
from nrl_launch.jobs import record
from nrl_launch.spec import LaunchSpec
from tests.conftest import (
    OTHER_UID,
    Cli,
    give,
    make_foreign,
    other_group,
    source_job,
    without_warnings,
)
from tests.fakes import FakeSlurm, install
from tests.helpers import bash_values

SENTINEL = "hf_sentinel_Zq9'$(x)\"secret"


def script(**values: object) -> str:
    base: dict[str, object] = {"driver": {"command": ["python", "train.py"]}}
    return backends.plan(LaunchSpec.model_validate({**base, **values})).script


def definitions(text: str) -> str:
    return text.split("# ---- Batch step")[0]


def run_bash(text: str, probe: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The script's values and helpers, then `probe`, in a real bash with only `env`."""
    helpers = "\n".join(
        _function(text, name)
        for name in ("log", "end_job", "make_ray_token", "has_ray_auth", "ray_python")
    )
    return subprocess.run(
        ["bash", "-c", definitions(text) + "\n" + helpers + "\n" + probe],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **env},
        check=False,
    )


def _function(text: str, name: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}() {{"))
    if lines[start].rstrip().endswith("}"):  # a one-line function
        return lines[start]
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(lines[start : end + 1])


def test_job_env_points_ray_at_the_job_s_token_file_and_drops_an_inherited_token() -> None:
    values = bash_values(
        script(),
        'RAY_AUTH_TOKEN=inherited; job_env; printf "%s\\0" "$RAY_AUTH_MODE" '
        '"$RAY_AUTH_TOKEN_PATH" "${RAY_AUTH_TOKEN-unset}"',
    )
    assert values == ["token", "/logs/1-logs/ray-auth-token", "unset"]


def test_auth_off_disables_it_and_warns(cli: Cli) -> None:
    assert bash_values(script(ray={"auth": "off"}), 'job_env; printf "%s\\0" "$RAY_AUTH_MODE"') == [
        "disabled"
    ]
    result = cli("render", "--set", "ray.auth=off", "--", "python", "x.py")
    assert result.code == 0
    assert "warning: ray.auth is off: anyone who can reach the job's Ray ports" in result.err


def test_each_job_makes_its_own_token_readable_by_its_owner_only(tmp_path: Path) -> None:
    tokens = []
    for run in range(2):
        log_dir = tmp_path / f"{run}-logs"
        log_dir.mkdir()
        done = run_bash(script(), "make_ray_token", {"NRL_LOG_DIR": str(log_dir)})
        assert done.returncode == 0, done.stderr
        token = log_dir / "ray-auth-token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600
        tokens.append(token.read_text())
        assert done.stdout == "" and done.stderr == ""  # nothing printed it
    assert all(len(t) == 64 and int(t, 16) >= 0 for t in tokens)
    assert tokens[0] != tokens[1]


def _has_ray_auth(tmp_path: Path, python: str) -> subprocess.CompletedProcess[str]:
    """has_ray_auth on node n0 with `ray` as pip writes it: its first line names a Python (here
    a shell running `python`) whose package metadata says which Ray it is."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(f"#!/bin/sh\n{python}\n")
    (fake / "ray").write_text(f"#!{fake / 'python'}\n")
    for tool in ("python", "ray"):
        (fake / tool).chmod(0o755)
    env = {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "NRL_LOG_DIR": str(tmp_path),
        "NRL_NODE_NAME": "n0",
    }
    return run_bash(script(), "has_ray_auth", env)


@pytest.mark.parametrize(("version", "ok"), [("2.51.2", False), ("2.52.0", True), ("2.60.0", True)])
def test_the_head_refuses_a_ray_without_token_auth(tmp_path: Path, version: str, ok: bool) -> None:
    done = _has_ray_auth(tmp_path, f"echo {version}")
    assert (done.returncode == 0) is ok
    if not ok:
        assert (
            (tmp_path / "ENDED")
            .read_text()
            .startswith(f"Ray {version} on n0 has no token authentication (Ray 2.52 or later has)")
        )


def test_a_ray_whose_version_cannot_be_read_is_refused(tmp_path: Path) -> None:
    """Token auth needs Ray 2.52: a version nobody can read fails the check, not passes it."""
    done = _has_ray_auth(tmp_path, "exit 1")  # no Ray in its Python; `ray --version` fails too
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "ENDED").read_text().startswith("cannot read the version of Ray on n0")


def test_a_required_secret_missing_on_a_node_is_named() -> None:
    text = script(secrets={"MY_KEY": "required"})
    probe = 'if secret=$(missing_secret); then printf "%s" "$secret"; else printf none; fi'
    assert run_bash(text, probe, {"HF_TOKEN": "x"}).stdout == "MY_KEY"
    assert run_bash(text, probe, {"MY_KEY": SENTINEL}).stdout == "none"


def test_secret_values_appear_in_no_output(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    monkeypatch.setenv("MY_KEY", SENTINEL + "2")
    args = ["--secret", "MY_KEY", "--secret", "HF_TOKEN", "--", "python", "x.py"]
    outputs = [
        cli("render", *args),
        cli("render", "--json", *args),
        cli("config", "show", "--sources", *args),
        cli("config", "show", "--json", *args),
    ]
    for result in outputs:
        assert result.code == 0, result.err
        assert SENTINEL not in result.out + result.err
    spec = json.loads(cli("config", "show", "--json", *args).out)["spec"]
    assert spec["secrets"] == {
        "HF_TOKEN": "required",
        "MY_KEY": "required",
        "WANDB_API_KEY": "optional",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--secret", "MY_KEY"],
            "secrets.MY_KEY: MY_KEY is not set in this shell and the job requires it",
        ),
        (["--set", "secrets=[A_KEY, B_KEY]"], "secrets.A_KEY: A_KEY is not set in this shell"),
        (["--secret", "1BAD"], "secrets.1BAD: '1BAD' is not an environment variable name"),
        (["--secret", "SLURM_JOB_ID"], "cannot be set: SLURM_JOB_ID is set by Slurm"),
        (["--set", "secrets.HF_TOKEN=always"], "secrets.HF_TOKEN: input should be 'required'"),
        (["--env", "HF_TOKEN=hf_abc"], "env.HF_TOKEN: HF_TOKEN is listed in secrets"),
    ],
)
def test_a_bad_or_missing_secret_stops_submit_before_anything_is_queued(
    cli: Cli, isolated: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    state = tmp_path / "state"
    os.environ["NRL_LAUNCH_STATE_DIR"] = str(state)
    try:
        result = cli("submit", *args, "--", "python", "x.py")
    finally:
        del os.environ["NRL_LAUNCH_STATE_DIR"]
    assert result.code == 2
    assert message in result.err.splitlines()[0]
    assert "Traceback" not in result.err
    assert not state.exists() and not list(isolated.iterdir())


def test_optional_secrets_missing_are_one_warning(cli: Cli) -> None:
    result = cli("render", "--", "python", "x.py")
    assert "warning" not in result.err  # render is a dry run: secrets are checked at submit
    from nrl_launch.jobs.launch import secret_findings

    spec = LaunchSpec.model_validate({"driver": {"command": ["x"]}})
    assert secret_findings(spec, {"HF_TOKEN": "x", "WANDB_API_KEY": "y"}) == []  # all set: quiet
    (missing,) = secret_findings(
        LaunchSpec.model_validate({"driver": {"command": ["x"]}, "secrets": ["MY_KEY"]}),
        {"HF_TOKEN": "x", "WANDB_API_KEY": "y"},
    )
    assert missing.error and "MY_KEY" in missing.message


def test_off_drops_a_default_secret() -> None:
    spec = LaunchSpec.model_validate(
        {"driver": {"command": ["x"]}, "secrets": {"WANDB_API_KEY": "off"}}
    )
    assert spec.optional_secrets == ["HF_TOKEN"]
    assert spec.required_secrets == []


@pytest.mark.parametrize("secrets", [[[]], [{"A": 1}], ["HF_TOKEN", 3]])
def test_a_secrets_list_of_anything_but_names_is_refused(secrets: list[object]) -> None:
    """Found by the fuzz test: a list holding a list was hashed and raised a TypeError."""
    with pytest.raises(ValidationError) as refused:
        LaunchSpec.model_validate({"secrets": secrets, "driver": {"command": ["python"]}})
    assert "secrets" in str(refused.value)


# ==== Issue 25: the job's log dir is its own; the login side trusts only the user's files ====

# The PATH the tests started with: a test's fake Slurm is alone on PATH, bash is not.
SYSTEM_PATH = os.environ["PATH"]
JOB = ["--", "python", "x.py"]
REFUSED = re.compile(r"^\[nrl-launch [^]]+\] nrl-launch refused to start the job: (.*)$")


def _spec(**values: object) -> LaunchSpec:
    base: dict[str, object] = {"driver": {"command": ["python", "train.py"]}}
    return LaunchSpec.model_validate({**base, **values})


# Each backend's job script, and the name its copy in the log dir gets (start_log_dir's $1).
RENDERED = {"slurm-ray": "job.sbatch", "slurm-plain": "job.sbatch", "local": "job.sh"}


def _rendered(kind: str, **values: object) -> tuple[str, str]:
    job = _spec(**values)
    if kind == "slurm-ray":
        request = slurm.plan(job)
    elif kind == "slurm-plain":
        request = backends.get("slurm").plan_plain(job)
    else:
        request = local.plan(job)
    return request.script, RENDERED[kind]


def _job_definitions(text: str) -> str:
    """The script's assignments and functions, as bash has them once it sources the script."""
    return source_job(text)


def _job_bash(
    text: str,
    probe: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    umask: int = -1,
) -> subprocess.CompletedProcess[str]:
    """The script's definitions, then `probe`, in a real bash whose $0 is the script (written
    0666: the copy start_log_dir makes is masked by the job's umask alone), run in tmp_path."""
    path = tmp_path / "job-script.sh"
    path.write_text(text)
    path.chmod(0o666)
    return subprocess.run(
        ["bash", "-c", _job_definitions(text) + "\n" + probe, str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": SYSTEM_PATH, **(env or {})},
        umask=umask,
        check=False,
    )


@pytest.mark.parametrize("kind", RENDERED)
def test_every_job_script_sets_umask_077_before_anything_else_runs(kind: str) -> None:
    text, _ = _rendered(kind)
    commands = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[:2] == ["set -euo pipefail", "umask 077"]


@pytest.mark.parametrize("kind", RENDERED)
def test_the_log_dir_and_its_files_are_the_owner_s_alone_whatever_the_caller_s_umask(
    kind: str, tmp_path: Path
) -> None:
    text, copy = _rendered(kind)
    log_dir = tmp_path / "logs" / "5-logs"
    env = {"NRL_LOG_DIR": str(log_dir), "NRL_JOB_SPEC": "{}"}  # as submit passes the spec
    done = _job_bash(text, f"start_log_dir {copy} 1700000000", tmp_path, env, umask=0)
    assert done.returncode == 0, done.stdout + done.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in log_dir.iterdir()}
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    files = [copy, "STARTED", "spec.json", "timeline", "timings.json"]
    assert modes == dict.fromkeys(files, 0o600)
    assert stat.S_IMODE((tmp_path / "logs").stat().st_mode) == 0o700  # the base it made too


@pytest.mark.parametrize("kind", RENDERED)
def test_the_log_dir_gets_the_spec_submit_passed_and_no_step_inherits_it(
    kind: str, tmp_path: Path
) -> None:
    text, copy = _rendered(kind)
    log_dir = tmp_path / "logs" / "5-logs"
    value = '{"backend": "slurm", "env": {"X": "\'$(x)\\n"}}'
    # Whatever the script or a process it starts reads of NRL_JOB_SPEC afterwards (set -u).
    probe = (
        f"start_log_dir {copy} 1700000000\n"
        'printf "%s\\n" "${NRL_JOB_SPEC-unset}"; env | grep -c ^NRL_JOB_SPEC= || true'
    )
    env = {"NRL_LOG_DIR": str(log_dir), "NRL_JOB_SPEC": value}
    done = _job_bash(text, probe, tmp_path, env)
    assert (done.returncode, done.stdout) == (0, "unset\n0\n"), done.stderr
    spec_json = log_dir / "spec.json"
    assert spec_json.read_text() == value + "\n"
    assert stat.S_IMODE(spec_json.stat().st_mode) == 0o600


@pytest.mark.parametrize("kind", RENDERED)
@pytest.mark.parametrize("given", [None, ""])
def test_a_script_run_without_the_spec_writes_no_spec_json(
    kind: str, given: str | None, tmp_path: Path
) -> None:
    """A copy of the script sbatch'ed by hand has no NRL_JOB_SPEC: it runs, with no spec.json."""
    text, copy = _rendered(kind)
    log_dir = tmp_path / "logs" / "5-logs"
    env = {"NRL_LOG_DIR": str(log_dir), **({} if given is None else {"NRL_JOB_SPEC": given})}
    done = _job_bash(text, f"start_log_dir {copy} 1700000000", tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(
        [copy, "STARTED", "timeline", "timings.json"]
    )


@pytest.mark.parametrize("kind", RENDERED)
def test_the_job_refuses_a_log_dir_someone_else_made_and_writes_nothing_into_it(
    kind: str, tmp_path: Path
) -> None:
    text, copy = _rendered(kind)
    log_dir = tmp_path / "logs" / "5-logs"
    log_dir.mkdir(parents=True)
    log_dir.chmod(0o777)
    token = log_dir / "ray-auth-token"
    token.touch()
    token.chmod(0o666)
    give(token, uid=OTHER_UID)
    give(log_dir, uid=OTHER_UID)
    # As the job's batch step goes on: the token comes right after the log dir.
    probe = f"start_log_dir {copy} 1700000000; make_ray_token"
    done = _job_bash(text, probe, tmp_path, {"NRL_LOG_DIR": str(log_dir)})
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    refused = REFUSED.match(line)
    assert refused, line
    assert refused[1] == (
        f"its log dir {log_dir} exists already (made by someone else, or by an earlier job with "
        "this id): move it away and submit again"
    )
    assert [p.name for p in log_dir.iterdir()] == ["ray-auth-token"]
    assert token.read_text() == ""


@pytest.mark.parametrize("kind", RENDERED)
def test_the_job_refuses_a_world_writable_log_base_without_sticky(
    kind: str, tmp_path: Path
) -> None:
    text, copy = _rendered(kind)
    base = tmp_path / "open"
    base.mkdir()
    base.chmod(0o777)
    log_dir = base / "5-logs"
    done = _job_bash(text, f"start_log_dir {copy} 1", tmp_path, {"NRL_LOG_DIR": str(log_dir)})
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    refused = REFUSED.match(line)
    assert refused, line
    assert refused[1] == (
        f"{base} is writable by every user (mode 0777): another user could replace its log dir "
        f"{log_dir}; choose a logs.base_dir only you can write"
    )
    assert list(base.iterdir()) == []


def test_the_job_refuses_a_log_base_a_group_of_others_can_write(tmp_path: Path) -> None:
    gid, name = other_group()
    if gid != 2100:  # a gid with no group entry: test_the_job_names_a_group_that_has_no_...
        pytest.skip("needs group 2100 (nrl-team, a group of other users)")
    text, copy = _rendered("slurm-ray")
    base = tmp_path / "team"
    base.mkdir()
    give(base, gid=gid)
    base.chmod(0o770)
    log_dir = base / "5-logs"
    done = _job_bash(text, f"start_log_dir {copy} 1", tmp_path, {"NRL_LOG_DIR": str(log_dir)})
    assert done.returncode == 1
    refused = REFUSED.match(done.stdout.strip())
    assert refused, done.stdout
    assert refused[1].startswith(f"{base} is writable by group {name} (mode 0770): ")
    assert list(base.iterdir()) == []


def test_the_job_names_a_group_that_has_no_group_entry_by_its_gid(tmp_path: Path) -> None:
    text, copy = _rendered("slurm-ray")
    base = tmp_path / "team"
    base.mkdir()
    give(base, gid=54322)  # no group entry: whose it is cannot be known, so not the user's
    base.chmod(0o770)
    done = _job_bash(
        text, f"start_log_dir {copy} 1", tmp_path, {"NRL_LOG_DIR": str(base / "5-logs")}
    )
    assert done.returncode == 1
    assert f"{base} is writable by group gid 54322 (mode 0770): " in done.stdout


def test_the_job_accepts_a_sticky_shared_log_base_and_makes_its_own_dir(tmp_path: Path) -> None:
    """In a sticky dir (as /tmp) no one can replace the job's dir; one made first is refused."""
    text, copy = _rendered("slurm-ray")
    base = tmp_path / "sticky"
    base.mkdir()
    base.chmod(0o1777)
    log_dir = base / "5-logs"
    done = _job_bash(text, f"start_log_dir {copy} 1", tmp_path, {"NRL_LOG_DIR": str(log_dir)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700


# ---- M4: a file's words are data, never code ----


# In bash arithmetic a variable's value is itself evaluated, and an array subscript in it is
# expanded: $(...) runs. Under the job's `set -u` only a subscript of a variable that is set
# runs (of an unset `a`, bash stops at "a: unbound variable" first), so each payload comes as
# the issue wrote it (a[...]) and on a variable every job script sets (NRL_NODES[...]).
INJECTIONS = ["a[$(touch INJECTED)]", "NRL_NODES[$(touch INJECTED)]"]


@pytest.mark.parametrize(
    "gpus",
    # A joined file's words are split by `read`: as one word, ${IFS} stands for the space.
    [*INJECTIONS, *(p.replace(" ", "${IFS}") for p in INJECTIONS)],
)
def test_wait_for_nodes_never_runs_a_joined_file_s_words(tmp_path: Path, gpus: str) -> None:
    text, _ = _rendered("slurm-ray")
    log_dir = tmp_path / "5-logs"
    (log_dir / "joined").mkdir(parents=True)
    (log_dir / "joined" / "0").write_text("n0.cluster 8 1700000000.5\n")
    (log_dir / "joined" / "1").write_text(f"x {gpus} 0\n")
    probe = 'NRL_NODES=2 NRL_JOIN_TIMEOUT=0 NRL_NODE_LIST="n0 n1"; wait_for_nodes'
    done = _job_bash(text, probe, tmp_path, {"NRL_LOG_DIR": str(log_dir)})
    assert done.returncode == 1, done.stderr
    assert not list(tmp_path.rglob("INJECTED"))
    # The node with the bad file is not counted: it has not joined.
    assert json.loads((log_dir / "readiness.json").read_text()) == {
        "nodes": 1,
        "nodes_expected": 2,
        "gpus": 8,
        "gpus_expected": 16,
    }
    assert (log_dir / "ENDED").read_text() == (
        "not every node joined within 0s: n1 (node 1) missing; see ray-worker-1.log\n"
    )


@pytest.mark.parametrize("code", INJECTIONS)
def test_the_plain_job_never_runs_its_exit_code_file_s_words(tmp_path: Path, code: str) -> None:
    """The batch step reads the first failing node's exit_code: a value that is not a number
    ends the job with code 1, and its $(...) never runs."""
    text, _ = _rendered("slurm-plain")
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text(
        f'#!/bin/bash\nprintf "%s\\n" {shlex.quote(code)} >"$NRL_LOG_DIR/exit_code"\nexit 3\n'
    )
    (fake / "scontrol").write_text("#!/bin/bash\nexit 1\n")
    for tool in ("srun", "scontrol"):
        (fake / tool).chmod(0o755)
    submit = tmp_path / "submit"
    submit.mkdir(mode=0o700)
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        cwd=submit,
        env={
            "PATH": f"{fake}:{SYSTEM_PATH}",
            "SLURM_JOB_ID": "5",
            "SLURM_SUBMIT_DIR": str(submit),
        },
        check=False,
    )
    assert not list(tmp_path.rglob("INJECTED"))
    assert done.returncode == 1, done.stdout + done.stderr
    log_dir = submit / "5-logs"
    assert (log_dir / "ENDED").read_text() == (
        "the command's step ended with exit code 1; see job.log\n"
    )
    assert (log_dir / "exit_code").read_text() == "1\n"


# ---- submit and render: the log base, the profile, env names, the debugger ----


@pytest.fixture
def sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Fake Slurm alone on PATH; sbatch answers 42 and writes its umask and environment
    (NUL-separated) to tmp_path/sbatch-umask and tmp_path/sbatch-env."""
    fake = install(tmp_path, monkeypatch)
    env = shutil.which("env", path="/usr/bin:/bin")
    assert env is not None
    fake.script(
        "sbatch",
        f'umask >"{tmp_path}/sbatch-umask"\n{env} -0 >"{tmp_path}/sbatch-env"\necho 42',
    )
    return fake


def test_submit_refuses_a_world_writable_log_base_before_sbatch(
    cli: Cli, sbatch: FakeSlurm, isolated: Path, tmp_path: Path
) -> None:
    base = isolated / "open"
    base.mkdir()
    base.chmod(0o777)
    result = cli("submit", "--log-dir", "open", *JOB)
    assert result.code == 2
    (line,) = without_warnings(result.err).splitlines()  # a warning says the secrets are unset
    assert line.startswith(
        f"nrl-launch: error: logs.base_dir open ({base}): {base} is writable by every user (mode "
        "0777, no sticky bit): another user could "
    )
    assert line.endswith("; use a directory only you can write (--log-dir DIR)")
    assert sbatch.calls("sbatch") == []
    assert not (tmp_path / "state").exists()
    rendered = cli("render", "--log-dir", "open", *JOB)
    assert rendered.code == 0, rendered.err
    problem = line.removeprefix("nrl-launch: error: ")
    assert f"nrl-launch: warning: {problem} (submit refuses it)" in rendered.err.splitlines()


@pytest.mark.parametrize("whose", ["another user", "a group of others"])
def test_a_profile_in_the_cwd_that_is_not_the_user_s_own_is_refused(
    cli: Cli, isolated: Path, whose: str
) -> None:
    profile = isolated / "nrl-launch.yaml"
    profile.write_text("setup: echo pwned\n")
    profile.chmod(0o644)
    why = make_foreign(profile, whose, 0o664)
    result = cli("render", *JOB)
    assert result.code == 2
    assert result.err == (
        f"nrl-launch: error: profile {profile}: {why}: its setup command would run on every "
        "node of your job, as you; remove it (or fix its owner and mode), or name a profile "
        "with --profile FILE\n"
    )
    assert "pwned" not in result.out


def test_the_user_s_own_profile_in_the_cwd_is_used(cli: Cli, isolated: Path) -> None:
    profile = isolated / "nrl-launch.yaml"
    profile.write_text("slurm:\n  job_name: from-profile\n")
    profile.chmod(0o600)
    result = cli("render", *JOB)
    assert result.code == 0, result.err
    assert "#SBATCH --job-name=from-profile" in result.out.splitlines()


def test_an_env_name_that_says_credential_is_refused_without_echoing_its_value(cli: Cli) -> None:
    result = cli("render", "--env", "OPENAI_API_KEY=sk-1", *JOB)
    assert result.code == 2
    (line,) = result.err.splitlines()
    assert line.startswith("nrl-launch: error: env.OPENAI_API_KEY: its name says it holds a ")
    assert line.endswith("export it and give --secret OPENAI_API_KEY")
    assert "sk-1" not in result.out + result.err


@pytest.mark.parametrize("setting", ["TOKENIZERS_PARALLELISM=false", "NCCL_IB_PKEY=0"])
def test_env_names_that_only_contain_a_credential_word_are_accepted(cli: Cli, setting: str) -> None:
    result = cli("render", "--env", setting, *JOB)
    assert result.code == 0, result.err
    name, value = setting.split("=")
    assert bash_values(result.out, f'job_env; printf "%s\\0" "${name}"') == [value]


def test_ray_s_external_debugger_renders_with_a_warning(cli: Cli) -> None:
    result = cli("render", "--set", "ray.external_debugger=true", *JOB)
    assert result.code == 0, result.err
    assert (
        "nrl-launch: warning: ray.external_debugger is on: a breakpoint on any node opens Ray's "
        "debugger on that node's address with no password, and whoever connects first gets a "
        "Python prompt as you; turn it on only where everyone who can reach the nodes is trusted"
    ) in result.err.splitlines()


# ---- submit: the state dir, sbatch's umask, and secrets in a file ----


def _sbatch_env(tmp_path: Path) -> dict[str, str]:
    entries = (tmp_path / "sbatch-env").read_bytes().split(b"\0")[:-1]
    return dict(e.decode("utf-8", "surrogateescape").partition("=")[::2] for e in entries)


@pytest.mark.usefixtures("sbatch")
@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_submit_keeps_the_state_dir_to_the_user_and_runs_sbatch_with_umask_077(
    cli: Cli, tmp_path: Path, umask: int
) -> None:
    old = os.umask(umask)
    try:
        result = cli("submit", "-q", *JOB)
    finally:
        os.umask(old)
    assert (result.code, result.out) == (0, "42\n"), result.err
    state = tmp_path / "state"
    rec = record.load("42", state)
    script = Path(rec.script_path)
    assert script.parent.parent == state

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert (mode(state), mode(state / "jobs"), mode(script.parent)) == (0o700, 0o700, 0o700)
    assert mode(state / "jobs" / "42.json") == 0o600
    assert mode(script) == 0o700
    assert (tmp_path / "sbatch-umask").read_text() == "0077\n"


@pytest.mark.usefixtures("sbatch")
def test_secrets_via_file_keeps_them_out_of_sbatch_s_environment(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    result = cli("submit", "-q", "--set", "slurm.secrets_via=file", *JOB)
    assert result.code == 0, result.err
    assert "HF_TOKEN" not in _sbatch_env(tmp_path)
    script = Path(record.load("42", tmp_path / "state").script_path)
    secrets = Path(f"{script}.secrets")
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert secrets.read_bytes() == f"HF_TOKEN={SENTINEL}\0".encode()
    # The submitted script reads that very file into the job's environment.
    done = subprocess.run(
        [
            "bash",
            "-c",
            _job_definitions(script.read_text()) + '\nload_secrets; printf "%s" "$HF_TOKEN"',
        ],
        capture_output=True,
        text=True,
        env={"PATH": SYSTEM_PATH},
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, SENTINEL), done.stderr
    # And Slurm's own copy of the script holds no value either.
    assert SENTINEL not in script.read_text()


@pytest.mark.usefixtures("sbatch")
@pytest.mark.parametrize("via", ["env", "file"])
def test_sbatch_gets_the_spec_in_its_environment_and_withheld_secrets_still_not(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    monkeypatch.setenv("NRL_JOB_SPEC", "a stale one, from the shell")
    result = cli("submit", "-q", "--set", f"slurm.secrets_via={via}", *JOB)
    assert result.code == 0, result.err
    env = _sbatch_env(tmp_path)
    rec = record.load("42", tmp_path / "state")
    # The job's own spec, exactly (sbatch --export=ALL passes it on to the batch step).
    assert json.loads(env["NRL_JOB_SPEC"]) == rec.spec
    assert "--export=ALL" in rec.argv
    assert ("HF_TOKEN" in env) == (via == "env")
    # The script holds the job's values, never its spec's JSON.
    assert '"backend":' not in Path(rec.script_path).read_text()


def test_the_local_job_starts_with_the_spec_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local backend's bash gets the request's variables beside this shell's own."""
    import time

    from nrl_launch.backends import Request

    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    job = tmp_path / "job.sh"
    seen = tmp_path / "seen"
    job.write_text(
        f'printf "%s|%s" "$NRL_JOB_SPEC" "$HF_TOKEN" >{shlex.quote(str(seen))}.tmp\n'
        f"mv {shlex.quote(str(seen))}.tmp {shlex.quote(str(seen))}\n"
    )
    request = Request(
        argv=("bash", str(job), "local-1"), script="", environment=(("NRL_JOB_SPEC", "{}"),)
    )
    local.BACKEND.submit(request, job_id="local-1", cwd=tmp_path, output=tmp_path / "out")
    deadline = time.monotonic() + 30
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen.read_text() == "{}|" + SENTINEL


def _load_secrets(tmp_path: Path, content: bytes, mode: int) -> subprocess.CompletedProcess[str]:
    secrets = tmp_path / "job.sh.secrets"
    secrets.write_bytes(content)
    secrets.chmod(mode)
    text, _ = _rendered("slurm-ray", slurm={"secrets_via": "file"})
    probe = (
        f"NRL_SECRETS_FILE={secrets}; load_secrets; "
        'printf "%s\\0" "${HF_TOKEN-unset}" "${EVIL_PATH-unset}"'
    )
    return _job_bash(text, probe, tmp_path)


def test_load_secrets_exports_the_job_s_secrets_only(tmp_path: Path) -> None:
    content = f"HF_TOKEN={SENTINEL}\0EVIL_PATH=/tmp/evil\0".encode()
    done = _load_secrets(tmp_path, content, 0o600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\0")[:-1] == [SENTINEL, "unset"]


def test_load_secrets_refuses_a_file_others_can_read(tmp_path: Path) -> None:
    secrets = tmp_path / "job.sh.secrets"
    done = _load_secrets(tmp_path, b"HF_TOKEN=x\0", 0o644)
    assert done.returncode == 0, done.stderr
    log_line, values = done.stdout.split("\n", 1)
    assert log_line.endswith(
        f"] not reading the secrets file {secrets}: it is not yours alone (mode 0600)"
    )
    assert values.split("\0")[:-1] == ["unset", "unset"]


def test_a_failed_sbatch_leaves_no_secrets_file(
    cli: Cli, sbatch: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    sbatch.answer("sbatch", stderr="sbatch: error: Batch job submission failed\n", code=1)
    result = cli("submit", "--set", "slurm.secrets_via=file", *JOB)
    assert result.code == 3
    assert list((tmp_path / "state" / "scripts").iterdir()) == []


# ---- The batch output of a job that refused to start ----


def test_diagnose_gives_the_job_s_refusal_as_the_cause(tmp_path: Path) -> None:
    from nrl_launch.jobs.diagnose import diagnose

    output = tmp_path / "slurm-5.out"
    reason = (
        "its log dir /l/5-logs exists already (made by someone else, or by an earlier job with "
        "this id): move it away and submit again"
    )
    output.write_text(
        "some site banner\n[nrl-launch 2025-01-01 00:00:00] nrl-launch refused to start the "
        f"job: {reason}\n"
    )
    found = diagnose(None, output)
    assert found is not None
    assert (found.cause, found.where) == (reason, "slurm-5.out line 2")
