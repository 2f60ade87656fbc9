"""A job submitted to a remote cluster is recorded here, and a command naming its id goes to
its cluster without --remote; list shows every cluster's jobs (one ssh per cluster)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nrl_launch.remote import listing, records
from nrl_launch.remote.profiles import Remote
from tests.conftest import Cli
from tests.fakes import install
from tests.helpers import save
from tests.remote.conftest import FakeSsh, git_project


def _record(job_id: str, name: str, host: str) -> None:
    remote = Remote(name=name, host=host)
    records.save(records.RemoteJob(remote=remote, job_id=job_id, submitted_at=9), os.environ)


def test_a_job_id_goes_to_its_cluster(cli: Cli, fake_ssh: FakeSsh) -> None:
    _record("4242", "dev", "dev-login")
    result = cli("logs", "4242", "--node", "1")
    assert result.code == 0, result.err
    assert result.out.split("\0")[:-1] == ["logs", "4242", "--node", "1"]
    assert "dev-login" in fake_ssh.calls()[-1]


def test_the_same_id_on_two_clusters_asks_which(cli: Cli, fake_ssh: FakeSsh) -> None:
    _record("4242", "dev", "dev-login")
    _record("4242", "other", "other-login")
    result = cli("status", "4242")
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: JOBID 4242: jobs of that id were submitted to several clusters "
        "(dev, other): say which with --remote NAME"
    ]
    assert fake_ssh.calls() == []


def test_list_merges_every_cluster_one_ssh_each(cli: Cli, fake_ssh: FakeSsh) -> None:
    _record("4242", "dev", "dev-login")
    _record("13", "gone", "unreachable")
    result = cli("list", "--json")
    assert result.code == 0, result.err
    jobs = {
        (j["remote"], j["job_id"]): j["status"]["phase"] for j in json.loads(result.out)["jobs"]
    }
    assert jobs == {("dev", "77"): "RUNNING", ("gone", "13"): "UNKNOWN"}
    assert "remote gone: ssh to unreachable failed" in result.err
    assert len([c for c in fake_ssh.calls() if "list --json" in c]) == 2  # one per cluster
    rows = [line.split("\t") for line in cli("list").out.splitlines()]
    assert [row[:5] + row[6:] for row in rows] == [
        ["gone", "13", "", "", "UNKNOWN", "unreachable could not be reached"],
        ["dev", "77", "there", "2", "RUNNING", "2/2 nodes"],
    ]


def test_merge_puts_newest_first_and_marks_local_jobs() -> None:
    merged = listing.merge(
        [{"job_id": "1", "submitted_at": 3}], {"dev": [{"job_id": "2", "submitted_at": 4}]}
    )
    assert [(j["job_id"], j["remote"]) for j in merged] == [("2", "dev"), ("1", None)]


@pytest.mark.parametrize(
    "answer",
    [
        {"job_id": "../../elsewhere/planted", "log_dir": "/logs/x"},
        {"job_id": "12", "chain": ["12", "../../elsewhere/planted"]},
        {"job_id": "{tmp}/planted"},  # an absolute path: the records dir would not count
        {"job_id": 12},
    ],
)
def test_a_remote_job_id_that_is_no_job_id_is_refused(
    cli: Cli,
    fake_ssh: FakeSsh,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answer: dict[str, object],
) -> None:
    # A cluster's nrl-launch (or whatever answers there) names the record file a job id
    # becomes here: one that is no job id writes nothing, anywhere.
    if answer["job_id"] == "{tmp}/planted":
        answer = {"job_id": f"{tmp_path}/planted"}
    fake_ssh.answer_submit(answer)
    monkeypatch.chdir(git_project(tmp_path))
    before = set(tmp_path.rglob("*"))
    result = cli("--remote", "dev", "submit", "--", "python", "train.py")
    assert result.code == 7, result.err
    (line,) = result.err.splitlines()
    assert line.startswith("nrl-launch: error: remote dev: its nrl-launch gave the job id ")
    assert "expected a Slurm job id (digits; 12_3 or 12+1), local-<digits>" in line
    made = {p for p in set(tmp_path.rglob("*")) - before if "remote-home" not in p.parts}
    assert {p.name for p in made if p.suffix == ".json"} == {"checked.json"}


@pytest.mark.parametrize("job_id", ["1234", "1234_7", "1234+1", "local-1764300000000", "grpo-x1"])
def test_job_ids_of_every_backend_are_recorded(
    cli: Cli, fake_ssh: FakeSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_id: str
) -> None:
    fake_ssh.answer_submit({"job_id": job_id, "log_dir": "/logs"})
    monkeypatch.chdir(git_project(tmp_path))
    result = cli("--remote", "dev", "submit", "-q", "--", "python", "train.py")
    assert (result.code, result.out) == (0, f"{job_id}\n"), result.err
    assert (tmp_path / "state" / "remote" / "dev" / f"{job_id}.json").is_file()


def test_a_planted_record_with_a_path_for_an_id_is_ignored(fake_ssh: FakeSsh) -> None:
    _record("4242", "dev", "dev-login")
    planted = Path(os.environ["NRL_LAUNCH_STATE_DIR"]) / "remote" / "dev" / "x.json"
    record = json.loads(planted.with_name("4242.json").read_text()) | {"job_id": "../x"}
    planted.write_text(json.dumps(record))
    assert [j.job_id for j in records.jobs_of("dev", os.environ)] == ["4242"]
    assert fake_ssh.calls() == []


@pytest.mark.usefixtures("fake_ssh")
def test_list_shows_this_machines_jobs_as_status_does(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # list across clusters reads this machine's jobs from the API, not from the CLI's status:
    # each job's status is still what `status --json` says of it.
    slurm = install(tmp_path, monkeypatch, alone=False)
    slurm.answer("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    slurm.answer("sacct", stdout="41|COMPLETED|0:0|\n")
    slurm.answer("scontrol", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    save(tmp_path, "41")
    _record("4242", "dev", "dev-login")
    listed = cli("list", "--json")
    assert listed.code == 0, listed.err
    (here,) = [j for j in json.loads(listed.out)["jobs"] if j["remote"] is None]
    (status,) = json.loads(cli("status", "41", "--json").out)["jobs"]
    # status --json adds what only a job named gets: its code and its training
    assert here["status"] == {k: v for k, v in status.items() if k not in ("code", "training")}
