"""`nrl-launch init`: what it reads from Slurm (parsers, on output captured from the dev
cluster), and the profile it writes without asking anything, which later commands read."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nrl_launch import cli as cli_module
from nrl_launch.cli import init
from nrl_launch.errors import UsageError
from tests.conftest import Cli
from tests.helpers import TEST_DATA, bash_values

DATA = TEST_DATA / "slurm-22.05"


def captured(name: str) -> str:
    return (DATA / name).read_text()


def dev_cluster(**answers: str | None) -> init.Query:
    """Slurm's answers as the dev cluster gave them (accounting off), `answers` by command."""
    replies: dict[str, str | None] = {
        "scontrol show partition": captured("scontrol-show-partition.txt"),
        "scontrol show config": captured("scontrol-show-config.txt"),
        "sinfo": captured("sinfo-partition-idle.txt"),
        "sacctmgr": None,
        **{name.replace("_", " "): text for name, text in answers.items()},
    }

    def query(argv: list[str]) -> str | None:
        return next((text for cmd, text in replies.items() if " ".join(argv).startswith(cmd)))

    return query


def test_the_dev_cluster_s_partition_and_gpus() -> None:
    facts = init.read_cluster(dev_cluster(), partition=None, user="alice")
    assert facts.values == {
        "slurm.partition": "batch",
        "slurm.gpus_per_node": 8,
        "slurm.gpu_request": "gres",
    }
    assert facts.notes == [
        "slurm.partition: batch, the cluster's default (batch, debug)",
        "slurm.gpus_per_node: 8, asked for as --gres=gpu:N (partition batch's nodes: gpu:8)",
    ]
    assert facts.warnings == []


def test_the_default_account_where_accounting_is_on() -> None:
    config = captured("scontrol-show-config.txt").replace(
        "accounting_storage/none", "accounting_storage/slurmdbd"
    )
    query = dev_cluster(scontrol_show_config=config, sacctmgr="rl_team\n")
    facts = init.read_cluster(query, partition="debug", user="alice")
    assert facts.values["slurm.account"] == "rl_team"
    assert "slurm.partition" not in facts.values  # given: the profile takes the flag's
    assert "slurm.account: rl_team, alice's default account" in facts.notes


def test_nodes_without_gpus_in_gres_ask_slurm_for_none() -> None:
    facts = init.read_cluster(dev_cluster(sinfo="4|(null)|idle\n"), partition=None, user="a")
    assert facts.values["slurm.gpu_request"] == "none"
    assert "slurm.gpus_per_node" not in facts.values
    (warning,) = facts.warnings
    assert warning.startswith("partition batch's nodes have no GPUs in Slurm's gres")


def test_without_slurm_only_what_was_given() -> None:
    facts = init.read_cluster(lambda _argv: None, partition=None, user="a")
    assert facts.values == {}
    (warning,) = facts.warnings
    assert warning.startswith("Slurm did not answer (scontrol show partition)")


def test_a_partition_the_cluster_does_not_have() -> None:
    with pytest.raises(UsageError, match=r"--partition 'gpu': not a partition of this cluster"):
        init.read_cluster(dev_cluster(), partition="gpu", user="a")


# ---- the command ----


@pytest.fixture
def run_init(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    """`nrl-launch init ...` in this process, with no Slurm on PATH (cli/__init__.py wires the
    command; until it does, a copy of the app with it added)."""
    empty = tmp_path / "no-slurm"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    if "init" not in [c.name for c in cli_module.app.registered_commands]:
        app = copy.copy(cli_module.app)
        app.registered_commands = [*cli_module.app.registered_commands]
        app.command("init")(init.init)
        monkeypatch.setattr(cli_module, "app", app)
    return lambda *args: cli("init", *args)


SITE = [
    "--account", "rl_team", "--partition", "batch", "--gpus-per-node", "4",
    "--container", "nvcr.io/nvidia/nemo-rl:v0.6.0", "--mount", "/lustre:/lustre",
    "--log-dir", "/lustre/alice/logs",
]  # fmt: skip


def test_init_asks_nothing_off_a_terminal_and_render_reads_the_profile(
    run_init: Cli, cli: Cli, isolated: Path
) -> None:
    result = run_init(*SITE)  # stdin is not a terminal here: a question would fail to read
    assert result.code == 0, result.err
    profile = isolated.parent / "home" / ".config" / "nrl-launch" / "profile.yaml"
    assert result.out.startswith(f"Wrote profile {profile}:\n")
    assert yaml.safe_load(profile.read_text()) == {
        "slurm": {"account": "rl_team", "partition": "batch", "gpus_per_node": 4},
        "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": ["/lustre:/lustre"]},
        "logs": {"base_dir": "/lustre/alice/logs"},
    }
    assert "Slurm did not answer" in result.err

    rendered = cli("render", "--", "python", "train.py")
    assert rendered.code == 0, rendered.err
    lines = [line for line in rendered.out.splitlines() if line.startswith("#SBATCH")]
    for line in ["--account=rl_team", "--partition=batch", "--gres=gpu:4"]:
        assert f"#SBATCH {line}" in lines
    assert "--output=/lustre/alice/logs/slurm-%j.out" in rendered.out
    # The image pyxis gets: what the script's own set_container_args gives srun.
    probe = 'NRL_SUBMIT_DIR=/s; set_container_args ""; printf "%s\\0" "${NRL_CONTAINER_ARGS[@]}"'
    assert "--container-image=nvcr.io/nvidia/nemo-rl:v0.6.0" in bash_values(rendered.out, probe)


