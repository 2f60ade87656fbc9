"""The Ray actors: FSDP2 training ranks and tensor-parallel generation ranks.

Each group of actors is one torch.distributed world of its own: NCCL where the actor has a
GPU, gloo on the CPU otherwise. Rank 0 of a group picks the rendezvous address on its node.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import ray
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from tiny_rl.model import ModelConfig, ShardedForward, build, token_logprobs


def device() -> torch.device:
    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


class Member:
    """What every actor has: where it runs, and how it joins its group."""

    def where(self) -> dict[str, Any]:
        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "pid": os.getpid(),
            "python": sys.executable,
        }

    def rendezvous(self) -> str:
        """An address on this node other ranks can reach (called on rank 0 only)."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, address: str, rank: int, world: int) -> str:
        dev = device()
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=address, rank=rank, world_size=world)
        self.rank, self.world, self.dev = rank, world, dev
        return backend


class TrainWorker(Member):
    """One FSDP2 rank: the policy sharded over every training rank (`fully_shard` per block,
    then the root), AdamW on the shards, a clipped policy-gradient (GRPO) or NLL (SFT) step."""

    def setup(self, model: dict[str, Any], seed: int, lr: float, weight_decay: float) -> None:
        self.model_cfg = ModelConfig.from_cfg(model)
        mesh = init_device_mesh(self.dev.type, (self.world,))
        policy = build(self.model_cfg, seed).to(self.dev)
        for block in policy.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(policy, mesh=mesh)
        self.policy = policy
        self.optim = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)

    def logprobs(self, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
        with torch.no_grad():
            logits = self.policy(tokens.to(self.dev))
        return token_logprobs(logits, tokens.to(self.dev), prompt_len).cpu()

    def grpo_step(
        self,
        tokens: torch.Tensor,
        prompt_len: int,
        advantages: torch.Tensor,
        old_logprobs: torch.Tensor,
        clip: float,
        max_grad_norm: float,
    ) -> dict[str, float]:
        tokens, adv = tokens.to(self.dev), advantages.to(self.dev).unsqueeze(-1)
        logp = token_logprobs(self.policy(tokens), tokens, prompt_len)
        ratio = torch.exp(logp - old_logprobs.to(self.dev))
        clipped = torch.clamp(ratio, 1 - clip, 1 + clip)
        loss = -torch.minimum(ratio * adv, clipped * adv).mean()
        return self._step(loss, max_grad_norm)

    def sft_step(
        self, tokens: torch.Tensor, prompt_len: int, max_grad_norm: float
    ) -> dict[str, float]:
        tokens = tokens.to(self.dev)
        loss = -token_logprobs(self.policy(tokens), tokens, prompt_len).mean()
        return self._step(loss, max_grad_norm)

    def _step(self, loss: torch.Tensor, max_grad_norm: float) -> dict[str, float]:
        self.optim.zero_grad()
        loss.backward()  # FSDP2 reduce-scatters the gradients to their shards
        norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_grad_norm)
        self.optim.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        return {"loss": mean.item() / self.world, "grad_norm": float(norm.full_tensor())}

    def full_weights(self) -> dict[str, torch.Tensor] | None:
        """Every rank gathers; rank 0 returns the whole policy on the CPU, the others None."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        weights = get_model_state_dict(self.policy, options=options)
        return weights if self.rank == 0 else None

    def save(self, path: str) -> None:
        """Rank 0 writes the full weights and optimizer state under `path` (a tmp_step_N dir)."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        weights = get_model_state_dict(self.policy, options=options)
        optim = get_optimizer_state_dict(self.policy, self.optim, options=options)
        if self.rank == 0:
            Path(path).mkdir(parents=True, exist_ok=True)
            for name, obj in (("weights.pt", weights), ("optimizer.pt", optim)):
                with open(Path(path) / name, "wb") as out:
                    torch.save(obj, out)
                    out.flush()
                    os.fsync(out.fileno())
        dist.barrier()

    def load(self, path: str) -> None:
        """Rank 0 reads the checkpoint and broadcasts it to every rank's shards."""
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        weights: dict[str, Any] = {}
        optim: dict[str, Any] = {}
        if self.rank == 0:
            weights = torch.load(Path(path) / "weights.pt", weights_only=True)
            optim = torch.load(Path(path) / "optimizer.pt", weights_only=True)
        set_model_state_dict(self.policy, weights, options=options)
        set_optimizer_state_dict(self.policy, self.optim, optim, options=options)


class GenerationWorker(Member):
    """One tensor-parallel rank of a generation engine. Every rank of an engine is called with
    the same prompts and seed, computes its shard and all-reduces, so all ranks sample the same
    tokens; the driver reads rank 0's."""

    def setup(self, model: dict[str, Any]) -> None:
        self.model_cfg = ModelConfig.from_cfg(model)
        group = self.world

        def reduce(partial: torch.Tensor) -> torch.Tensor:
            if group > 1:
                dist.all_reduce(partial)
            return partial

        self.forward = ShardedForward(self.model_cfg, self.rank, self.world, reduce)
        self.version = -1

    def update_weights(self, weights: dict[str, torch.Tensor], version: int) -> float:
        start = time.perf_counter()
        self.forward.load({k: v.to(self.dev) for k, v in weights.items()})
        self.version = version
        return time.perf_counter() - start

    def generate(
        self, prompts: torch.Tensor, new_tokens: int, temperature: float, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Sample `new_tokens` after each prompt; (tokens, their logprobs, weights version)."""
        rng = torch.Generator(device=self.dev).manual_seed(seed)
        tokens = prompts.to(self.dev)
        logps = []
        with torch.no_grad():
            for _ in range(new_tokens):
                logits = self.forward(tokens)[:, -1].float() / temperature
                logp = torch.log_softmax(logits, dim=-1)
                nxt = torch.multinomial(logp.exp(), 1, generator=rng)
                logps.append(logp.gather(-1, nxt))
                tokens = torch.cat([tokens, nxt], dim=1)
        return tokens.cpu(), torch.cat(logps, dim=1).cpu(), self.version

    def logprobs(self, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
        with torch.no_grad():
            logits = self.forward(tokens.to(self.dev))
        return token_logprobs(logits, tokens.to(self.dev), prompt_len).cpu()
