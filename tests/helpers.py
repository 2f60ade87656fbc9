"""Helpers that more than one test module uses: import them from here, never from a test_ module.

The golden renders' catalogue (their cases, and pyxis flags read from a script) is in
golden_cases.py. Fixtures live in conftest.py (the one fake Slurm: the `slurm` fixture, over
tests/fakes.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nrl_launch.jobs import record
from nrl_launch.nemorl.config import load
from nrl_launch.nemorl.layout import Layout, compute
from nrl_launch.spec import LaunchSpec

# ---- Hostile values and a rendered script read back in bash ----

HOSTILE = [
    "two words",
    "it's",
    'say "hi"',
    "both ' and \"",
    "$(touch /tmp/nrl-pwned)",
    "`touch /tmp/nrl-pwned`",
    "a;b",
    "a && b || c",
    "line one\nline two",
    "\ttab\tand\r\n",
    "naïve ☃ 日本語 🚀",
    "-rf",
    "--config=x",
    "*",
    "~",
    "$HOME ${HOME} $0",
    "back\\slash \\n",
    "!event",
    "> /dev/null <",
    "#comment",
    "",
]
# Path-like values: absolute, and without ',' or ':' (pyxis' separators) so mounts accept them.
HOSTILE_PATHS = ["/x/" + v.replace(":", "") for v in HOSTILE if v]


def bash_values(script: str, probe: str) -> list[str]:
    """Source the script in a real bash (its values and functions; sourced, it runs nothing)
    and then run `probe`, which prints values separated by NUL bytes, which no value can
    contain."""
    result = subprocess.run(
        ["bash", "-c", 'source /dev/stdin <<<"$1"\n' + probe, "bash", script],
        capture_output=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "NRL_LOG_DIR": "/logs/1-logs", "SLURM_SUBMIT_DIR": "/submit"},
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def submit_argv(script: str) -> list[str]:
    """The argv that bash passes to sbatch when the header's submit command is pasted."""
    line = next(x for x in script.splitlines() if x.startswith("# Submit with: "))
    result = subprocess.run(
        [
            "bash",
            "-c",
            "sbatch() { printf '%s\\0' \"$@\"; }\n" + line.removeprefix("# Submit with: "),
        ],
        capture_output=True,
        check=True,
    )
    return ["sbatch", *result.stdout.decode().split("\0")[:-1]]


def spec(**values: object) -> LaunchSpec:
    base: dict[str, object] = {"driver": {"command": ["python", "x.py"]}}
    base.update(values)
    return LaunchSpec.model_validate(base)


# Words that need no quotes but that shellcheck misreads in a script (found by test_fuzz):
# `$`, backquotes and a backslash in '...' (SC2016, SC1003), and array elements that look like
# a comma-separated list or an `[index]=value` (SC2054, SC2191), and bash's reserved words
# (SC1010).
MISREAD = ["$HOME", "`id`", "a\\", "a\\'b", "a,b", "=x", "=", "1=x", "a+=x", "a@=x", "then", "fi"]


# ---- NeMo RL configs (tests/data/nemo_rl) and their layouts ----

TESTS = Path(__file__).parent
TEST_DATA = TESTS / "data"
NEMO = TEST_DATA / "nemo_rl" / "examples" / "configs"
RECIPES = NEMO / "recipes" / "llm"
NONCOLOC_2N = RECIPES / "grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml"


def layout_of(path: Path, overrides: Sequence[str] = ()) -> Layout:
    cfg = load(path, overrides)
    return compute(cfg.value, cfg.present, cfg.raw)


def fits_then_one_problem(path: Path, overrides: Sequence[str], problem: str) -> None:
    """A rule's test: the config fits as it is, and the overrides break it with one line."""
    assert layout_of(path).problems == ()
    problems = layout_of(path, overrides).problems
    assert len(problems) == 1, problems
    assert problem in problems[0]


Rule = tuple[str, Path, list[str], str]


