"""Layering: one test per adjacent pair of layers, profile discovery, and `config show`.

defaults < profile < job file < ray.sub env vars < CLI flags < --set
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def show(cli: Cli, *args: str) -> dict:  # type: ignore[type-arg]
    result = cli("config", "show", "--json", "--interactive", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)  # type: ignore[no-any-return]


def test_defaults_when_nothing_is_set(cli: Cli) -> None:
    shown = show(cli)
    assert shown["spec"]["slurm"]["nodes"] == 1
    assert shown["spec"]["ray"]["ports"]["gcs"] == 1200
    assert shown["sources"]["slurm.nodes"] == "default"


def test_profile_over_defaults(cli: Cli, tmp_path: Path) -> None:
    profile = write(tmp_path / "p.yaml", "slurm: {nodes: 3, account: acct}\n")
    shown = show(cli, "--profile", str(profile))
    assert shown["spec"]["slurm"]["nodes"] == 3
    assert shown["sources"]["slurm.nodes"] == f"profile {profile}"
    assert shown["sources"]["slurm.time"] == "default"


def test_job_file_over_profile(cli: Cli, tmp_path: Path) -> None:
    profile = write(tmp_path / "p.yaml", "slurm: {nodes: 3, account: acct}\n")
    job = write(tmp_path / "j.yaml", "slurm: {nodes: 5}\n")
    shown = show(cli, "--profile", str(profile), "-f", str(job))
    assert shown["spec"]["slurm"]["nodes"] == 5
    assert shown["sources"]["slurm.nodes"] == f"job file {job}"
    assert shown["spec"]["slurm"]["account"] == "acct"  # the rest of the profile stays


def test_ray_sub_env_over_job_file(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = write(tmp_path / "j.yaml", "slurm: {gpus_per_node: 8}\nray: {ports: {gcs: 6379}}\n")
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    monkeypatch.setenv("PORT", "54514")
    shown = show(cli, "-f", str(job))
    assert shown["spec"]["slurm"]["gpus_per_node"] == 4
    assert shown["spec"]["ray"]["ports"]["gcs"] == 54514
    assert shown["sources"]["ray.ports.gcs"] == "env PORT"


@pytest.mark.parametrize(("value", "debugger"), [("legacy", True), ("1", False), ("", False)])
def test_ray_debug_legacy_is_ray_sub_s_external_debugger_other_values_are_ray_s(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str, debugger: bool
) -> None:
    monkeypatch.setenv("RAY_DEBUG", value)
    monkeypatch.setenv("RAY_LOG_SYNC_FREQUENCY", "30")
    shown = show(cli)
    assert shown["spec"]["ray"]["external_debugger"] is debugger
    assert shown["spec"]["ray"]["log_sync_s"] == 30
    assert shown["sources"]["ray.log_sync_s"] == "env RAY_LOG_SYNC_FREQUENCY"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("RAY_SUB_DEBUG_ENV", "1", "never prints the job's environment"),
        ("DEDICATED_RAY_HEAD", "yes", "must be 0 or 1, as for ray.sub"),
        ("DEDICATED_RAY_HEAD", "2", "must be 0 or 1, as for ray.sub"),
        ("NRL_DEDICATED_RAY_HEAD", "1", "no node would offer its GPUs"),
    ],
)
def test_a_ray_sub_variable_nrl_launch_does_not_take_is_refused_not_ignored(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    out = tmp_path / "job.sbatch"
    result = cli("render", "-o", str(out), "--", "python", "train.py")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert f"{name}={value!r}" in result.err and says in result.err
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "value"), [("RAY_SUB_DEBUG_ENV", "0"), ("DEDICATED_RAY_HEAD", "0")]
)
def test_ray_sub_s_own_defaults_are_not_refused(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    assert show(cli)["spec"]["ray"]["external_debugger"] is False
    assert show(cli)["spec"]["ray"]["dedicated_head"] is False


@pytest.mark.parametrize(("value", "head"), [("1", True), ("0", False)])
def test_dedicated_ray_head_is_ray_dedicated_head(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, head: bool
) -> None:
    """ray.sub's DEDICATED_RAY_HEAD over a job file; --nodes keeps counting the GPU nodes (with
    ray.sub it counted the head too: a warning says so)."""
    job = write(tmp_path / "j.yaml", f"ray: {{dedicated_head: {str(not head).lower()}}}\n")
    monkeypatch.setenv("DEDICATED_RAY_HEAD", value)
    result = cli("config", "show", "--json", "--interactive", "-f", str(job), "--nodes", "2")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["spec"]["ray"]["dedicated_head"] is head
    assert shown["sources"]["ray.dedicated_head"] == "env DEDICATED_RAY_HEAD"
    assert ("3 nodes in all" in result.err) is head
    assert ("unlike with ray.sub, --nodes counts only the GPU nodes (2)" in result.err) is head


def test_cli_flags_over_ray_sub_env(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    monkeypatch.setenv("CONTAINER", "nvcr.io/nvidia/nemo-rl:v0.6.0")
    shown = show(cli, "--gpus-per-node", "2", "--container", "/images/rl.sqsh")
    assert shown["spec"]["slurm"]["gpus_per_node"] == 2
    assert shown["spec"]["container"]["image"] == "/images/rl.sqsh"
    assert shown["sources"]["container.image"] == "--container"


def test_set_over_cli_flags(cli: Cli) -> None:
    shown = show(cli, "--nodes", "2", "--set", "slurm.nodes=7", "--set", "slurm.time=1:30")
    assert shown["spec"]["slurm"]["nodes"] == 7
    assert shown["spec"]["slurm"]["time"] == "1:30"  # a time, not YAML's base-60 integer 90
    assert shown["sources"]["slurm.nodes"] == "--set slurm.nodes"


def test_ray_sub_habits_keep_working(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTAINER", "nvcr.io/nvidia/nemo-rl:v0.6.0")
    monkeypatch.setenv("MOUNTS", "/lustre/a:/lustre/a,/data:/data:ro")
    monkeypatch.setenv("COMMAND", "uv run examples/run_sft.py")
    monkeypatch.setenv("BASE_LOG_DIR", "/lustre/a/logs")
    result = cli("config", "show", "--json")
    spec = json.loads(result.out)["spec"]
    assert spec["container"]["runtime"] == "pyxis"
    assert [m["dst"] for m in spec["container"]["mounts"]] == ["/lustre/a", "/data"]
    assert spec["driver"]["command"] == ["bash", "-c", "uv run examples/run_sft.py"]
    assert spec["logs"]["base_dir"] == "/lustre/a/logs"


def test_env_flags_add_to_env_from_files(cli: Cli, tmp_path: Path) -> None:
    job = write(tmp_path / "j.yaml", "env: {A: from-file, B: from-file}\n")
    shown = show(cli, "-f", str(job), "--env", "B=from-flag", "--env", "C=x=y")
    assert shown["spec"]["env"] == {"A": "from-file", "B": "from-flag", "C": "x=y"}
    assert shown["sources"]["env.B"] == "--env"


def test_profile_flag_over_profile_env_var(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "NRL_LAUNCH_PROFILE", str(write(tmp_path / "env.yaml", "slurm: {nodes: 2}\n"))
    )
    flag = write(tmp_path / "flag.yaml", "slurm: {nodes: 3}\n")
    assert show(cli, "--profile", str(flag))["spec"]["slurm"]["nodes"] == 3


def test_profile_env_var_over_cwd_profile(
    cli: Cli, tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(isolated / "nrl-launch.yaml", "slurm: {nodes: 4}\n")
    monkeypatch.setenv(
        "NRL_LAUNCH_PROFILE", str(write(tmp_path / "env.yaml", "slurm: {nodes: 2}\n"))
    )
    assert show(cli)["spec"]["slurm"]["nodes"] == 2


def test_cwd_profile_over_user_profile(cli: Cli, tmp_path: Path, isolated: Path) -> None:
    write(tmp_path / "home/.config/nrl-launch/profile.yaml", "slurm: {nodes: 6}\n")
    assert show(cli)["spec"]["slurm"]["nodes"] == 6
    write(isolated / "nrl-launch.yaml", "slurm: {nodes: 4}\n")
    shown = show(cli)
    assert shown["spec"]["slurm"]["nodes"] == 4
    assert shown["sources"]["slurm.nodes"].endswith("nrl-launch.yaml")


def test_later_value_replaces_a_whole_subtree(cli: Cli, tmp_path: Path) -> None:
    job = write(tmp_path / "j.yaml", "container: {mounts: [/a:/a, /b:/b]}\n")
    shown = show(cli, "-f", str(job), "--mount", "/c:/c")
    assert [m["src"] for m in shown["spec"]["container"]["mounts"]] == ["/c"]


def test_config_show_sources_table(cli: Cli, tmp_path: Path) -> None:
    job = write(tmp_path / "j.yaml", "slurm: {nodes: 5}\n")
    result = cli("config", "show", "--sources", "--interactive", "-f", str(job), "--time", "10")
    assert result.code == 0, result.err
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in result.out.splitlines()}
    assert rows["slurm.nodes"] == ["5", f"job file {job}"]
    assert rows["slurm.time"] == ["'10'", "--time"]
    assert rows["ray.ports.gcs"] == ["1200", "default"]


def test_config_show_yaml(cli: Cli) -> None:
    import yaml

    result = cli("config", "show", "--interactive", "--nodes", "3")
    assert yaml.safe_load(result.out)["slurm"]["nodes"] == 3


def test_container_flag_implies_pyxis_over_a_profile(cli: Cli, tmp_path: Path) -> None:
    profile = write(tmp_path / "p.yaml", "container: {runtime: none}\n")
    shown = show(cli, "--profile", str(profile), "--container", "/images/rl.sqsh")
    assert shown["spec"]["container"]["runtime"] == "pyxis"
    assert shown["sources"]["container.runtime"] == "--container"


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    """Reading a FIFO blocks until something writes to it: `-f fifo` used to hang for ever."""
    import os

    from nrl_launch.errors import ConfigError
    from nrl_launch.paths import read_config_text

    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    with pytest.raises(
        ConfigError, match=r"job file: cannot be read \(not a regular file but a FIFO\)"
    ):
        read_config_text(fifo, "job file")


def test_a_key_given_twice_is_refused_with_both_lines(cli: Cli, tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys: a second `slurm:` silently dropped the first's
    nodes. A merge (`<<`) overridden beside it is not a repeat."""
    job = write(tmp_path / "j.yaml", "slurm:\n  nodes: 2\nenv: {A: '1'}\nslurm:\n  time: 10\n")
    result = cli("config", "show", "--interactive", "-f", str(job))
    assert result.code == 2
    assert result.err == (
        f"nrl-launch: error: job file {job}: invalid YAML at line 4, column 1: "
        "'slurm' is given twice (first at line 1)\n"
    )
    from nrl_launch.spec.layers import load_yaml_mapping

    merged = write(tmp_path / "m.yaml", "x: &b {nodes: 2, time: 10}\nslurm: {<<: *b, nodes: 3}\n")
    assert load_yaml_mapping(merged, "job file")["slurm"] == {"nodes": 3, "time": 10}


