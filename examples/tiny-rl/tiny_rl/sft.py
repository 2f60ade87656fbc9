"""SFT: the training half alone. Each step takes `policy.train_global_batch_size` solved examples
of the toy task (made from the seed and the step), split over the FSDP2 ranks; the loss is the
answer tokens' negative log-likelihood."""

from __future__ import annotations

import math
import time
from pathlib import Path

import ray

from tiny_rl import task
from tiny_rl.metrics import say
from tiny_rl.run import Run


def main(argv: list[str], default_config: Path) -> int:
    run = Run(argv, default_config, "sft")
    batch_size = int(run.cfg["policy"]["train_global_batch_size"])
    max_grad_norm = float(run.cfg["policy"]["max_grad_norm"])
    length = int(run.cfg["data"]["prompt_length"])
    vocab = int(run.model["vocab_size"])
    train = run.workers.train
    step, saved = run.step, run.step > 0
    while step < run.max_steps:
        if run.out_of_time(step, saved, {"algo": "sft"}):
            return 0
        step += 1
        began = time.perf_counter()
        examples = task.solved(task.prompts(run.seed, step, batch_size, length, vocab))
        shards = run.split(examples, len(train), "policy.train_global_batch_size")
        results = ray.get(
            [
                a.sft_step.remote(s, length, max_grad_norm)
                for a, s in zip(train, shards, strict=True)
            ]
        )
        training_s = time.perf_counter() - began
        saved = run.ckpt.due(step, step == run.max_steps)
        save_s = run.save(step, {"algo": "sft", "loss": results[0]["loss"]}) if saved else 0.0
        step_s = time.perf_counter() - began
        run.timer.mark_iteration()
        loss = results[0]["loss"]
        run.metrics.log(
            step,
            {
                "loss": loss,
                "answer_prob": math.exp(-loss),  # per answer token, geometric mean
                "grad_norm": results[0]["grad_norm"],
                "step_s": step_s,
                "training_s": training_s,
                "checkpoint_s": save_s,
            },
        )
        say(
            f"step {step}/{run.max_steps}: loss {loss:.4f} | {step_s:.2f} s "
            f"(training {training_s:.2f})"
        )
    say(f"done: {run.max_steps} steps")
    return 0
