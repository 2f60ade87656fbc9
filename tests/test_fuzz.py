"""Hypothesis over the whole job spec: every section at once, with hostile text wherever a field
takes text (quotes, `$(...)`, backquotes, `${x}`, newlines where the field allows them, tabs,
unicode, leading dashes, globs, `;`, `&&`, `!`, `%`...).

For each generated spec, every script it renders (the Ray job on Slurm, the plain job of `run`
and, for the local backend, the local script):

1. parses: `bash -n`;
2. is shellcheck clean (see `Shellcheck`: each case's value-bearing head, whole scripts for a
   sample);
3. hands every user value to a real bash unchanged: the driver argv, the job's environment after
   job_env (and the secrets, which it must leave alone), the setup command, the paths, the
   container's arguments, the spec JSON and the argv of the "Submit with" line.

The generator builds specs within the rules, so nearly all are accepted; one that is refused must
be refused with a ValidationError. `test_only_validation_errors` drives the spec with broken input
(valid specs with random values replaced by junk) to check just that, and that whatever it
accepts renders to a script bash parses.

The seed is fixed (derandomize): CI runs the same cases every time. NRL_LAUNCH_FUZZ_EXAMPLES=N
runs N whole specs instead of 1000 (and N/2 broken ones instead of 500), NRL_LAUNCH_FUZZ_RANDOM=1
new ones each run (for a long hunt: 3,000 random ones pass).

Cost, measured on a 2-core machine (AMD EPYC, bash 5.2, shellcheck 0.9.0): about 100 s of CPU
for the file, 55 s of wall time when the machine is otherwise idle (test_whole_spec 43 s,
test_only_validation_errors 10 s) and under 2 minutes while other jobs load it. The cost is in
shellcheck (see `Shellcheck`), hypothesis making the cases (about 15 ms each) and bash (about
3 ms a script to parse, 4 ms to run a probe).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import string
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, reject, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from nrl_launch import backends
from nrl_launch.backends import Request, slurm
from nrl_launch.spec import DEFAULT_DRIVERS, CachesSpec, LaunchSpec, reserved_env_name
from nrl_launch.spec.layers import describe_errors
from tests.conftest import need_tool, source_job

EXAMPLES = int(os.environ.get("NRL_LAUNCH_FUZZ_EXAMPLES", "1000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("NRL_LAUNCH_FUZZ_RANDOM"),
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# By its path: a secret may be named PATH.
BASH = shutil.which("bash") or "/bin/bash"
# What the probes run with: the variables the node steps get from the batch step.
LOG_DIR = "/logs/1-logs"
SUBMIT_DIR = "/submit"

# ---- Hostile text ----

# Pieces that mean something to bash, to sbatch, to pyxis or to a terminal.
FRAGMENTS = [
    *("'", '"', "''", "\\", "\\'", "$", "$'", '$"', "$(id)", "`id`", "${x}", "${x:-y}"),
    *("$HOME", "$0", "$@", "$*", "$1", "$((1+1))", "<(x)", ";", "&&", "||", "|", "&", "!"),
    *("!!", "*", "?", "[a]", "{a,b}", "~", "~root", "#", "%", "%j", "%%", "=", "-", "--"),
    *("-rf", "--x=y", "-c", " ", "  ", "\t", "\n", "\r", "\r\n", "<", ">", ">>", "<<EOF"),
    *("EOF", "(", ")", "{", "}", ",", ":", "/", "..", "é", "naïve", "☃", "日本語", "🚀"),
    *("\u00a0", "\u2028", "\u0085", "\ufeff", "\u202e", "\x1b[31m", "\x7f", "\x01", "\x80"),
    *("# shellcheck disable=all", "PY", "'\"'\"'", "\\n", "\\x41", "\\u2603"),
]
_any_char = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
_piece = st.one_of(
    st.sampled_from(FRAGMENTS),
    _any_char,
    st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=8),
)
# Any text a YAML file or a command line can carry: everything but NUL (and lone surrogates).
text = st.lists(_piece, max_size=8).map("".join)


def _printable(value: str) -> str:
    return "".join(ch for ch in value if ord(ch) >= 32 and ord(ch) != 127)


def _single_line(value: str) -> str:
    return value.replace("\n", "").replace("\r", "")


def _nonempty(value: str) -> str:
    return value if value.strip() else "x" + value


def _one_word(value: str) -> str:
    """A Slurm name has no spaces (the spec refuses one): hostile, but one word."""
    return "".join(c for c in value if not c.isspace()) or "x"


def _path(value: str) -> str:
    """An absolute path as mounts, workdirs and caches take it (pyxis splits on ',' and ':')."""
    return "/" + value.replace(",", "").replace(":", "")


nonempty = text.map(_nonempty)
path = text.map(_path)

# Names with a meaning to bash, to the tools a job runs, or to the job script itself; the spec
# refuses those it cannot pass on, the others must arrive like any name.
SPECIAL_NAMES = [
    *("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "CDPATH", "GLOBIGNORE", "POSIXLY_CORRECT"),
    *("COLUMNS", "LINES", "REPLY", "TMOUT", "PS0", "PS1", "PS2", "PS3", "PS4", "ENV", "OPTERR"),
    *("HISTFILE", "COMP_WORDBREAKS", "TIMEFORMAT", "PROMPT_COMMAND", "EXECIGNORE", "CHILD_MAX"),
    *("TERM", "SHELL", "TMPDIR", "LD_PRELOAD", "GLOBSORT", "histchars", "auto_resume"),
    *("COMMAND", "RAY_ADDRESS", "RAY_ENABLE_UV_RUN_RUNTIME_ENV"),
    *("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "HF_HOME", "TRANSFORMERS_CACHE"),
    *("HF_DATASETS_CACHE", "UV_CACHE_DIR", "ENROOT_CACHE_PATH"),
    # The script's own local variables: the job's env may shadow any of them.
    *("rc", "index", "node", "nodes", "workdir", "base", "name", "step", "mounts", "image"),
    # Refused by the spec (bash's, Slurm's and the script's own): see `cases`.
    *("IFS", "RANDOM", "BASH_ENV", "FUNCNEST", "SHLVL", "PIPESTATUS", "DIRSTACK", "MAPFILE"),
    *("COPROC", "SLURM_JOB_ID", "NRL_LOG_DIR"),
]
_ACCEPTED = [n for n in SPECIAL_NAMES if reserved_env_name(n) is None]
REFUSED_NAMES = [n for n in SPECIAL_NAMES if n not in _ACCEPTED]
# A secret comes from the environment bash starts with, and bash resets these then (PS4 when
# run as root): a secret of one of these names cannot reach the job. As env, set by job_env
# after bash has started, they arrive.
RESET_BY_BASH = {"PS1", "PS2", "PS4", "OPTERR", "COMP_WORDBREAKS"}
_plain_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: reserved_env_name(n) is None
)
env_name = st.one_of(_plain_name, _plain_name, st.sampled_from(_ACCEPTED))
# YAML reads `16` as an int and `1e-3` as a float; the spec takes both as text.
env_value = st.one_of(
    text,
    st.integers(-(10**6), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["0", "1", "2"]),  # FUNCNEST and the like read numbers
)


_DAYS, _HOURS, _UNDER_100 = st.integers(0, 400), st.integers(0, 23), st.integers(0, 99)
_TIME_FORM = st.sampled_from(["int", "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"])
_BLANK_BEFORE, _BLANK_AFTER = st.sampled_from(["", "", " ", "\t"]), st.sampled_from(["", " "])


@st.composite
def slurm_time(draw: st.DrawFn) -> int | str:
    """Every form sbatch's --time takes (and a bare YAML int, which is minutes)."""
    d, h, m, s = draw(_DAYS), draw(_HOURS), draw(_UNDER_100), draw(_UNDER_100)
    m60, s60 = m % 60, s % 60
    form = draw(_TIME_FORM)
    forms: dict[str, int | str] = {
        "int": max(m, 1),
        "M": f"{max(m, 1)}",
        "M:S": f"{m}:{s60:02d}",
        "H:M:S": f"{h}:{m60:02d}:{s60:02d}",
        "D-H": f"{d}-{h}",
        "D-H:M": f"{d}-{h:02d}:{m60}",
        "D-H:M:S": f"{d}-{h}:{m60:02d}:{s60:02d}",
    }
    value = forms[form]
    if isinstance(value, str):
        if not re.search("[1-9]", value):  # a zero time limit is refused
            value = value[:-1] + "1"
        # The spec takes a time with blanks around it, as sbatch does.
        value = draw(_BLANK_BEFORE) + value + draw(_BLANK_AFTER)
    return value