def test_a_profile_that_is_no_file_says_what_it_is(cli: Cli, tmp_path: Path) -> None:
    result = cli("config", "show", "--interactive", "--profile", str(tmp_path))
    assert result.code == 2
    assert result.err == f"nrl-launch: error: profile {tmp_path}: is a directory, not a YAML file\n"


def test_two_job_files_merge_in_order(cli: Cli, tmp_path: Path) -> None:
    base = write(tmp_path / "base.yaml", "slurm: {nodes: 2, account: acct, time: '2:00:00'}\n")
    big = write(tmp_path / "big.yaml", "slurm: {nodes: 8}\n")
    shown = show(cli, "-f", str(base), "-f", str(big))
    assert shown["spec"]["slurm"]["nodes"] == 8  # the later file wins
    assert shown["spec"]["slurm"]["account"] == "acct"  # and the earlier one's rest stays
    assert shown["sources"]["slurm.nodes"] == f"job file {big}"
    assert shown["sources"]["slurm.account"] == f"job file {base}"
    assert show(cli, "-f", str(big), "-f", str(base))["spec"]["slurm"]["nodes"] == 2


# ---- warnings: what a valid spec would silently get wrong ----


def warnings(cli: Cli, *args: str) -> list[str]:
    result = cli("render", *args)
    assert result.code == 0, result.err
    prefix = "nrl-launch: warning: "
    return [line.removeprefix(prefix) for line in result.err.splitlines() if prefix in line]


