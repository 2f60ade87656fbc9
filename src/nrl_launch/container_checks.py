"""What users get wrong with pyxis containers, caught before the job is written or queued.

pyxis fails a step on every node, minutes after the job left the queue, for mistakes the spec
already shows: an image path it takes for a registry, a mount source that is not there, a
working directory the container does not have, a driver script no mount brings in. Each check
gives one line naming the key: an error where the job would certainly fail, a warning where it
might be meant (a directory that exists inside the image, scratch space on each node).

`findings(..., on_host=False)` reads only the spec and the submit dir's name: `render` runs it
too (a dry run in CI, where the cluster's filesystem does not exist). With `on_host=True`,
`submit` and `run` also look at this machine's files: the login node sees the shared
filesystem the nodes see. `check` prints the warnings, or refuses the job with its errors
(with --no-check, i.e. nemo_rl.check false, the errors are printed as warnings too).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nrl_launch import output, shell
from nrl_launch.container_image import (
    NO_CHECK,
    Finding,
    exists,
    image_findings,
    image_ray_findings,
)
from nrl_launch.errors import ConfigError
from nrl_launch.nemorl.job import driver_workdir
from nrl_launch.spec import LaunchSpec
from nrl_launch.storage import LOCAL_FILESYSTEMS, filesystem_type, is_under, node_local_root

if TYPE_CHECKING:
    from nrl_launch.backends import Traits
    from nrl_launch.backends.base import Backend

__all__ = ["Finding", "all_findings", "check", "findings", "image_ray_findings", "site_mounts"]

# What a step's container holds of the host whatever the job says: enroot's own system mounts
# (its mounts.d/10-system.fstab binds /proc, /sys and /dev, /dev/shm with it).
_ENROOT_SYSTEM = ("/proc", "/sys", "/dev")
# Paths every image has: a program there (/usr/bin/python3) is the image's own, not the host's.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", *_ENROOT_SYSTEM)
_SCRIPT = (".py", ".sh")
# The job's log dir, <base>/<JOBID>-logs (or <JOBID>-<RESTART>-logs), is mounted in every step.
_LOG_DIR = re.compile(r"[0-9]+(?:-[0-9]+)?-logs")


@dataclass(frozen=True)
class _View:
    """The container's filesystem as the job's mounts make it: which container paths come from
    the host, and from where."""

    binds: tuple[tuple[str, str], ...]  # (destination, source), the deepest destination first
    log_base: str  # the host's logs.base_dir: its <JOBID>-logs is mounted at the same path

    def host_path(self, path: str) -> str | None:
        """Where the container path `path` is on the host, or None: inside the image."""
        path = posixpath.normpath(path)
        rest = posixpath.relpath(path, self.log_base) if is_under(path, self.log_base) else ""
        if rest and _LOG_DIR.fullmatch(rest.split("/")[0]):
            return path
        for dst, src in self.binds:
            if is_under(path, dst):
                return src.rstrip("/") + path[len(dst.rstrip("/")) :]
        return None

    def holds(self, path: str) -> bool:
        return self.host_path(path) is not None


def site_mounts(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(destination, source) of each bind mount in enroot's mounts.d on this machine (the
    site's, then the user's): enroot adds them to every container. A login node without enroot
    has none, and the nodes may have more: what is found here only ever makes a path visible."""
    home = environ.get("HOME", "")
    config = environ.get("XDG_CONFIG_HOME") or f"{home}/.config"
    dirs = [
        Path(environ.get("ENROOT_SYSCONF_PATH") or "/etc/enroot") / "mounts.d",
        Path(environ.get("ENROOT_CONFIG_PATH") or f"{config}/enroot") / "mounts.d",
    ]
    found = []
    for directory in dirs:
        try:
            files = sorted(directory.glob("*.fstab"))
        except OSError:
            continue
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found += _fstab_binds(text, environ)
    return found