@dataclass
class Case:
    """A spec as a user would write it (`data`) and what each script must hand on."""

    data: dict[str, Any]
    command: list[str] | None
    env: dict[str, str]
    mounts: list[str] = field(default_factory=list)  # as the user wrote them, SRC:DST[:FLAGS]


_MOUNT_FORM = st.sampled_from(["path", "str", "dict"])
_MOUNT_FLAGS = st.one_of(st.none(), st.from_regex(r"[a-z]{1,8}(\+[a-z]{1,8}){0,2}", fullmatch=True))


@st.composite
def mount(draw: st.DrawFn) -> tuple[Any, str]:
    """A mount in one of the forms a job file takes, and the SRC:DST[:FLAGS] it means."""
    src = draw(path)
    form = draw(_MOUNT_FORM)
    if form == "path":
        return src, f"{src}:{src}"
    dst = src if draw(st.booleans()) else draw(path)
    flags = draw(_MOUNT_FLAGS)
    meant = f"{src}:{dst}" + (f":{flags}" if flags else "")
    if form == "str":
        return meant, meant
    return {"src": src, "dst": dst, "flags": flags}, meant


_PORT_NAMES = ["gcs", "client_server", "dashboard", "dashboard_agent_listen"]
_PORT_NAMES += ["dashboard_agent_grpc", "node_manager", "object_manager", "runtime_env_agent"]
_PORT_NAMES += ["metrics_export"]
_PORT = st.integers(1, 65535)


