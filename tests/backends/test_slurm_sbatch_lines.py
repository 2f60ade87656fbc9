"""The job script's #SBATCH lines: the flags of its sbatch argv, quoted the way sbatch reads them,
so that the copy in the log dir resubmits by hand (`sbatch job.sbatch`), as ray.sub does.

`sbatch_reads` is sbatch's own reading of a script's #SBATCH lines, ported from Slurm 22.05's
src/sbatch/opt.c (_opt_batch_script and get_argument, unchanged from 21.08 to 24.x but for a
`\\ ` outside quotes, which nrl-launch never writes). tests/cluster/test_resubmit.py checks it
against the real sbatch on the same hostile values.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from nrl_launch.backends import slurm
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.helpers import SBATCH_HOSTILE, sbatch_reads


def directives(script: str) -> list[str]:
    return [line for line in script.split("\n") if line.startswith("#SBATCH")]


def spec(**slurm_values: object) -> LaunchSpec:
    return LaunchSpec.model_validate(
        {"driver": {"command": ["python", "x.py"]}, "slurm": slurm_values}
    )


@pytest.mark.parametrize(
    ("word", "written"),
    [
        ("--nodes=2", "--nodes=2"),
        ("--exclusive", "--exclusive"),
        ("--output=/l/nrl-logs/slurm-%j.out", "--output=/l/nrl-logs/slurm-%j.out"),
        ("--exclude=node[2-3]", "--exclude=node[2-3]"),
        ("--mail-user=a@b.c,d+e@f", "--mail-user=a@b.c,d+e@f"),
        ("a100", "a100"),
        ("--job-name=a b", '--job-name="a b"'),
        ("--comment=#1", '--comment="#1"'),
        ("--comment=it's", '--comment="it\'s"'),
        ('--comment=say "hi"', '--comment="say \\"hi\\""'),
        ("--comment=back\\slash", '--comment="back\\\\slash"'),
        ("--comment=$HOME", '--comment="$HOME"'),
        ("--comment=naïve", '--comment="naïve"'),
        ("-J=a b", '"-J=a b"'),
        ("hetjob", '"hetjob"'),
        ("PackJob", '"PackJob"'),
        (":x", '":x"'),
        ("a:b", "a:b"),
    ],
)
def test_sbatch_word(word: str, written: str) -> None:
    assert slurm.sbatch_word(word) == written
    assert sbatch_reads(f"#SBATCH {written}\n") == [word]


@pytest.mark.parametrize("value", SBATCH_HOSTILE, ids=repr)
def test_each_hostile_value_reads_back(value: str) -> None:
    words = [value, f"--comment={value}", "--comment", value, f"-J{value}"]
    line = "#SBATCH " + " ".join(slurm.sbatch_word(w) for w in words)
    assert sbatch_reads(f"#!/bin/bash\n{line}\n#SBATCH --nodes=1\ntrue\n") == [*words, "--nodes=1"]


@pytest.mark.parametrize("word", ["", "a\nb", "\n", "--comment=a\nb", "a\rb", "\r\n"], ids=repr)
def test_a_word_no_sbatch_line_can_carry_is_refused(word: str) -> None:
    with pytest.raises(ValueError, match="cannot be written on an #SBATCH line"):
        slurm.sbatch_word(word)


def test_bash_quoting_is_not_sbatch_s() -> None:
    """Why the q filter cannot write these lines: sbatch has no $'...', and reads `\\` inside
    '...' as an escape."""
    assert sbatch_reads("#SBATCH $'--comment=$HOME'\n") == ["$--comment=$HOME"]
    with pytest.raises(ValueError, match="Unmatched"):  # bash reads 'a\' as a\
        sbatch_reads("#SBATCH '--comment=a\\'\n")
    assert sbatch_reads("#SBATCH --comment=a b #c\n") == ["--comment=a", "b"]


_ONE_LINE = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00\n\r"), min_size=1
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ONE_LINE, min_size=1, max_size=5))
def test_any_words_read_back(words: list[str]) -> None:
    line = "#SBATCH " + " ".join(slurm.sbatch_word(w) for w in words)
    assert sbatch_reads(line + "\ntrue\n") == words


HOSTILE_SPEC = {
    "job_name": "a 'b' \"c\" #d $e \\f ☃",
    "account": "acc#1$(x)'y'",  # a Slurm name has no spaces (refused), the rest is hostile
    "partition": "hetjob",
    "qos": ":q",
    "reservation": 'r\\v"',
    "exclude": "node[2-3]",
    "dependency": "singleton",
    "cpus_per_node": 16,
    "gpu_request": "gpus-per-node",
    "extra_args": ["--comment", 'say "hi" # it\'s', "--mail-type=END,FAIL", "-C", "a100|h100"],
}


@pytest.mark.parametrize("kind", ["slurm", "plain"])
def test_the_script_carries_its_argv_as_sbatch_lines(kind: str) -> None:
    job = LaunchSpec.model_validate(
        {
            "driver": {"command": ["python", "x.py"]},
            "slurm": HOSTILE_SPEC,
            "logs": {"base_dir": "/l/it's a #dir"},
        }
    )
    request = (slurm.plan if kind == "slurm" else slurm.plan_plain)(job)
    assert request.argv[:2] == ("sbatch", "--parsable")
    # Everything but --parsable (sbatch's answer is for nrl-launch, not for a user) and the script.
    assert sbatch_reads(request.script) == list(request.argv[2:-1])
    lines = directives(request.script)
    flags = slurm.sbatch_flags(job)
    assert lines[: len(flags)] == [f"#SBATCH {slurm.sbatch_word(f)}" for f in flags]
    assert lines[len(flags) :] == [
        '#SBATCH --comment "say \\"hi\\" # it\'s"',
        "#SBATCH --mail-type=END,FAIL",
        '#SBATCH -C "a100|h100"',
    ]
    # In the header: after the shebang, the version, the submit command and the defaults
    # nrl-launch chose, before any command.
    header = request.script.split("\n")
    first = header.index(lines[0])
    assert header[3] == "# Not given, so nrl-launch's defaults:"
    assert header[first : first + len(lines)] == lines
    assert all(line.startswith("#") for line in header[: first + len(lines) + 3])


def test_the_default_job_s_lines() -> None:
    """No --time (the partition's default time limit), whole nodes for a Ray job: both said."""
    script = slurm.plan(spec()).script
    assert (
        "#   slurm.exclusive: not set, so whole nodes (--exclusive), as a Ray job takes every "
        "CPU and GPU of its nodes\n"
        "#   slurm.time: not set, so no --time: the partition's default time limit\n"
    ) in script
    lines = directives(script)
    assert lines == [
        "#SBATCH --exclusive",
        "#SBATCH --export=ALL",
        "#SBATCH --gres=gpu:8",
        "#SBATCH --job-name=nrl-launch",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --open-mode=append",
        "#SBATCH --output=./slurm-%j.out",
    ]


def test_sbatch_s_short_forms_mean_what_they_mean_to_sbatch(cli: Cli) -> None:
    result = cli(
        "render", "-N", "2", "-t", "4:00:00", "-A", "acct", "-p", "batch", "-J", "grpo",
        "--", "python", "x.py",
    )  # fmt: skip
    assert result.code == 0, result.err
    lines = directives(result.out)
    for line in ["--nodes=2", "--time=4:00:00", "--account=acct", "--partition=batch"]:
        assert f"#SBATCH {line}" in lines
    assert "#SBATCH --job-name=grpo" in lines


def test_qos_constraint_reservation_exclude_and_requeue_are_sorted_lines(cli: Cli) -> None:
    sets = {
        "qos": "high",
        "constraint": "h100&ib",
        "reservation": "maint",
        "exclude": "node[1-2]",
        "requeue": "false",
    }
    args = [w for key, value in sets.items() for w in ("--set", f"slurm.{key}={value}")]
    result = cli("render", *args, "--", "python", "x.py")
    assert result.code == 0, result.err
    lines = directives(result.out)
    assert lines == sorted(lines)
    for line in ['--constraint="h100&ib"', "--exclude=node[1-2]", "--no-requeue"]:
        assert f"#SBATCH {line}" in lines
    assert {"#SBATCH --qos=high", "#SBATCH --reservation=maint"} <= set(lines)
    # The header's sbatch command carries them too.
    submit = shlex.split(result.out.split("\n")[2].removeprefix("# Submit with: "))
    assert {"--constraint=h100&ib", "--exclude=node[1-2]", "--no-requeue"} <= set(submit)


@pytest.mark.parametrize(("requeue", "line"), [(True, "--requeue"), (False, "--no-requeue")])
def test_requeue_is_said_only_when_set(requeue: bool, line: str) -> None:
    assert f"#SBATCH {line}" in directives(slurm.plan(spec(requeue=requeue)).script)
    assert line in slurm.sbatch_flags(spec(requeue=requeue))
    unset = slurm.sbatch_flags(spec())
    assert "--requeue" not in unset
    assert "--no-requeue" not in unset


_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\n\r"))
_MAYBE = st.one_of(st.none(), _TEXT)
_FREE_FLAGS = st.sampled_from(["--comment", "--constraint", "--mail-user", "--licenses", "-C"])


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "job_name": st.text(st.characters(min_codepoint=32, exclude_categories=["Cs"])),
            **dict.fromkeys(
                ["account", "partition", "qos", "reservation", "exclude", "dependency"], _MAYBE
            ),
            "requeue": st.sampled_from([None, True, False]),
            "time": st.sampled_from(["10", " 1:00:00", "2-00:00:00\t"]),
        },
    ),
    extra=st.lists(st.tuples(_FREE_FLAGS, _TEXT.filter(bool), st.booleans()), max_size=4),
    base_dir=_TEXT,
)
def test_generated_jobs_read_back(
    fields: dict[str, object], extra: list[tuple[str, str, bool]], base_dir: str
) -> None:
    args = [w for flag, v, joined in extra for w in ([f"{flag}={v}"] if joined else [flag, v])]
    data = {
        "driver": {"command": ["python", "x.py"]},
        "slurm": {**fields, "extra_args": args},
        "logs": {"base_dir": base_dir},
    }
    try:
        job = LaunchSpec.model_validate(data)
    except ValidationError:
        assume(False)
        return
    for plan in (slurm.plan, slurm.plan_plain):
        request = plan(job)
        assert sbatch_reads(request.script) == list(request.argv[2:-1])