DRIVER = ["--", "python", "train.py"]


def test_ray_sub_variables_from_the_shell_are_named(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    monkeypatch.setenv("PORT", "6379")
    monkeypatch.setenv("CONTAINER", "img")
    # A flag overrides CONTAINER: only the two that are used are named.
    assert warnings(cli, "--container", "other", *DRIVER) == [
        "ray.sub variables set in your shell are used: GPUS_PER_NODE (slurm.gpus_per_node), "
        "PORT (ray.ports.gcs); unset them if they are not meant for this job"
    ]
    overridden = ["--container", "other", "--gpus-per-node", "8", "--set", "ray.ports.gcs=1200"]
    assert warnings(cli, *overridden, *DRIVER) == []


def test_a_job_without_ray_is_not_warned_about_what_only_ray_reads(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run and pull start no Ray: ray.sub's port and head variables change nothing there (and
    a dedicated head adds no node to them); what they do read is still named."""
    monkeypatch.setenv("PORT", "6379")
    monkeypatch.setenv("DEDICATED_RAY_HEAD", "1")
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    result = cli("run", "--dry-run", "-N", "2", "--log-dir", "/lustre/logs", "--", "hostname")
    assert result.code == 0, result.err
    assert result.err.splitlines() == [
        "nrl-launch: warning: ray.sub variables set in your shell are used: GPUS_PER_NODE "
        "(slurm.gpus_per_node); unset them if they are not meant for this job"
    ]
    assert "#SBATCH --nodes=2\n" in result.out
    monkeypatch.delenv("GPUS_PER_NODE")
    result = cli("pull", "--dry-run", "ubuntu:24.04")
    assert result.code == 0, result.err
    assert result.err == ""
    # The same shell under a Ray job: all three are used, and named.
    assert warnings(cli, *DRIVER)[0].startswith(
        "ray.sub variables set in your shell are used: PORT (ray.ports.gcs), DEDICATED_RAY_HEAD"
    )


def test_mounts_without_a_container(cli: Cli) -> None:
    assert warnings(cli, "--mount", "/data:/data", *DRIVER) == [
        "container.mounts (from --mount) are not used: the job runs without a container; "
        "give --container IMAGE, or drop the mounts"
    ]
    assert warnings(cli, "--container", "img", "--mount", "/data:/data", *DRIVER) == []
    # Asked for in so many words (or by pull, whatever the profile says): nothing to say.
    no_container = ["--container-runtime", "none", "--mount", "/data:/data"]
    assert warnings(cli, *no_container, *DRIVER) == []
    # The local backend never runs one: a profile's mounts are for the cluster's jobs.
    assert warnings(cli, "--backend", "local", "--mount", "/data:/data", *DRIVER) == []


def test_a_node_local_log_dir_of_a_multi_node_job(cli: Cli) -> None:
    assert warnings(cli, "-N", "2", "--log-dir", "/tmp/logs", *DRIVER) == [
        "logs.base_dir /tmp/logs (from --log-dir) is local to each node (/tmp): each of the "
        "job's 2 nodes would write its logs and state where neither the others nor status and "
        "logs can read them; choose a directory every node shares"
    ]
    assert warnings(cli, "-N", "1", "--log-dir", "/tmp/logs", *DRIVER) == []
    assert warnings(cli, "-N", "2", "--log-dir", "/lustre/logs", *DRIVER) == []


def test_a_relative_log_dir_is_taken_from_where_the_job_is_submitted(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The default log dir is `.`: submitted from /tmp, every node writes its own /tmp."""
    node_local = Path("/dev/shm")
    if not node_local.is_dir():
        pytest.skip("no /dev/shm here")
    monkeypatch.chdir(node_local)
    assert warnings(cli, "-N", "2", "--log-dir", "logs", *DRIVER) == [
        "logs.base_dir logs (from --log-dir), /dev/shm/logs from this directory, is local to "
        "each node (/dev/shm): each of the job's 2 nodes would write its logs and state where "
        "neither the others nor status and logs can read them; choose a directory every node "
        "shares"
    ]
    assert warnings(cli, "-N", "2", *DRIVER)[0].startswith(
        "logs.base_dir ., /dev/shm from this directory, is local to each node (/dev/shm)"
    )
    monkeypatch.chdir(tmp_path)
    assert warnings(cli, "-N", "2", "--log-dir", "/lustre/logs", *DRIVER) == []


@pytest.mark.parametrize(
    ("time", "said"),
    [
        ("4:00", "slurm.time '4:00' (from --time) is 4 minutes to Slurm (MM:SS); for hours "
         "write 4:00:00"),
        ("8:30", "slurm.time '8:30' (from --time) is 8 minutes 30 seconds to Slurm (MM:SS); "
         "for hours write 8:30:00"),
        ("20:00", None),  # as likely a short run of 20 minutes
        ("4:00:00", None),
        ("240", None),
        ("90:00", None),  # as likely 90 minutes as 90 hours
    ],
)  # fmt: skip
def test_a_time_of_minutes_that_reads_like_hours(cli: Cli, time: str, said: str | None) -> None:
    assert warnings(cli, "-t", time, *DRIVER) == ([said] if said else [])
    # Only for a job that trains: an interactive cluster may well be meant for minutes.
    assert warnings(cli, "-t", time, "--interactive") == []


def test_job_flags_of_the_slurm_keys() -> None:
    """Each of sbatch's flags sets its key, labelled with the flag (the commands name them in
    their signatures: see cli/options.py)."""
    from nrl_launch.cli.options import job_flags

    flags = job_flags(qos="high", constraint="h100", reservation="r", exclude="node1")
    assert flags.values == {
        "slurm.qos": "high",
        "slurm.constraint": "h100",
        "slurm.reservation": "r",
        "slurm.exclude": "node1",
    }
    assert flags.labels == {
        "slurm.qos": "--qos",
        "slurm.constraint": "--constraint",
        "slurm.reservation": "--reservation",
        "slurm.exclude": "--exclude",
    }


def test_yaml_s_off_and_numbers_are_the_words_a_user_meant(cli: Cli, tmp_path: Path) -> None:
    """`off` (YAML's false) drops a secret, as docs/security.md says; a numeric account, job name or
    partition (YAML's ints) is that word."""
    job = tmp_path / "j.yaml"
    job.write_text(
        "secrets:\n  HF_TOKEN: off\nslurm:\n  account: 123456\n  job_name: 2024\n  partition: 1\n"
    )
    result = cli("config", "show", "--json", "-f", str(job), "--", "python", "x.py")
    assert result.code == 0, result.err
    spec = json.loads(result.out)["spec"]
    assert spec["secrets"]["HF_TOKEN"] == "off"
    slurm = spec["slurm"]
    assert (slurm["account"], slurm["job_name"], slurm["partition"]) == ("123456", "2024", "1")
