"""driver.stall_min on the dev cluster: a driver that prints a step and then hangs (a Ray
driver alive and idle, as a hung collective leaves it) ends FAILED as stalled, naming its last
line, soon after the limit; the driver, Ray and every step are gone from the nodes."""

from __future__ import annotations

import re
import sys
import time

import pytest

from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster

STALL_MIN = 0.25  # 15 s
# What a busy machine adds between the limit passing and Slurm ending the job: the watch looks
# every second, the driver gets 10 s to stop, then Ray stops on every node.
SLACK_S = 90.0
HANG = (
    "import ray, time; ray.init(address='auto')\n"
    "print(f'step 3 done at {time.time():.3f}', flush=True)\n"
    "time.sleep(3600)\n"
)


def test_a_driver_that_hangs_ends_as_stalled_naming_its_last_line(
    cli: Cli, cluster_job: list[str]
) -> None:
    submitted = cli(
        "submit", "-q", *ON_NODE0_AND_1, *cluster_job,
        "--set", f"driver.stall_min={STALL_MIN}",
        "--", "python", "-c", HANG,
    )  # fmt: skip
    assert submitted.code == 0, submitted.err
    job_id = submitted.out.strip()
    wait_until(lambda: "step 3 done at" in cli("logs", job_id).out, 300)
    printed_at = float(cli("logs", job_id).out.split("step 3 done at ")[1].split()[0])

    def ended() -> bool:
        return job_status(cli, job_id)["phase"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")

    wait_until(ended, STALL_MIN * 60 + SLACK_S + 60)
    took = time.time() - printed_at
    status = job_status(cli, job_id)
    print(f"stall {STALL_MIN * 60:.0f} s: last line -> FAILED in {took:.1f} s", file=sys.__stderr__)
    assert status["phase"] == "FAILED", status
    assert re.search(
        r"stalled: no driver output for 0\.25 min; the last line, at "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d: step 3 done at [0-9.]+$",
        status["detail"],
    ), status["detail"]
    assert STALL_MIN * 60 <= took < STALL_MIN * 60 + SLACK_S, took
    # The hung driver, Ray and the steps: gone from every node.
    wait_for_clean_nodes(60)
