"""Who else can write a path (`nrl_launch.trust`), and the login side that uses it: `status`,
`attach` and the log dir readers believe and run only what no other user could have written.

Real dirs and files with real modes: as root, a path is given to another user (uid 54321, no
passwd entry) with os.chown, and to a group of other users (nrl-team, gid 2100, where this
machine has it; else gid 54322, which has no group entry and so is nobody's private group).
POSIX ACLs are real ones (setfacl), and that user acts through them (setpriv)."""

from __future__ import annotations

import grp
import os
import subprocess
from pathlib import Path

import pytest

from nrl_launch import trust
from nrl_launch.errors import ExitCode, UntrustedLogError
from nrl_launch.jobs import record
from nrl_launch.jobs.status import find_log_dir, phase_of, printable, read_log_dir, run_log_dirs
from tests.conftest import (
    ACL_WRITERS,
    OTHER_UID,
    Cli,
    as_other,
    give,
    make_foreign,
    other_group,
    setfacl,
)
from tests.fakes import FakeSlurm, install


def mkdir(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)  # not masked by the umask, as mkdir's mode is
    return path


def write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# ---- replaceable and shared ----


def test_a_world_writable_dir_without_sticky_and_everything_under_it_is_replaceable(
    tmp_path: Path,
) -> None:
    open_dir = mkdir(tmp_path / "open", 0o777)
    mine = mkdir(open_dir / "mine", 0o700)
    why = f"{open_dir} is writable by every user (mode 0777, no sticky bit)"
    assert trust.replaceable(open_dir) == why
    # My own 0700 dir is no help: another user can rename it away and put theirs there.
    assert trust.replaceable(mine) == why
    assert trust.shared(open_dir) == f"{open_dir} is writable by every user (mode 0777)"
    assert trust.shared(mine) is None


def test_a_sticky_world_writable_parent_keeps_its_entries_their_owner_s(tmp_path: Path) -> None:
    """Like /tmp: others can make entries in it (shared) but not replace mine (not replaceable)."""
    sticky = mkdir(tmp_path / "sticky", 0o1777)
    mine = mkdir(sticky / "mine", 0o700)
    assert trust.replaceable(mine) is None
    assert trust.replaceable(sticky) is None
    assert trust.shared(sticky) == f"{sticky} is writable by every user (mode 1777)"
    assert trust.shared(mine) is None


def test_a_chain_of_0700_dirs_is_neither_replaceable_nor_shared(tmp_path: Path) -> None:
    inner = mkdir(mkdir(tmp_path / "a", 0o700) / "b", 0o700)
    assert trust.replaceable(inner) is None
    assert trust.shared(inner) is None
    assert trust.foreign_owner(inner) is None
    assert trust.not_mine(inner) is None


def test_a_group_writable_dir_is_flagged_with_its_group_s_name(tmp_path: Path) -> None:
    gid, name = other_group()
    team = mkdir(tmp_path / "team", 0o770)
    give(team, gid=gid)
    inside = mkdir(team / "inside", 0o700)
    why = f"{team} is writable by group {name} (mode 0770, no sticky bit)"
    assert trust.replaceable(team) == why
    assert trust.replaceable(inside) == why
    assert trust.shared(team) == f"{team} is writable by group {name} (mode 0770)"


def test_a_group_writable_dir_of_the_user_s_private_group_is_not_flagged(tmp_path: Path) -> None:
    """A group of the user's own name with no other member (root's, here) is the user alone."""
    if grp.getgrgid(os.getgid()).gr_name != _my_name() or grp.getgrgid(os.getgid()).gr_mem:
        pytest.skip("this user's primary group is not a private one")
    own = mkdir(tmp_path / "own-group", 0o770)
    give(own, gid=os.getgid())
    assert trust.replaceable(own) is None
    assert trust.shared(own) is None
    assert trust.not_mine(own) is None


def _my_name() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def test_a_path_not_made_yet_is_judged_by_its_deepest_existing_parent(tmp_path: Path) -> None:
    open_dir = mkdir(tmp_path / "open", 0o777)
    private = mkdir(tmp_path / "private", 0o700)
    assert trust.replaceable(open_dir / "a" / "b") == (
        f"{open_dir} is writable by every user (mode 0777, no sticky bit)"
    )
    assert trust.replaceable(private / "a" / "b") is None
    assert trust.shared(open_dir / "a") is None  # it does not exist: this user would make it


