"""slurm.extra_args never overrides what nrl-launch sets, in any spelling sbatch accepts.

sbatch reads its arguments with getopt_long: `--nodes=2`, `--nodes 2`, `-N2`, `-N 2`, bundles of
short flags (`-vN2`) and unambiguous prefixes of long names (`--job=x` is --job-name). The
option table in `sbatch_args` was checked against sbatch 22.05 itself: every prefix of every one
of its long options resolves (to one option, ambiguous, or unknown) as sbatch resolves it.
"""

from __future__ import annotations

import pytest

from nrl_launch.errors import ConfigError
from nrl_launch.spec import SlurmSpec, sbatch_args
from nrl_launch.spec.layers import Setting, resolve

# (extra_args, the long option the problem must name)
OWNED_SPELLINGS: list[tuple[list[str], str]] = [
    (["--nodes=2"], "--nodes"),
    (["--nodes", "2"], "--nodes"),
    (["-N2"], "--nodes"),
    (["-N", "2"], "--nodes"),
    (["-HN2"], "--nodes"),  # bundled after a flag without a value
    (["--output=o.txt"], "--output"),
    (["--ou=o.txt"], "--output"),  # the shortest unambiguous prefix
    (["-o", "o.txt"], "--output"),
    (["-eerr.txt"], "--error"),
    (["--job=x"], "--job-name"),
    (["-J", "x"], "--job-name"),
    (["--sig=B:USR1@60"], "--signal"),
    (["--requeue"], "--requeue"),
    (["--req"], "--requeue"),
    (["--no-requeue"], "--no-requeue"),
    (["--parsable"], "--parsable"),
    (["--pars"], "--parsable"),
    (["--export=NONE"], "--export"),
    (["--export-file=/tmp/env"], "--export-file"),
    (["--ntasks-per-node=8"], "--ntasks-per-node"),
    (["--tasks-per-node=8"], "--tasks-per-node"),  # sbatch's alias
    (["-n", "16"], "--ntasks"),
    (["--chdir=/tmp"], "--chdir"),
    (["-D/tmp"], "--chdir"),
    (["--ch", "/tmp"], "--chdir"),
    (["--wrap=true"], "--wrap"),
    (["--test-only"], "--test-only"),
    (["--gpus-per-node=4"], "--gpus-per-node"),
    (["--gpus-per-n=4"], "--gpus-per-node"),
    (["-G", "4"], "--gpus"),
    (["--gpus-per-task=1"], "--gpus-per-task"),
    (["--gres=gpu:4"], "--gres"),
    (["--gres", "gres/gpu:a100:4,nvme:1"], "--gres"),
    (["--time=8:00:00"], "--time"),
    (["-t", "10"], "--time"),
    (["-A", "other"], "--account"),
    (["-p", "debug"], "--partition"),
    (["-d", "afterok:1"], "--dependency"),
    (["-c", "8"], "--cpus-per-task"),
    (["-W"], "--wait"),
    (["--array=0-3"], "--array"),
    (["-M", "other"], "--clusters"),
    (["--help"], "--help"),
]


@pytest.mark.parametrize(
    ("args", "option"), OWNED_SPELLINGS, ids=[" ".join(a) for a, _ in OWNED_SPELLINGS]
)
def test_owned_flags_are_refused_in_every_spelling(args: list[str], option: str) -> None:
    found = sbatch_args.problems(args, gres_owned=True)
    assert len(found) == 1, found
    assert found[0].startswith(f"{' '.join(args)!r} is sbatch's {option}, which nrl-launch owns")


ALLOWED: list[list[str]] = [
    ["--constraint=h100"],
    ["--constraint", "h100"],
    ["-C", "h100", "--mem=0"],
    ["--comment", "--nodes=3"],  # the value of --comment, as sbatch reads it
    ["--exclusive=user"],
    ["-Hv"],
    ["--mail-type=END", "--mail-user", "me@example.com"],
    ["--gres-flags=enforce-binding"],  # not --gres: an option of its own
    ["--container-id=x"],  # Slurm's own OCI option, not pyxis's
    ["--cons=h100"],  # an unambiguous prefix of an option nrl-launch does not own
    ["--unknown-to-this-table=1"],  # a newer sbatch's option: sbatch judges it
]


@pytest.mark.parametrize("args", ALLOWED, ids=[" ".join(a) for a in ALLOWED])
def test_other_flags_pass(args: list[str]) -> None:
    assert sbatch_args.problems(args, gres_owned=True) == []


