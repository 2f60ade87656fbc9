"""Writes the driver logs beside it (python make_logs.py): NeMo RL's and tiny-rl's own print
statements, their f-strings copied as they are, with plausible values. NeMo RL at
NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909; each writer names the lines it copies.
tiny-rl: examples/tiny-rl/tiny_rl/{run,grpo,sft}.py of this repository."""

from __future__ import annotations

import pprint
from pathlib import Path

HERE = Path(__file__).parent
NEMO = "NVIDIA-NeMo/RL@7ea279a"


def header(out: list[str], *sources: str) -> None:
    out.append("# Written by make_logs.py; it follows " + "; ".join(sources) + ".")


def config_and_setup(out: list[str], algo: str, log_dir: str) -> None:
    """examples/run_<algo>.py main() (Final config, pprint) and setup()'s SETUP COMPLETE."""
    out.append("Loaded configuration from: examples/configs/x.yaml")
    out.append("Final config:")
    config = {
        "checkpointing": {"enabled": True, "save_period": 2},
        algo: {"max_num_epochs": 2, "max_num_steps": 1000000, "val_period": 10},
        "logger": {"log_dir": log_dir, "tensorboard_enabled": True},
    }
    out.extend(pprint.pformat(config).splitlines())
    out.append(f"📊 Using log directory: {log_dir}")
    out.append("\n▶ Setting up compute cluster...")
    out.append("  ✓ Ray cluster initialized with 1 nodes")
    out.append("\n" + "=" * 60)
    out.append(" " * 18 + "SETUP COMPLETE")
    out.append("=" * 60 + "\n")


def epoch(out: list[str], current_epoch: int, max_num_epochs: int) -> None:
    out.append(f"\n{'=' * 25} Epoch {current_epoch + 1}/{max_num_epochs} {'=' * 25}")


def step_banner(out: list[str], current_step: int, steps: int) -> None:
    out.append(f"\n{'=' * 25} Step {current_step + 1}/{steps} {'=' * 25}")


def save(out: list[str], total_steps: int) -> None:
    out.append(f"Saving checkpoint for step {total_steps + 1}...")


def timing(out: list[str], timing_metrics: dict[str, float]) -> None:
    """The ⏱️ Timing block as every algorithm prints it (e.g. grpo.py 3721-3742)."""
    out.append("\n⏱️  Timing:")
    total_time = timing_metrics.get("total_step_time", 0)
    out.append(f"  • Total step time: {total_time:.2f}s")
    for k, v in sorted(timing_metrics.items(), key=lambda item: item[1], reverse=True):
        if k != "total_step_time":
            percent = (v / total_time * 100) if total_time > 0 else 0
            out.append(f"  • {k}: {v:.2f}s ({percent:.1f}%)")


def performance(out: list[str]) -> None:
    """algorithms/utils.py print_performance_metrics: its own '  • ' lines, not results."""
    out.append("\n🔍 Performance Metrics:")
    out.append(f"  • Mean Total Tokens per Sample: {612.25:.2f}")
    out.append("  • Throughputs (per GPU):")
    out.append(f"    - E2E (Samples/sec/gpu): {1.23:.2f}")


def grpo_step(
    out: list[str], total_steps: int, reward: float, loss: float, seconds: float, saves: bool
) -> None:
    """grpo.py grpo_train: generation prints, the save (3575) before the logging, 📊 Training
    Results (3703-3717), Timing."""
    out.append("▶ Preparing batch...")
    out.append(f"▶ Generating responses for batch of size {64}...")
    out.append("(VllmGenerationWorker pid=4242) INFO 08-22 17:39:06 Processed prompts: 100%")
    out.append("▶ Processing rewards...,")
    out.append("▶ Computing advantages...")
    out.append("▶ Training policy...")
    if saves:
        save(out, total_steps)
    out.append(f"Logged data to /results/logs/exp_001/train_data_step{total_steps + 1}.jsonl")
    metrics = {"loss": loss, "gen_kl_error": 0.0012}
    out.append("\n📊 Training Results:")
    out.append(f"  • Loss: {metrics['loss']:.4f}")
    out.append(f"  • Generation KL Error: {metrics['gen_kl_error']:.4f}")
    out.append(f"  • Avg Reward: {reward:.4f}")
    out.append(f"  • Mean Generation Length: {201.5:.4f}")
    timing(
        out,
        {
            "total_step_time": seconds,
            "generation": seconds * 0.6,
            "policy_training": seconds * 0.3,
            "prepare_for_generation/total": seconds * 0.05,
        },
    )
    performance(out)


