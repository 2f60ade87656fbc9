"""Shared fixtures: an isolated environment for every test, and the CLI run in-process."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nrl_launch.cli import main
from nrl_launch.spec.external_pools import GLOBALS as NEMO_RL_POOL_ENV
from nrl_launch.spec.layers import RAY_SUB_ENV
from tests.fakes import FakeSlurm, install

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
# Logs every node shares: a job run from the tests' dirs (under /tmp) is warned otherwise.
SHARED_LOGS = ["--log-dir", "/lustre/logs"]


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ray.sub variables (nor NeMo RL's pool ones), no profile and a fresh HOME and cwd: only
    what a test sets counts."""
    # The default secrets too: whether this machine's shell has them must not change a test.
    for name in [
        *RAY_SUB_ENV,
        *NEMO_RL_POOL_ENV,
        "NRL_LAUNCH_PROFILE",
        "NRL_LAUNCH_DEBUG",
        "HF_TOKEN",
        "WANDB_API_KEY",
    ]:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `nrl-launch ARGS...` in this process; returns its exit code, stdout and stderr."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        code = exit_info.value.code
        return Result(code if isinstance(code, int) else 1, out, err)

    return run


def unavailable(reason: str) -> None:
    """Skip a test that cannot run here, saying why; in CI, where it must run, fail it."""
    if os.environ.get("CI"):
        pytest.fail(f"this test must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ray_venv() -> Path:
    """The venv the jobs the tests run take Ray from: $NRL_TEST_RAY_VENV, else the venv these
    tests run in when it has Ray (`pip install -e '.[dev,local]'`, as the README and CI do)."""
    venv = Path(os.environ.get("NRL_TEST_RAY_VENV") or sys.prefix)
    if not (venv / "bin" / "ray").exists():
        unavailable(f"{venv} has no Ray: pip install -e '.[dev,local]' (or set NRL_TEST_RAY_VENV)")
    return venv


def need_tool(name: str) -> str:
    """The path of a tool the tests need; CI installs it, so there it must be present."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; .ci/run installs it")
        pytest.skip(f"{name} is not installed (apt-get install {name})")
    return path


def source_job(script: str) -> str:
    """Bash code that sources the job script `script` (its values and functions: sourced, a
    job script runs nothing), for a test to run its own code after."""
    assert "\nNRL_TEST_END\n" not in script
    return f"source /dev/stdin <<'NRL_TEST_END'\n{script}\nNRL_TEST_END\n"


def shellcheck(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [need_tool("shellcheck"), "--shell=bash", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )


def without_warnings(err: str) -> str:
    """stderr without nrl-launch's warning lines: the dev cluster's nodes share this machine's
    /tmp, where tests keep their log dirs, which nrl-launch warns is node-local on a real one."""
    lines = err.splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("nrl-launch: warning: "))


def ray_processes(log_dir: Path | str) -> list[str]:
    """The Ray daemons of the job whose log dir is `log_dir` alive on this machine (which sees
    every dev-cluster node's processes): those that inherited its NRL_LOG_DIR. Other work on
    this machine may run Ray beside the test's job; its daemons are not the job's."""
    wanted = os.path.normpath(log_dir)  # the job writes it as $PWD/./<id>-logs, say
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            if comm not in ("raylet", "gcs_server"):
                continue
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        dirs = [e[len(b"NRL_LOG_DIR=") :].decode() for e in env if e.startswith(b"NRL_LOG_DIR=")]
        if any(os.path.normpath(d) == wanted for d in dirs):
            found.append(comm)
    return found


def wait_until(predicate: Callable[[], object], timeout: float = 120.0) -> None:
    """Poll until `predicate()` is true; fail after `timeout` s (a hang bound, not a target)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s"
        time.sleep(0.5)


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Fake Slurm commands first on PATH (each refuses until a test says what it answers)."""
    return install(tmp_path, monkeypatch, alone=False)


TINY_RL = EXAMPLES / "tiny-rl"
# What marks the README's main job's block (its tiny-rl env, then its GRPO run).
MAIN_JOB = "--wait grpo --config examples/configs/grpo_tiny.yaml"


def doc_pages() -> list[Path]:
    """The pages a reader copies commands from: the README and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def doc_page(marker: str) -> Path:
    """The one page (README.md or docs/) whose text holds `marker`."""
    pages = [page for page in doc_pages() if marker in page.read_text()]
    names = [str(page.relative_to(REPO)) for page in pages]
    assert len(pages) == 1, f"{marker!r} is in {len(pages)} pages, not 1: {names}"
    return pages[0]


def doc_blocks(page: Path, language: str) -> list[str]:
    """The ```language blocks of `page`, in order."""
    return [b.split("```", 1)[0] for b in page.read_text().split(f"```{language}\n")[1:]]


def doc_block(marker: str) -> list[str]:
    """The commands of the one ```bash block, in the README or a page of docs/, that holds
    `marker`, one per line: what a reader copies from the page it lives on."""
    found = [
        (page, block)
        for page in doc_pages()
        for block in doc_blocks(page, "bash")
        if marker in block
    ]
    where = [str(page.relative_to(REPO)) for page, _ in found]
    assert len(found) == 1, f"{marker!r} is in {len(found)} ```bash blocks, not 1: {where}"
    ((_, block),) = found
    return [line for line in block.splitlines() if line.strip()]


def readme_shell_env() -> dict[str, str]:
    """The environment of a README reader's shell before the Install section's
    `source .venv/bin/activate`: no venv active, none of its tools on PATH. Run the README's
    commands after `READER`, which activates it, as the reader did."""
    env = dict(os.environ)
    venv = env.pop("VIRTUAL_ENV", None)
    bins = {str(Path(sys.prefix) / "bin"), *([str(Path(venv) / "bin")] if venv else [])}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p not in bins)
    return env


# The Install section's activation, for the venv these tests run in (the README's .venv in CI):
# every README command runs in the shell a reader has after it.
READER = f"source {Path(sys.prefix) / 'bin' / 'activate'}"


def as_reader(commands: list[str]) -> list[str]:
    """bash's argv for `commands` (README lines) run in a reader's shell: the venv activated."""
    return ["bash", "-ec", "\n".join([READER, *commands])]


@pytest.fixture(scope="session")
def tiny_rl() -> Path:
    """examples/tiny-rl with its env, made by the README's own command for it (uv from the venv
    these tests run in): torch, Ray and tiny-rl in examples/tiny-rl/.venv."""
    uv = Path(sys.prefix) / "bin" / "uv"
    if not uv.exists():
        unavailable(f"{sys.prefix} has no uv: pip install -e '.[dev,local]'")
    (make_env,) = [line for line in doc_block(MAIN_JOB) if "uv venv" in line]
    made = subprocess.run(
        as_reader([make_env.split("#")[0]]),
        cwd=TINY_RL,
        env=readme_shell_env(),
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return TINY_RL


@pytest.fixture
def fresh_tiny_rl(tiny_rl: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/tiny-rl without what an earlier run of its main job left (checkpoints, logs),
    and jobs recorded in tmp."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(isolated / "state"))
    for left in [tiny_rl / "results", tiny_rl / "logs", *tiny_rl.glob("local-*")]:
        shutil.rmtree(left) if left.is_dir() else left.unlink(missing_ok=True)
    return tiny_rl


# ---- Another user of a shared cluster, for the tests of who may write what (trust.py) ----

OTHER_UID = 54321  # another user: no passwd entry, so nrl-launch names it "uid 54321"
# An ACL entry that lets OTHER_UID write, as a user or as a group, and how nrl-launch names who
# it lets write: the cases both the trust checks and the node program's are tested with.
ACL_WRITERS = pytest.mark.parametrize(
    ("entry", "who"),
    [
        (f"u:{OTHER_UID}:rwx", f"user uid {OTHER_UID}"),
        (f"g:{OTHER_UID}:rwx", f"group gid {OTHER_UID}"),
    ],
    ids=["user", "group"],
)
SYSTEM_TOOLS = "/usr/sbin:/usr/bin:/sbin:/bin"  # setpriv, setfacl and what that user runs


def other_group() -> tuple[int, str]:
    """A group of other users, and the name nrl-launch gives it: nrl-team (gid 2100, which the
    dev cluster makes) where this machine has it, else gid 54322 (no group entry: nobody's
    private group)."""
    try:
        return 2100, grp.getgrgid(2100).gr_name
    except KeyError:
        return 54322, "gid 54322"


def give(path: Path, uid: int = -1, gid: int = -1) -> None:
    """chown without following a link; skips where this user may not (only root may)."""
    try:
        os.chown(path, uid, gid, follow_symlinks=False)
    except PermissionError:
        pytest.skip(f"cannot give {path} to uid {uid} / gid {gid} as this user")


def make_foreign(path: Path, whose: str, group_mode: int) -> str:
    """Make `path` not the user's own: `whose` "another user" gives it to OTHER_UID, else
    `group_mode` makes it writable by other_group(). Returns how nrl-launch says why."""
    if whose == "another user":
        give(path, uid=OTHER_UID)
        return f"{path} belongs to user uid {OTHER_UID}, not you"
    gid, name = other_group()
    give(path, gid=gid)
    path.chmod(group_mode)
    return f"{path} is writable by group {name} (mode {group_mode:04o})"


def as_other(*argv: str) -> subprocess.CompletedProcess[str]:
    """Runs `argv` as OTHER_UID (its gid the same number, no other group): a real second user on
    this machine; skips where this user may not (only root may)."""
    if os.getuid() != 0:
        pytest.skip("only root can run a command as another user")
    ids = [f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"]
    return subprocess.run(
        [shutil.which("setpriv", path=SYSTEM_TOOLS) or "setpriv", *ids, *argv],
        capture_output=True,
        text=True,
        env={"PATH": SYSTEM_TOOLS},  # the fake Slurm's PATH holds nothing else
        check=False,
    )


def setfacl(path: Path, *entries: str) -> None:
    """Adds POSIX ACL entries to `path`, as setfacl -m writes them: u:UID:rwx, g:GID:rwx,
    m::r-x (the mask), d:u:UID:rwx (a directory's default ACL). CI installs the acl package."""
    tool = shutil.which("setfacl", path=SYSTEM_TOOLS)
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("setfacl is not installed; .ci/run installs it (the acl package)")
        pytest.skip("setfacl is not installed (apt-get install acl)")
    subprocess.run([tool, "-m", ",".join(entries), str(path)], check=True)


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A new directory that another user can reach (0755, in /tmp, root's and sticky), where
    they act in a test: pytest's tmp_path lies under a 0700 dir."""
    path = Path(tempfile.mkdtemp(prefix="nrl-test-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