@st.composite
def ray_ports(draw: st.DrawFn, gpus: int) -> dict[str, int]:
    """Distinct ports, none in a worker range wide enough for `gpus` GPUs."""
    width = draw(st.integers(max(64, 16 * gpus), 20000))
    low = draw(st.integers(1, 65536 - width))
    high = low + width - 1
    ports: list[int] = []
    while len(ports) < len(_PORT_NAMES):
        port = draw(_PORT)
        if not low <= port <= high and port not in ports:
            ports.append(port)
    return {**dict(zip(_PORT_NAMES, ports, strict=True)), "worker_min": low, "worker_max": high}


# Built once: hypothesis validates a strategy the first time it draws from it.
GPUS = [0, 1, 4, 8, 16]
_PORTS = {gpus: st.one_of(st.none(), ray_ports(gpus)) for gpus in GPUS}
_FIFTH = st.integers(0, 4)
_BOOL = st.booleans()
_MAYBE_BOOL = st.one_of(st.none(), _BOOL)
_MAYBE_TEXT = st.one_of(st.none(), text)
# A value of an #SBATCH line: one line (sbatch reads the script line by line).
_MAYBE_SBATCH_VALUE = st.one_of(st.none(), text.map(_one_word))
_MAYBE_PATH = st.one_of(st.none(), path)
_JOB_NAME = st.one_of(st.none(), text.map(_printable).map(_nonempty))
_NODES = st.integers(1, 64)
_GPU_REQUEST = st.one_of(st.none(), st.sampled_from(["gres", "gpus-per-node", "none"]))
_CPUS = st.one_of(st.none(), st.integers(1, 256))
# Raw sbatch flags nrl-launch does not own, each with a hostile single-line value (flags it
# owns, or a bare word, are refused: tests/spec/test_sbatch_args.py covers those).
_FREE_FLAGS = ("--comment", "--constraint", "--mail-user", "--mail-type", "--licenses", "--mem")
_EXTRA_ARGS = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.sampled_from(_FREE_FLAGS), text.map(_printable)).map(
            lambda pair: f"{pair[0]}={pair[1]}"
        ),
        max_size=4,
    ),
)
_MOUNTS = st.lists(mount(), max_size=4)
_TIMEOUT = st.one_of(st.none(), st.integers(1, 10**6))
_BASE_DIR = st.one_of(nonempty, path)
_CACHES = st.one_of(
    st.none(),
    path,  # the shorthand for caches.dir
    st.fixed_dictionaries(
        {}, optional={k: path for k in ("dir", "hf_home", "uv", "megatron", "enroot")}
    ),
)
_ENV = st.dictionaries(env_name, env_value, max_size=6)
_SECRETS = st.lists(env_name, max_size=3, unique=True)
_ONE_IN_50 = st.integers(0, 49)
_RECIPE = st.sampled_from(sorted(DEFAULT_DRIVERS))
_LAUNCHER = st.lists(nonempty, min_size=1, max_size=3)
_OVERRIDES = st.lists(text, max_size=5)
_ARGS = st.lists(text, max_size=6)
_FIRST = text.filter(bool)
_MARGIN = st.one_of(st.none(), st.integers(1, 600))
_WORKDIR = st.one_of(st.none(), text, path)


