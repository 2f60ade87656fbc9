"""The training drivers' log lines that say where training is, found in one scan of the text:
NeMo RL's (nemo_rl/algorithms/*.py at NVIDIA-NeMo/RL 7ea279a) and tiny-rl's (examples/tiny-rl).
Pure.

NeMo RL prints, per step (grpo.py grpo_train and async_grpo_train, sft.py, dpo.py, rm.py,
distillation.py, ppo.py; each the same f-strings):
  a banner  `========================= Step {current_step + 1}/{N} =========================`
            (k counts within the epoch, after `... Epoch {e}/{E} ...`; async GRPO's is global)
  `Saving checkpoint for step {total_steps + 1}...`   before it writes the checkpoint
  `📊 Training Results:` then `  • {label}: {value}` lines (the labels differ by algorithm)
  `⏱️  Timing:` then `  • Total step time: {total:.2f}s` and `  • {name}: {v:.2f}s ({p:.1f}%)`
Its Logger numbers the step's metrics total_steps + 1 (the global step); so does this reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["LogReading", "read_nemo_rl", "read_tiny_rl"]


@dataclass
class LogReading:
    """What one driver's log said, before it becomes a Progress."""

    algorithm: str
    step: int | None = None
    total: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    step_finished: bool = False
    step_seconds: list[float] = field(default_factory=list)
    saves: list[int] = field(default_factory=list)
    metrics: dict[str, dict[int, float]] = field(default_factory=dict)

    def record(self, name: str, step: int | None, value: float | None) -> None:
        """A metric's value at a step; a later value for the same step (a resumed run's) wins."""
        if step is not None and value is not None:
            self.metrics.setdefault(name, {})[step] = value


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ---- NeMo RL ----------------------------------------------------------------------------------

# grpo.py 2818/2823 and 4517, sft.py 439, dpo.py 588, rm.py 527, distillation.py 762/767:
# f"\n{'=' * 25} Step {k}/{N} {'=' * 25}" and f"\n{'=' * 25} Epoch {e}/{E} {'=' * 25}".
_BANNER = re.compile(r"={25} (Step|Epoch) (\d+)/(\d+) ={25}")
# grpo.py 3575 and 5189, sft.py 583, dpo.py 726, rm.py 661, distillation.py 1047.
_SAVE = re.compile(r"Saving checkpoint for step (\d+)\.\.\.")
# grpo.py 3703, sft.py 612, dpo.py 755, rm.py 690, distillation.py 1091:
# print("\n📊 Training Results:").
_RESULTS = "📊 Training Results:"
# print("\n⏱️  Timing:") in the same functions, just after.
_TIMING = re.compile("⏱\ufe0f?  Timing:")
# The results' f"  • {label}: {value:.4f}" (a percent or " steps" after a few), e.g.
# grpo.py 3705-3717; async GRPO's f"  • Avg Trajectory Age: {age:.2f} steps" (grpo.py 5330).
_RESULT = re.compile(r"  • ([A-Za-z][\w ]*): (\S+?)(%| steps)?")
# f"  • Total step time: {total_time:.2f}s" and f"  • {k}: {v:.2f}s ({percent:.1f}%)".
_TOTAL_TIME = re.compile(r"  • Total step time: (\d+\.\d\d)s")
_TIMING_ITEM = re.compile(r"  • ([\w/.-]+): (\d+\.\d\d)s \(\d+\.\d%\)")
# examples/run_grpo.py: which GRPO trainer runs; distillation.py setup 469: its teacher.
_HINTS = {
    "🚀 Running async GRPO training": "async grpo",
    "🚀 Running synchronous GRPO training (legacy)": "grpo",
    "🚀 Running synchronous GRPO training (TransferQueue)": "grpo",
    "▶ Setting up teacher policy...": "distillation",
}
# examples/run_*.py: print("Final config:"); pprint.pprint(config): a top-level key per line.
_CONFIG_SECTION = re.compile(r"[{ ]'(grpo|sft|dpo|rm|distillation|ppo)': \{")
# Every algorithm's setup(): print(" " * 18 + "SETUP COMPLETE").
_SETUP_COMPLETE = " " * 18 + "SETUP COMPLETE"
# The lines worth a look, found by one scan of the text (a long log is mostly other lines):
# the above, and the lines that end a block (headers, ▶ progress lines).
_NEMO_RL_LINES = re.compile(
    r"^(?:={25} |Saving checkpoint|📊|⏱|🔍|  • |🚀|▶| {18}SETUP COMPLETE|[{ ]')[^\r\n]*",
    re.MULTILINE,
)

