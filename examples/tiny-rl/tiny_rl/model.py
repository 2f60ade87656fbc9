"""The policy: a small decoder-only transformer, built in code with a seeded random init.

Training holds it as an `nn.Module` (sharded by FSDP2); generation runs the same math from a
full state dict split into tensor-parallel shards (`ShardedForward`), Megatron-style: attention
heads and the MLP's hidden units split over the TP ranks, one all-reduce after each half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    d_model: int
    heads: int
    layers: int
    max_len: int

    @classmethod
    def from_cfg(cls, model: dict[str, Any]) -> ModelConfig:
        return cls(
            vocab=int(model["vocab_size"]),
            d_model=int(model["hidden_size"]),
            heads=int(model["num_attention_heads"]),
            layers=int(model["num_layers"]),
            max_len=int(model["max_position_embeddings"]),
        )


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        x = x + self.proj(attention(q, k, v, self.heads))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        # A fresh tensor, not a view: FSDP2 hooks the root's output for the backward pass.
        return self.head(self.ln_f(x)).clone()


def build(cfg: ModelConfig, seed: int) -> TinyLM:
    """The same weights on every rank: the init is seeded."""
    torch.manual_seed(seed)
    return TinyLM(cfg)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """Causal self-attention over `heads` heads; (batch, seq, heads*dim) in and out."""
    b, s, width = q.shape
    split = [t.view(b, s, heads, width // heads).transpose(1, 2) for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*split, is_causal=True)
    return out.transpose(1, 2).reshape(b, s, width)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """Log-probabilities of the response tokens (positions prompt_len..end) under `logits`."""
    logp = torch.log_softmax(logits[:, prompt_len - 1 : -1].float(), dim=-1)
    return logp.gather(-1, tokens[:, prompt_len:].unsqueeze(-1)).squeeze(-1)


class ShardedForward:
    """TP rank `rank` of `size`: this rank's slice of every attention and MLP weight; the
    embeddings, norms and head are replicated. `reduce` sums a partial output over the group."""

    def __init__(self, cfg: ModelConfig, rank: int, size: int, reduce: Any) -> None:
        if cfg.heads % size:
            raise ValueError(
                f"policy.generation.vllm_cfg.tensor_parallel_size={size} must divide the "
                f"model's {cfg.heads} attention heads"
            )
        self.cfg, self.rank, self.size, self.reduce = cfg, rank, size, reduce
        self.params: dict[str, torch.Tensor] = {}

    def load(self, full: dict[str, torch.Tensor]) -> None:
        """Take this rank's shards of a full (unsharded) state dict."""
        d, r, n = self.cfg.d_model, self.rank, self.size
        cols = slice(r * d // n, (r + 1) * d // n)  # this rank's heads' columns
        hidden = slice(r * 4 * d // n, (r + 1) * 4 * d // n)
        params = {}
        for name, tensor in full.items():
            t = tensor.detach().to(torch.float32)
            if name.endswith("qkv.weight") or name.endswith("qkv.bias"):
                t = torch.cat([part[cols] for part in t.chunk(3, dim=0)])
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                t = t[:, cols] if "proj" in name else t[:, hidden]
            elif name.endswith("fc1.weight") or name.endswith("fc1.bias"):
                t = t[hidden]
            params[name] = t.contiguous()
        self.params = params

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        p, heads = self.params, self.cfg.heads // self.size
        x = p["tok.weight"][tokens] + p["pos.weight"][: tokens.shape[1]]
        for i in range(self.cfg.layers):
            w = f"blocks.{i}."
            h = F.layer_norm(x, (x.shape[-1],), p[w + "ln1.weight"], p[w + "ln1.bias"])
            q, k, v = F.linear(h, p[w + "qkv.weight"], p[w + "qkv.bias"]).chunk(3, dim=-1)
            x = x + self.reduce(F.linear(attention(q, k, v, heads), p[w + "proj.weight"]))
            x = x + p[w + "proj.bias"]
            h = F.layer_norm(x, (x.shape[-1],), p[w + "ln2.weight"], p[w + "ln2.bias"])
            h = F.gelu(F.linear(h, p[w + "fc1.weight"], p[w + "fc1.bias"]))
            x = x + self.reduce(F.linear(h, p[w + "fc2.weight"])) + p[w + "fc2.bias"]
        x = F.layer_norm(x, (x.shape[-1],), p["ln_f.weight"], p["ln_f.bias"])
        return F.linear(x, p["head.weight"], p["head.bias"])