def test_a_gres_without_gpus_only_conflicts_when_nrl_launch_passes_gres() -> None:
    """sbatch keeps only the last --gres: nvme:1 would drop nrl-launch's gpu:8. Asked for with
    --gpus-per-node (or not at all), the GPUs do not travel in --gres and the two combine."""
    (problem,) = sbatch_args.problems(["--gres=nvme:1"], gres_owned=True)
    assert "would replace nrl-launch's --gres" in problem
    assert "slurm.gpu_request: gpus-per-node" in problem
    assert sbatch_args.problems(["--gres=nvme:1"], gres_owned=False) == []
    assert sbatch_args.problems(["--gres=gpu:2"], gres_owned=False) != []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--nod=2"],
            "'--nod=2' abbreviates several sbatch options (--nodefile, --nodelist, --nodes)",
        ),
        (["--node", "2"], "'--node' abbreviates several sbatch options"),
        (["train.sh"], "'train.sh' is not an option: sbatch would run it as the job script"),
        (["--exclusive", "user"], "'user' is not an option"),  # an optional value needs =
        ([":", "-N", "2"], "':' is not an option"),  # a second het-job component
        (["--"], "'--' ends sbatch's options"),
        ([""], "'' is not an option"),
        (["-f"], "'-f' is not an sbatch option"),
        (["--container-image=nvcr.io/x"], "is a pyxis flag"),
        (["--container-mounts", "/a:/a"], "'--container-mounts /a:/a' is a pyxis flag"),
    ],
)
def test_what_sbatch_would_misread_is_refused(args: list[str], expected: str) -> None:
    found = sbatch_args.problems(args, gres_owned=True)
    assert len(found) == 1, found
    assert expected in found[0]


def test_one_line_per_problem() -> None:
    found = sbatch_args.problems(
        ["--constraint=h100", "-N", "2", "--export=NONE", "-o", "x"], gres_owned=True
    )
    assert [line.split(" is sbatch's ")[0] for line in found] == [
        "'-N 2'",
        "'--export=NONE'",
        "'-o x'",
    ]


def test_the_spec_refuses_them_naming_the_key_and_its_source() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(
            [
                [
                    Setting("interactive", True, "test"),
                    Setting("slurm.extra_args", ["-N2", "--gres=nvme:1"], "job file j.yaml"),
                ]
            ]
        )
    assert caught.value.problems == [
        "slurm.extra_args: '-N2' is sbatch's --nodes, which nrl-launch owns: "
        "use slurm.nodes / --nodes (from job file j.yaml)",
        "slurm.extra_args: '--gres=nvme:1' would replace nrl-launch's --gres for the GPUs "
        "(sbatch keeps the last --gres): set slurm.gpu_request: gpus-per-node to ask for the "
        "GPUs with --gpus-per-node instead (from job file j.yaml)",
    ]


def test_the_gres_rule_follows_how_the_spec_asks_for_gpus() -> None:
    assert SlurmSpec(gpu_request="gpus-per-node", extra_args=("--gres=nvme:1",)).extra_args
    assert SlurmSpec(gpus_per_node=0, extra_args=("--gres=nvme:1",)).extra_args
    with pytest.raises(ValueError, match="would replace nrl-launch's --gres"):
        SlurmSpec(extra_args=("--gres=nvme:1",))


@pytest.mark.parametrize("value", ["--comment=a\nb", "--comment=a\rb", "--comment=a\x00b"])
def test_newlines_and_nul_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"single line|NUL"):
        SlurmSpec(extra_args=(value,))


def test_every_owned_option_is_one_sbatch_knows() -> None:
    """A typo in OWNED would protect nothing: each name must be in sbatch's table."""
    assert set(sbatch_args.OWNED) <= set(sbatch_args._LONG)


def test_requeue_in_extra_args_points_at_slurm_requeue() -> None:
    for args in (["--requeue"], ["--no-requeue"]):
        (problem,) = sbatch_args.problems(args, gres_owned=True)
        assert "use slurm.requeue: true or false" in problem


@pytest.mark.parametrize("args", [["--constraint=b"], ["-C", "b"], ["--cons", "b"]])
def test_a_constraint_in_extra_args_conflicts_only_with_slurm_constraint(args: list[str]) -> None:
    """sbatch keeps the last --constraint: with slurm.constraint set, one in extra_args would
    silently replace it. Without it, the extra one is the job's only constraint."""
    assert sbatch_args.problems(args, gres_owned=True) == []
    (problem,) = sbatch_args.problems(args, gres_owned=True, constraint_set=True)
    assert problem == (
        f"{' '.join(args)!r} would replace slurm.constraint (sbatch keeps the last "
        "--constraint): give the constraint once, in slurm.constraint"
    )
    assert SlurmSpec(extra_args=tuple(args)).extra_args
    with pytest.raises(ValueError, match=r"would replace slurm\.constraint"):
        SlurmSpec(constraint="a", extra_args=tuple(args))