_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _fstab_binds(text: str, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    binds = []
    for line in text.split("\n"):
        fields = line.split("#", 1)[0].split()
        if len(fields) < 4 or not {"bind", "rbind"} & set(fields[3].split(",")):
            continue
        names = [a or b for a, b in _VAR.findall(" ".join(fields[:2]))]
        if any(name not in environ for name in names):
            continue  # enroot fills in what only the node knows (ENROOT_ROOTFS...)
        src, dst = (_VAR.sub(lambda m: environ[m[1] or m[2]], f) for f in fields[:2])
        if src.startswith("/") and dst.startswith("/"):
            binds.append((dst, src))
    return binds


def _view(
    spec: LaunchSpec, submit_dir: str, home: str | None, site: list[tuple[str, str]]
) -> _View:
    binds = [(m.dst, m.src) for m in spec.container.mounts]
    binds += [(root, root) for root in spec.caches.roots()]
    if spec.container.mount_home and home:
        binds.append((home, home))
    binds += site + [(path, path) for path in _ENROOT_SYSTEM]
    binds.sort(key=lambda bind: len(bind[0].rstrip("/")), reverse=True)
    base = posixpath.normpath(posixpath.join(submit_dir, spec.logs.base_dir))
    return _View(tuple(binds), base)


def findings(
    spec: LaunchSpec, submit_dir: str, environ: Mapping[str, str], *, on_host: bool
) -> list[Finding]:
    """Every container problem of `spec` submitted from `submit_dir`; with `on_host`, this
    machine's files are looked at too (image, mount sources, driver scripts, $HOME)."""
    container = spec.container
    home = environ.get("HOME") or None
    sandbox: list[Finding] = []
    if spec.sandbox and spec.sandbox.image:  # pyxis's too, whatever the job's own runtime
        sandbox = image_findings("sandbox.image", spec.sandbox.image, submit_dir, home, on_host)
    for name, pool in spec.pools.items():  # a pool's own image, as the job's
        if pool.image:
            sandbox += image_findings(f"pools.{name}.image", pool.image, submit_dir, home, on_host)
    if container.runtime != "pyxis":
        return sandbox + (_on_this_machine(spec, submit_dir) if on_host else [])
    view = _view(spec, submit_dir, home, site_mounts(environ) if on_host else [])
    found = image_findings("container.image", container.image or "", submit_dir, home, on_host)
    found += _mounts(spec, on_host)
    found += _workdirs(spec, view, _submit_dirs(submit_dir, environ), on_host)
    found += _driver(spec, view, submit_dir, on_host)
    if on_host and container.mount_home and home:
        found += _home(home)
    return found + sandbox


def all_findings(
    spec: LaunchSpec,
    *,
    backend: Backend | Traits,
    on_host: bool,
    environ: Mapping[str, str] | None = None,
    ray: bool = True,
) -> list[Finding]:
    """Every container finding of `spec` (submitted from this directory): the image's Ray, and
    pyxis's rules where pyxis runs (elsewhere the job's image is the whole container). Without
    `ray` (run, pull: no Ray), the image's Ray is not asked about. `backend` is the spec's, or
    its traits (the caller has them: this module sits below the backends)."""
    environ = os.environ if environ is None else environ
    found = image_ray_findings(spec, on_host=on_host) if ray else []
    if backend.slurm_cluster or (backend.shares_files and on_host):
        found += findings(spec, str(Path.cwd()), environ, on_host=on_host)
    return found


def check(
    spec: LaunchSpec,
    *,
    backend: Backend,
    on_host: bool,
    environ: Mapping[str, str] | None = None,
    keys: Collection[str] | None = None,
    ray: bool = True,
) -> None:
    """Print the container warnings of `spec` (`all_findings`), or raise ConfigError with its
    errors, one line each; nemo_rl.check false (--no-check) makes the errors warnings. When the
    job is refused, only the errors are said: they come first. With `keys`, only the findings
    of those keys (a profile has no submit dir of its own)."""
    found = all_findings(spec, backend=backend, on_host=on_host, environ=environ, ray=ray)
    found = [f for f in found if keys is None or f.key in keys]
    errors = [f.message for f in found if f.error]
    if errors and spec.nemo_rl.check:
        raise ConfigError(errors)
    for finding in found:
        output.warn(finding.message)


def _submit_dirs(submit_dir: str, environ: Mapping[str, str]) -> list[str]:
    """The submit dir, and $PWD when it names the same directory another way (through a
    symlink): sbatch may take either for SLURM_SUBMIT_DIR, so a mount of either will do."""
    dirs = [submit_dir]
    pwd = environ.get("PWD", "")
    if pwd.startswith("/") and pwd != submit_dir:
        try:
            if Path(pwd).samefile(submit_dir):
                dirs.append(pwd)
        except OSError:
            pass
    return dirs


def _mounts(spec: LaunchSpec, on_host: bool) -> list[Finding]:
    key, found = "container.mounts", []
    for mount in spec.container.mounts:
        root = node_local_root(mount.src)
        if on_host and not exists(mount.src):
            found.append(
                Finding(
                    key,
                    f"{key} {mount}: source {mount.src} does not exist, and pyxis refuses a "
                    f"mount without one on every node; create it or fix the mount ({NO_CHECK} "
                    "if only the compute nodes have it)",
                    error=True,
                )
            )
        elif root is not None:
            found.append(
                Finding(
                    key,
                    f"{key} {mount}: {root} is local to each node, so each node mounts its own "
                    f"copy of {mount.src} (fine for scratch space, not for files the nodes share)",
                )
            )
    return found


def _workdirs(
    spec: LaunchSpec, view: _View, submit_dirs: list[str], on_host: bool
) -> list[Finding]:
    container, found = spec.container, []
    inside = "it must exist inside the image (as NeMo RL's /opt/nemo-rl does)"
    if container.workdir is not None:
        if not view.holds(container.workdir):
            found.append(
                Finding(
                    "container.workdir",
                    f"container.workdir {container.workdir} is under no container.mounts "
                    f"destination: {inside}, or every step fails with pyxis's \"couldn't chdir\"",
                )
            )
    elif on_host and not any(view.holds(d) for d in submit_dirs):
        # Only where the job is submitted from: render's dir (a CI checkout) says nothing.
        where = submit_dirs[0]
        found.append(
            Finding(
                "container.workdir",
                "container.workdir is not set, so every step starts in the submit dir "
                f"{where}, which is under no container.mounts destination: in the container it "
                f'is missing (pyxis fails each task: "couldn\'t chdir to {where}") or holds '
                'only the job\'s log dir; mount it (--mount "$PWD") or set container.workdir '
                "to a dir inside the container",
                error=True,
            )
        )
    workdir = spec.driver.workdir
    # A relative driver.workdir is relative to where the step starts.
    step_dir = container.workdir or submit_dirs[0]
    if (
        workdir is not None
        and workdir != container.workdir
        and not view.holds(posixpath.join(step_dir, workdir))
    ):
        found.append(
            Finding(
                "driver.workdir",
                f"driver.workdir {workdir} is under no container.mounts destination: {inside}",
            )
        )
    return found


def _paths(command: tuple[str, ...]) -> list[tuple[str, bool]]:
    """The arguments of `command` that name a file, each with whether it is a script (the
    program itself when absolute, or a .py/.sh): not an option, an override (key=value), a
    URL, or the code after -c."""
    found = []
    for index, arg in enumerate(command):
        after_c = index > 0 and command[index - 1] == "-c"
        if after_c or arg.startswith("-") or "=" in arg or "://" in arg or "\n" in arg:
            continue
        if arg.startswith("/"):
            found.append((arg, index == 0 or arg.endswith(_SCRIPT)))
        elif arg.endswith(_SCRIPT) and not any(c.isspace() for c in arg):
            found.append((arg, True))
    return found


def _driver(spec: LaunchSpec, view: _View, submit_dir: str, on_host: bool) -> list[Finding]:
    """The driver's script and the files it names: visible inside the container?"""
    key, found = "driver command", []
    # The dir the driver runs in: a relative driver.workdir is relative to the step's own.
    step_dir = spec.container.workdir or submit_dir
    base = posixpath.normpath(posixpath.join(step_dir, driver_workdir(spec) or "."))
    for arg, script in _paths(spec.driver.command or ()):
        if any(is_under(arg, d) for d in _SYSTEM_DIRS):
            continue  # the image's own (/usr/bin/python3)
        host = view.host_path(arg if arg.startswith("/") else posixpath.join(base, arg))
        if host is not None:
            if script and on_host and not exists(host):
                found.append(_missing(spec, arg, base, host))
        elif not arg.startswith("/"):
            continue  # in a workdir inside the image: the workdir's own line says so
        elif on_host and exists(arg) and (script or node_local_root(arg) is None):
            # Not a node-local dir such as /tmp: every container has one of its own.
            found.append(
                Finding(
                    key,
                    f"{key}: {arg} exists on this machine but is under no container.mounts "
                    "destination, so the container does not see it; mount its dir "
                    f"(--mount {posixpath.dirname(arg)})",
                    error=True,
                )
            )
        elif script:
            found.append(
                Finding(
                    key,
                    f"{key}: {arg} is under no container.mounts destination: it must exist "
                    "inside the image",
                )
            )
    return found


def _missing(spec: LaunchSpec, arg: str, base: str, host: str) -> Finding:
    where = f"{host} does not exist" if arg.startswith("/") else f"no {host} in {base}"
    # A setup command may make it (a git clone): then the job may still find it.
    maybe = spec.setup is not None
    tail = "; unless the setup command makes it" if maybe else ""
    return Finding(
        "driver command",
        f"driver command: {arg} is not there ({where}, as the container sees it through "
        f"container.mounts){tail}: fix the path, the mounts or the working dir",
        error=not maybe,
    )


def _on_this_machine(spec: LaunchSpec, submit_dir: str) -> list[Finding]:
    """A job without a container runs in this machine's files, as its nodes share them: the
    files its setup command sources, and its recipe's script, must be there before it queues
    (a venv the README's step makes, a checkout submitted from another dir). Not after a `cd`
    in setup, nor where setup may make the script (a warning then)."""
    base = posixpath.normpath(posixpath.join(submit_dir, driver_workdir(spec) or "."))
    found = []
    for word, moved in shell.sourced(spec.setup or ""):
        path = posixpath.join(base, word)
        if not moved and not exists(path):
            found.append(
                Finding(
                    "setup",
                    f"setup: sources {word}, which is not there (no {path}; the job runs in "
                    "this machine's files, as its nodes share them): make it first, or fix setup",
                    error=True,
                )
            )
    if found:
        return found  # the driver's script may be what it would make
    # A NeMo RL driver's script (a recipe's, which nrl-launch wrote into the command, or the
    # same path in a command of the user's): missing, the job was submitted from another dir
    # than the NeMo RL checkout (unless its setup makes it).
    scripts = set(spec.nemo_rl.drivers.values())
    for arg in spec.driver.command or ():
        path = posixpath.join(base, arg)
        if arg in scripts and not exists(path):
            found.append(
                Finding(
                    "driver command",
                    f"driver command: {arg} (a NeMo RL driver) is not there (no {path}): "
                    "submit from the NeMo RL checkout that holds it, or set driver.workdir",
                    error=spec.setup is None,
                )
            )
    return found


def _home(home: str) -> list[Finding]:
    root = node_local_root(home)
    kind = None if root else filesystem_type(home)
    if root:
        why = f"{root}, local to each node"
    elif kind in LOCAL_FILESYSTEMS:
        why = f"a {kind} filesystem local to this machine"
    else:
        return []
    return [
        Finding(
            "container.mount_home",
            f"container.mount_home: $HOME ({home}) is on {why}, so each node mounts its own "
            "$HOME, not this one; keep what the job needs on shared storage, or turn "
            "mount_home off",
        )
    ]