def rule_cases(rules: Sequence[Rule]) -> list[object]:
    """Each (rule, config, overrides, problem) as a case of `fits_then_one_problem`, named by
    its rule."""
    return [pytest.param(path, over, problem, id=rule) for rule, path, over, problem in rules]


# ---- imports: what a fresh `python -m nrl_launch` loads ----


def imported(*args: str, code: str | None = None) -> set[str]:
    """Every module a fresh `python -m nrl_launch ARGS` (or `python -c CODE`) imports (from -X
    importtime)."""
    run = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            *(["-c", code] if code else ["-m", "nrl_launch"]),
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


# ---- job records ----


def make_record(job_id: str, submitted_at: float = 1.0) -> record.JobRecord:
    return record.JobRecord(
        job_id=job_id,
        backend="slurm",
        job_name="j",
        nodes=2,
        submitted_at=submitted_at,
        submit_dir="/s",
        log_dir=f"/s/{job_id}-logs",
        script_path="/x.sbatch",
        argv=["sbatch"],
        spec={},
    )


def save(
    tmp_path: Path, job_id: str, name: str = "j", at: float = 1.0, spec: dict | None = None
) -> Path:
    """A record of a 2-node Slurm job; returns its log dir (not made)."""
    log_dir = tmp_path / "logs" / f"{job_id}-logs"
    record.save(
        record.JobRecord(
            job_id=job_id,
            backend="slurm",
            job_name=name,
            nodes=2,
            submitted_at=at,
            submit_dir=str(tmp_path),
            log_dir=str(log_dir),
            script_path=str(tmp_path / "job.sbatch"),
            argv=["sbatch", "job.sbatch"],
            spec=spec or {"ray": {"ports": {"dashboard": 8265}}},
        ),
        tmp_path / "state",
    )
    return log_dir


# ---- status and list with no job id: every job, one squeue ----


# ---- sbatch's own reading of #SBATCH lines ----

# What C's isspace() takes for a blank (sbatch splits words at these).
_BLANKS = " \t\n\v\f\r"
_SEPARATORS = ("packjob", "hetjob")


def _separator_at(text: str, i: int) -> str | None:
    """The hetjob separator at `text[i:]`, as a word of its own (any case), if there is one."""
    for word in _SEPARATORS:
        end = i + len(word)
        if text[i:end].lower() == word and (end == len(text) or text[end] in _BLANKS):
            return word
    return None


def _get_argument(line: str) -> tuple[str | None, str]:
    """sbatch's get_argument: the next word of an #SBATCH line (None: no more on this line) and
    the rest of the line."""
    i = 0
    while i < len(line) and line[i] in _BLANKS:
        i += 1
    separator = _separator_at(line, i)
    if separator:  # blanked out, which ends the line's words
        line = line[:i] + " " * len(separator) + line[i + len(separator) :]
    if line[i : i + 1] == ":":
        raise ValueError(f"sbatch: Unexpected `:` in [{line}]")
    word: list[str] = []
    quote, quoted, escaped = "", False, False
    while i < len(line) and (quoted or line[i] not in _BLANKS):
        char = line[i]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
            i += 1
            continue
        elif quoted:
            if char == quote:
                quoted = False
                i += 1
                continue
        elif char in "\"'":
            quoted, quote = True, char
            i += 1
            continue
        elif char == "#":  # an unquoted `#` starts a comment
            break
        word.append(char)
        i += 1
    if quoted:
        raise ValueError(f"sbatch: Unmatched `{quote}` in [{line}]")
    return ("".join(word) if word else None), line[i:]


