"""jobs/sweep.py: the grid from --sweep and --sweep-file, its order, the experiment's names,
the lanes of --max-running, and where a point's overrides go."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_launch.errors import ConfigError, UsageError
from nrl_launch.jobs import sweep
from tests.helpers import spec


def test_the_grid_is_the_product_with_the_first_axis_slowest() -> None:
    axes = [
        sweep.parse_axis("policy.optimizer.lr=1e-6, 3e-6"),
        sweep.parse_axis("grpo.num_generations_per_prompt=8,16"),
    ]
    points = sweep.grid(axes)
    assert [(p.number, p.overrides) for p in points] == [
        (1, ("policy.optimizer.lr=1e-6", "grpo.num_generations_per_prompt=8")),
        (2, ("policy.optimizer.lr=1e-6", "grpo.num_generations_per_prompt=16")),
        (3, ("policy.optimizer.lr=3e-6", "grpo.num_generations_per_prompt=8")),
        (4, ("policy.optimizer.lr=3e-6", "grpo.num_generations_per_prompt=16")),
    ]
    assert points[1].label == "policy.optimizer.lr=1e-6 grpo.num_generations_per_prompt=16"
    assert sweep.grid([sweep.parse_axis("++new.key=a")])[0].overrides == ("++new.key=a",)
    assert [p.overrides for p in sweep.grid([])] == [()]  # --experiment alone: one job


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("policy.lr", "expected KEY=V1,V2,..."),
        ("policy.lr=", "an empty value"),
        ("policy.lr=1,,2", "an empty value"),
        ("policy.lr=1,2,1", "1 given twice"),
        ("~policy.lr=1", "is not a config key"),
        ("policy..lr=1", "is not a config key"),
        ("=1,2", "is not a config key"),
        ("a.b=[1,2],[3]", "in a --sweep-file"),
    ],
)
def test_a_bad_sweep_is_one_line_naming_the_flag(text: str, says: str) -> None:
    with pytest.raises(UsageError) as exc:
        sweep.parse_axis(text)
    assert exc.value.message.startswith(f"--sweep {text!r}: ")
    assert says in exc.value.message and "\n" not in exc.value.message


def test_a_key_swept_twice_is_refused() -> None:
    axes = [sweep.parse_axis("a.b=1,2"), sweep.parse_axis("++a.b=3")]
    with pytest.raises(UsageError, match=r"--sweep '\+\+a.b=3': a.b is swept already"):
        sweep.grid(axes)


def test_a_sweep_file_keeps_values_as_written(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("policy.optimizer.lr: [1.0e-6, 3e-6]\ngrpo.x:\n  - 8\n  - '[1,2]'\n")
    axes = sweep.parse_file(path)
    assert [(a.key, a.values) for a in axes] == [
        ("policy.optimizer.lr", ("1.0e-6", "3e-6")),
        ("grpo.x", ("8", "[1,2]")),
    ]


def test_every_bad_entry_of_a_sweep_file_is_a_line_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("a.b: 1\nc.d: [1, [2]]\nok.key: [1]\n'bad key': [1]\ne.f: []\n")
    with pytest.raises(ConfigError) as exc:
        sweep.parse_file(path)
    flag = f"--sweep-file {path}"
    assert exc.value.problems == [
        f"{flag} line 1: a.b: expected a list of values ([V1, V2, ...])",
        f"{flag} line 2: c.d: each value is one scalar; a list or mapping value is written "
        "quoted, as Hydra reads it ('[1,2]')",
        f"{flag} line 4: key 'bad key' is not a config key: expected a dotted name "
        "(policy.optimizer.lr), or +key / ++key for one the config lacks",
        f"{flag} line 5: e.f: an empty value; expected V1,V2,... each non-empty",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [("[1, 2]\n", "expected a mapping"), ("a: [1\n", "not YAML"), ("", "expected a mapping")],
)
def test_a_sweep_file_that_is_no_mapping_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        sweep.parse_file(path)


def test_a_missing_sweep_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--sweep-file .*: no such file"):
        sweep.parse_file(tmp_path / "nope.yaml")


def test_experiment_names() -> None:
    assert sweep.experiment_name("lr-sweep_v2.1", []) == "lr-sweep_v2.1"
    for bad in ["", "-x", "a b", "a/b", "x" * 65, "é"]:
        with pytest.raises(UsageError, match=r"--experiment .*: expected a name of 1-64"):
            sweep.experiment_name(bad, [])
    made = sweep.experiment_name(None, [], now=0)
    assert made.startswith("sweep-19") or made.startswith("sweep-20")  # local time of epoch 0
    assert sweep.experiment_name(None, [made, f"{made}-2"], now=0) == f"{made}-3"


def test_lanes_of_max_running() -> None:
    ids = ["11", "12", "13"]
    assert [sweep.dependency(i, ids[:i], 2) for i in range(4)] == [
        None,
        None,
        "afterany:11",
        "afterany:12",
    ]
    assert [sweep.dependency(i, ids[:i], None) for i in range(3)] == [None, None, None]
    assert sweep.job_name("exp", sweep.Point(3, ())) == "exp-3"


def test_a_point_s_overrides_go_where_the_driver_reads_them() -> None:
    point = sweep.Point(1, ("a.b=1",))
    nemo = {"recipe": "grpo", "config": "c.yaml", "overrides": ["x=1"]}
    recipe = spec(nemo_rl=nemo, driver={"command": None}, interactive=False)
    got, key = sweep.with_overrides(recipe, point)
    assert (got.nemo_rl.overrides, key) == (("x=1", "a.b=1"), "nemo_rl.overrides")
    own = spec(driver={"command": ["uv", "run", "run_grpo.py", "--config", "c.yaml"]})
    got, key = sweep.with_overrides(own, point)
    assert got.driver.command == ("uv", "run", "run_grpo.py", "--config", "c.yaml", "a.b=1")
    assert key == "driver.command"
    for shell in (["bash", "-c", "uv run x.py"], ["/bin/sh", "-ec", "x"]):
        with pytest.raises(UsageError, match="is a shell string"):
            sweep.with_overrides(spec(driver={"command": shell}), point)
    bash_script = spec(driver={"command": ["bash", "train.sh"]})  # "$@" reaches it
    assert sweep.with_overrides(bash_script, point)[0].driver.command == (
        "bash",
        "train.sh",
        "a.b=1",
    )


def test_the_summary_counts_phases_in_order() -> None:
    assert sweep.summary(["RUNNING", "PENDING", "RUNNING", "PENDING"]) == (
        "4 jobs: 2 RUNNING, 2 PENDING"
    )
    assert sweep.summary(["COMPLETED"]) == "1 job: 1 COMPLETED"