def write_grpo() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} examples/run_grpo.py _select_trainer (🚀 line), nemo_rl/algorithms/grpo.py "
        "grpo_train: Epoch banner 2803, Step banner 2823, 'Saving checkpoint' 3575, "
        "Training Results 3703-3717, Timing 3721-3742; utils.py print_performance_metrics",
    )
    config_and_setup(out, "grpo", "/results/logs/exp_001")
    out.append("🚀 Running synchronous GRPO training (legacy)")
    total_steps = 0
    for current_epoch in range(2):
        epoch(out, current_epoch, 2)
        for current_step in range(3):
            step_banner(out, current_step, min(3, 1000000))
            if total_steps == 3:  # the first step of epoch 2 stops at the log's end
                out.append("▶ Preparing batch...")
                out.append(f"▶ Generating responses for batch of size {64}...")
                break
            reward = 0.2 + 0.1 * total_steps
            saves = (total_steps + 1) % 2 == 0
            grpo_step(out, total_steps, reward, -0.01 * total_steps, 30.0 + total_steps, saves)
            total_steps += 1
        else:
            continue
        break
    (HERE / "grpo.log").write_text("\n".join(out) + "\n")


def write_grpo_resumed() -> None:
    """Two tries in one ray-driver.log (driver.sh appends): the first saves step 2, finishes
    step 3 and dies in step 4; the second resumes from step 2 (grpo_save_state.current_step
    == 2) and prints 'Step 3/5' first."""
    out: list[str] = []
    header(
        out,
        f"{NEMO} nemo_rl/algorithms/grpo.py grpo_train (Step banner 2823 with current_step "
        "restored from the checkpoint's grpo_save_state, 'Saving checkpoint' 3575, "
        "Training Results 3703-3717, Timing 3721-3742); a requeued job appends to the log",
    )
    config_and_setup(out, "grpo", "/results/logs/exp_001")
    out.append("🚀 Running synchronous GRPO training (legacy)")
    epoch(out, 0, 1)
    for total_steps in range(3):
        step_banner(out, total_steps, 5)
        grpo_step(out, total_steps, 0.1 * (total_steps + 1), 0.5, 20.0, total_steps == 1)
    step_banner(out, 3, 5)
    out.append("▶ Preparing batch...")
    out.append("slurmstepd: error: *** JOB 101 ON node-1 CANCELLED DUE TO PREEMPTION ***")
    config_and_setup(out, "grpo", "/results/logs/exp_002")
    out.append("🚀 Running synchronous GRPO training (legacy)")
    epoch(out, 0, 1)
    for total_steps in range(2, 4):
        step_banner(out, total_steps, 5)
        grpo_step(out, total_steps, 0.5 + 0.1 * total_steps, 0.25, 40.0, total_steps == 3)
    (HERE / "grpo_resumed.log").write_text("\n".join(out) + "\n")


