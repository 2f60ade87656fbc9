"""The one module that prints: plain text, a versioned JSON envelope, or one-line errors.

rich is imported only where a table is drawn, so plain commands start fast.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["JSON_VERSION", "emit_json", "emit_text", "error", "note", "table", "warn"]

# Bumped when a key in any --json output changes meaning or disappears (adding keys is fine).
JSON_VERSION = 1


def emit_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def emit_json(command: str, data: Mapping[str, Any], *, ok: bool = True) -> None:
    import json

    envelope = {"nrl_launch_json": JSON_VERSION, "command": command, "ok": ok, **data}
    emit_text(json.dumps(envelope, indent=2, sort_keys=True, ensure_ascii=False))


def error(message: str) -> None:
    """One line per problem on stderr, prefixed so it stands out in a wall of job output."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"nrl-launch: error: {line}\n")
    sys.stderr.flush()


def note(message: str) -> None:
    """Something nrl-launch decided for the user (a derived value), on stderr."""
    sys.stderr.write(f"nrl-launch: note: {message}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    sys.stderr.write(f"nrl-launch: warning: {message}\n")
    sys.stderr.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain table on a terminal; tab-separated columns when piped, for grep and cut."""
    if not sys.stdout.isatty():
        for row in rows:
            emit_text("\t".join(row))
        return
    from rich.console import Console
    from rich.table import Table

    view = Table(*headers, box=None, pad_edge=False, highlight=False)
    for row in rows:
        view.add_row(*row)
    Console(highlight=False, markup=False).print(view)
