"""The toy task, verifiable and made in code: answer with the prompt's first token, repeated.

A prompt is `length` random tokens (1..vocab-1; 0 is never drawn); the answer is `length` tokens.
The reward is the fraction of answer tokens equal to the prompt's first one, so a random policy
scores about 1/vocab and one that learned the task (it must look back past the rest of the
prompt) scores 1.0. Prompts depend only on (seed,
step), so a resumed run sees the same data as an unbroken one.
"""

from __future__ import annotations

import torch


def prompts(seed: int, step: int, count: int, length: int, vocab: int) -> torch.Tensor:
    rng = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(1, vocab, (count, length), generator=rng)


def reward(tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
    return (tokens[:, prompt_len : 2 * prompt_len] == tokens[:, :1]).float().mean(dim=1)


def solved(batch: torch.Tensor) -> torch.Tensor:
    """SFT's examples: each prompt followed by its correct answer."""
    return torch.cat([batch, batch[:, :1].expand_as(batch)], dim=1)


def advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """GRPO: each sample's reward against its own prompt's group (mean 0, std 1 where the group's
    rewards differ)."""
    grouped = rewards.view(-1, group)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    return (centred / (grouped.std(dim=1, keepdim=True) + 1e-6)).view(-1)
