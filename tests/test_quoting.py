"""Hostile values must reach bash byte for byte: each test renders a job, runs the rendered code
in a real bash and compares what arrives with what was given (submitit's weird-path idea)."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrl_launch.backends import Request, slurm
from nrl_launch.shell import quote
from nrl_launch.spec import reserved_env_name
from tests.conftest import Cli, shellcheck
from tests.helpers import HOSTILE, HOSTILE_PATHS, MISREAD, bash_values, spec, submit_argv


@pytest.mark.parametrize("script", [False, True], ids=["command-line", "script"])
def test_quote_round_trips_each_hostile_value(script: bool) -> None:
    values = HOSTILE + MISREAD
    code = "set -eu\n" + "".join(f"printf '%s\\0' {quote(v, script=script)}\n" for v in values)
    out = subprocess.run(["bash", "-c", code], capture_output=True, check=True).stdout
    assert out.decode().split("\0")[:-1] == values


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("$HOME", "$'$HOME'"),
        ("`id`", "$'`id`'"),
        ("a\\", "$'a\\\\'"),
        ("a,b", "'a,b'"),
        ("=x", "'=x'"),
        ("1=x", "'1=x'"),
        ("a+=x", "'a+=x'"),
        ("a=b", "a=b"),  # as NeMo RL's overrides are: left bare
        ("++a.b=1", "++a.b=1"),
    ],
)
def test_script_words(value: str, word: str) -> None:
    assert quote(value, script=True) == word
    # A command line for a user keeps the plainer form.
    assert quote(value) in (word, shlex.quote(value))


def test_script_words_are_shellcheck_clean(tmp_path: Path) -> None:
    words = [quote(v, script=True) for v in HOSTILE + MISREAD]
    path = tmp_path / "words.sh"
    path.write_text(
        "#!/usr/bin/env bash\n"
        + "".join(f"A{i}={w}\nexport E{i}={w}\n" for i, w in enumerate(words))
        + f"ARGV=({' '.join(words)})\n"
        + 'printf "%s\\n" "${ARGV[@]}" '
        + " ".join(f'"$A{i}"' for i in range(len(words)))
        + "\n"
    )
    result = shellcheck(path)
    assert result.returncode == 0, result.stdout


def test_hostile_job_is_shellcheck_clean(tmp_path: Path) -> None:
    """Values in the places shellcheck read them wrongly (found by test_fuzz): a log dir with
    quotes in it flows into an exported variable (SC2089/SC2090), a prompt names variables it
    expands when shown (SC2154)."""
    job = spec(
        logs={"base_dir": "/l/'it' \"is\" a dir"},
        env={"PS1": "${x}$(y) ", "PS4": "+ $LINENO", "PROMPT_COMMAND": "echo $z"},
        driver={"command": ["python", *HOSTILE, *MISREAD]},
    )
    for name, script in [
        ("slurm", slurm.plan(job).script),
        ("plain", slurm.plan_plain(job).script),
    ]:
        path = tmp_path / f"{name}.sbatch"
        path.write_text(script)
        result = shellcheck(path)
        assert result.returncode == 0, result.stdout


# Names the spec refuses because bash keeps them for itself (found by test_fuzz): what a job
# that set them would get. Each script fails where the value would be lost or break the job.
BASH_OWN = {
    # job_env sets it; the script's next call of a function from a function aborts it.
    "FUNCNEST": "job_env() { export FUNCNEST=1; }; f() { g; }; g() { :; }; job_env; f",
    # job_env sets them; the command the job runs does not get them.
    "PIPESTATUS": "job_env() { export PIPESTATUS=1; }; job_env; (exec env) | grep -qx PIPESTATUS=1",
    "DIRSTACK": "job_env() { export DIRSTACK=1; }; job_env; (exec env) | grep -qx DIRSTACK=1",
    # As a secret (in the environment bash starts with), bash counts it up.
    "SHLVL": "[[ $SHLVL == 1 ]]",
}


@pytest.mark.parametrize("name", BASH_OWN)
def test_bash_keeps_these_names_for_itself(name: str) -> None:
    assert reserved_env_name(name) is not None
    # As the job script starts (once `set` has run, PIPESTATUS is bash's array).
    code = "set -euo pipefail\n" + BASH_OWN[name]
    env = {"PATH": "/usr/bin:/bin", "SHLVL": "1"}
    result = subprocess.run(["bash", "-c", code], capture_output=True, env=env)
    assert result.returncode != 0


def test_the_job_s_own_ray_enable_uv_run_runtime_env_wins() -> None:
    """The script turns Ray's uv runtime env off unless the job turns it on (found by test_fuzz:
    the job's env value and a secret of that name were overwritten)."""
    name = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
    probe = f'job_env; printf "%s\\0" "${name}"'
    assert bash_values(slurm.plan(spec()).script, probe) == ["0"]
    assert bash_values(slurm.plan(spec(env={name: "1"})).script, probe) == ["1"]
    # A secret comes from the environment the job starts in.
    assert bash_values(slurm.plan(spec(secrets=[name])).script, f"export {name}=2; {probe}") == [
        "2"
    ]


