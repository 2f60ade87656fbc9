"""`nrl-launch report`: a chain's jobs (by the name they share) or an experiment's points as one
page, from their log dirs; what it wrote, said in one line. The page itself is
tests/jobs/test_report.py's; a real chain's, in a browser, tests/cluster/test_grpo.py's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.helpers import save

LOGS = Path(__file__).resolve().parents[1] / "data" / "nemo_rl_logs"


@pytest.fixture(autouse=True)
def _records_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def chain(tmp_path: Path) -> list[Path]:
    """Two links of a chain named grpo-run (Slurm's singleton dependency), each with its log
    dir: the first ran the GRPO log, the second the same run resumed."""
    dirs = []
    for k, (job_id, log) in enumerate((("31", "grpo.log"), ("32", "grpo_resumed.log"))):
        spec = {"slurm": {"dependency": "singleton", "time": "1:00:00", "gpus_per_node": 8}}
        log_dir = save(tmp_path, job_id, name="grpo-run", at=float(k), spec=spec)
        log_dir.mkdir(parents=True)
        t0 = 1_700_000_000 + 4000 * k
        (log_dir / "timeline").write_text(
            f"submitted {t0}\nstarted {t0 + 30}\nhead_up {t0 + 40}\ndriver_started {t0 + 60}\n"
            f"ended {t0 + 3600}\n"
        )
        (log_dir / "ENDED").write_text("Slurm stopped the job (time limit)\n")
        shutil.copy(LOGS / log, log_dir / "ray-driver.log")
        dirs.append(log_dir)
    return dirs


@pytest.mark.usefixtures("chain")
def test_a_chain_by_its_name_is_one_run_on_one_page(cli: Cli, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    target = tmp_path / "run.html"
    result = cli("report", "grpo-run", "-o", str(target))
    assert result.code == 0, result.err
    assert result.out.startswith(f"Wrote {target}: 2 curve(s) of train/loss, train/reward, ")
    text = target.read_text()
    # both links' job ids, their ends and their time limit's cause, on the one page
    assert "31 queued" in text and "32 queued" in text and "time limit" in text


def test_a_job_that_is_not_recorded_is_not_found(cli: Cli) -> None:
    result = cli("report", "99")
    assert result.code == 4 and "no job '99'" in result.err


def test_report_needs_a_job_or_an_experiment(cli: Cli) -> None:
    result = cli("report")
    assert result.code == 2
    assert result.err.strip().endswith(
        "report: name a JOBID (or a chain's name), or --experiment NAME"
    )