# A result's label -> the name NeMo RL's Logger gives the metric (log_metrics(prefix="train")),
# so that the log's values and TensorBoard's meet; (name, scale): the log prints a percent.
_RESULT_NAMES: dict[str, tuple[str, float]] = {
    "Loss": ("train/loss", 1.0),
    "Draft Loss": ("train/draft_loss", 1.0),
    "Generation KL Error": ("train/gen_kl_error", 1.0),
    "Avg Reward": ("train/reward", 1.0),
    "Avg Total Reward": ("train/reward", 1.0),  # dynamic sampling: metrics["reward"]
    "Avg Filtered Reward": ("train/filtered_reward", 1.0),
    "Mean Generation Length": ("train/mean_gen_tokens_per_sample", 1.0),
    "Buffer Size": ("train/buffer_size", 1.0),
    "Avg Trajectory Age": ("train/avg_trajectory_age", 1.0),
    "num valid samples": ("train/num_valid_samples", 1.0),  # rm.py 695
    "Policy Loss": ("train/loss", 1.0),  # ppo.py 1930
    "Critic Loss": ("train/critic/loss", 1.0),
    "Critic Grad Norm": ("train/critic/grad_norm", 1.0),
    "Critic LR": ("train/critic/lr", 1.0),
    "Critic Clip Frac": ("train/critic/vf_clipfrac", 1.0),
    "Training Model Floating Point Utilization": ("train/train_fp_utilization", 0.01),
}


def _result_name(label: str) -> tuple[str, float]:
    """dpo.py and rm.py print the metrics' own names (loss, sft_loss, accuracy, ...)."""
    return _RESULT_NAMES.get(label) or ("train/" + label.strip().replace(" ", "_"), 1.0)


def _nemo_rl_algorithm(labels: set[str], hint: str | None) -> str:
    """The algorithm, from the labels its Training Results print (hint: what its setup said)."""
    if labels & {"Buffer Size", "Avg Trajectory Age"}:
        return "async grpo"
    if labels & {"Policy Loss", "Critic Loss"}:
        return "ppo"
    if labels & {"Avg Reward", "Avg Total Reward", "Generation KL Error"}:
        return "async grpo" if hint == "async grpo" else "grpo"
    if labels & {"sft_loss", "preference_loss"}:
        return "dpo"
    if labels & {"num valid samples", "rewards_chosen_mean"}:
        return "rm"
    if "Mean Generation Length" in labels:
        return "distillation"
    if hint is not None:
        return hint
    return "sft" if "Loss" in labels else "nemo-rl"


class _NemoRLReader:
    def __init__(self) -> None:
        self.reading = LogReading(algorithm="nemo-rl")
        self.known = False
        self.block: str | None = None  # "results" or "timing": the block its lines belong to
        self.global_step: int | None = None
        self.labels: set[str] = set()
        self.hint: str | None = None
        self.config_hint: str | None = None

    def line(self, line: str) -> None:
        """One of the lines _NEMO_RL_LINES finds. Another than a result or timing ends its
        block."""
        if line.startswith("  • "):
            if self.block == "results":
                self._result(line)
            elif self.block == "timing":
                self._timing(line)
            return
        self.block = None
        if line.startswith("="):
            self._banner(line)
        elif line.startswith("Saving checkpoint"):
            if match := _SAVE.fullmatch(line):
                self.reading.saves.append(int(match[1]))
        elif line == _RESULTS:
            self.block = "results"
        elif _TIMING.fullmatch(line):
            self.block = "timing"
        else:
            self._setup(line)

    def _setup(self, line: str) -> None:
        """The lines before the steps that say which driver and algorithm this is."""
        if line in _HINTS:
            self.hint, self.known = _HINTS[line], True
        elif line == _SETUP_COMPLETE:
            self.known = True
        elif self.config_hint is None and (match := _CONFIG_SECTION.match(line)):
            self.config_hint = match[1]

    def _banner(self, line: str) -> None:
        match = _BANNER.fullmatch(line)
        if match is None:
            return
        self.known, self.block = True, None
        number, of = int(match[2]), int(match[3])
        reading = self.reading
        if match[1] == "Epoch":
            reading.epoch, reading.epochs = number, of
            return
        reading.step, reading.total, reading.step_finished = number, of, False
        # A later epoch runs only when max_num_steps exceeds the dataloader's length, so its N is
        # that length: the global step is (epoch - 1) * N + k.
        self.global_step = (reading.epoch - 1) * of + number if reading.epoch else number

    def _result(self, line: str) -> None:
        match = _RESULT.fullmatch(line)
        if match is None:
            return
        label, value = match[1], _number(match[2])
        name, scale = _result_name(label)
        self.labels.add(label)
        self.reading.record(name, self.global_step, None if value is None else value * scale)

    def _timing(self, line: str) -> None:
        if match := _TOTAL_TIME.fullmatch(line):
            seconds = float(match[1])
            self.reading.step_seconds.append(seconds)
            self.reading.step_finished = True
            self.reading.record("timing/train/total_step_time", self.global_step, seconds)
        elif match := _TIMING_ITEM.fullmatch(line):
            self.reading.record(f"timing/train/{match[1]}", self.global_step, float(match[2]))

    def result(self) -> LogReading | None:
        if not self.known:
            return None
        self.reading.algorithm = _nemo_rl_algorithm(self.labels, self.hint or self.config_hint)
        return self.reading