# The slurm keys each written as one --KEY=VALUE flag.
_SBATCH_KEYS = ("account", "partition", "qos", "reservation", "exclude", "constraint", "dependency")


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    """Set `key` unless `value` is None (a key left out takes its default)."""
    if value is not None:
        target[key] = value


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A whole job spec: every section, valid by construction (bar a refused name now and then)."""
    local = draw(_FIFTH) == 0
    interactive = draw(_FIFTH) == 0
    gpus = draw(st.sampled_from(GPUS))
    data: dict[str, Any] = {}
    if local or draw(_BOOL):
        data["backend"] = "local" if local else "slurm"
    _put(data, "interactive", interactive or (None if draw(_BOOL) else False))

    s: dict[str, Any] = {"gpus_per_node": gpus}
    _put(s, "job_name", draw(_JOB_NAME))
    s["nodes"] = 1 if local else draw(_NODES)
    s["time"] = draw(slurm_time())
    for key in _SBATCH_KEYS:
        _put(s, key, draw(_MAYBE_SBATCH_VALUE))
    _put(s, "exclusive", draw(_MAYBE_BOOL))
    _put(s, "requeue", draw(_MAYBE_BOOL))
    _put(s, "gpu_request", draw(_GPU_REQUEST))
    _put(s, "cpus_per_node", draw(_CPUS))
    extra = draw(_EXTRA_ARGS)
    if extra is not None and "constraint" in s:  # sbatch would keep only the last one
        extra = [arg for arg in extra if not arg.startswith("--constraint=")]
    _put(s, "extra_args", extra)
    data["slurm"] = s

    mounts: list[str] = []
    pyxis = not local and draw(_BOOL)
    if pyxis:
        pairs = draw(_MOUNTS)
        mounts = [meant for _, meant in pairs]
        c: dict[str, Any] = {"image": draw(nonempty), "mounts": [given for given, _ in pairs]}
        _put(c, "runtime", "pyxis" if draw(_BOOL) else None)
        _put(c, "workdir", draw(_MAYBE_PATH))
        _put(c, "mount_home", draw(_MAYBE_BOOL))
        data["container"] = c
    elif draw(_BOOL):
        data["container"] = {"runtime": "none"}

    ray: dict[str, Any] = {}
    _put(ray, "ports", draw(_PORTS[gpus]))
    timeouts: dict[str, Any] = {}
    for key in ("head_start_s", "join_s", "driver_s"):
        _put(timeouts, key, draw(_TIMEOUT))
    _put(ray, "timeouts", timeouts or None)
    _put(data, "ray", ray or None)

    # The log dir: relative or absolute, never '%' or '\' (sbatch patterns), one line (it goes
    # on an #SBATCH line); with pyxis, never ',' or ':' either (it is mounted).
    base = _single_line(draw(_BASE_DIR)).replace("%", "").replace("\\", "")
    base = _path(base)[1:] if pyxis else base
    _put(data, "logs", {"base_dir": _nonempty(base)} if draw(_BOOL) else None)

    caches = draw(_CACHES)
    _put(data, "caches", caches)

    # The names the caches set are refused in env and secrets (tried now and then below). A
    # secret comes from the environment bash starts with: not one that bash resets then.
    taken = set(CachesSpec.model_validate(caches).env()) if caches else set()
    env = {k: v for k, v in draw(_ENV).items() if k not in taken}
    secrets = [n for n in draw(_SECRETS) if n not in {*env, *taken, *RESET_BY_BASH}]
    # Now and then (hypothesis favours 0 and the ends of a range: not them) a name the spec
    # refuses, which must be refused with a ValidationError.
    if draw(_ONE_IN_50) == 25:
        name = draw(st.sampled_from([*REFUSED_NAMES, *sorted(taken)]))
        if draw(_BOOL):
            env[name] = draw(env_value)
        else:
            secrets.append(name)
    _put(data, "env", env or None)
    _put(data, "secrets", secrets or None)
    _put(data, "setup", draw(_MAYBE_TEXT))

    driver: dict[str, Any] = {}
    nemo: dict[str, Any] = {}
    command: list[str] | None = None
    if not interactive:
        if draw(_BOOL):
            # What `_with_command` builds from a recipe: launcher, driver, config, overrides.
            recipe = draw(_RECIPE)
            launcher = draw(_LAUNCHER)
            drivers = {recipe: draw(nonempty)} if draw(_BOOL) else {}
            config, overrides = draw(nonempty), draw(_OVERRIDES)
            command = [*launcher, drivers.get(recipe, DEFAULT_DRIVERS[recipe])]
            command += ["--config", config, *overrides]
            nemo = {"config": config, "overrides": overrides, "launcher": launcher}
            _put(nemo, "drivers", drivers or None)
        else:
            command = [draw(_FIRST), *draw(_ARGS)]
        driver["command"] = command
    elif draw(_BOOL):
        nemo = {"config": draw(nonempty), "overrides": draw(_OVERRIDES)}
    _put(nemo, "check", draw(_MAYBE_BOOL))
    _put(nemo, "checkpoint_margin_min", draw(_MARGIN))
    _put(driver, "workdir", draw(_WORKDIR))
    _put(data, "driver", driver or None)
    _put(data, "nemo_rl", nemo or None)
    return Case(data, command, {k: str(v) for k, v in env.items()}, mounts)


# ---- Running the rendered code in a real bash ----


def _definitions(script: str) -> str:
    """The script's assignments and functions, as bash has them once it sources the script."""
    return source_job(script)


