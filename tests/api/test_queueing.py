"""One way in (api/queueing.py): a catalogue of specs that submit must refuse, fed through every
door that queues a job (the CLI, the API with a Spec made by hand, a sweep, --retries, --chain),
each refused with the same line, with nothing queued, written or deleted; doctor and plan report
the same lines. And what a queue that fails half way keeps: every queued try's record and code."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from nrl_launch import api
from nrl_launch.errors import ConfigError
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import CATALOGUE, Bad, bad_job, git, sbatch_reads


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
        data = bad_job(tmp_path, bad)
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
    job_file.write_text(yaml.safe_dump(bad_job(tmp_path, bad)))
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


def test_the_api_queues_a_sweep_as_submit_sweep_does(
    slurm: FakeSlurm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counter = tmp_path / "n"
    slurm.script(
        "sbatch",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 100) + 1 )); echo $n >{counter}; echo $n",
    )
    spec = api.load_spec(
        settings={"logs.base_dir": str(tmp_path / "jobs"), "container.runtime": "none",
                  "secrets": {"HF_TOKEN": "off", "WANDB_API_KEY": "off"}},
        command=["python", "train.py"],
    )  # fmt: skip
    jobs = api.submit_sweep(spec, {"lr": [1, 2], "seed": ["a", "b"]}, experiment="e", max_running=2)
    assert [(j.job_id, j.job_name, j.overrides) for j in jobs] == [
        ("101", "e-1", ["lr=1", "seed=a"]),
        ("102", "e-2", ["lr=1", "seed=b"]),
        ("103", "e-3", ["lr=2", "seed=a"]),
        ("104", "e-4", ["lr=2", "seed=b"]),
    ]
    assert [j.spec["driver"]["command"][-2:] for j in jobs][-1] == ["lr=2", "seed=b"]
    assert [j.job_id for j in api.jobs(experiment="e")] == ["101", "102", "103", "104"]
    read = [sbatch_reads(Path(call.split()[-1]).read_text()) for call in slurm.calls("sbatch")]
    assert [[a for a in r if a.startswith("--dependency=")] for r in read] == [
        [], [], ["--dependency=afterany:101"], ["--dependency=afterany:102"],
    ]  # fmt: skip
    assert capsys.readouterr() == ("", "")  # nothing printed
    with pytest.raises(api.UsageError, match=r"axes\['lr'\]: lr: 1 given twice"):
        api.submit_sweep(spec, {"lr": [1, 1]})
