"""The CLI as people already use launchers: `status`/`list` of every job, job names for ids,
shell completion, `logs -f`'s exit code, --json errors, --debug anywhere, help for a bare
command, `cancel` of an ended job, and the examples in every command's --help.

Slurm is the one fake (conftest's `slurm` fixture, tests/fakes.py): each command refuses unless a
test answers."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from nrl_launch.cli import app
from tests.conftest import REPO, Cli
from tests.fakes import FakeSlurm
from tests.helpers import save

QUEUE = "21|RUNNING|None|2|node[0-1]\n22|PENDING|Priority|2|\n23|RUNNING|None|2|node[2-3]\n"


def test_status_alone_shows_every_job_from_one_squeue(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    for i, job_id in enumerate(["21", "22", "23"]):
        save(tmp_path, job_id, name=f"grpo-{job_id}", at=float(i))
    slurm.answer("squeue", QUEUE)
    result = cli("status")
    assert result.code == 0, result.err
    rows = [line.split("\t") for line in result.out.splitlines()]
    assert [r[:4] for r in rows] == [
        ["23", "grpo-23", "2", "STARTING"],
        ["22", "grpo-22", "2", "PENDING"],
        ["21", "grpo-21", "2", "STARTING"],
    ]
    assert rows[1][6] == "waiting for resources (Priority)"
    (call,) = slurm.calls()  # one query for all of them
    assert call.startswith("squeue ") and "-j 23,22,21 " in call
    data = json.loads(cli("status", "--json").out)
    assert [(j["job_id"], j["phase"]) for j in data["jobs"]] == [
        ("23", "STARTING"),
        ("22", "PENDING"),
        ("21", "STARTING"),
    ]


def test_list_shows_the_same_with_the_records(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    for i, job_id in enumerate(["21", "22", "23"]):
        save(tmp_path, job_id, at=float(i))
    slurm.answer("squeue", QUEUE)
    listed = cli("list")
    assert listed.code == 0, listed.err
    assert [line.split("\t")[3] for line in listed.out.splitlines()] == [
        "STARTING",
        "PENDING",
        "STARTING",
    ]
    jobs = json.loads(cli("list", "--json").out)["jobs"]
    assert [(j["job_id"], j["status"]["phase"]) for j in jobs][1] == ("22", "PENDING")
    assert jobs[0]["log_dir"].endswith("/23-logs")  # the record, as before
    assert len(slurm.calls("squeue")) == 2  # one per command


def test_a_scheduler_that_does_not_answer_leaves_the_list(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    save(tmp_path, "21")
    result = cli("list")  # every fake refuses: squeue exits 99
    assert result.code == 0
    assert result.out.split("\t")[:4] == ["21", "j", "2", "UNKNOWN"]
    (warning,) = result.err.splitlines()
    assert warning.startswith("nrl-launch: warning: squeue failed (exit 99)")
    assert warning.endswith("the state of its 1 job(s) is unknown")
    assert "slurm did not answer" in result.out
    assert slurm.calls() == [slurm.calls()[0]]  # asked once


def test_status_alone_with_no_jobs_and_watch_without_a_job(cli: Cli, slurm: FakeSlurm) -> None:
    assert (cli("status").code, cli("status").out) == (0, "")
    assert json.loads(cli("status", "--json").out)["jobs"] == []
    watch = cli("status", "--watch")
    assert watch.code == 2
    assert watch.err == (
        "nrl-launch: error: --watch: no job submitted from here is queued or running\n"
    )
    assert slurm.calls() == []


def test_watch_with_no_job_follows_every_job_that_has_not_ended(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    save(tmp_path, "21", name="runs", at=2.0)
    save(tmp_path, "22", name="ended", at=1.0)
    # 21 runs for the first two looks, then Slurm lists it no more.
    looks = tmp_path / "looks"
    slurm.script(
        "squeue",
        f"n=0; [[ ! -f {looks} ]] || read -r n <{looks}; echo $((n + 1)) >{looks}\n"
        'if ((n < 2)); then printf "21|RUNNING|None|2|node[0-1]\\n"; fi',
    )
    # sacct: each job asked for (-j IDS) as COMPLETED
    slurm.script(
        "sacct",
        "while (($#)); do if [[ $1 == -j ]]; then ids=$2; fi; shift; done\n"
        'for id in ${ids//,/ }; do printf "%s|COMPLETED|0:0|\\n" "$id"; done',
    )
    slurm.answer("scontrol", "", "slurm_load_jobs error: Invalid job id specified\n", 1)
    watch = cli("status", "--watch")
    assert watch.code == 0, watch.err
    tables = watch.out.split("Jobs: ")[1:]
    # Redrawn when 21 changed, from starting (Slurm runs it, its head is not up) to ended; the
    # job that had ended is not followed.
    assert [t.splitlines()[0] for t in tables] == ["1 job: 1 STARTING", "1 job: 1 COMPLETED"]
    assert all(t.splitlines()[1].split("\t")[:3] == ["21", "runs", s] for t, s in
               zip(tables, ["STARTING", "COMPLETED"], strict=True))  # fmt: skip


# ---- job names wherever a job id goes ----


def test_a_job_name_works_as_its_id(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "21", name="grpo-8b")
    slurm.answer("squeue", "21|PENDING|Priority|2|\n")
    by_name = json.loads(cli("status", "grpo-8b", "--json").out)["jobs"]
    assert [j["job_id"] for j in by_name] == ["21"]
    slurm.answer("scancel")
    cancelled = cli("cancel", "grpo-8b")
    assert (cancelled.code, cancelled.out) == (0, "Cancelled 21\n")
    assert slurm.calls("scancel") == ["scancel 21"]


def test_an_id_wins_over_a_name(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "21", name="22")
    save(tmp_path, "22", name="other")
    slurm.answer("squeue", "22|PENDING|Priority|2|\n")
    assert json.loads(cli("status", "22", "--json").out)["jobs"][0]["job_id"] == "22"


def test_a_name_several_jobs_share_is_refused_naming_them(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    for i, job_id in enumerate(["21", "22", "23"]):
        save(tmp_path, job_id, name="chain" if job_id != "22" else "solo", at=float(i))
    for command in ("status", "logs", "cancel", "stop", "attach", "dashboard"):
        result = cli(command, "chain")
        assert result.code == 2, (command, result.err)
        assert result.err == (
            "nrl-launch: error: JOBID 'chain': 2 jobs are named 'chain' (23, 21, newest first): "
            "give the job id\n"
        )
    unknown = cli("status", "nothing-like-it")
    assert unknown.code == 4
    assert "no job 'nothing-like-it' was submitted with nrl-launch here" in unknown.err
    assert slurm.calls() == []


# ---- shell completion ----


def test_job_ids_complete_from_the_records_without_asking_slurm(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path, "21", name="grpo", at=1.0)
    save(tmp_path, "31", name="sft", at=2.0)
    save(tmp_path, "32", name="sft", at=3.0)
    monkeypatch.setenv("_NRL_LAUNCH_COMPLETE", "complete_bash")
    for command in ("status", "logs", "attach", "stop", "cancel", "dashboard"):
        monkeypatch.setenv("COMP_WORDS", f"nrl-launch {command} ")
        monkeypatch.setenv("COMP_CWORD", "2")
        result = cli()
        assert result.code == 0, result.err
        # Newest first; a name is offered when one job has it.
        assert result.out.split() == ["32", "31", "21", "grpo"], command
    monkeypatch.setenv("COMP_WORDS", "nrl-launch logs 3")
    assert cli().out.split() == ["32", "31"]
    monkeypatch.setenv("COMP_WORDS", "nrl-launch sta")
    monkeypatch.setenv("COMP_CWORD", "1")
    assert cli().out.split() == ["status"]
    monkeypatch.setenv("COMP_WORDS", "nrl-launch logs 21 --fo")
    monkeypatch.setenv("COMP_CWORD", "3")
    assert cli().out.split() == ["--follow"]
    assert slurm.calls() == []


def test_the_completion_script_is_shown(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = cli("--show-completion", "bash")
    assert result.code == 0
    assert "_NRL_LAUNCH_COMPLETE=complete_bash" in result.out
    assert "--install-completion" in cli("--help").out


# ---- logs -f exits as submit --wait does ----


@pytest.mark.parametrize(
    ("squeue", "sacct", "code"),
    [
        ("41|COMPLETED|None|2|node[0-1]\n", "41|COMPLETED|0:0\n", 0),
        ("41|FAILED|NonZeroExitCode|2|node[0-1]\n", "41|FAILED|3:0\n", 3),
        ("41|CANCELLED|None|2|node[0-1]\n", "41|CANCELLED by 0|0:15\n", 1),
        ("41|TIMEOUT|None|2|node[0-1]\n", "41|TIMEOUT|0:0\n", 1),
    ],
    ids=["completed", "failed", "cancelled", "timeout"],
)
def test_logs_follow_exits_with_the_job_s_exit_code(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, squeue: str, sacct: str, code: int
) -> None:
    log_dir = save(tmp_path, "41")
    log_dir.mkdir(parents=True)
    (log_dir / "ray-driver.log").write_text("step 1\n")
    slurm.answer("squeue", squeue)
    slurm.answer("sacct", sacct)
    result = cli("logs", "41", "-f")
    assert (result.code, result.out) == (code, "step 1\n"), result.err
    if code:
        assert result.err.startswith("nrl-launch: note: job 41 ended ")


# ---- --json: every command, and its errors ----


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["status", "77", "--json"], 4, "no job '77' was submitted"),
        (["logs", "--json", "77"], 4, "no job '77' was submitted"),
        (["cancel", "77", "--json"], 4, "no job '77' was submitted"),
        (["stop", "77", "--json"], 4, "no job '77' was submitted"),
        (["attach", "77", "--json"], 4, "no job '77' was submitted"),
        (["dashboard", "77", "--json"], 4, "no job '77' was submitted"),
        (["list", "--json", "--bogus"], 2, "No such option: --bogus"),
        (["render", "--json", "--nodes", "0", "--", "python"], 2, "slurm.nodes"),
        (["config", "show", "--json", "--nodes", "0", "--", "python"], 2, "slurm.nodes"),
        (["init", "--json", "--gpu-request", "some"], 2, "slurm.gpu_request"),
    ],
)
def test_an_error_with_json_is_a_json_object_too(
    cli: Cli, slurm: FakeSlurm, args: list[str], code: int, says: str
) -> None:
    result = cli(*args)
    assert result.code == code
    data = json.loads(result.out)
    command = "config show" if args[0] == "config" else args[0]
    assert (data["nrl_launch_json"], data["command"], data["ok"]) == (1, command, False)
    assert data["exit_code"] == code and says in data["errors"][0]
    assert result.err == f"nrl-launch: error: {data['errors'][0]}\n"  # and the line, as ever
    assert slurm.calls() == []


def test_json_after_the_driver_is_the_driver_s(cli: Cli) -> None:
    result = cli("render", "--nodes", "0", "--", "python", "train.py", "--json")
    assert (result.code, result.out) == (2, "")


def test_a_command_that_printed_its_object_prints_no_second(cli: Cli) -> None:
    """plan prints its object (ok: false, the problems), then fails: still one object."""
    config = "examples/tiny-rl/examples/configs/grpo_tiny.yaml"
    result = cli("plan", "--config", str(REPO / config), "--nodes", "2", "--json")
    assert result.code == 2
    data = json.loads(result.out)  # one object: json.loads refuses two
    assert data["command"] == "plan" and data["problems"]


def test_logs_json_and_its_refusal_with_follow(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    log_dir = save(tmp_path, "41")
    log_dir.mkdir(parents=True)
    (log_dir / "ray-driver.log").write_text("a\nb\n")
    data = json.loads(cli("logs", "41", "--json", "--tail", "1").out)
    assert (data["job_id"], data["text"]) == ("41", "b\n")
    assert data["path"] == str(log_dir / "ray-driver.log")
    refused = cli("logs", "41", "-f", "--json")
    assert refused.code == 2
    assert "--follow and --json cannot be combined" in json.loads(refused.out)["errors"][0]
    assert slurm.calls() == []


def test_debug_after_the_command(cli: Cli) -> None:
    result = cli("render", "--nodes", "0", "--debug", "--", "python")
    assert (result.code, result.err.startswith("Traceback")) == (2, True)
    assert cli("render", "--interactive", "--debug").code == 0


# ---- a bare command prints its help ----


@pytest.mark.parametrize(("args", "has"), [([], "Commands:"), (["config"], "show")])
def test_a_bare_command_prints_its_help_exit_0(cli: Cli, args: list[str], has: str) -> None:
    result = cli(*args)
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith("Usage: nrl-launch") and has in result.out
    assert "Examples:\n" in result.out


def test_the_help_says_where_to_start_on_a_cluster(cli: Cli) -> None:
    """A new user's first `nrl-launch --help` names the commands to run on a cluster, in their
    order, on one line; the commands it names exist."""
    result = cli("--help")
    assert result.code == 0
    start = (
        "  Start here on a cluster: nrl-launch init, nrl-launch doctor, nrl-launch plan, "
        "nrl-launch submit"
    )
    assert start in result.out.splitlines()
    named = [word.strip(",") for word in start.split(":")[1].split() if word != "nrl-launch"]
    assert set(named) <= {c.name for c in app.registered_commands}
    assert len(result.out.splitlines()) < 50  # still a page


def test_the_listing_of_commands_is_their_own_help(cli: Cli) -> None:
    # `nrl-launch --help` lists the commands from summaries kept in cli/__init__.py, without
    # importing them: each is its command's first sentence, and the help reads as the one
    # typer makes from all the commands.
    from nrl_launch import cli as package

    full: Any = typer.main.get_command(app)  # typer's own click: read by its attributes
    context = full.context_class(full, info_name="nrl-launch", **full.context_settings)
    for name, summary in package._SUMMARIES.items():
        words = (full.commands[name].help or "").split("\n\n")[0].split()
        first = next(i for i, word in enumerate(words) if word.endswith("."))
        assert summary == " ".join(words[: first + 1]), name
    assert list(package._SUMMARIES) == list(full.commands)
    assert cli("--help").out == full.get_help(context) + "\n"


# ---- cancel of an ended job, dashboard without a port ----


def test_cancel_of_an_ended_job_says_how_it_ended(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    save(tmp_path, "51")
    save(tmp_path, "52")
    slurm.answer("squeue", "51|COMPLETED|None|2|node[0-1]\n52|RUNNING|None|2|node[2-3]\n")
    slurm.answer("sacct", "51|COMPLETED|0:0\n")
    slurm.answer("scancel")
    result = cli("cancel", "51", "52")
    assert (result.code, result.out) == (0, "Cancelled 52\n")
    assert result.err == (
        "nrl-launch: warning: job 51 had already ended (COMPLETED: completed): nothing to cancel\n"
    )
    assert slurm.calls("scancel") == ["scancel 52"]
    data = json.loads(cli("cancel", "51", "--json").out)
    assert (data["cancelled"], data["ended"]) == ([], {"51": "COMPLETED: completed"})
    assert slurm.calls("scancel") == ["scancel 52"]  # not again


def test_cancel_when_squeue_fails_still_cancels(cli: Cli, slurm: FakeSlurm, tmp_path: Path) -> None:
    save(tmp_path, "51")
    slurm.answer("scancel")
    result = cli("cancel", "51")
    assert (result.code, result.out) == (0, "Cancelled 51\n")
    assert "cancelling without knowing which jobs have ended" in result.err
    assert slurm.calls("scancel") == ["scancel 51"]


@pytest.mark.parametrize("spec", [{"ray": {}}, {"slurm": {"nodes": 2}}, {"ray": {"ports": None}}])
def test_dashboard_of_a_record_without_its_port_is_one_line(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, spec: dict
) -> None:
    save(tmp_path, "61", spec=spec)
    result = cli("dashboard", "61")
    assert result.code == 2
    assert result.err == (
        "nrl-launch: error: job 61's record names no Ray dashboard port (ray.ports.dashboard): "
        f"the head's log, ray-head.log in {tmp_path}/logs/61-logs, says where its dashboard "
        "listens\n"
    )
    assert slurm.calls() == []


# ---- the examples in every command's --help ----

COMMANDS = [c.name for c in app.registered_commands] + ["config", "config show"]
# Examples that run here as written (no cluster, no job): the rest are parsed only.
RUNNABLE = ("render", "plan", "config show", "status", "list")


def help_examples(cli: Cli, command: str) -> list[list[str]]:
    text = cli(*command.split(), "--help").out
    assert "\n  Examples:\n" in text, command
    lines = text.split("\n  Examples:\n", 1)[1].replace("\\\n", " ").splitlines()
    found = [shlex.split(line, comments=True) for line in lines if line.strip()]
    assert 1 <= len(found) <= 2 and all(argv[0] == "nrl-launch" for argv in found), lines
    return [argv[1:] for argv in found]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_shows_examples_that_work(
    cli: Cli, slurm: FakeSlurm, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # as written from the repository root
    for argv in help_examples(cli, command):
        assert argv[: len(command.split())] == command.split(), argv
        for path in (a for a in argv if a.startswith("examples/")):
            assert (REPO / path).exists(), path
        if "JOBID" not in argv and (" ".join(argv).startswith(RUNNABLE) or "--dry-run" in argv):
            result = cli(*argv)
            assert result.code == 0, (argv, result.err)
        else:  # it needs a cluster or a job: its flags and arguments parse
            _parse([a.replace("JOBID", "12") for a in argv])
    assert not [c for c in slurm.calls() if not c.startswith("squeue")]  # nothing was queued


def _parse(argv: list[str]) -> None:
    """Parse `nrl-launch ARGV...` as the command would, without running it."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = group.make_context("nrl-launch", [])
    command, args = group.get_command(ctx, argv[0]), argv[1:]
    if isinstance(command, typer.core.TyperGroup):  # config show
        command, args = command.get_command(ctx, args[0]), args[1:]
    assert command is not None, argv
    command.make_context(argv[0], args, parent=ctx)  # raises on a flag or value it refuses