# ---- foreign_owner and not_mine ----


def test_a_dir_of_another_user_on_the_way_is_named(tmp_path: Path) -> None:
    theirs = mkdir(tmp_path / "theirs", 0o755)
    give(theirs, uid=OTHER_UID)
    mine = mkdir(theirs / "mine", 0o700)
    assert trust.foreign_owner(mine / "not-yet") == f"{theirs} belongs to user uid {OTHER_UID}"
    # Root's dirs (/, /tmp) and the user's own are not another user's.
    assert trust.foreign_owner(tmp_path / "elsewhere") is None


def test_not_mine_says_why_a_file_is_not_the_user_s_own(tmp_path: Path) -> None:
    gid, name = other_group()
    own = write(tmp_path / "own", "x", 0o700)
    link = tmp_path / "link"
    link.symlink_to(own)
    theirs = write(tmp_path / "theirs", "x", 0o600)
    give(theirs, uid=OTHER_UID)
    team = write(tmp_path / "team", "x", 0o660)
    give(team, gid=gid)
    everyone = write(tmp_path / "everyone", "x", 0o666)
    assert trust.not_mine(own) is None
    assert trust.not_mine(link) == f"{link} is a symbolic link"
    assert trust.not_mine(theirs) == f"{theirs} belongs to user uid {OTHER_UID}, not you"
    assert trust.not_mine(team) == f"{team} is writable by group {name} (mode 0660)"
    assert trust.not_mine(everyone) == f"{everyone} is writable by every user (mode 0666)"
    assert trust.not_mine(tmp_path / "gone") == (
        f"{tmp_path / 'gone'} cannot be read (No such file or directory)"
    )


# ---- log_base_problem ----


def test_log_base_problem_names_the_key_and_the_resolved_path_of_a_relative_base(
    tmp_path: Path,
) -> None:
    """One line: the key, the base as given and resolved, who can write it, and what to do (the
    words between, on what another user could do, are the module's to word)."""
    base = mkdir(tmp_path / "logs", 0o777)
    problem = trust.log_base_problem("logs", tmp_path)
    assert problem is not None and "\n" not in problem
    assert problem.startswith(
        f"logs.base_dir logs ({base}): {base} is writable by every user (mode 0777, no sticky "
        "bit): another user could "
    )
    assert problem.endswith("; use a directory only you can write (--log-dir DIR)")
    # An absolute base is named as it was given.
    problem = trust.log_base_problem(str(base), Path("/"))
    assert problem is not None and problem.startswith(f"logs.base_dir {base}: {base} is writable")


def test_log_base_problem_refuses_a_sticky_shared_base_and_accepts_a_private_one(
    tmp_path: Path,
) -> None:
    """In a sticky dir others cannot replace the job's log dir, but they can make it first."""
    sticky = mkdir(tmp_path / "sticky", 0o1777)
    problem = trust.log_base_problem("sticky", tmp_path)
    assert problem is not None
    assert problem.startswith(
        f"logs.base_dir sticky ({sticky}): {sticky} is writable by every user (mode 1777): "
    )
    mkdir(tmp_path / "private", 0o700)
    assert trust.log_base_problem("private", tmp_path) is None
    assert trust.log_base_problem("private/not-yet", tmp_path) is None


# ---- POSIX ACLs: an entry that lets another user write counts, as the mode's bits do ----


@ACL_WRITERS
def test_a_log_base_an_acl_lets_another_user_write_is_refused(
    reachable: Path, entry: str, who: str
) -> None:
    """root:root 0775 (root's private group) plus an ACL entry for another user: the other user
    makes the next job's log dir there (as the review did), so the base is refused."""
    base = mkdir(reachable / "logs", 0o775)
    setfacl(base, entry)
    assert as_other("mkdir", str(base / "1234-logs")).returncode == 0  # the attack works
    why = f"{base} is writable by {who} through its ACL (mode 0775"
    assert trust.replaceable(base) == f"{why}, no sticky bit)"
    assert trust.replaceable(base / "1234-logs") == f"{why}, no sticky bit)"
    assert trust.shared(base) == f"{why})"
    assert trust.not_mine(base) == f"{why})"
    problem = trust.log_base_problem(str(base), Path("/"))
    assert problem is not None and problem.startswith(f"logs.base_dir {base}: {why}, no sticky")


