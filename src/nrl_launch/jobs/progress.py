"""Where a training run is, read from its driver's log (ray-driver.log) and, when given, its
TensorBoard event files. Pure: it reads files and returns values; it runs and prints nothing.

From the log (the last LOG_TAIL_BYTES of it; progress_logs.py has the line formats):
  NeMo RL (grpo, async grpo, sft, dpo, rm, distillation, ppo): the `Step k/N` banner, the
  `Epoch e/E` banner, `Saving checkpoint for step s...`, the `📊 Training Results` values and
  the `⏱️  Timing` block's `Total step time`;
  tiny-rl (examples/tiny-rl): its `step k/N: ... | t s (...)` and `saved .../step_k` lines.
From TensorBoard: NeMo RL's Logger writes every metric, as a scalar tagged <prefix>/<name>
(train/reward, train/loss, timing/train/total_step_time, ...), to <logger.log_dir>/tensorboard/
(nemo_rl/utils/logger.py Logger.__init__ and TensorboardLogger.log_metrics). Those series join
the log's, exact where the log's are rounded. Reading them needs the `metrics` extra
(tensorboard), imported only when event files are there.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from nrl_launch.jobs.progress_logs import LogReading, read_nemo_rl, read_tiny_rl

__all__ = [
    "LOG_TAIL_BYTES",
    "TENSORBOARD_MISSING",
    "Progress",
    "Save",
    "read_log_progress",
    "read_progress",
]

# How much of the log's end is read. A step prints 1-10 KiB with the workers' lines, so this
# holds the last thousands of steps (TensorBoard holds them all); reading it takes about 0.6 s
# (2.5 s for 64 MiB, 2 s at worst when nearly every line is NeMo RL's own), on each `status`.
LOG_TAIL_BYTES = 16 * 1024 * 1024
TENSORBOARD_MISSING = "install nrl-launch[metrics] to read TensorBoard event files"
# The metrics status shows first, when the run has them: the reward and the loss.
_MAIN = ("train/reward", "train/loss")
_TINY_RL_MAIN = ("reward", "loss")

Series = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Save:
    """A checkpoint the driver saved (NeMo RL prints its line as it starts writing it)."""

    step: int


@dataclass(frozen=True)
class Progress:
    """Where training is. `step` and `total` are the driver's own `Step k/N`: within the epoch
    for NeMo RL's epoch-bound loops (epoch, epochs: its `Epoch e/E`), else global. Metrics and
    saves are numbered by the global step, as NeMo RL's Logger and checkpoints are."""

    algorithm: str  # grpo, async grpo, sft, dpo, rm, distillation, ppo, nemo-rl, tiny-rl grpo/sft
    step: int | None  # the last step started (tiny-rl: the last finished)
    total: int | None
    step_seconds: tuple[float, ...] = ()  # each finished step's wall time, in order
    saves: tuple[Save, ...] = ()
    metrics: Mapping[str, Series] = field(default_factory=lambda: MappingProxyType({}))
    main: tuple[str, ...] = ()  # reward and/or loss, by the names in `metrics`
    epoch: int | None = None
    epochs: int | None = None
    step_finished: bool = False  # the last step's time has been printed
    notes: tuple[str, ...] = ()  # for the user, e.g. TENSORBOARD_MISSING

    def seconds_per_step(self, recent: int = 10) -> float | None:
        """The median of the last `recent` steps' times (one slow step does not move it)."""
        last = self.step_seconds[-recent:] if recent > 0 else ()
        return statistics.median(last) if last else None

    def seconds_left(self) -> float | None:
        """The steps left times seconds_per_step. A step started but not finished counts whole
        (how far it is, the log does not say). With epochs left, each counts `total` steps: an
        upper bound when max_num_steps ends the run before its last epoch."""
        per_step = self.seconds_per_step()
        if per_step is None or self.step is None or self.total is None:
            return None
        left = self.total - self.step + (0 if self.step_finished else 1)
        if self.epoch is not None and self.epochs is not None:
            left += max(0, self.epochs - self.epoch) * self.total
        return max(0, left) * per_step

    def latest(self, name: str) -> float | None:
        """The metric's value at the last step that has one."""
        series = self.metrics.get(name)
        return series[-1][1] if series else None

    @property
    def last_save(self) -> Save | None:
        return max(self.saves, key=lambda save: save.step) if self.saves else None

    def as_json(self) -> dict[str, Any]:
        """For `status --json`: the counts, the timing, and the main metrics' latest values and
        series (NaN and infinities as null)."""
        last_save = self.last_save
        return {
            "algorithm": self.algorithm,
            "step": self.step,
            "total": self.total,
            "epoch": self.epoch,
            "epochs": self.epochs,
            "seconds_per_step": self.seconds_per_step(),
            "seconds_left": self.seconds_left(),
            "last_save_step": last_save.step if last_save else None,
            "latest": {name: _finite(self.latest(name)) for name in self.main},
            "series": {
                name: [[step, _finite(value)] for step, value in self.metrics[name]]
                for name in self.main
            },
            "notes": list(self.notes),
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _progress(reading: LogReading) -> Progress:
    series = {
        name: tuple(sorted(values.items())) for name, values in reading.metrics.items() if values
    }
    return Progress(
        algorithm=reading.algorithm,
        step=reading.step,
        total=reading.total,
        step_seconds=tuple(reading.step_seconds),
        saves=tuple(Save(step) for step in dict.fromkeys(reading.saves)),
        metrics=MappingProxyType(series),
        main=_main_names(reading.algorithm, series),
        epoch=reading.epoch,
        epochs=reading.epochs,
        step_finished=reading.step_finished,
    )


def _main_names(algorithm: str, metrics: Mapping[str, Series]) -> tuple[str, ...]:
    names = _TINY_RL_MAIN if algorithm.startswith("tiny-rl") else _MAIN
    return tuple(name for name in names if name in metrics)


def read_progress(text: str) -> Progress | None:
    """From a driver log's text: None when it is not NeMo RL's or tiny-rl's (no invented
    progress). A last line without its newline is still being written, and is left out."""
    text = text[: text.rfind("\n") + 1]
    nemo_rl = read_nemo_rl(text)
    if nemo_rl is not None and nemo_rl.step is not None:
        return _progress(nemo_rl)
    tiny_rl = read_tiny_rl(text)
    reading = tiny_rl if tiny_rl is not None else nemo_rl
    return None if reading is None else _progress(reading)


def read_log_progress(
    log: Path, tensorboard_dir: Path | None = None, max_bytes: int = LOG_TAIL_BYTES
) -> Progress | None:
    """read_progress of the log's last `max_bytes` (from the first whole line in them), with
    the scalars of the event files under tensorboard_dir (at any depth: NeMo RL writes one
    exp_NNN/tensorboard/ per run). None when the log is missing or not a known driver's."""
    try:
        text = _log_tail(log, max_bytes)
    except OSError:
        return None
    progress = read_progress(text)
    if progress is None or tensorboard_dir is None:
        return progress
    return _with_tensorboard(progress, tensorboard_dir)


def _log_tail(log: Path, max_bytes: int) -> str:
    with open(log, "rb") as file:
        size = file.seek(0, 2)
        start = max(0, size - max_bytes)
        file.seek(start)
        data = file.read(max_bytes)
    if start > 0:  # the first line is cut: it starts at its next line
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    return data.decode("utf-8", errors="replace")


def _event_files(directory: Path) -> list[Path]:
    """The event files, oldest first: their names carry the time they were opened
    (events.out.tfevents.<seconds>.<host>.<pid>.<n>)."""
    if not directory.is_dir():
        return []
    files = [path for path in directory.rglob("events.out.tfevents.*") if path.is_file()]

    def opened(path: Path) -> tuple[int, str]:
        parts = path.name.split(".")
        return (int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0, str(path))

    return sorted(files, key=opened)


def _with_tensorboard(progress: Progress, directory: Path) -> Progress:
    try:
        files = _event_files(directory)
    except OSError:
        return progress
    if not files:
        return progress
    try:
        loader = importlib.import_module("tensorboard.backend.event_processing.event_file_loader")
        tensor_util = importlib.import_module("tensorboard.util.tensor_util")
    except ImportError:
        return _note(progress, TENSORBOARD_MISSING)
    try:
        scalars = _read_scalars(files, loader, tensor_util)
    except OSError as err:
        return _note(progress, f"could not read the TensorBoard event files: {err}")
    merged = {name: dict(series) for name, series in progress.metrics.items()}
    for name, values in scalars.items():
        merged.setdefault(name, {}).update(values)  # exact, where the log's are rounded
    series = {name: tuple(sorted(values.items())) for name, values in merged.items()}
    return dataclasses.replace(
        progress, metrics=MappingProxyType(series), main=_main_names(progress.algorithm, series)
    )


def _note(progress: Progress, note: str) -> Progress:
    return dataclasses.replace(progress, notes=(*progress.notes, note))


def _read_scalars(
    files: list[Path], loader: ModuleType, tensor_util: ModuleType
) -> dict[str, dict[int, float]]:
    """Every scalar in the files, by tag and step; a later file's value for a step wins (a
    resumed run's). The loader stops quietly at a record still being written."""
    scalars: dict[str, dict[int, float]] = {}
    for path in files:
        for event in loader.EventFileLoader(str(path)).Load():
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                number = _scalar(value, tensor_util)
                if number is not None:
                    scalars.setdefault(value.tag, {})[int(event.step)] = number
    return scalars


def _scalar(value: Any, tensor_util: ModuleType) -> float | None:
    """A summary value's number: simple_value (torch's SummaryWriter), or a one-element tensor
    of the scalars plugin (what tensorboard's loader makes of simple_value, and new-style)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if not value.HasField("tensor") or value.metadata.plugin_data.plugin_name != "scalars":
        return None
    try:
        array = tensor_util.make_ndarray(value.tensor)
        return float(array.reshape(-1)[0]) if array.size == 1 else None
    except (TypeError, ValueError):
        return None