def test_quoted_values_never_put_a_raw_newline_in_the_script() -> None:
    request = slurm.plan(spec(driver={"command": ["python", "a\nEOF\nb"]}, env={"X": "1\n2"}))
    lines = request.script.splitlines()
    assert not any(line in ("EOF", "b", "2'") for line in lines)


def test_driver_argv_arrives_unchanged() -> None:
    command = ["uv", *HOSTILE]
    request = slurm.plan(spec(driver={"command": command}))
    assert bash_values(request.script, 'printf "%s\\0" "${NRL_DRIVER[@]}"') == command


def test_env_values_arrive_unchanged() -> None:
    env = {f"V{i}": v for i, v in enumerate(HOSTILE)}
    request = slurm.plan(spec(env=env))
    probe = "job_env\n" + "".join(f'printf "%s\\0" "${name}"\n' for name in env)
    assert bash_values(request.script, probe) == list(env.values())


@pytest.mark.parametrize("value", HOSTILE_PATHS)
def test_paths_arrive_unchanged(value: str) -> None:
    # sbatch reads '\' in --output as a pattern switch, so the log dir refuses it (see
    # test_errors), and a line break, which no #SBATCH line can hold; every other path takes them.
    log_dir = value.replace("\\", "").replace("\n", "").replace("\r", "")
    request = slurm.plan(
        spec(
            logs={"base_dir": log_dir},
            caches={"hf_home": value, "uv": value},
            setup=value,
            driver={"command": ["python"], "workdir": value},
        )
    )
    probe = (
        'job_env; printf "%s\\0" "$NRL_BASE_LOG_DIR" "$NRL_DRIVER_WORKDIR" "$HF_HOME" '
        '"$UV_CACHE_DIR" "$NRL_SETUP"'
    )
    assert bash_values(request.script, probe) == [log_dir] + [value] * 4


@pytest.mark.parametrize("value", HOSTILE_PATHS)
def test_container_mounts_image_and_workdir_arrive_unchanged(value: str) -> None:
    request = slurm.plan(
        spec(
            container={
                "image": value + ".sqsh",
                "mounts": [f"{value}:{value}:ro", value],
                "workdir": value,
            }
        )
    )
    args = bash_values(
        request.script, 'set_container_args ray-head; printf "%s\\0" "${NRL_CONTAINER_ARGS[@]}"'
    )
    assert args == [
        f"--container-image={value}.sqsh",
        f"--container-mounts={value}:{value}:ro,{value}:{value},/logs/1-logs:/logs/1-logs",
        f"--container-workdir={value}",
        "--container-name=ray-head",
        "--no-container-mount-home",
    ]