def test_init_json_says_what_it_wrote_and_where(run_init: Cli, isolated: Path) -> None:
    result = run_init(*SITE, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    profile = isolated.parent / "home" / ".config" / "nrl-launch" / "profile.yaml"
    assert (data["command"], data["ok"], data["profile"]) == ("init", True, str(profile))
    assert data["values"]["slurm.account"] == "rl_team"
    assert data["values"]["container.mounts"] == ["/lustre:/lustre"]
    assert data["sources"]["slurm.account"] == "--account"
    assert yaml.safe_load(profile.read_text())["slurm"]["account"] == "rl_team"


def test_an_existing_profile_is_replaced_only_with_force(run_init: Cli, tmp_path: Path) -> None:
    profile = tmp_path / "site.yaml"
    profile.write_text("slurm: {account: old}\n")
    result = run_init("--profile", str(profile), "--account", "new")
    assert result.code == 2
    assert result.err == (
        f"nrl-launch: error: profile {profile} already exists; pass --force to replace it\n"
    )
    assert profile.read_text() == "slurm: {account: old}\n"
    result = run_init("--profile", str(profile), "--account", "new", "--force")
    assert result.code == 0, result.err
    assert yaml.safe_load(profile.read_text()) == {"slurm": {"account": "new"}}
    # Not where commands look by themselves: it says how to use it.
    assert f"pass --profile {profile}, or set NRL_LAUNCH_PROFILE={profile}" in result.err


def test_a_bad_value_names_its_flag_and_writes_nothing(run_init: Cli, isolated: Path) -> None:
    result = run_init("--mount", "data:/data", "--gpu-request", "some")
    assert result.code == 2
    assert result.err.splitlines() == [
        "nrl-launch: error: slurm.gpu_request: input should be 'gres', 'gpus-per-node' or "
        "'none' (got 'some', from --gpu-request)",
        "nrl-launch: error: container.mounts: source 'data' must be an absolute path "
        "(got 'data:/data', from --mount)",
    ]
    assert not (isolated.parent / "home" / ".config" / "nrl-launch").exists()


def test_an_image_pyxis_could_not_pull_is_refused_and_nothing_written(
    run_init: Cli, isolated: Path
) -> None:
    result = run_init("--container", "Bad Image")
    assert result.code == 2
    assert result.err.splitlines()[-1].startswith(
        "nrl-launch: error: container.image 'Bad Image': image name 'Bad Image' must be lowercase"
    )
    assert not (isolated.parent / "home" / ".config" / "nrl-launch").exists()


# ---- on a terminal: typer's prompts (CliRunner feeds the answers) ----


def on_a_terminal(monkeypatch: pytest.MonkeyPatch, sinfo: dict[str, str]) -> None:
    """init asks (CliRunner's stdin is no terminal), and Slurm answers as the dev cluster, each
    partition's nodes as `sinfo` says (partition -> `%D|%G|%t` lines)."""
    cluster = dev_cluster()

    def query(argv: list[str]) -> str | None:
        if argv[0] == "sinfo":
            return sinfo[argv[argv.index("-p") + 1]]
        return cluster(argv)

    monkeypatch.setattr(init, "_interactive", lambda: True)
    monkeypatch.setattr(init, "_query", query)


def test_init_asks_what_no_flag_gave_and_asks_a_bad_answer_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_a_terminal(monkeypatch, {"batch": "4|gpu:8|idle\n", "debug": "2|gpu:4|idle\n"})
    profile = tmp_path / "site.yaml"
    answers = [
        "rl_team",  # account
        "gpu",  # partition: not the cluster's, asked again
        "debug",  # another than the default: its nodes' GPUs are read
        "",  # GPUs per node: Enter keeps what Slurm said of debug's nodes (4)
        "nvcr.io/nvidia/nemo-rl:v0.6.0",
        "data:/data",  # a relative mount source: asked again
        "/lustre:/lustre /scratch:/scratch",
        "/lustre/alice/logs",
    ]
    result = CliRunner().invoke(
        cli_module.app, ["init", "--profile", str(profile)], input="\n".join(answers) + "\n"
    )
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(profile.read_text()) == {
        "slurm": {
            "account": "rl_team",
            "partition": "debug",
            "gpus_per_node": 4,
            "gpu_request": "gres",
        },
        "container": {
            "image": "nvcr.io/nvidia/nemo-rl:v0.6.0",
            "mounts": ["/lustre:/lustre", "/scratch:/scratch"],
        },
        "logs": {"base_dir": "/lustre/alice/logs"},
    }
    asked = result.stderr
    # click writes a question to stderr, the space after it as the input is read
    for question in ["Slurm account (empty: your default):", "GPUs per node [4]:"]:
        assert question in asked
    assert "Error: 'gpu': not a partition of this cluster (batch, debug)" in asked
    assert "Error: container.mounts: source 'data' must be an absolute path" in asked
    assert "slurm.gpus_per_node: 4, asked for as --gres=gpu:N (partition debug's" in asked
    assert f"Wrote profile {profile}:\n" in result.stdout  # (CliRunner echoes input there)


def test_init_off_a_terminal_asks_nothing_even_with_input_waiting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(init, "_query", dev_cluster())
    profile = tmp_path / "site.yaml"
    result = CliRunner().invoke(
        cli_module.app, ["init", "--profile", str(profile)], input="rl_team\n"
    )
    assert result.exit_code == 0, result.output
    assert all(line.startswith("nrl-launch: ") for line in result.stderr.splitlines())
    assert not any(question in result.output for question in init._QUESTIONS.values())
    assert yaml.safe_load(profile.read_text()) == {
        "slurm": {"partition": "batch", "gpus_per_node": 8, "gpu_request": "gres"}
    }


@pytest.mark.parametrize(("answer", "replaced"), [("y", True), ("n", False), ("", False)])
def test_an_existing_profile_is_replaced_on_a_terminal_when_you_say_yes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answer: str, replaced: bool
) -> None:
    on_a_terminal(monkeypatch, {"batch": "4|gpu:8|idle\n"})
    profile = tmp_path / "site.yaml"
    profile.write_text("slurm: {account: old}\n")
    args = ["init", "--profile", str(profile), *SITE[:2], "--partition", "batch"]
    args += ["--gpus-per-node", "8", "--container", "/images/img.sqsh", "--mount", "/a:/a"]
    args += ["--log-dir", "/lustre/logs"]
    result = CliRunner().invoke(cli_module.app, args, input=answer + "\n")
    assert f"Profile {profile} already exists. Replace it? [y/N]:" in result.stderr
    if replaced:
        assert result.exit_code == 0, result.output
        assert yaml.safe_load(profile.read_text())["slurm"]["account"] == "rl_team"
    else:
        assert isinstance(result.exception, UsageError)
        assert profile.read_text() == "slurm: {account: old}\n"


