"""The code a run runs: at submit, a copy of the driver's git checkout (driver.snapshot).

A long run outlives the working tree it was submitted from: hours later a chain's next link, a
retry or a requeued restart would otherwise run whatever the tree holds by then. `freeze` copies
the files git would give (tracked and untracked-not-ignored, as they are on disk, uncommitted
changes in; ignored ones such as .venv and checkpoints out) into a directory of the user's own
under the log base dir, which every node sees, and returns the spec with `driver.frozen` set:
the job's driver runs in the copy of its working directory, with the copy's source roots first
on PYTHONPATH (an editable install in the checkout's env would otherwise import the checkout's
code) and, for `uv run`, the checkout's project env as it is (the copy has no .venv; syncing it
would point the user's env at the copy). Like NeMo RL's tools/code_snapshot.sh, which copies
`git ls-files` of the checkout for the same reason.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nrl_launch import paths, runner
from nrl_launch.errors import SchedulerError, UsageError
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.models import FrozenCode

__all__ = [
    "Copied",
    "code_line",
    "describe",
    "discard",
    "freeze",
    "outputs_made_absolute",
    "source_of",
]

# Under the log base dir (logs.base_dir, which submit already requires to be the user's own).
SNAPSHOTS = "code-snapshots"
_GIT = ["git", "-c", "core.quotepath=off"]
_HYDRA_SPECIAL = re.compile(r"[\s\\,\[\]{}()'\"=$]")


@dataclass(frozen=True)
class Copied:
    """What a snapshot holds: the frozen code, and what copying it took."""

    frozen: FrozenCode
    files: int
    bytes: int
    seconds: float


def source_of(spec: LaunchSpec, cwd: Path) -> tuple[Path | None, str]:
    """The driver's working directory on this machine (inside the container, the job sees it
    through a mount), or None and why it cannot be frozen."""
    workdir = spec.driver.workdir
    if workdir is None and spec.container.runtime == "pyxis" and spec.container.workdir:
        workdir = spec.container.workdir
    if workdir is None:
        return cwd, ""
    if spec.container.runtime == "pyxis" and workdir.startswith("/"):
        mounts = [m for m in spec.container.mounts if _under(workdir, m.dst)]
        if not mounts:
            return None, f"the driver's working dir {workdir} is in the container, under no mount"
        mount = max(mounts, key=lambda m: len(m.dst))
        workdir = mount.src.rstrip("/") + workdir[len(mount.dst.rstrip("/")) :]
    return cwd / workdir, ""


def describe(spec: LaunchSpec, cwd: Path) -> str:
    """One line: what submit would freeze for `spec` (render and --dry-run copy nothing)."""
    if not spec.driver.snapshot:
        return "driver.snapshot is off: the driver runs its working dir as it is when it starts"
    if spec.interactive or not spec.driver.command:
        return "no driver: nothing to freeze"
    workdir, why = source_of(spec, cwd)
    if workdir is None:
        return f"nothing frozen: {why}"
    root = _toplevel(workdir)
    if root is None:
        return f"nothing frozen: {workdir} is not in a git checkout"
    commit, dirty = _commit(root)
    return f"submit freezes {root} ({_code(commit, dirty)}) under {SNAPSHOTS}/ in the log base dir"


def freeze(
    spec: LaunchSpec, cwd: Path, base: Path, outputs: Sequence[tuple[str, str]] = ()
) -> tuple[LaunchSpec, Copied | None, str]:
    """`spec` with its driver's code copied under `base` (the log base dir), the copy, and a
    note when nothing was frozen (off, no driver, not a git checkout). `outputs`: the NeMo RL
    config's output dirs (key, path) relative to the driver's working dir: the frozen driver
    runs in the copy, so it is given them as overrides, absolute, where they were (the run's
    logs and checkpoints stay in the checkout, and a later submit resumes from them)."""
    if not spec.driver.snapshot or spec.interactive or not spec.driver.command:
        return spec, None, ""
    workdir, why = source_of(spec, cwd)
    if workdir is None:
        return spec, None, f"code: not frozen ({why})"
    root = _toplevel(workdir)
    if root is None:
        found = shutil.which(_GIT[0]) is not None
        why = f"{workdir} is not in a git checkout" if found else "git is not installed here"
        return spec, None, f"code: not frozen ({why}): the job runs it as it is when it starts"
    started = time.monotonic()
    commit, dirty = _commit(root)
    parent = base / SNAPSHOTS
    dest = None
    try:
        paths.private_dir(parent)
        # A new dir of its own (0700), named by when it was made.
        dest = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=parent))
        files, size = _copy(root, _listed(root, _outputs_in(root, base)), dest)
    except OSError as exc:
        if dest is not None:
            shutil.rmtree(dest, ignore_errors=True)
        raise UsageError(
            f"driver.snapshot: cannot copy {root} into {parent} ({exc.strerror}); "
            "pass --no-snapshot to run the checkout as it is"
        ) from None
    rel = workdir.resolve().relative_to(root)
    project = _project(root, rel)
    snap_project = dest / project
    python_path = [str(snap_project / "src")] if (snap_project / "src").is_dir() else []
    python_path.append(str(snap_project))
    venv = root / project / ".venv"
    use_venv = venv.is_dir() and "UV_PROJECT_ENVIRONMENT" not in spec.env
    if use_venv and spec.container.runtime == "pyxis":
        use_venv = False  # the container's env is the job's own, as it always was
    frozen = FrozenCode(
        dir=str(dest),
        source=str(root),
        workdir=str(dest / rel),
        python_path=tuple(python_path),
        venv=str(venv) if use_venv else None,
        commit=commit,
        dirty=dirty,
    )
    update: dict[str, object] = {"frozen": frozen}
    if outputs and spec.driver.command:
        update["command"] = (*spec.driver.command, *outputs_made_absolute(spec, cwd, outputs))
    driver = spec.driver.model_copy(update=update)
    copied = Copied(frozen, files, size, time.monotonic() - started)
    return spec.model_copy(update={"driver": driver}), copied, ""


def outputs_made_absolute(
    spec: LaunchSpec, cwd: Path, outputs: Sequence[tuple[str, str]]
) -> tuple[str, ...]:
    """The overrides that give a frozen driver (it runs in the copy) the config's output dirs
    `outputs` (key, path relative to its working dir) where they were, absolute."""
    workdir, _ = source_of(spec, cwd)
    if workdir is None:
        return ()
    seen = _seen_workdir(spec, cwd, workdir)
    made = [(key, posixpath.join(seen, value)) for key, value in outputs]
    # A path Hydra's override grammar would read otherwise stays as the config has it.
    return tuple(f"++{key}={path}" for key, path in made if not _HYDRA_SPECIAL.search(path))


def _seen_workdir(spec: LaunchSpec, cwd: Path, host: Path) -> str:
    """The driver's working dir as the job sees it: inside the container, as pyxis mounts it."""
    if spec.container.runtime == "pyxis":
        inside = spec.driver.workdir or spec.container.workdir
        if inside:
            return posixpath.normpath(posixpath.join(str(cwd), inside))
    return str(host.resolve())


