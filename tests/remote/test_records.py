"""A job submitted to a remote cluster is recorded here, and a command naming its id goes to
its cluster without --remote; list shows every cluster's jobs (one ssh per cluster)."""

from __future__ import annotations

import json
import os

from nrl_launch.remote import listing, records
from nrl_launch.remote.profiles import Remote
from tests.conftest import Cli
from tests.remote.conftest import FakeSsh


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