def _submit_line(script: str) -> str:
    # Split on "\n" only: str.splitlines() also splits on U+2028, U+0085..., which a quoted
    # value holds raw and bash does not split on.
    for text_line in script.split("\n")[:4]:
        for prefix in ("# Submit with: ", "# Run with: "):
            if text_line.startswith(prefix):
                return text_line.removeprefix(prefix)
    raise AssertionError("no 'Submit with' or 'Run with' line in the script's header")


@dataclass
class Probe:
    """Bash code that prints named sections of values, and the values each must have."""

    code: list[str] = field(default_factory=list)
    expected: list[tuple[str, list[str]]] = field(default_factory=list)

    def emit(self, name: str, words: str, expected: list[str]) -> None:
        self.code.append(f"emit {words}")
        self.expected.append((name, expected))


def _sections(out: bytes) -> Iterator[list[str]]:
    records = out.decode("utf-8", "surrogateescape").split("\0")[:-1]
    i = 0
    while i < len(records):
        n = int(records[i])
        yield records[i + 1 : i + 1 + n]
        i += 1 + n


def run_probe(script: str, probe: Probe, secrets: dict[str, str]) -> None:
    """Run the script's definitions, then `probe`, in a real bash; compare every section."""
    code = "\n".join(
        [_definitions(script), 'emit() { printf \'%s\\0\' "$#" "$@"; }', *probe.code, ""]
    )
    result = subprocess.run(
        [BASH, "-c", code],
        capture_output=True,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "NRL_LOG_DIR": LOG_DIR,
            "NRL_SUBMIT_DIR": SUBMIT_DIR,
            "SLURM_SUBMIT_DIR": SUBMIT_DIR,
            **secrets,
        },
    )
    got = list(_sections(result.stdout))
    for (name, expected), arrived in zip(probe.expected, got, strict=False):
        assert arrived == expected, f"{name}: bash got {arrived!r}, expected {expected!r}"
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    assert len(got) == len(probe.expected), result.stderr.decode("utf-8", "replace")


def _gpu_flag(spec: LaunchSpec) -> list[str]:
    s = spec.slurm
    if not s.gpus_per_node or s.gpu_request == "none":
        return []
    if s.gpu_request == "gres":
        return [f"--gres=gpu:{s.gpus_per_node}"]
    return [f"--gpus-per-node={s.gpus_per_node}"]


def _step_args(spec: LaunchSpec, ray: bool) -> list[str]:
    s = spec.slurm
    cpus = [f"--cpus-per-task={s.cpus_per_node}"] if s.cpus_per_node else []
    if ray:
        return ["--ntasks-per-node=1", *cpus, *_gpu_flag(spec)]
    label = ["--label"] if s.nodes > 1 else []
    nodes = [f"--nodes={s.nodes}", f"--ntasks={s.nodes}", "--ntasks-per-node=1"]
    return [*nodes, *cpus, *_gpu_flag(spec), "--kill-on-bad-exit=1", *label]


