"""A command in a terminal of its own (a detached tmux session), as a person at a keyboard has
it: what its screen shows, and lines typed into it. attach's pty path is driven through it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import TracebackType

from tests.conftest import need_tool, wait_until


class Terminal:
    """`command` (one shell line) running in a 200x50 tmux session named `name`, in `cwd`."""

    def __init__(self, command: str, name: str, cwd: Path | None = None) -> None:
        self._tmux = need_tool("tmux")
        self._name = name
        where = ["-c", str(cwd)] if cwd is not None else []
        subprocess.run(
            [self._tmux, "new-session", "-d", "-s", name, "-x", "200", "-y", "50", *where, command],
            check=True,
        )

    def screen(self) -> str:
        return subprocess.run(
            [self._tmux, "capture-pane", "-p", "-t", self._name], capture_output=True, text=True
        ).stdout

    def type(self, line: str) -> None:
        """Type `line` and Enter."""
        subprocess.run([self._tmux, "send-keys", "-t", self._name, line, "Enter"], check=True)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        wait_until(lambda: text in self.screen(), timeout=timeout)

    def wait_for_prompt(self, timeout: float = 60) -> None:
        wait_until(lambda: "$" in self.screen() or "#" in self.screen(), timeout=timeout)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        subprocess.run([self._tmux, "kill-session", "-t", self._name], capture_output=True)