def sbatch_reads(script: str) -> list[str]:
    """The arguments sbatch takes from the #SBATCH lines of `script`, in order (getopt_long then
    reads them as it reads a command line)."""
    args: list[str] = []
    for line in script.split("\n"):  # "\n" only: sbatch's next_line
        if line.startswith("#SBATCH"):
            rest = line[len("#SBATCH") :]
        elif line.startswith("#SLURM"):
            rest = line[len("#SLURM") :]
        elif line.lstrip(_BLANKS)[:1] not in ("", "#"):
            break  # the first command ends the header
        else:
            continue
        if _separator_at(rest, len(rest) - len(rest.lstrip(_BLANKS))):
            break  # the next component of a heterogeneous job
        while True:
            word, rest = _get_argument(rest)
            if word is None:
                break
            args.append(word)
    return args


# Every value an #SBATCH line can carry: HOSTILE's (bar line breaks), and what sbatch itself reads
# differently from bash: its comment and hetjob separators, a leading `:`, a backslash before a
# blank, every kind of blank, and characters a terminal or a Unicode reader takes for a break.
SBATCH_HOSTILE = [
    *(v for v in HOSTILE + MISREAD if v and "\n" not in v and "\r" not in v),
    *("\ttab\tand", "hetjob", "PackJob", "hetjob x", ":x", "a:b", "a\\ b", "\\", "\\\\"),
    *('"', "'", '"\'"', "x#y", " #y", "%j", "  ", " a ", "a\x0bb\x0cc", "\x1b[31m", "\x7f"),
    *("\u00a0", "\u2028", "\u0085", "\ufeff", "\u202e", "{#x", "#}", "--", "-", "=", "a=b c"),
]


# A git that commits in a test's repo whatever this machine's git config holds.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in `repo` (which must succeed); its stdout, stripped."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ---- One way in: specs that every door that queues a job must refuse alike ----


@dataclass(frozen=True)
class Bad:
    """A spec submit refuses (the one-way-in tests feed each through every door): what it adds
    to a plain job, what the machine holds first, and the words its refusal starts with."""

    name: str
    spec: Callable[[Path], dict[str, Any]]
    refusal: str
    setup: Callable[[Path], None] = lambda _: None


def _precious(tmp: Path) -> dict[str, Any]:
    # A job file (or a record's spec re-submitted) naming someone's directory as its frozen code.
    frozen = {"dir": str(tmp / "precious"), "source": str(tmp), "workdir": str(tmp / "precious")}
    return {"driver": {"frozen": frozen}}


def _make_precious(tmp: Path) -> None:
    (tmp / "precious").mkdir(exist_ok=True)
    (tmp / "precious" / "keep.txt").write_text("mine\n")


def _open_logs(tmp: Path) -> None:
    (tmp / "jobs").mkdir(exist_ok=True)
    (tmp / "jobs").chmod(0o777)  # no sticky bit: anyone can make or replace a log dir


CATALOGUE = [
    Bad("frozen code given", _precious, "driver.frozen: set by submit", _make_precious),
    Bad(
        "a sandbox that sees the log dirs",
        lambda tmp: {
            "sandbox": {
                "image": "/images/sandbox.sqsh",
                "command": ["x"],
                "mounts": [f"{tmp / 'jobs'}:/l"],
            }
        },
        "sandbox.mounts: ",
    ),
    Bad(
        "a container whose workdir no mount brings in",
        lambda _: {"container": {"runtime": "pyxis", "image": "nvcr.io#nvidia/nemo-rl:v0.5"}},
        "container.workdir is not set",
    ),
    Bad("a log dir others can replace", lambda _: {}, "logs.base_dir ", _open_logs),
    Bad(
        "a required secret not set",
        lambda _: {"secrets": {"MY_TEST_SECRET": "required"}},
        "secrets.MY_TEST_SECRET: ",
    ),
]


def bad_job(tmp: Path, bad: Bad) -> dict[str, Any]:
    base: dict[str, Any] = {
        "container": {"runtime": "none"},
        "logs": {"base_dir": str(tmp / "jobs")},
        "driver": {"command": ["python", "train.py"]},
        "secrets": {"HF_TOKEN": "off", "WANDB_API_KEY": "off"},
    }
    for key, value in bad.spec(tmp).items():
        base[key] = {**base.get(key, {}), **value}
    return base
