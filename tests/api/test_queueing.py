"""One way in (api/queueing.py): a catalogue of specs that submit must refuse, fed through every
door that queues a job (the CLI, the API with a Spec made by hand, a sweep, --retries, --chain),
each refused with the same line, with nothing queued, written or deleted; doctor and plan report
the same lines. And what a queue that fails half way keeps: every queued try's record and code."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nrl_launch import api
from nrl_launch.errors import ConfigError
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import git


@dataclass(frozen=True)
class Bad:
    """A spec submit refuses: what it adds to a plain job, what the machine holds first, and
    the words its refusal starts with."""

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


def _job(tmp: Path, bad: Bad) -> dict[str, Any]:
    base: dict[str, Any] = {
        "container": {"runtime": "none"},
        "logs": {"base_dir": str(tmp / "jobs")},
        "driver": {"command": ["python", "train.py"]},
        "secrets": {"HF_TOKEN": "off", "WANDB_API_KEY": "off"},
    }
    for key, value in bad.spec(tmp).items():
        base[key] = {**base.get(key, {}), **value}
    return base


def _errors(err: str) -> list[str]:
    error = "nrl-launch: error: "
    return [line.removeprefix(error) for line in err.splitlines() if line.startswith(error)]


@pytest.fixture
def door(slurm: FakeSlurm, tmp_path: Path, cli: Cli) -> Callable[..., list[str]]:
    """Submit the catalogue's spec through one door; its error lines, once nothing was queued,
    recorded, written or removed."""
    slurm.answer("sbatch", stdout="77\n")
    git(Path.cwd(), "init", "-q")  # a checkout: submit would freeze its code

    def submit(bad: Bad, how: str) -> list[str]:
        bad.setup(tmp_path)
        data = _job(tmp_path, bad)
        job_file = tmp_path / "job.yaml"
        job_file.write_text(yaml.safe_dump(data))
        if how == "api":  # a Spec made by hand: no load_spec, no layering
            with pytest.raises(ConfigError) as refused:
                api.submit(api.Spec(LaunchSpec.model_validate(data)))
            lines = refused.value.problems
        else:
            extra = {
                "cli": [],
                "sweep": ["--sweep", "lr=1,2"],
                "retries": ["--retries", "1"],
                "chain": ["--chain", "2"],
            }[how]
            result = cli("submit", "-f", str(job_file), *extra)
            assert result.code == 2, (how, result.out, result.err)
            assert result.out == ""
            lines = _errors(result.err)
        assert slurm.calls("sbatch") == [], how
        assert not list((tmp_path / "state").rglob("*.json")), how  # no record
        assert not list((tmp_path / "state").rglob("*.sh")), how  # no script
        assert not list(tmp_path.rglob("code-snapshots")), how  # no snapshot
        if (tmp_path / "precious").exists():
            assert (tmp_path / "precious" / "keep.txt").read_text() == "mine\n", how
        return lines

    return submit


@pytest.mark.parametrize("bad", CATALOGUE, ids=lambda b: b.name)
def test_every_door_refuses_the_same_spec_with_the_same_line(
    door: Callable[..., list[str]], bad: Bad
) -> None:
    said = {how: door(bad, how) for how in ("cli", "api", "sweep", "retries", "chain")}
    assert any(line.startswith(bad.refusal) for line in said["cli"]), said["cli"]
    for how, lines in said.items():
        # A sweep names the point each line is about; the lines are the same.
        unlabelled = [re.sub(r"^point [0-9]+ \([^)]*\): ", "", line) for line in lines]
        assert set(unlabelled) == set(said["cli"]), how


@pytest.mark.parametrize("bad", CATALOGUE, ids=lambda b: b.name)
def test_doctor_and_plan_report_what_submit_refuses(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, bad: Bad
) -> None:
    del slurm  # doctor's Slurm queries get no answer: their checks fail on their own
    bad.setup(tmp_path)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(_job(tmp_path, bad)))
    refused = [line for line in _errors(cli("submit", "-f", str(job_file)).err) if line]
    doctor = cli("doctor", "-f", str(job_file), "--json")
    said = json.loads(doctor.out)
    if doctor.code == 2:  # what the spec itself says wrong: refused as it is read, as by submit
        assert said["errors"] == refused
        return
    assert doctor.code == 6
    failed = {c["name"] + ": " + c["detail"] for c in said["checks"] if c["status"] == "fail"}
    for line in refused:
        key = line.split(" ", 1)[0].rstrip(":")
        assert f"{key}: {line.removeprefix(key).lstrip(': ')}" in failed, (line, failed)
    with warnings.catch_warnings():  # what load_spec warns about: the CLI said it above
        warnings.simplefilter("ignore")
        planned = api.plan(api.load_spec(job_file))
    assert set(planned.refused) == set(refused)


def test_a_half_queued_retries_run_keeps_its_record_and_its_code(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Try 1 queued, the spare refused by sbatch: try 1 stays queued, so its record (listing
    it) and the code snapshot it runs stay too, and the error says so."""
    work = Path.cwd()
    git(work, "init", "-q")
    (work / "train.py").write_text("print('hi')\n")
    git(work, "add", "train.py")
    git(work, "commit", "-qm", "x")
    counter = tmp_path / "n"
    slurm.script(
        "sbatch",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n >{counter}; "
        'if [ "$n" = 1 ]; then echo 501; '
        'else echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; exit 1; fi',
    )
    result = cli("submit", "--log-dir", str(tmp_path / "jobs"), "--container-runtime", "none",
                 "--retries", "2", "--", "python", "train.py")  # fmt: skip
    assert result.code == 3, result.err
    assert "try 2 of 3 was not queued" in result.err
    assert "the run 501 has 1 of its tries queued (501)" in result.err
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "state" / "jobs").glob("*.json")]
    assert rec["job_id"] == "501"
    assert [t["job_id"] for t in rec["tries"]] == ["501"]
    frozen = rec["spec"]["driver"]["frozen"]
    assert Path(frozen["dir"], "train.py").read_text() == "print('hi')\n"
    assert api.job("501").job_id == "501"
