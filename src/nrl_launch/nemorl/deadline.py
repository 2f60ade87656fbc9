"""NeMo RL's save before the job's end (checkpointing.checkpoint_must_save_by), decided at
submit and set on the node.

NeMo RL counts checkpoint_must_save_by from when its timer starts, after its own setup (20-30
minutes at scale; its issue #3596), so a value fixed here from the time limit would land after
the job's end whenever that setup is long. Here nrl-launch only decides whether the job manages
the deadline (nemo_rl.save_by_job_end) and says so; the node sets the value from the job's real
end when the driver starts, and a start-up shim makes the timer (nemo_rl.timer_class) count
from that end (node/deadline.sh, node/save_by_shim.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_launch.spec import LaunchSpec, slurm_time_minutes

if TYPE_CHECKING:
    from nrl_launch.nemorl.config import NemoConfig

__all__ = ["Decision", "ddhhmmss_minutes", "decide"]

KEY = "checkpointing.checkpoint_must_save_by"


@dataclass(frozen=True)
class Decision:
    """Whether the node is to manage the deadline (turn nemo_rl.save_by_job_end on), and what
    to say: notes (what nrl-launch does) and warnings (what will go wrong)."""

    manage: bool = False
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def decide(spec: LaunchSpec, cfg: NemoConfig, *, time_limited: bool) -> Decision:
    """With checkpointing on, on a backend whose jobs end at a time limit: the node manages
    the deadline for a recipe (or with nemo_rl.save_by_job_end) unless the config sets one;
    a value of the config's own after the limit, or a limit within the margin, is a warning.
    Elsewhere the config's value applies (said for a recipe)."""
    nemo = spec.nemo_rl
    if cfg.value("checkpointing.enabled", False) is not True or nemo.save_by_job_end is False:
        return Decision()
    given = cfg.value(KEY, None)
    if not time_limited:
        if nemo.recipe is None:
            return Decision()
        shown = "null" if given is None else given
        return Decision(
            notes=(
                f"{KEY}: as the config says ({shown}): the {spec.backend} backend ends its jobs "
                "at no time limit",
            )
        )
    time = spec.slurm.time
    minutes = None if time is None else slurm_time_minutes(time)
    margin = nemo.checkpoint_margin_min
    if given is not None:
        at = ddhhmmss_minutes(str(given))
        if minutes is not None and at is not None and at > minutes:
            return Decision(
                warnings=(
                    f"{KEY}={given} is after the time limit {time}: the job ends before it saves",
                )
            )
        return Decision()
    if nemo.recipe is None and nemo.save_by_job_end is None:
        return Decision()
    if minutes is not None and minutes <= margin:
        return Decision(
            warnings=(
                f"{KEY} not set: the time limit {time} is within the {margin}-minute save margin "
                "(nemo_rl.checkpoint_margin_min)",
            )
        )
    end = (
        f"slurm.time={time}"
        if time is not None
        else "the partition's default time limit, which Slurm knows when the job starts"
    )
    note = (
        f"{KEY}: set on the node when the driver starts, to the job's end ({end}) less "
        f"{margin} min, counted from when the job ends whatever NeMo RL's setup takes (its "
        f"timer {nemo.timer_class} is made to count from it)"
    )
    return Decision(manage=True, notes=(note,))


def ddhhmmss_minutes(text: str) -> float | None:
    """Minutes in NeMo RL's DD:HH:MM:SS (checkpoint_must_save_by), or None when malformed."""
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    d, h, m, s = (int(p) for p in parts)
    return d * 1440 + h * 60 + m + s / 60
