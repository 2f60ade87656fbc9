"""ssh to a remote cluster's login node: the argv, and the ONE place the remote command line is
built and quoted.

ssh joins its command words with spaces and hands the string to the remote user's login shell
(`$SHELL -c`), so every word is quoted here for a POSIX shell (sh, bash, zsh), once. The line
first says on stderr that it started (`STARTED`): stderr lines before that are ssh's own (a
failed connection is one line naming ssh's error, exit 7); after it, the remote nrl-launch's
notes and warnings, passed on as they come. When nrl-launch is not on the PATH of the remote's
ssh sessions, the line says so (`MISSING`) and exits 127: one clear line here, exit 7.
"""

from __future__ import annotations

import codecs
import json
import os
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

from nrl_launch import __version__, output, paths, runner
from nrl_launch.errors import RemoteError
from nrl_launch.remote.profiles import Remote

__all__ = ["FORWARDED_ENV", "argv", "check_installed", "command_line", "run", "word"]

STARTED = "nrl-launch-remote: started"
MISSING = "nrl-launch: error: nrl-launch is not on the PATH of ssh sessions on this host"
# Set for the remote nrl-launch: it runs for a laptop (its errors can say where to fix things).
FORWARDED_ENV = "NRL_LAUNCH_FORWARDED"
# ssh notices a dead connection within a minute, not at TCP's hours.
_KEEPALIVE = ["-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"]


def word(value: str) -> str:
    """`value` as one word of the remote shell; a leading `~/` stays the remote user's home."""
    if value == "~":
        return '"$HOME"'
    if value.startswith("~/"):
        return '"$HOME"/' + shlex.quote(value[2:])
    return shlex.quote(value)


def command_line(
    remote: Remote,
    args: Sequence[str],
    *,
    cwd: str | None = None,
    after: str = "",
    announce: bool = True,
) -> str:
    """The remote shell's line that runs `nrl-launch ARGS` (remote.command) in `cwd` (default:
    the home dir); `after`: a line of this package's own to run once it has ended (its exit code
    stays the command's); without `announce`, no STARTED line (a terminal's, attach)."""
    nrl = shlex.split(remote.command)
    # The profile's command may start at ~/; the arguments are the user's words, as they are.
    run_it = " ".join([*(word(w) for w in nrl), *(shlex.quote(a) for a in args)])
    line = f"printf '%s\\n' {shlex.quote(STARTED)} >&2; " if announce else ""
    line += (
        f"command -v {word(nrl[0])} >/dev/null 2>&1 || "
        f"{{ printf '%s\\n' {shlex.quote(MISSING)} >&2; exit 127; }}; "
    )
    if cwd is not None:
        line += f"cd {word(cwd)} || exit 1; "
    env = f"{FORWARDED_ENV}={shlex.quote(remote.name)}"
    if after:
        return line + f"{env} {run_it}; rc=$?; {after}; exit $rc"
    return line + f"{env} exec {run_it}"


def raw_line(line: str) -> str:
    """A line of this package's own (sync's upload), announced like command_line's."""
    return f"printf '%s\\n' {shlex.quote(STARTED)} >&2; {line}"


def argv(
    remote: Remote, line: str | None, *, tty: bool = False, options: Sequence[str] = ()
) -> list[str]:
    """ssh's argv: the user's own ssh and config, the profile's options, then ours (the first
    value ssh gets for an option wins, so the user's win), the destination, the line (None: no
    command, as for `ssh -N`)."""
    return [
        "ssh",
        *remote.ssh_options,
        *(["-t"] if tty else ["-T"]),
        *_KEEPALIVE,
        *options,
        "--",
        remote.host,
        *([line] if line is not None else []),
    ]


class Stderr:
    """A remote command's stderr: ssh's own lines held until the remote line has started (then
    passed on), the remote's passed on as they come; the last line kept for an error."""

    def __init__(self, show: bool = True) -> None:
        self.started = False
        self.missing = False
        self.held: list[str] = []
        self.last = ""
        self._show = show
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            text = line.rstrip("\n")
            if text == STARTED:
                self.started = True
                for held in self.held:
                    self.show(held)
                self.held = []
                return
            if text == MISSING:
                self.missing = True
                return
            if text.strip():
                self.last = text.strip()
            if self.started:
                self.show(line)
            else:
                self.held.append(line)

    def show(self, line: str) -> None:
        if self._show:
            output.write(line if line.endswith("\n") else line + "\n", stderr=True)