def _container_args(spec: LaunchSpec, mounts: list[str], attach: bool) -> list[str]:
    c = spec.container
    if c.runtime == "none":
        return []
    image = [] if attach else [f"--container-image={c.image}"]
    return [
        *image,
        "--container-mounts=" + ",".join([*mounts, f"{LOG_DIR}:{LOG_DIR}"]),
        f"--container-workdir={c.workdir or SUBMIT_DIR}",
        "--container-name=ray-head",
        "--container-mount-home" if c.mount_home else "--no-container-mount-home",
    ]


def _sbatch_argv(case: Case, spec: LaunchSpec, ray: bool = True) -> list[str]:
    """What sbatch must receive, from the user's values (not from the code that renders it)."""
    s = case.data["slurm"]
    base = case.data.get("logs", {}).get("base_dir", ".")
    flags = [
        f"--job-name={s.get('job_name', 'nrl-launch')}",
        f"--nodes={s['nodes']}",
        "--ntasks-per-node=1",
        "--export=ALL",
        f"--output={base}/slurm-%j.out",
        "--open-mode=append",  # a requeued job's runs all keep their output
    ]
    flags += [f"--{key}={s[key]}" for key in _SBATCH_KEYS if key in s]
    if "requeue" in s:
        flags.append("--requeue" if s["requeue"] else "--no-requeue")
    if "cpus_per_node" in s:
        flags.append(f"--cpus-per-task={s['cpus_per_node']}")
    if "time" in s:  # none: the partition's default time limit
        flags.append(f"--time={s['time']}")
    # Unset: whole nodes for a Ray job, and for a plain one with GPUs.
    if s.get("exclusive", ray or spec.slurm.gpus_per_node > 0):
        flags.append("--exclusive")
    flags += _gpu_flag(spec)
    return ["sbatch", "--parsable", *sorted(flags), *s.get("extra_args", []), "nrl-launch.sbatch"]


def probe_for(case: Case, spec: LaunchSpec, request: Request, kind: str) -> Probe:
    """Everything a script of `kind` (slurm, plain or local) must hand on, section by section."""
    p = Probe()
    ray = kind != "plain"
    p.emit("driver argv", '"${NRL_DRIVER[@]}"', case.command or [])
    d = case.data
    p.emit("driver workdir", '"$NRL_DRIVER_WORKDIR"', [d.get("driver", {}).get("workdir", "")])
    p.emit("setup", '"$NRL_SETUP"', [d.get("setup") or ""])
    p.emit("log dir", '"$NRL_BASE_LOG_DIR"', [d.get("logs", {}).get("base_dir", ".")])
    p.emit("nodes", '"$NRL_NODES"', [str(d["slurm"]["nodes"])])
    p.emit("cache dirs", '"${NRL_CACHE_DIRS[@]}"', spec.caches.roots())
    if ray:
        t = spec.ray.timeouts
        numbers = [spec.slurm.gpus_per_node, spec.slurm.cpus_per_node or "", int(spec.interactive)]
        numbers += [
            t.head_start_s,
            t.join_s,
            t.driver_s or "",
            *spec.ray.ports.model_dump().values(),
        ]
        p.emit(
            "numbers",
            '"$NRL_GPUS_PER_NODE" "$NRL_CPUS_PER_NODE" "$NRL_INTERACTIVE" '
            '"$NRL_HEAD_START_TIMEOUT" "$NRL_JOIN_TIMEOUT" "$NRL_DRIVER_TIMEOUT" '
            '"$NRL_GCS_PORT" "$NRL_RAY_CLIENT_SERVER_PORT" "$NRL_DASHBOARD_PORT" '
            '"$NRL_DASHBOARD_AGENT_LISTEN_PORT" "$NRL_DASHBOARD_AGENT_GRPC_PORT" '
            '"$NRL_NODE_MANAGER_PORT" "$NRL_OBJECT_MANAGER_PORT" "$NRL_RUNTIME_ENV_AGENT_PORT" '
            '"$NRL_METRICS_EXPORT_PORT" "$NRL_MIN_WORKER_PORT" "$NRL_MAX_WORKER_PORT"',
            [str(n) for n in numbers],
        )
    if kind != "local":
        p.emit("srun step args", '"${NRL_STEP_ARGS[@]}"', _step_args(spec, ray))
        # The user's mounts, then the caches they do not cover (a Ray job and a plain one alike).
        mounts = slurm.container_mounts(spec)
        assert mounts[: len(case.mounts)] == case.mounts
        for attach in (False, True):
            p.code.append(f"set_container_args ray-head{' attach' if attach else ''}")
            args = _container_args(spec, mounts, attach)
            p.emit(f"container args (attach={attach})", '"${NRL_CONTAINER_ARGS[@]}"', args)
    # The submit (or run) line of the header, pasted into bash.
    program = "bash" if kind == "local" else "sbatch"
    p.code.append(
        f'{program}() {{ emit "$@"; }}\n{_submit_line(request.script)}\nunset -f {program}'
    )
    if kind == "local":
        p.expected.append(("run command", ["nrl-launch.sh", "JOBID"]))
    else:
        p.expected.append(("submit command", _sbatch_argv(case, spec, ray)[1:]))
    # The spec travels beside the script (submit passes it in NRL_JOB_SPEC), never in it.
    assert dict(request.environment) == {"NRL_JOB_SPEC": spec.model_dump_json()}
    p.emit("no spec json", '"${NRL_JOB_SPEC-unset}"', ["unset"])
    # The environment, last: it may change how bash behaves. In a function, as on a node
    # (node_main > enter_job_env > job_env), so that FUNCNEST and the like take effect. The
    # user's values win over the script's default for RAY_ENABLE_UV_RUN_RUNTIME_ENV; a name
    # both in env and set by the caches is refused.
    env = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", **spec.caches.env(), **case.env}
    body = ["probe_env() {", "  job_env"]
    for name, value in env.items():
        if name not in spec.secrets:
            body.append(f'  emit "${{{name}}}" "${{{name}@a}}"')
            p.expected.append((f"env {name}", [value, "x"]))
    for name in spec.secrets:
        body.append(f'  emit "${{{name}-}}"')
        p.expected.append((f"secret {name}", [_secret(name)]))
    p.code.append("\n".join([*body, "}", "probe_env"]))
    return p