def test_a_file_an_acl_lets_another_user_write_is_not_mine(reachable: Path) -> None:
    script = write(reachable / "7-attach.sh", "#!/bin/bash\n", 0o700)
    setfacl(script, f"u:{OTHER_UID}:rw")
    appended = as_other("sh", "-c", f"echo 'touch /tmp/pwned' >>{script}")
    assert appended.returncode == 0, appended.stderr
    assert trust.not_mine(script) == (
        f"{script} is writable by user uid {OTHER_UID} through its ACL (mode 0760)"
    )


def test_a_default_acl_that_lets_another_user_write_what_is_made_in_a_dir_counts(
    reachable: Path,
) -> None:
    """A dir whose default ACL names another user: what this user makes in it (a cache, the
    job's own dirs) is theirs to write."""
    base = mkdir(reachable / "caches", 0o755)
    setfacl(base, f"d:u:{OTHER_UID}:rwx")
    (base / "uv").mkdir()  # as the job makes a cache dir
    assert as_other("touch", str(base / "uv" / "planted")).returncode == 0
    why = f"{base} is writable by user uid {OTHER_UID} through its default ACL (mode 0755"
    assert trust.replaceable(base) == f"{why}, no sticky bit)"
    assert trust.shared(base) == f"{why})"


def test_an_acl_entry_counts_whatever_its_mask(reachable: Path) -> None:
    """Fail closed: a mask that holds an entry back today is one setfacl away from letting it."""
    base = mkdir(reachable / "masked", 0o755)
    setfacl(base, f"u:{OTHER_UID}:rwx", "m::r-x")
    assert trust.shared(base) == (
        f"{base} is writable by user uid {OTHER_UID} through its ACL (mode 0755)"
    )


def test_an_acl_that_lets_no_one_else_write_is_no_problem(reachable: Path) -> None:
    """Entries that read only, or name this user or the owner, are not another user's write."""
    base = mkdir(reachable / "readers", 0o755)
    setfacl(base, f"u:{OTHER_UID}:r-x", f"g:{OTHER_UID}:r-x", f"u:{os.getuid()}:rwx")
    setfacl(base, f"d:u:{OTHER_UID}:r-x")
    assert as_other("mkdir", str(base / "1234-logs")).returncode != 0
    assert trust.replaceable(base) is None
    assert trust.shared(base) is None
    assert trust.not_mine(base) is None
    assert trust.log_base_problem(str(base), Path("/")) is None


def test_doctor_warns_of_a_cache_dir_an_acl_lets_another_user_write(
    cli: Cli, reachable: Path
) -> None:
    """The cache checks (doctor, submit's lint) read the same functions: a uv cache 0755 with an
    ACL for another user, who plants a wheel there, is one the job must not use."""
    uv = mkdir(reachable / "uv", 0o755)
    setfacl(uv, f"u:{OTHER_UID}:rwx")
    assert as_other("touch", str(uv / "planted.whl")).returncode == 0
    result = cli("doctor", "--backend", "local", "--set", f"caches.uv={uv}")
    assert result.code == 0, result.out + result.err
    assert (
        f"warn  caches.uv: {uv}: {uv} is writable by user uid {OTHER_UID} through its ACL (mode "
        "0775): another user could put code there that your job runs"
    ) in result.out


# ---- The log dir readers: run_log_dirs, read_log_dir, find_log_dir ----


def test_a_restart_s_log_dir_of_another_user_is_left_out_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = mkdir(tmp_path / "7-logs", 0o700)
    mine = mkdir(tmp_path / "7-1-logs", 0o700)
    theirs = mkdir(tmp_path / "7-9-logs", 0o700)
    give(theirs, uid=OTHER_UID)
    assert run_log_dirs(first) == [first, mine]
    assert capsys.readouterr().err == (
        f"nrl-launch: warning: ignoring 7-9-logs, not job 7's: {theirs} belongs to user uid "
        f"{OTHER_UID}, not you\n"
    )
    assert find_log_dir(first) == mine  # the newest of the job's own runs


