"""The one module that prints: plain text, a versioned JSON envelope, or one-line errors.

rich is imported only where a table is drawn, so plain commands start fast. While the Python
API (nrl_launch.api) runs outside a command, warnings and notes go to its caller instead
(`heard_by`): nothing prints then.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

__all__ = [
    "JSON_VERSION",
    "as_command",
    "ask",
    "confirm",
    "emit_json",
    "emit_text",
    "error",
    "heard_by",
    "json_printed",
    "note",
    "redraw",
    "reset",
    "table",
    "traceback",
    "warn",
    "write",
]

# Bumped when a key in any --json output changes meaning or disappears (adding keys is fine).
JSON_VERSION = 1

_json_printed = False  # whether this process has printed a JSON object (at most one, whole)

# Who hears warn() and note() instead of stderr (kind "warning" or "note", the message): the
# Python API's caller, while an API function runs; None: stderr. A command of the CLI keeps
# stderr for them, also when it calls the API (`as_command`).
_sink: ContextVar[Callable[[str, str], None] | None] = ContextVar("nrl_launch_sink", default=None)
_command: ContextVar[bool] = ContextVar("nrl_launch_command", default=False)


@contextlib.contextmanager
def as_command() -> Iterator[None]:
    """The block runs a command of the CLI: what it warns about is printed, wherever it is said."""
    token = _command.set(True)
    try:
        yield
    finally:
        _command.reset(token)


@contextlib.contextmanager
def heard_by(sink: Callable[[str, str], None]) -> Iterator[None]:
    """warn() and note() go to `sink` for the block, unless a CLI command runs it."""
    if _command.get():
        yield
        return
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def emit_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def write(text: str, *, stderr: bool = False) -> None:
    """`text` as it is (a log's bytes as they come: no newline added); with `stderr`, there
    (a remote nrl-launch's own notes and warnings, passed on)."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(text)
    stream.flush()


def emit_json(command: str, data: Mapping[str, Any], *, ok: bool = True) -> None:
    import json  # stdlib, for --json only: not at `import nrl_launch.api`

    global _json_printed
    envelope = {"nrl_launch_json": JSON_VERSION, "command": command, "ok": ok, **data}
    emit_text(json.dumps(envelope, indent=2, sort_keys=True, ensure_ascii=False))
    _json_printed = True


def reset() -> None:
    """A new command starts: nothing printed yet (tests run many in one process)."""
    global _json_printed
    _json_printed = False


def json_printed() -> bool:
    """Whether a JSON object was printed: an error after it adds no second one to stdout."""
    return _json_printed


def error(message: str) -> None:
    """One line per problem on stderr, prefixed so it stands out in a wall of job output."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"nrl-launch: error: {line}\n")
    sys.stderr.flush()


def traceback() -> None:
    """The traceback of the exception being handled, on stderr (--debug)."""
    import traceback  # stdlib, for --debug alone

    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


def note(message: str) -> None:
    """Something nrl-launch decided for the user (a derived value), on stderr."""
    if (sink := _sink.get()) is not None:
        sink("note", message)
        return
    sys.stderr.write(f"nrl-launch: note: {message}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    if (sink := _sink.get()) is not None:
        sink("warning", message)
        return
    sys.stderr.write(f"nrl-launch: warning: {message}\n")
    sys.stderr.flush()


def ask(question: str, *, default: str, parse: Callable[[str], Any]) -> Any:
    """The answer to `question` on stderr (`default` on Enter), as `parse` reads it; `parse`
    raises ValueError for a bad answer, whose message is shown before asking again."""
    import typer  # the API (nrl_launch.api) never loads typer (test_imports.py)

    def checked(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return typer.prompt(
        question, default=default, show_default=bool(default), value_proc=checked, err=True
    )


def confirm(question: str) -> bool:
    """Yes or no on stderr; no on Enter."""
    import typer  # the API (nrl_launch.api) never loads typer (test_imports.py)

    return typer.confirm(question, default=False, err=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain table on a terminal; tab-separated columns when piped, for grep and cut."""
    if not sys.stdout.isatty():
        for row in rows:
            emit_text("\t".join(row))
        return
    # rich draws a table on a terminal only: off every other path (test_imports.py).
    from rich.console import Console
    from rich.table import Table

    view = Table(*headers, box=None, pad_edge=False, highlight=False)
    for row in rows:
        view.add_row(*row)
    Console(highlight=False, markup=False).print(view)


def redraw(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table that replaces the one drawn before it (`status --watch`): on a terminal, the
    screen is cleared and the table drawn under `title`; piped, `title` and the rows (tab-
    separated) are printed again, once per change, for a log or grep."""
    if not sys.stdout.isatty():
        emit_text(title)
        table(headers, rows)
        return
    from rich.console import Console

    Console().clear()
    emit_text(title)
    table(headers, rows)