def write_async_grpo() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} examples/run_grpo.py ('🚀 Running async GRPO training'), nemo_rl/algorithms/"
        "grpo.py async_grpo_train: 🚀 Starting 4311, Step banner 4517, 'Saving checkpoint' "
        "5189, Training Results 5323-5330, Timing 5332-5339; utils.py print_efficiency_summary",
    )
    config_and_setup(out, "grpo", "/results/logs/exp_001")
    out.append("🚀 Running async GRPO training")
    out.append(
        f"🚀 Starting async GRPO training with buffer_size={512}, "
        f"max_age={1} steps, "
        f"max_generation_failures={8}"
    )
    out.append(f"✅ Buffer ready for step {0}! Starting training loop...")
    for step in range(3):
        out.append(f"\n{'=' * 25} Step {step + 1}/{10} {'=' * 25}")
        out.append("📦 Sampling from replay buffer...")
        if step == 1:
            out.append(f"Saving checkpoint for step {step + 1}...")
        out.append("\n📊 Training Results:")
        out.append(f"  • Loss: {0.0123 * (step + 1):.4f}")
        out.append(f"  • Generation KL Error: {0.001:.4f}")
        out.append(f"  • Avg Reward: {0.3 + 0.2 * step:.4f}")
        out.append(f"  • Buffer Size: {256}")
        out.append(f"  • Avg Trajectory Age: {0.5:.2f} steps")
        out.append("\n⏱️  Timing:")
        total_time = 12.0 + step
        out.append(f"  • Total step time: {total_time:.2f}s")
        out.append(f"  • policy_training: {total_time / 2:.2f}s ({50.0:.1f}%)")
        out.append(f"\n📊 Efficiency Summary (Step {step + 1}):")
        out.append(f"  {'Category':<35} {'Time (s)':>10} {'% of Wall':>10}")
        out.append(f"  {'idle/buffer_starvation':<35} {1.5:>10.2f} {3.1:>9.2f}%")
    (HERE / "grpo_async.log").write_text("\n".join(out) + "\n")


def write_sft() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} nemo_rl/algorithms/sft.py sft_train: Epoch banner 435, Step banner 438-440, "
        "'Saving checkpoint' 583, Training Results 612-628 (with the FLOPS lines), "
        "Timing 630-641",
    )
    config_and_setup(out, "sft", "/results/logs/exp_001")
    total_steps = 0
    for current_epoch in range(2):
        epoch(out, current_epoch, 2)
        for current_step in range(2):
            step_banner(out, current_step, min(2, 1000000))
            out.append("▶ Preparing batch...")
            out.append("▶ Taking a training step...")
            if (total_steps + 1) % 2 == 0:
                save(out, total_steps)
            out.append("\n📊 Training Results:")
            out.append(f"  • Loss: {float(1.5 - 0.25 * total_steps):.4f}")
            total_tflops, num_ranks = 812.5, 8
            out.append(
                f"  • Training FLOPS: {total_tflops:.2f} TFLOPS "
                f"({total_tflops / num_ranks:.2f} TFLOPS per rank)"
            )
            out.append(f"  • Training Model Floating Point Utilization: {100 * 0.41:.2f}%")
            timing(out, {"total_step_time": 8.0, "policy_training": 7.5, "data_processing": 0.5})
            total_steps += 1
    (HERE / "sft.log").write_text("\n".join(out) + "\n")


def write_dpo() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} nemo_rl/algorithms/dpo.py dpo_train: Step banner 587-589, 'Saving checkpoint' "
        "726, Training Results 755-757 (DPOValMetrics' fields), Timing 774-785",
    )
    config_and_setup(out, "dpo", "/results/logs/exp_001")
    epoch(out, 0, 1)
    names = [
        "loss",
        "sft_loss",
        "preference_loss",
        "accuracy",
        "rewards_chosen_mean",
        "rewards_rejected_mean",
        "num_valid_samples",
        "global_valid_seqs",
        "global_valid_toks",
    ]
    for total_steps in range(3):
        step_banner(out, total_steps, min(150, 3))
        out.append("▶ Taking a training step...")
        if total_steps == 2:
            save(out, total_steps)
        metrics = dict.fromkeys(names, 1.0)
        metrics["loss"] = 0.69 - 0.1 * total_steps
        metrics["accuracy"] = 0.5 + 0.1 * total_steps
        out.append("\n📊 Training Results:")
        out.extend(f"  • {metric_name}: {float(metrics[metric_name]):.4f}" for metric_name in names)
        timing(out, {"total_step_time": 4.0 + total_steps, "policy_training": 3.0})
    (HERE / "dpo.log").write_text("\n".join(out) + "\n")