@pytest.mark.parametrize("value", [v for v in HOSTILE if v and not any(c in v for c in "\n\t\r\\")])
def test_job_name_and_log_dir_reach_sbatch_unchanged(value: str) -> None:
    request = slurm.plan(spec(slurm={"job_name": value}, logs={"base_dir": "/l/" + value}))
    argv = submit_argv(request.script)
    assert argv == list(request.argv)
    assert f"--job-name={value}" in argv
    assert f"--output=/l/{value}/slurm-%j.out" in argv


@pytest.mark.parametrize("plan", [slurm.plan, slurm.plan_plain])
def test_the_spec_travels_beside_the_script_not_in_it(plan: Callable[..., Request]) -> None:
    """The job's full spec reaches it in NRL_JOB_SPEC, in the environment submit starts it
    with (the job writes it to spec.json); the script holds its values, never its JSON."""
    job = spec(env={"X": "\n'\"$(x)"}, driver={"command": HOSTILE[:1] + HOSTILE})
    request = plan(job)
    (name, text), *rest = request.environment
    assert (name, rest) == ("NRL_JOB_SPEC", [])
    assert json.loads(text) == job.model_dump(mode="json")
    assert '"backend":' not in request.script and text not in request.script
    # The longest line is a value of the job's own (its driver), never the whole spec.
    longest = max(len(line) for line in request.script.split("\n"))
    assert longest < len(text) // 2, longest
    (unset,) = bash_values(request.script, 'printf "%s\\0" "${NRL_JOB_SPEC-unset}"')
    assert unset == "unset"


def test_hostile_values_through_the_cli(cli: Cli) -> None:
    """The same values typed on a command line: flags, --env, --mount and the driver argv."""
    mount = HOSTILE_PATHS[4]
    args = [
        "render",
        "--json",
        "--job-name",
        "a 'b' \"c\" $(d)",
        "--env",
        "X=" + HOSTILE[8],
        "--mount",
        f"{mount}:{mount}",
        "--container",
        "img",
        "--",
    ]
    result = cli(*args, *HOSTILE[1:])
    assert result.code == 0, result.err
    request = json.loads(result.out)
    script = request["script"]
    assert bash_values(script, 'printf "%s\\0" "${NRL_DRIVER[@]}"') == HOSTILE[1:]
    assert bash_values(script, 'job_env; printf "%s\\0" "$X"') == [HOSTILE[8]]
    assert submit_argv(script) == request["argv"]


@pytest.mark.parametrize(
    "dirname", ["a 0", "a'; echo foo", 'a"=0"', "a\\=0", "a\n0", "-x *"], ids=repr
)
def test_render_to_weird_path(cli: Cli, tmp_path: Path, dirname: str) -> None:
    target_dir = tmp_path / dirname
    target_dir.mkdir()
    target = target_dir / "job.sbatch"
    result = cli("render", "--interactive", "-o", str(target))
    assert result.code == 0, result.err
    assert target.read_text().startswith("#!/usr/bin/env bash")
    assert target.stat().st_mode & 0o777 == 0o755
    assert submit_argv(target.read_text())[-1] == str(target)
    # stdout is the submit command line, which bash reads back as the same argv
    echoed = (
        subprocess.run(
            ["bash", "-c", "sbatch() { printf '%s\\0' \"$@\"; }\n" + result.out],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")[:-1]
    )
    assert echoed[-1] == str(target)


# Any text a YAML file or a command line can carry: everything but NUL (and lone surrogates,
# which are not text).
_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    command=st.lists(_text, min_size=1, max_size=6).filter(lambda c: bool(c[0])),
    env=st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
            lambda name: reserved_env_name(name) is None
        ),
        _text,
        max_size=4,
    ),
)
def test_generated_values_arrive_unchanged(command: list[str], env: dict[str, str]) -> None:
    request = slurm.plan(spec(driver={"command": command}, env=env))
    probe = 'printf "%s\\0" "${NRL_DRIVER[@]}"; job_env\n' + "".join(
        f'printf "%s\\0" "${name}"\n' for name in env
    )
    assert bash_values(request.script, probe) == [*command, *env.values()]