def run(
    remote: Remote,
    line: str,
    *,
    capture: bool = False,
    on_stdout: Callable[[bytes], None] | None = None,
    stdin: BinaryIO | None = None,
    quiet_stderr: bool = False,
) -> tuple[int, str]:
    """Run `line` on the remote over one ssh; its stdout is passed on (or with `capture`,
    returned; or given to `on_stdout` as bytes come), its stderr passed on. Returns its exit
    code and the captured stdout.

    Raises:
        RemoteError: ssh failed before the line ran (or, exit 255, the connection broke), or
            nrl-launch is not installed there.
    """
    code, out, _ = run_raw(
        remote, line, capture=capture, on_stdout=on_stdout, stdin=stdin, quiet=quiet_stderr
    )
    return code, out


def run_raw(
    remote: Remote,
    line: str,
    *,
    capture: bool = False,
    on_stdout: Callable[[bytes], None] | None = None,
    stdin: BinaryIO | None = None,
    quiet: bool = False,
    check: bool = True,
) -> tuple[int, str, Stderr]:
    """`run`, also returning what its stderr said (whether it started, its last line); without
    `check`, ssh's failure is returned (255), not raised."""
    errors = Stderr(show=not quiet)
    proc = runner.Piped(argv(remote, line), on_stderr=errors, stdin=stdin)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept: list[str] = []
    while chunk := proc.read():
        if on_stdout is not None:
            on_stdout(chunk)
        elif capture:
            kept.append(decoder.decode(chunk))
        else:
            output.write(decoder.decode(chunk))
    code = proc.wait()
    if not errors.started and code != 255:  # ssh's own lines: shown, unless they are the error
        for held in errors.held:
            errors.show(held)
    if check:
        raise_for(remote, code, errors)
    return code, "".join(kept) + decoder.decode(b"", final=True), errors


def raise_for(remote: Remote, code: int, errors: Stderr) -> None:
    """The one line for ssh's failure (255) or a missing nrl-launch (127, said by the line)."""
    if code == 127 and errors.missing:
        raise RemoteError(
            f"remote {remote.name}: nrl-launch is not installed on {remote.host} (or not on the "
            f"PATH of its ssh sessions): `{remote.command}` was not found there; install it in "
            "your environment on the cluster (pip install nrl-launch) or set `command:` of "
            f"this remote in {paths.remotes_file(os.environ)} to its full path"
        )
    if code == 255 and (not errors.started or _ssh_said(errors.last)):
        raise RemoteError(
            f"remote {remote.name}: ssh to {remote.host} failed: "
            f"{errors.last or 'ssh exited 255 with no error output'}"
        )


def _ssh_said(line: str) -> bool:
    """Whether `line` is ssh's own (a connection lost after the command started)."""
    return line.startswith(("ssh:", "Connection to", "client_loop:", "Timeout, server"))


def check_installed(remote: Remote, environ: Mapping[str, str]) -> None:
    """On first use of a remote: nrl-launch runs there (else one line, exit 7), and a version
    other than this one's is one warning. Remembered per remote, so later commands skip it."""
    checked = paths.remote_dir(environ, remote.name) / "checked.json"
    key = {"host": remote.host, "command": remote.command, "version": __version__}
    try:
        if json.loads(paths.read_text(checked)) == key:
            return
    except (OSError, ValueError):
        pass
    _, out = run(remote, command_line(remote, ["--version"]), capture=True)
    there = out.strip().removeprefix("nrl-launch ").strip()
    if there != __version__:
        output.warn(
            f"remote {remote.name}: {remote.host} runs nrl-launch {there or '(unknown version)'}, "
            f"this machine {__version__}: commands may differ; install the same version on both"
        )
    try:
        paths.private_dir(checked.parent)
        paths.write_atomically(checked, json.dumps(key) + "\n")
    except OSError:
        pass  # checked again next time