# ---- no Slurm here ----


def test_init_without_slurm_and_no_value_says_so_in_one_line_and_writes_nothing(
    run_init: Cli, isolated: Path
) -> None:
    """No scontrol on PATH (a laptop, a CI runner) and no flag: a profile of nothing would be
    useless, so init says where to run it, and writes nothing."""
    result = run_init()
    assert result.code == 3  # a Slurm command could not be run (README: Exit codes)
    assert result.err.splitlines() == [
        "nrl-launch: error: init found no Slurm here (scontrol is not on PATH): run it on the "
        "cluster's login node, or give the values by flag (--partition, --gpus-per-node, "
        "--account, --container, --mount, --log-dir); nothing was written"
    ]
    assert result.out == ""
    assert not (isolated.parent / "home" / ".config" / "nrl-launch").exists()


def test_an_image_without_token_authentication_names_what_works_for_a_profile(
    run_init: Cli, cli: Cli, tmp_path: Path
) -> None:
    """init has no --set: the line names what does work (another image, or ray.auth off in the
    profile or per job), and the profile is written (a job may still turn auth off)."""
    profile = tmp_path / "site.yaml"
    result = run_init("--profile", str(profile), "--container", "nvcr.io/nvidia/nemo-rl:v0.4.0")
    assert result.code == 0, result.err
    assert (
        "nrl-launch: warning: container.image nvcr.io/nvidia/nemo-rl:v0.4.0: its Ray is 2.46.0 "
        "(NeMo RL v0.4 pins it), which has no token authentication (Ray 2.52 or later has), so "
        "jobs of this profile are refused while ray.auth is token: use an image with a newer Ray "
        "(NeMo RL v0.6.0 or later), or add 'ray: {auth: \"off\"}' to the profile (or --set "
        "ray.auth=off per job; then anyone who can reach the job's Ray ports can run code as you)"
    ) in result.err.splitlines()
    assert yaml.safe_load(profile.read_text()) == {
        "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.4.0"}
    }
    # What it says works does: the profile with ray.auth off renders a job in that image.
    profile.write_text(profile.read_text() + 'ray: {auth: "off"}\n')
    rendered = cli("render", "--profile", str(profile), "--log-dir", "/lustre/logs", "--", "x")
    assert rendered.code == 0, rendered.err