def _secret(name: str) -> str:
    return f"secret value of {name} $(x) '\n"


# ---- shellcheck, in batches, beside the cases ----


class Shellcheck:
    """shellcheck over many scripts, in the background while hypothesis makes more cases.

    shellcheck takes about 0.5 s for a whole Ray job script and 40 ms for its head (the header,
    the job's values and environment, the srun and container arguments: every line a user value
    reaches), however many files one process checks. So every case's heads are checked, with
    SC2034 off (their variables are used further down), and every `full_every`-th case's whole
    scripts as they are, with no code off.
    """

    def __init__(self, directory: Path, full_every: int = 40, batch: int = 100) -> None:
        self.tool = need_tool("shellcheck")
        self.directory = directory
        self.full_every = full_every
        self.batch = batch
        self.cases = 0
        self.pending: dict[bool, list[Path]] = {True: [], False: []}  # by whether a head
        self.running: list[tuple[subprocess.Popen[str], list[Path]]] = []
        self.problems: list[str] = []
        self.spec_of: dict[Path, str] = {}

    def add(self, spec: LaunchSpec, scripts: dict[str, str]) -> None:
        n = self.cases
        self.cases += 1
        for kind, script in scripts.items():
            head = script.split("\nlog() {")[0] + "\n"
            assert head != script + "\n", "the script has no log() after its values"
            files = [(True, head)] + ([(False, script)] if n % self.full_every == 0 else [])
            for is_head, content in files:
                name = f"{n:05d}-{kind}{'-head' if is_head else ''}.sh"
                file = self.directory / name
                file.write_text(content, encoding="utf-8")
                self.spec_of[file] = spec.model_dump_json()
                self.pending[is_head].append(file)
        if sum(map(len, self.pending.values())) >= self.batch:
            self._start()

    def _start(self) -> None:
        for is_head, files in self.pending.items():
            if not files:
                continue
            excluded = ["--exclude=SC2034"] if is_head else []
            argv = [self.tool, "--shell=bash", "--severity=style", "--format=gcc", *excluded]
            self.running.append(
                (
                    subprocess.Popen([*argv, *map(str, files)], stdout=subprocess.PIPE, text=True),
                    files,
                )
            )
            self.pending[is_head] = []
        # Never more than two at once: the cases (hypothesis, bash) need a core too.
        while len(self.running) > 2:
            self._collect(self.running.pop(0))

    def _collect(self, item: tuple[subprocess.Popen[str], list[Path]]) -> None:
        process, files = item
        out, _ = process.communicate()
        if process.returncode != 0:
            by_file: dict[str, list[str]] = {}
            for message in out.splitlines():
                by_file.setdefault(message.split(":", 1)[0], []).append(message)
            for name, messages in by_file.items():
                spec_json = self.spec_of.get(Path(name), "?")
                self.problems.append("\n".join([*messages[:10], f"  spec: {spec_json}", ""]))
            if not by_file:
                self.problems.append(f"shellcheck failed on {files[0]}...: {out}")

    def finish(self) -> list[str]:
        self._start()
        while self.running:
            self._collect(self.running.pop(0))
        return self.problems

    def stop(self) -> None:
        """End the checks still running (a case failed: their results no longer count)."""
        for process, _ in self.running:
            process.kill()
            process.communicate()
        self.running = []


