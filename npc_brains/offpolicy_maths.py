"""The off-policy learners' shared maths as small pure functions (each checked in tests/npc_brains/test_qmix*.py,
test_maddpg*.py): the exploration schedule, masked greedy and epsilon-greedy choice, TD(lambda) targets,
target-network updates and the straight-through Gumbel-softmax."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

GUMBEL_MASK = -1e10  # MADDPG: logit of an invalid action before the Gumbel-softmax (probability exactly 0)


def epsilon_at(joint_step: int, start: float, finish: float, anneal: int) -> float:
    """Linear schedule from `start` to `finish` over `anneal` joint steps, then flat (EPyMARL's)."""
    if anneal <= 0:
        return float(finish)
    frac = min(max(joint_step, 0) / anneal, 1.0)
    return float(start + frac * (finish - start))


def masked_argmax(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """argmax over the last axis among valid actions only (a row with no valid action picks 0)."""
    return torch.where(mask, q, torch.full_like(q, float("-inf"))).argmax(-1)


def masked_max(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return q.gather(-1, masked_argmax(q, mask).unsqueeze(-1)).squeeze(-1)


def epsilon_greedy(q: torch.Tensor, mask: torch.Tensor, epsilon: float, generator: torch.Generator
                   ) -> torch.Tensor:
    """With probability epsilon a uniformly random valid action, else the masked greedy one."""
    greedy = masked_argmax(q, mask)
    u = torch.rand(mask.shape, generator=generator, device=mask.device)
    uniform = torch.where(mask, u, torch.full_like(u, -1.0)).argmax(-1)  # uniform among the valid
    explore = torch.rand(greedy.shape, generator=generator, device=mask.device) < epsilon
    return torch.where(explore, uniform, greedy)


def td_lambda_targets(rewards: torch.Tensor, next_values: torch.Tensor, last: torch.Tensor, gamma: float,
                      lam: float) -> torch.Tensor:
    """Targets over (E, T): `next_values[:, t]` is the target network's value of step t + 1, `last[:, t]` marks
    an episode's final step (no bootstrap past it). lam = 0: r + gamma * next; else the lambda-return
    G_t = r_t + gamma * ((1 - lam) * next_t + lam * G_{t+1})."""
    cont = (~last).to(rewards.dtype)
    if lam == 0:
        return rewards + gamma * cont * next_values
    out = torch.zeros_like(rewards)
    g = torch.zeros_like(rewards[:, 0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        g = rewards[:, t] + gamma * cont[:, t] * ((1 - lam) * next_values[:, t] + lam * g)
        out[:, t] = g
    return out


def shift_next(x: torch.Tensor) -> torch.Tensor:
    """x[:, t + 1] at position t along axis 1 (zeros at the end): the next step's value for each step."""
    return torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1)


@torch.no_grad()
def hard_update(target: nn.Module, source: nn.Module) -> None:
    target.load_state_dict(source.state_dict())


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- (1 - tau) * target + tau * source, parameter by parameter."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)


def gumbel_noise(shape: torch.Size, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, device=device).clamp_(1e-12, 1 - 1e-7)
    return -torch.log(-torch.log(u))


def st_gumbel_softmax(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None
                      ) -> torch.Tensor:
    """Straight-through Gumbel-softmax: the forward value is the one-hot of argmax(logits + g), the gradient
    is that of softmax((logits + g) / temperature)."""
    y_soft = torch.softmax((logits + gumbel_noise(logits.shape, generator, logits.device)) / temperature, -1)
    y_hard = F.one_hot(y_soft.argmax(-1), logits.shape[-1]).to(y_soft.dtype)
    return y_hard - y_soft.detach() + y_soft


__all__ = ["GUMBEL_MASK", "epsilon_at", "epsilon_greedy", "hard_update", "masked_argmax", "masked_max",
           "shift_next", "soft_update", "st_gumbel_softmax", "td_lambda_targets"]
