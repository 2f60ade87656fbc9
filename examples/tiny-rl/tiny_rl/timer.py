"""checkpointing.checkpoint_must_save_by as NeMo RL keeps it (nemo_rl/utils/timer.py,
`TimeoutChecker`, the same in v0.4.0 to v0.7.0): its clock starts when the timer is built,
after the driver's setup (NeMo RL's issue #3596), and `check_save()` says save once the time
since then, plus an average step with `fit_last_save_time`, reaches `last_save_time`. Same
attributes, same arithmetic: what nrl-launch's start-up shim does to NeMo RL's timer
(nemo_rl.timer_class) it does to this one."""

from __future__ import annotations

import sys
import time


def convert_to_seconds(text: str) -> int:
    """DD:HH:MM:SS in seconds, as NeMo RL's timer reads it."""
    days, hours, minutes, seconds = (int(p) for p in text.split(":"))
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


class TimeoutChecker:
    def __init__(self, timeout: str | None = "00:03:45:00", fit_last_save_time: bool = False):
        self.last_save_time = float("inf") if timeout is None else convert_to_seconds(timeout)
        self.start_time = time.time()
        self.last_saved = False
        self.iteration_times: list[float] = []
        self.previous_iteration_time: float | None = None
        self.fit_last_save_time = fit_last_save_time

    def check_save(self) -> bool:
        sys.stdout.flush()
        sys.stderr.flush()
        if self.last_saved:
            return False
        elapsed = time.time() - self.start_time
        if self.fit_last_save_time and self.iteration_times:
            average = sum(self.iteration_times) / len(self.iteration_times)
            if elapsed + average >= self.last_save_time:
                self.last_saved = True
                return True
        if elapsed >= self.last_save_time:
            self.last_saved = True
            return True
        return False

    def start_iterations(self) -> None:
        self.previous_iteration_time = time.time()

    def mark_iteration(self) -> None:
        now = time.time()
        if self.previous_iteration_time is not None:
            self.iteration_times.append(now - self.previous_iteration_time)
        self.previous_iteration_time = now
