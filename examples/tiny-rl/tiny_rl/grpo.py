"""GRPO, every step: generate on the engines, score, group-relative advantages, a clipped
policy-gradient update on the FSDP2 ranks, then push the new weights to every engine.

Scoring is `task.reward` in this process, or, when `tiny_rl.judge_url` is set, the judge at that
URL (tiny_rl/judge.py: an OpenAI-compatible server, say a model pool behind its balancer), one
request per sample; the time it takes is logged as `judge_s`.

Before each update, training recomputes the log-probabilities of what the engines sampled; the
two must agree (they run the same weights, one sharded for FSDP2, one split for TP), which
checks the last weight push. Their largest gap is logged as `logprob_error`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import ray
import torch

from tiny_rl import task
from tiny_rl.config import fail
from tiny_rl.judge import Client, JudgeError
from tiny_rl.metrics import say
from tiny_rl.run import Run

# Generation and training compute the same function in a different order (TP partial sums);
# float32 keeps their log-probabilities this close. A bad push is off by whole units.
LOGPROB_TOLERANCE = 1e-3


def main(argv: list[str], default_config: Path) -> int:
    run = Run(argv, default_config, "grpo")
    grpo, gen_cfg = run.section, run.cfg["policy"]["generation"]
    prompts_per_step = int(grpo["num_prompts_per_step"])
    group = int(grpo["num_generations_per_prompt"])
    clip = float(run.cfg["loss_fn"]["ratio_clip_max"])
    max_grad_norm = float(run.cfg["policy"]["max_grad_norm"])
    length = int(run.cfg["data"]["prompt_length"])
    vocab = int(run.model["vocab_size"])
    temperature = float(gen_cfg.get("temperature", 1.0))
    if temperature != 1.0:
        fail(f"policy.generation.temperature={temperature}: tiny-rl samples at 1.0 only")
    judge = connect_judge((run.cfg.get("tiny_rl") or {}).get("judge_url"))
    train, engines = run.workers.train, run.workers.engines
    step = run.step
    push(engines, train, step)
    saved = step > 0
    while step < run.max_steps:
        if run.out_of_time(step, saved, {"algo": "grpo"}):
            return 0
        step += 1
        began = time.perf_counter()
        batch = task.prompts(run.seed, step, prompts_per_step, length, vocab).repeat_interleave(
            group, 0
        )

        t = time.perf_counter()
        tokens, gen_logprobs = generate(engines, batch, length, run.seed * 7919 + step)
        generation_s = time.perf_counter() - t
        t = time.perf_counter()
        rewards = score(judge, tokens, length)
        judge_s = time.perf_counter() - t if judge else 0.0
        adv = task.advantages(rewards, group)

        t = time.perf_counter()
        key = "grpo.num_prompts_per_step x num_generations_per_prompt"
        shards = run.split(tokens, len(train), key)
        old = torch.cat(
            ray.get([a.logprobs.remote(s, length) for a, s in zip(train, shards, strict=True)])
        )
        error = float((old - gen_logprobs).abs().max())
        if error > LOGPROB_TOLERANCE:
            raise RuntimeError(
                f"step {step}: generation and training disagree on log-probabilities "
                f"by {error:.3g} "
                f"(tolerance {LOGPROB_TOLERANCE}): the weights on the engines are not the policy's"
            )
        parts = zip(train, shards, adv.chunk(len(train)), old.chunk(len(train)), strict=True)
        results = ray.get(
            [a.grpo_step.remote(s, length, ad, o, clip, max_grad_norm) for a, s, ad, o in parts]
        )
        training_s = time.perf_counter() - t

        sync_s = push(engines, train, step)
        saved = run.ckpt.due(step, step == run.max_steps)
        save_s = run.save(step, {"algo": "grpo", "reward": float(rewards.mean())}) if saved else 0.0
        step_s = time.perf_counter() - began
        run.timer.mark_iteration()
        values = {
            "reward": float(rewards.mean()),
            "loss": results[0]["loss"],
            "grad_norm": results[0]["grad_norm"],
            "logprob_error": error,
            "step_s": step_s,
            "generation_s": generation_s,
            "training_s": training_s,
            "weight_sync_s": sync_s,
            "checkpoint_s": save_s,
            "judge_s": judge_s,
        }
        run.metrics.log(step, values)
        say(
            f"step {step}/{run.max_steps}: reward {values['reward']:.3f} "
            f"loss {values['loss']:+.4f} "
            f"logprob error {error:.1e} | {step_s:.2f} s (generation {generation_s:.2f}, "
            f"training {training_s:.2f}, weight sync {sync_s:.2f}"
            f"{f', judge {judge_s:.2f}' if judge else ''})"
        )
    final = check_push(engines, train, run, length, vocab)
    say(
        f"done: {run.max_steps} steps; generation matches training after the last push "
        f"({final:.1e})"
    )
    return 0


def connect_judge(url: str | None) -> Client | None:
    """The judge at tiny_rl.judge_url, once it answers; None (task.reward here) when unset."""
    if url is None:
        say("rewards: task.reward, in this process (tiny_rl.judge_url is null)")
        return None
    try:
        judge = Client(str(url))
        model = judge.model()
    except JudgeError as err:
        fail(str(err))
    say(f"rewards: from the judge {model} at {judge.url}, one request per sample")
    return judge


def score(judge: Client | None, tokens: torch.Tensor, length: int) -> torch.Tensor:
    if judge is None:
        return task.reward(tokens, length)
    prompts, answers = tokens[:, :length].tolist(), tokens[:, length : 2 * length].tolist()
    pairs = list(zip(prompts, answers, strict=True))
    try:
        return torch.tensor(judge.scores(pairs), dtype=torch.float32)
    except JudgeError as err:
        fail(str(err))


def generate(
    engines: list[list[Any]], batch: torch.Tensor, length: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each engine takes a slice of the batch; all its TP ranks run it, rank 0's output is read."""
    parts = batch.tensor_split(len(engines))
    calls = [
        [r.generate.remote(p, length, 1.0, seed + i) for r in e]
        for i, (e, p) in enumerate(zip(engines, parts, strict=True))
    ]
    outs = [ray.get(c) for c in calls]
    for i, ranks in enumerate(outs):
        if any(not torch.equal(ranks[0][0], r[0]) for r in ranks[1:]):
            raise RuntimeError(f"generation engine {i}: its TP ranks sampled different tokens")
    return torch.cat([o[0][0] for o in outs]), torch.cat([o[0][1] for o in outs])


def push(engines: list[list[Any]], train: list[Any], version: int) -> float:
    """The policy's full weights (gathered from the FSDP2 shards) to every generation rank."""
    t = time.perf_counter()
    refs = [a.full_weights.remote() for a in train]
    ray.get(refs[1:])
    ray.get([r.update_weights.remote(refs[0], version) for e in engines for r in e])
    return time.perf_counter() - t


def check_push(
    engines: list[list[Any]], train: list[Any], run: Run, length: int, vocab: int
) -> float:
    probe = task.solved(task.prompts(run.seed, 0, len(train) * 2, length, vocab))
    shards = probe.chunk(len(train))
    trained = torch.cat(
        ray.get([a.logprobs.remote(s, length) for a, s in zip(train, shards, strict=True)])
    )
    served = torch.cat([ray.get([r.logprobs.remote(probe, length) for r in e])[0] for e in engines])
    error = float((served.view(len(engines), *trained.shape) - trained).abs().max())
    if error > LOGPROB_TOLERANCE:
        raise RuntimeError(f"after the last push generation and training differ by {error:.3g}")
    return error