def test_a_log_dir_of_another_user_reads_as_absent_and_its_ended_is_not_believed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = mkdir(tmp_path / "7-logs", 0o700)
    write(log_dir / "ENDED", "driver exited with code 0\n", 0o644)
    write(log_dir / "exit_code", "0\n", 0o644)
    give(log_dir / "ENDED", uid=OTHER_UID)
    give(log_dir, uid=OTHER_UID)
    view = read_log_dir(log_dir)
    assert view.log_dir is None and view.ended is None and view.end is None
    assert capsys.readouterr().err == (
        f"nrl-launch: warning: not reading {log_dir}: {log_dir} belongs to user uid "
        f"{OTHER_UID}, not you\n"
    )
    # The job, still running for Slurm, is not shown COMPLETED by the forged file.
    from nrl_launch.backends import SchedulerView

    phase, _ = phase_of(SchedulerView(state="RUNNING"), view, 2)
    assert phase.value != "COMPLETED" and not phase.terminal


def test_the_user_s_own_log_dir_is_read(tmp_path: Path) -> None:
    """The control for the test above: the same files in a dir of the user's own count."""
    log_dir = mkdir(tmp_path / "7-logs", 0o700)
    write(log_dir / "ENDED", "driver exited with code 0\n", 0o600)
    view = read_log_dir(log_dir)
    assert view.log_dir == log_dir and view.ended == "driver exited with code 0"


def test_find_log_dir_refuses_a_group_writable_attach_script(tmp_path: Path) -> None:
    gid, name = other_group()
    log_dir = mkdir(tmp_path / "7-logs", 0o700)
    write(log_dir / "job.sbatch", "#!/bin/bash\n", 0o700)
    script = write(log_dir / "7-attach.sh", "#!/bin/bash\n", 0o770)
    give(script, gid=gid)
    with pytest.raises(UntrustedLogError) as refused:
        find_log_dir(log_dir, "7-attach.sh", "job.sbatch")
    assert refused.value.exit_code == ExitCode.NOT_FOUND
    assert int(refused.value.exit_code) == 4
    assert str(refused.value) == (
        f"{script} is writable by group {name} (mode 0770): another user could have written "
        f"what nrl-launch would run there; not using the job's log dir {log_dir}"
    )
    script.chmod(0o700)  # the user's own again: found
    assert find_log_dir(log_dir, "7-attach.sh", "job.sbatch") == log_dir


def test_find_log_dir_refuses_a_log_dir_in_a_world_writable_parent(tmp_path: Path) -> None:
    """The log dir and its scripts are the user's, but anyone can swap the dir for theirs."""
    base = mkdir(tmp_path / "open", 0o777)
    log_dir = mkdir(base / "7-logs", 0o700)
    write(log_dir / "7-attach.sh", "#!/bin/bash\n", 0o700)
    with pytest.raises(UntrustedLogError, match=r"is writable by every user \(mode 0777") as e:
        find_log_dir(log_dir, "7-attach.sh", "job.sbatch")
    assert e.value.exit_code == 4
    assert str(e.value).startswith(f"{base} is writable by every user (mode 0777, no sticky bit)")


def test_find_log_dir_refuses_a_symlinked_job_script(tmp_path: Path) -> None:
    log_dir = mkdir(tmp_path / "7-logs", 0o700)
    write(log_dir / "7-attach.sh", "#!/bin/bash\n", 0o700)
    (log_dir / "job.sbatch").symlink_to("/nonexistent/job.sbatch")  # dangling counts too
    with pytest.raises(UntrustedLogError, match=r"job\.sbatch is a symbolic link"):
        find_log_dir(log_dir, "7-attach.sh", "job.sbatch")


# ---- The CLI: attach and status ----


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return install(tmp_path, monkeypatch)


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """attach replaces the process with bash: here it runs bash as a child instead, so that a
    script that is run shows (and pytest goes on)."""
    from nrl_launch import runner

    def become(argv: list[str], env: dict[str, str]) -> None:
        done = subprocess.run(argv, env={**env, "PATH": "/usr/bin:/bin"}, check=False)
        raise SystemExit(done.returncode)

    monkeypatch.setattr(runner, "become", become)


def save_job(tmp_path: Path, job_id: str = "11") -> Path:
    """A record of a running 2-node Ray job on Slurm; returns its log dir (made, 0700)."""
    logs = mkdir(tmp_path / "logs", 0o700)
    log_dir = mkdir(logs / f"{job_id}-logs", 0o700)
    record.save(
        record.JobRecord(
            job_id=job_id,
            backend="slurm",
            job_name="j",
            nodes=2,
            submitted_at=1.0,
            submit_dir=str(tmp_path),
            log_dir=str(log_dir),
            script_path=str(tmp_path / "job.sbatch"),
            argv=["sbatch", "job.sbatch"],
            spec={"ray": {"ports": {"dashboard": 8265}}},
        ),
        tmp_path / "state",
    )
    return log_dir


