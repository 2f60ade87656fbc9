"""The forwarder reads a command's words as the CLI declares them (remote/words.py): every
option's value is skipped, never taken for a JOBID, and the grammar comes from the commands
themselves, so no option can be missing from it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import typer

from nrl_launch import cli
from nrl_launch.remote import records, words
from nrl_launch.remote.profiles import Remote
from tests.conftest import Cli
from tests.remote.conftest import FakeSsh


def _commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every command of the CLI, a group's (config's) own commands too."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def _grammar(name: str) -> words.Grammar:
    return words.Grammar.of(typer.main.get_command(cli.app).commands[name])  # type: ignore[attr-defined]


def test_every_option_of_every_command_is_read_with_its_values() -> None:
    checked = 0
    for name, command in _commands(typer.main.get_command(cli.app)):
        grammar = words.Grammar.of(command)
        for param in command.params:
            if param.param_type_name != "option":
                continue
            takes = 0 if param.is_flag or param.count else param.nargs
            for spellings in (param.opts, param.secondary_opts):
                for spelling in spellings:
                    _check(grammar, name, spelling, takes, max(spellings, key=len))
                    checked += 1
    assert checked > 150  # every command's options, not a few


def _check(grammar: words.Grammar, name: str, spelling: str, takes: int, canonical: str) -> None:
    """`spelling` and its values (alone, `--opt=V`, `-oV`), then a word that is no value."""
    forms = [[spelling, *["4242"] * takes, "77"]]
    if takes == 1:
        forms.append([f"{spelling}=4242" if spelling.startswith("--") else f"{spelling}4242", "77"])
    for form in forms:
        typed = words.split(grammar, form)
        kinds = [w.kind for w in typed]
        assert kinds == ["option", *["value"] * (len(form) - 2), "argument"], (name, form)
        assert words.given(typed, canonical)
        if grammar.names_jobs:
            assert words.job_ids(typed) == ["77"], (name, form)


def test_an_experiment_name_is_no_job_id() -> None:
    # Kept by hand, the forwarder's options had lost --experiment: its value became a JOBID.
    for command in ("status", "cancel"):
        typed = words.split(_grammar(command), ["--experiment", "exp1"])
        assert words.job_ids(typed) == []
    typed = words.split(_grammar("logs"), ["-f", "--tail=5", "4242", "--node", "1"])
    assert words.job_ids(typed) == ["4242"]
    assert words.value(typed, "--tail") == "5" and words.value(typed, "--node") == "1"
    attach = words.split(_grammar("attach"), ["4242", "--node", "1", "--", "ray", "status"])
    assert words.job_ids(attach) == ["4242"]  # the command after it is no job


def test_an_experiment_named_like_a_remote_job_stays_here(cli: Cli, fake_ssh: FakeSsh) -> None:
    # A job 4242 submitted to dev: `status --experiment 4242` asks about this machine's
    # experiment 4242, not dev's job.
    remote = Remote(name="dev", host="dev-login")
    records.save(records.RemoteJob(remote=remote, job_id="4242", submitted_at=9), os.environ)
    result = cli("status", "--experiment", "4242")
    assert fake_ssh.calls() == []
    assert result.code == 4, result.err
    assert "experiment" in result.err and "dev" not in result.err