def discard(frozen: FrozenCode | None) -> None:
    """Remove a snapshot no job was queued with (submit failed)."""
    if frozen is not None:
        shutil.rmtree(frozen.dir, ignore_errors=True)


def code_line(frozen: FrozenCode) -> str:
    """`code: 1a2b3c4 (+ uncommitted changes), snapshot <dir>`, as status shows it."""
    return f"code: {_code(frozen.commit, frozen.dirty)}, snapshot {frozen.dir}"


def _code(commit: str | None, dirty: bool) -> str:
    shown = commit[:12] if commit else "no commit yet"
    return shown + (" (+ uncommitted changes)" if dirty else "")


def _toplevel(workdir: Path) -> Path | None:
    if not workdir.is_dir():
        return None
    try:
        done = runner.run([*_GIT, "rev-parse", "--show-toplevel"], check=False, cwd=workdir)
    except SchedulerError:  # no git here: nothing to freeze
        return None
    top = done.stdout.rstrip("\n")
    return Path(top).resolve() if done.returncode == 0 and top else None


def _commit(root: Path) -> tuple[str | None, bool]:
    head = runner.run([*_GIT, "rev-parse", "--verify", "-q", "HEAD"], check=False, cwd=root)
    status = runner.run(
        [*_GIT, "status", "--porcelain", "-z", "--untracked-files=normal"], check=False, cwd=root
    )
    commit = head.stdout.strip() if head.returncode == 0 else None
    return commit or None, bool(status.stdout)