def write_rm() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} nemo_rl/algorithms/rm.py rm_train: Step banner 526-528, 'Saving checkpoint' "
        "661, Training Results 690-695 (RMValMetrics' fields), Timing 697-708",
    )
    config_and_setup(out, "rm", "/results/logs/exp_001")
    epoch(out, 0, 1)
    names = ["loss", "accuracy", "rewards_chosen_mean", "rewards_rejected_mean"]
    for total_steps in range(2):
        step_banner(out, total_steps, 4)
        out.append("▶ Taking a training step...")
        out.append("\n📊 Training Results:")
        for metric_name in [*names, "num_valid_samples"]:
            value = 0.6 - 0.05 * total_steps if metric_name == "loss" else 64.0
            if metric_name != "num_valid_samples":
                out.append(f"  • {metric_name}: {float(value):.4f}")
            else:
                out.append(f"  • num valid samples: {float(value):.0f}")
        timing(out, {"total_step_time": 6.5, "policy_training": 6.0})
    (HERE / "rm.log").write_text("\n".join(out) + "\n")


def write_distillation() -> None:
    out: list[str] = []
    header(
        out,
        f"{NEMO} nemo_rl/algorithms/distillation.py: setup 469 (teacher), distillation_train "
        "Epoch banner 761, Step banner 767, 'Saving checkpoint' 1047, Training Results "
        "1091-1096, Timing 1116-1140",
    )
    config_and_setup(out, "distillation", "/results/logs/exp_001")
    out.append("\n▶ Setting up teacher policy...")
    epoch(out, 0, 1)
    for total_steps in range(2):
        step_banner(out, total_steps, min(100, 20))
        out.append("▶ Preparing batch...")
        out.append("▶ Computing teacher logprobs...")
        if total_steps == 1:
            out.append(f"Saving checkpoint for step {total_steps + 1}...")
        out.append("\n📊 Training Results:")
        out.append(f"  • Loss: {0.8 - 0.1 * total_steps:.4f}")
        out.append(f"  • Mean Generation Length: {512.0:.4f}")
        timing(out, {"total_step_time": 50.0, "generation": 30.0, "policy_training": 15.0})
    (HERE / "distillation.log").write_text("\n".join(out) + "\n")


def write_tiny_rl() -> None:
    """tiny_rl/run.py (config, resumed, saved lines), grpo.py main (step line), sft.py main."""
    out: list[str] = []
    header(out, "tiny_rl/run.py Run.__init__, _resume, save; tiny_rl/grpo.py main")
    out.append("grpo: config /work/tiny.yaml, logs /results/logs/exp_002")
    out.append("placement: 2 FSDP2 training rank(s) (nccl), no generation; every GPU ...")
    out.append("resumed from /results/ckpt/grpo/step_95 (step 95)")
    for step in range(96, 99):
        if step == 97:
            out.append(f"saved /results/ckpt/grpo/step_{step} ({0.15:.2f} s)")
        error, step_s, generation_s, training_s, sync_s = 0.0, 0.2 + step / 1000, 0.02, 0.09, 0.09
        values = {"reward": 0.5 + (step - 96) * 0.25, "loss": -0.00001}
        out.append(
            f"step {step}/{100}: reward {values['reward']:.3f} "
            f"loss {values['loss']:+.4f} "
            f"logprob error {error:.1e} | {step_s:.2f} s (generation {generation_s:.2f}, "
            f"training {training_s:.2f}, weight sync {sync_s:.2f}"
            f"{f', judge {0.05:.2f}' if step == 98 else ''})"
        )
    (HERE / "tiny_rl_grpo.log").write_text("\n".join(out) + "\n")
    out = []
    header(out, "tiny_rl/run.py Run.__init__ and save; tiny_rl/sft.py main")
    out.append("sft: config /work/tiny-sft.yaml, logs /results/logs/exp_001")
    for step in range(1, 4):
        loss, step_s, training_s = 2.0 / step, 0.5, 0.4
        if step == 2:
            out.append(f"saved /results/ckpt/sft/step_{step} ({0.31:.2f} s)")
        out.append(
            f"step {step}/{10}: loss {loss:.4f} | {step_s:.2f} s (training {training_s:.2f})"
        )
    (HERE / "tiny_rl_sft.log").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    write_grpo()
    write_grpo_resumed()
    write_async_grpo()
    write_sft()
    write_dpo()
    write_rm()
    write_distillation()
    write_tiny_rl()