def _bash_n(script: str) -> None:
    # The script as an argument: bash reads a script from a pipe one byte at a time.
    result = subprocess.run([BASH, "-n", "-c", script], capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")


def _validate(data: dict[str, Any]) -> LaunchSpec | None:
    """The spec, or None where it is refused; refused any other way than by a ValidationError,
    or with a message that cannot be described to the user, fails."""
    try:
        return LaunchSpec.model_validate(data)
    except ValidationError as exc:
        lines = describe_errors(exc, {})
        assert lines, exc
        assert all(isinstance(x, str) and x for x in lines), lines
        return None


@pytest.mark.slow
def test_whole_spec(tmp_path: Path) -> None:
    """EXAMPLES whole specs, through every script each renders (see the module's docstring)."""
    checker = Shellcheck(tmp_path)
    refused: list[int] = [0]
    ran: list[int] = [0]

    @FUZZ
    @given(case=cases())
    def one(case: Case) -> None:
        spec = _validate(case.data)
        if spec is None:
            refused[0] += 1
            reject()
        note(f"spec: {spec.model_dump_json()}")
        requests: dict[str, Request] = {spec.backend: backends.plan(spec)}
        if spec.backend == "slurm" and spec.driver.command:
            requests["plain"] = slurm.plan_plain(spec)
        secrets = {name: _secret(name) for name in spec.secrets}
        for kind, request in requests.items():
            _bash_n(request.script)
            run_probe(request.script, probe_for(case, spec, request, kind), secrets)
        if spec.backend == "slurm":
            assert list(requests["slurm"].argv) == _sbatch_argv(case, spec)
        checker.add(spec, {k: r.script for k, r in requests.items()})
        ran[0] += 1

    try:
        one()
    except BaseException:
        checker.stop()
        raise
    problems = checker.finish()
    assert not problems, "shellcheck:\n" + "\n".join(problems[:20])
    assert ran[0] >= EXAMPLES, f"only {ran[0]} cases ran ({refused[0]} refused)"
    # Nearly every generated spec is valid: the cases test the scripts, not the refusals.
    assert refused[0] <= ran[0] // 10, f"{refused[0]} of {ran[0] + refused[0]} refused"


# ---- Broken input: refused with a ValidationError, or rendered to a script bash parses ----

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    text,
    st.lists(text, max_size=3),
    st.dictionaries(text, text, max_size=2),
)


def _slots(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) under `node`: each place a value sits in a nested dict or list."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        yield node, key
        if isinstance(value, (dict, list)):
            yield from _slots(value)


@st.composite
def broken_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec with one to three values replaced by junk, removed, or joined by a key the
    spec does not know."""
    data = copy.deepcopy(draw(cases()).data)
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(data))
        action = draw(st.sampled_from(["junk", "remove", "unknown"]))
        if action == "unknown" or not slots:
            dicts = [data, *(v[k] for v, k in slots if isinstance(v[k], dict))]
            draw(st.sampled_from(dicts))[draw(text)] = draw(JUNK)
            continue
        parent, key = draw(st.sampled_from(slots))
        if action == "junk":
            parent[key] = draw(JUNK)
        else:
            del parent[key]
    return data


@pytest.mark.slow
@settings(FUZZ, max_examples=max(EXAMPLES // 2, 1))
@given(data=broken_specs())
def test_only_validation_errors(data: dict[str, Any]) -> None:
    spec = _validate(data)
    if spec is not None:
        _bash_n(backends.plan(spec).script)
        if spec.backend == "slurm":
            _bash_n(slurm.plan_plain(spec).script)