def plant_attach_script(log_dir: Path, job_id: str, marker: Path) -> Path:
    write(log_dir / "job.sbatch", "#!/bin/bash\n", 0o700)
    return write(log_dir / f"{job_id}-attach.sh", f"touch {marker}\n", 0o700)


@pytest.mark.usefixtures("no_exec")
def test_attach_runs_the_user_s_own_attach_script(
    cli: Cli, fake: FakeSlurm, tmp_path: Path
) -> None:
    """The control for the refusals below: the marker shows when the script runs."""
    log_dir = save_job(tmp_path)
    marker = tmp_path / "RAN"
    plant_attach_script(log_dir, "11", marker)
    fake.answer("squeue", "11|RUNNING|None|2|node[0-1]\n")
    result = cli("attach", "11", "--", "hostname")
    assert result.code == 0, result.err
    assert marker.exists()


@pytest.mark.usefixtures("no_exec")
@pytest.mark.parametrize("whose", ["another user", "a group of others"])
def test_attach_refuses_an_attach_script_that_is_not_the_user_s_own(
    cli: Cli, fake: FakeSlurm, tmp_path: Path, whose: str
) -> None:
    log_dir = save_job(tmp_path)
    marker = tmp_path / "RAN"
    script = plant_attach_script(log_dir, "11", marker)
    why = make_foreign(script, whose, 0o770)
    fake.answer("squeue", "11|RUNNING|None|2|node[0-1]\n")
    result = cli("attach", "11", "--", "hostname")
    assert result.code == 4
    assert result.err == (
        f"nrl-launch: error: {why}: another user could have written what nrl-launch would run "
        f"there; not using the job's log dir {log_dir}\n"
    )
    assert not marker.exists()  # the planted script did not run


@pytest.mark.usefixtures("no_exec")
def test_attach_refuses_an_attach_script_an_acl_lets_another_user_write(
    cli: Cli, fake: FakeSlurm, reachable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its mode is 0700 and it is the user's, but an ACL lets another user write it: they add a
    line, which attach would run as the user."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(reachable / "state"))
    log_dir = save_job(reachable)
    script = plant_attach_script(log_dir, "11", reachable / "RAN")
    for place in (log_dir.parent, log_dir):
        setfacl(place, f"u:{OTHER_UID}:x")  # the way there: passing through is no write
    setfacl(script, f"u:{OTHER_UID}:rw")
    marker = reachable / "PLANTED"
    planted = as_other("sh", "-c", f"echo 'touch {marker}' >>{script}")
    assert planted.returncode == 0, planted.stderr
    fake.answer("squeue", "11|RUNNING|None|2|node[0-1]\n")
    result = cli("attach", "11", "--", "hostname")
    assert result.code == 4
    assert result.err == (
        f"nrl-launch: error: {script} is writable by user uid {OTHER_UID} through its ACL (mode "
        "0760): another user could have written what nrl-launch would run there; not using the "
        f"job's log dir {log_dir}\n"
    )
    assert not marker.exists()  # the planted line did not run


@pytest.mark.parametrize(
    ("ended", "shown"),
    [
        # A terminal escape (clear screen) does not clear the user's screen.
        ("driver exited with code 3\x1b[2Jall good\n", "driver exited with code 3?[2Jall good"),
        # A carriage return would let the text after it overwrite (or, read as a line break,
        # add to) the job's status line: it shows as ?, and the job stays one line.
        ("driver exited with code 3\x1b[2J\rall good\n", "driver exited with code 3?[2J?all good"),
    ],
)
def test_status_shows_control_characters_in_ended_as_question_marks(
    cli: Cli, fake: FakeSlurm, tmp_path: Path, ended: str, shown: str
) -> None:
    log_dir = save_job(tmp_path)
    write(log_dir / "ENDED", ended, 0o600)
    fake.answer("squeue", "11|RUNNING|None|2|node[0-1]\n")
    result = cli("status", "11")
    assert result.code == 0, result.err
    assert result.out == f"11  RUNNING    stopping: {shown}   (logs: {log_dir})\n"


def test_printable_keeps_newlines_tabs_and_text() -> None:
    assert printable("a\tb\nnaïve ☃\x1b]0;title\x07\x9b\x7f") == "a\tb\nnaïve ☃?]0;title???"
