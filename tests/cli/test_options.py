"""The job options are declared once (cli/options.py: JOB_OPTIONS) and each command's flags are
made from that declaration: the click commands typer builds, which --help, completion and the
remote forwarder read, hold every option a command takes, as declared."""

from __future__ import annotations

import json
import typing
from typing import Annotated, Any

import pytest
import typer

from nrl_launch.cli import app
from nrl_launch.cli.options import (
    ALL_OPTIONS,
    JOB_OPTIONS,
    JobFlags,
    JobOption,
    Quiet,
    job_command,
    job_flags,
)
from tests.conftest import Cli

# The job options each command does not take: these were its flags before the table, and stay.
NOT_TAKEN = {
    "submit": set(),
    "render": {"retries"},
    "plan": {"retries"},
    "doctor": {"retries"},
    "config show": {"retries"},
    "run": {"retries", "backend", "dedicated_head", "interactive", "config"},
    "pull": {
        "backend",
        "nodes",
        "dedicated_head",
        "gpus_per_node",
        "exclusive",
        "retries",
        "container",
        "container_runtime",
        "mount",
        "env",
        "secret",
        "interactive",
        "config",
        "no_check",
        "command",
    },
}


def _command(name: str) -> Any:
    """The click command typer builds for `name` (`config show`: the group's subcommand)."""
    command = typer.main.get_command(app)
    for word in name.split():
        command = command.commands[word]  # type: ignore[attr-defined]
    return command


def _is_list(value_type: Any) -> bool:
    return any(typing.get_origin(t) is list for t in typing.get_args(value_type))


def _declared_names(option: JobOption) -> set[str]:
    info = typing.get_args(option.type)[1]
    names = [info.default, *(info.param_decls or ())] if isinstance(info.default, str) else []
    return {flag for name in names for flag in name.split("/")}


@pytest.mark.parametrize("name", sorted(NOT_TAKEN))
def test_every_declared_option_is_in_the_click_command_as_declared(name: str) -> None:
    params = {p.name: p for p in _command(name).params}
    taken = [o for o in JOB_OPTIONS if o.name not in NOT_TAKEN[name]]
    for option in taken:
        param = params[option.name]
        value_type = typing.get_args(option.type)[0]
        if option.name == "command":  # the driver's words: every word after --
            assert param.param_type_name == "argument" and param.nargs == -1
            continue
        # What the forwarder reads: a flag takes no value, every other option one, given again
        # when it is a list.
        assert param.param_type_name == "option", option.name
        assert param.is_flag == (value_type in (bool, bool | None)), option.name
        assert param.multiple == _is_list(value_type), option.name
        assert param.nargs == 1, option.name
        assert {*param.opts, *param.secondary_opts} == _declared_names(option), option.name
        assert option.flag in param.opts
    assert not {o.name for o in JOB_OPTIONS if o.name in NOT_TAKEN[name]} & params.keys()


def test_the_job_options_come_where_flags_stands_and_json_and_cmd_last() -> None:
    """A command's own options before `flags` come first, then the job options in the table's
    order, then its options after `flags`, then --json and the driver's words: as --help and
    completion list them."""
    seen: list[JobFlags] = []

    @job_command({"nodes", "time", "json", "command"})
    def demo(
        quiet: Quiet = False,
        *,
        flags: JobFlags,
        later: Annotated[int, typer.Option("--later")] = 0,
    ) -> None:
        seen.append(flags)
        assert (quiet, later) == (True, 2)

    demo_app = typer.Typer(add_completion=False)
    demo_app.command()(demo)
    click = typer.main.get_command(demo_app)
    assert [p.name for p in click.params] == ["quiet", "nodes", "time", "later", "json", "command"]
    click.main(["-q", "-N", "3", "--later", "2", "--json", "--", "hostname"], standalone_mode=False)
    [flags] = seen
    assert flags.values == {
        "slurm.nodes": 3,
        "driver.command": ["hostname"],
        "interactive": False,
    }
    assert flags.labels["slurm.nodes"] == "--nodes" and flags.json


def test_a_name_the_table_does_not_declare_is_refused() -> None:
    with pytest.raises(ValueError, match="nodez"):
        job_command({"nodez"})
    with pytest.raises(ValueError, match="time"):  # a variant of an option it does not take
        job_command({"nodes"}, time=Quiet)
    with pytest.raises(TypeError, match="nodez"):
        job_flags(nodez=3)
    assert {o.name for o in JOB_OPTIONS} == ALL_OPTIONS


def test_each_keyed_option_sets_its_spec_key_labelled_with_its_flag(cli: Cli) -> None:
    """Every option that sets one spec key does, through a command built from the table, and
    `config show --json` says which flag set it."""
    given = {
        "--backend": "slurm",
        "--nodes": "3",
        "--gpus-per-node": "2",
        "--time": "10",
        "--account": "acct",
        "--partition": "part",
        "--job-name": "jn",
        "--qos": "high",
        "--constraint": "h100",
        "--reservation": "res",
        "--exclude": "node1",
        "--container": "img.sqsh",
        "--container-runtime": "pyxis",
        "--mount": "/a:/b",
        "--log-dir": "/lustre/logs",
    }
    args = [word for flag, value in given.items() for word in (flag, value)]
    result = cli(
        "config", "show", "--json", "--dedicated-head", "--no-exclusive", *args, "--", "hostname"
    )
    assert result.code == 0, result.err
    sources = json.loads(result.out)["sources"]
    keyed = [
        o
        for o in JOB_OPTIONS
        if o.key is not None and o.name != "retries" and o.key != "nemo_rl.config"
    ]
    assert {o.key: sources[o.key] for o in keyed} == {o.key: o.flag for o in keyed}
