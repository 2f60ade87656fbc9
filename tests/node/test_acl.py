"""Who else can write a dir, as the node program judges it (node/common.sh: replaceable,
shared, writers), POSIX ACLs included, in a real bash from a rendered script: an ACL entry that
lets another user write counts as the mode's bits do, and an ACL the node cannot read counts
too (fail closed). The other user is real (uid 54321, through setpriv), the ACLs too (setfacl).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from nrl_launch.backends import slurm
from tests.conftest import ACL_WRITERS, OTHER_UID, SYSTEM_TOOLS, as_other, setfacl, source_job
from tests.helpers import spec

REFUSED = re.compile(r"^\[nrl-launch [^]]+\] nrl-launch refused to start the job: (.*)$")
# A node without getfacl (the acl package): the function stands for the missing command.
NO_GETFACL = "getfacl() { return 127; }\n"


def _bash(probe: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The Ray job script's definitions, then `probe`, in a real bash whose $0 is the script."""
    text = slurm.plan(spec()).script
    path = cwd / "job.sbatch"
    path.write_text(text)
    return subprocess.run(
        ["bash", "-c", source_job(text) + probe, str(path)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": SYSTEM_TOOLS, **env},
        check=False,
    )


def _why(function: str, directory: Path, cwd: Path, before: str = "") -> str:
    """What `function` (replaceable or shared) prints of `directory`; '' when it fails."""
    done = _bash(f"{before}{function} {directory} || true", cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _base(reachable: Path, *entries: str, mode: int = 0o775) -> Path:
    """root:root `mode` (root's private group: no one else by its mode) with ACL `entries`."""
    base = reachable / "logs"
    base.mkdir()
    base.chmod(mode)
    setfacl(base, *entries)
    return base


@ACL_WRITERS
def test_the_job_refuses_a_log_base_an_acl_lets_another_user_write(
    reachable: Path, tmp_path: Path, entry: str, who: str
) -> None:
    """The review's attack: root:root 0775 plus an ACL entry for another user, who could rename
    the job's log dir away and put theirs in its place (or make it first)."""
    base = _base(reachable, entry)
    log_dir = base / "5-logs"
    done = _bash("start_log_dir job.sbatch 1", tmp_path, NRL_LOG_DIR=str(log_dir))
    assert done.returncode == 1, done.stdout + done.stderr
    refused = REFUSED.match(done.stdout.strip())
    assert refused, done.stdout
    assert refused[1] == (
        f"{base} is writable by {who} through its ACL (mode 0775): another user could replace "
        f"its log dir {log_dir}; choose a logs.base_dir only you can write"
    )
    assert list(base.iterdir()) == []
    # What the refusal prevents: that user can put a dir of theirs where the job's would be.
    assert as_other("mkdir", str(log_dir)).returncode == 0


def test_a_default_acl_that_lets_another_user_write_counts(reachable: Path, tmp_path: Path) -> None:
    base = _base(reachable, f"d:u:{OTHER_UID}:rwx", mode=0o755)
    why = f"{base} is writable by user uid {OTHER_UID} through its default ACL (mode 0755)"
    assert _why("replaceable", base, tmp_path) == why
    assert _why("shared", base, tmp_path) == why
    (base / "cache").mkdir()  # made by this user: the default ACL lets the other write it
    assert as_other("touch", str(base / "cache" / "planted")).returncode == 0


def test_an_acl_entry_counts_whatever_its_mask(reachable: Path, tmp_path: Path) -> None:
    base = _base(reachable, f"u:{OTHER_UID}:rwx", "m::r-x", mode=0o755)
    assert _why("shared", base, tmp_path) == (
        f"{base} is writable by user uid {OTHER_UID} through its ACL (mode 0755)"
    )


def test_without_getfacl_any_acl_counts_as_writable_by_others(
    reachable: Path, tmp_path: Path
) -> None:
    """Fail closed: a node that cannot read an ACL (`ls -ld` shows "+") does not trust it, even
    one that lets no one else write; a dir with no ACL is judged by its mode, as before."""
    base = _base(reachable, f"u:{OTHER_UID}:r-x", mode=0o755)
    assert _why("shared", base, tmp_path) == ""  # read as it is: no one else writes
    assert _why("shared", base, tmp_path, NO_GETFACL) == (
        f"{base} is writable by others, as far as nrl-launch can tell (it has an ACL, which "
        "getfacl cannot read here) (mode 0755)"
    )
    assert _why("replaceable", base / "x", tmp_path, NO_GETFACL) == ""  # not made yet
    plain = reachable / "plain"
    plain.mkdir(mode=0o755)
    assert _why("replaceable", plain, tmp_path, NO_GETFACL) == ""


def test_an_acl_that_lets_no_one_else_write_is_no_problem(reachable: Path, tmp_path: Path) -> None:
    base = _base(reachable, f"u:{OTHER_UID}:r-x", f"g:{OTHER_UID}:r-x", "u:0:rwx", mode=0o755)
    setfacl(base, f"d:u:{OTHER_UID}:r-x")
    assert _why("replaceable", base, tmp_path) == ""
    assert _why("shared", base, tmp_path) == ""
    log_dir = base / "5-logs"
    done = _bash("start_log_dir job.sbatch 1", tmp_path, NRL_LOG_DIR=str(log_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (log_dir / "timeline").is_file()