def read_nemo_rl(text: str) -> LogReading | None:
    """A NeMo RL driver's log; None without a step banner, a trainer's 🚀 line or SETUP COMPLETE."""
    reader = _NemoRLReader()
    for match in _NEMO_RL_LINES.finditer(text):
        reader.line(match[0])
    return reader.result()


# ---- tiny-rl ----------------------------------------------------------------------------------

# tiny_rl/run.py Run.__init__: say(f"{algo}: config {self.config_path}, logs {self.exp_dir}").
_TINY_START = re.compile(r"(grpo|sft): config .+, logs .+")
# tiny_rl/grpo.py main: f"step {step}/{max_steps}: reward {r:.3f} loss {l:+.4f} logprob
# error {e:.1e} | {step_s:.2f} s (generation {g:.2f}, training {t:.2f}, weight sync {w:.2f}
# [, judge {j:.2f}])"
_TINY_GRPO_STEP = re.compile(
    r"step (\d+)/(\d+): reward (\S+) loss (\S+) logprob error (\S+) \| (\d+\.\d\d) s "
    r"\(generation (\d+\.\d\d), training (\d+\.\d\d), weight sync (\d+\.\d\d)"
    r"(?:, judge (\d+\.\d\d))?\)"
)
# tiny_rl/sft.py main: f"step {step}/{max_steps}: loss {loss:.4f} | {step_s:.2f} s
# (training {t:.2f})"
_TINY_SFT_STEP = re.compile(
    r"step (\d+)/(\d+): loss (\S+) \| (\d+\.\d\d) s \(training (\d+\.\d\d)\)"
)
# tiny_rl/run.py Run.save: say(f"saved {final} ({seconds:.2f} s)"), final = <root>/step_<k>.
_TINY_SAVED = re.compile(r"saved .*/step_(\d+) \(\d+\.\d\d s\)")
_TINY_RL_LINES = re.compile(r"^(?:step \d|saved |grpo: |sft: )[^\r\n]*", re.MULTILINE)
# The names tiny-rl's metrics.jsonl gives the values (tiny_rl/grpo.py and sft.py `values`).
_TINY_GRPO_NAMES = (
    "reward",
    "loss",
    "logprob_error",
    "step_s",
    "generation_s",
    "training_s",
    "weight_sync_s",
    "judge_s",
)
_TINY_SFT_NAMES = ("loss", "step_s", "training_s")


def _tiny_rl_step(reading: LogReading, match: re.Match[str], names: tuple[str, ...]) -> None:
    """A step line, printed once the step (its save included) has finished."""
    step = int(match[1])
    reading.step, reading.total, reading.step_finished = step, int(match[2]), True
    for name, text in zip(names, match.groups()[2:], strict=True):
        reading.record(name, step, None if text is None else _number(text))
    reading.step_seconds.append(float(match[3 + names.index("step_s")]))


def read_tiny_rl(text: str) -> LogReading | None:
    """A tiny-rl driver's log; None without its start line or a step line of its own."""
    algorithm: str | None = None
    reading = LogReading(algorithm="")
    for found in _TINY_RL_LINES.finditer(text):
        line = found[0]
        if line.startswith("step "):
            if match := _TINY_GRPO_STEP.fullmatch(line):
                algorithm = "grpo"
                _tiny_rl_step(reading, match, _TINY_GRPO_NAMES)
            elif match := _TINY_SFT_STEP.fullmatch(line):
                algorithm = "sft"
                _tiny_rl_step(reading, match, _TINY_SFT_NAMES)
        elif line.startswith("saved "):
            if match := _TINY_SAVED.fullmatch(line):
                reading.saves.append(int(match[1]))
        elif match := _TINY_START.fullmatch(line):
            algorithm = match[1]
    if algorithm is None:
        return None
    reading.algorithm = f"tiny-rl {algorithm}"
    return reading