def _outputs_in(root: Path, base: Path) -> str | None:
    """The log base dir relative to `root` ("" for root itself) when it is in the checkout
    (logs.base_dir defaults to the submit dir): its snapshots and the jobs' log dirs are
    outputs, not code, and a snapshot holding the ones before it would grow with each."""
    try:
        rel = base.resolve().relative_to(root)
    except ValueError:
        return None
    return "" if rel == Path() else f"{rel.as_posix()}/"


def _listed(root: Path, outputs: str | None = None) -> list[str]:
    """The checkout's files as git lists them: tracked (submodules' too) and untracked ones
    that are not ignored; NUL-separated, so any name comes through as it is. Untracked files
    under `outputs` (the log base dir's snapshots and job log dirs) are left out."""
    tracked = runner.run(
        [*_GIT, "ls-files", "-z", "--cached", "--recurse-submodules"], cwd=root, timeout=300
    )
    untracked = runner.run(
        [*_GIT, "ls-files", "-z", "--others", "--exclude-standard"], cwd=root, timeout=300
    )
    names = {n for n in tracked.stdout.split("\0") if n}
    for name in untracked.stdout.split("\0"):
        if name and not (outputs is not None and _is_output(name, outputs)):
            names.add(name)
    return sorted(names)


def _is_output(name: str, outputs: str) -> bool:
    if not name.startswith(outputs):
        return False
    first = name[len(outputs) :].split("/", 1)[0]
    return first == SNAPSHOTS or (first.endswith("-logs") and "/" in name[len(outputs) :])


def _copy(root: Path, names: list[str], dest: Path) -> tuple[int, int]:
    """Copy `names` (relative to `root`) into `dest`: files 0600 (0700 when executable),
    directories 0700, symlinks as links. A tracked file deleted from the tree stays out, as
    it is out of the tree."""
    files = size = 0
    made: set[str] = set()
    for name in names:
        src = root / name
        try:
            st = src.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):  # a submodule not checked out
            continue
        parent = posixpath.dirname(name)
        if parent and parent not in made:
            _private_dirs(dest, parent, made)
        target = dest / name
        if stat.S_ISLNK(st.st_mode):
            target.symlink_to(src.readlink())
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(src, target, follow_symlinks=False)
            target.chmod(0o700 if st.st_mode & stat.S_IXUSR else 0o600)
            size += st.st_size
        else:
            continue
        files += 1
    return files, size


def _private_dirs(dest: Path, rel: str, made: set[str]) -> None:
    parts = rel.split("/")
    for k in range(1, len(parts) + 1):
        sub = "/".join(parts[:k])
        if sub not in made:
            (dest / sub).mkdir(mode=0o700, exist_ok=True)
            made.add(sub)


def _project(root: Path, rel: Path) -> Path:
    """The project the driver runs in, relative to `root`: the nearest directory from the
    working dir up holding a pyproject.toml (`uv run` finds it so), else the top level."""
    for part in [rel, *rel.parents]:
        if (root / part / "pyproject.toml").is_file():
            return part
    return Path()


def _under(path: str, parent: str) -> bool:
    parent = parent.rstrip("/") or "/"
    return path == parent or path.startswith(parent.rstrip("/") + "/")
