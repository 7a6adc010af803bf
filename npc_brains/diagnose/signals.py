"""Per-update signals the trainer logs for `village diagnose` that its losses do not already give.

Computed once per update on the flat training set (living rows only), so they cost a few reductions.
"""

from __future__ import annotations

import torch


def batch_signals(flat: dict[str, torch.Tensor], adv_raw: torch.Tensor, alive: torch.Tensor,
                  n_agents: int) -> dict[str, float | list[float | None]]:
    """Scale of the raw advantages and value targets, the number of valid actions, and per agent slot its
    share of living rows and the entropy (nats) of its chosen actions.

    `flat`: the trainer's flat training set ("actions", "mask", "agent", "returns"); `adv_raw`: the advantages
    of those rows before normalisation; `alive`: (T, R) living rows of the batch, R = villages x n_agents."""
    out: dict[str, float | list[float | None]] = {}
    n = int(adv_raw.numel())
    if n == 0:
        return out
    adv = adv_raw.detach().float()
    out["adv_std"] = float(adv.std()) if n > 1 else 0.0
    out["adv_abs_max"] = float(adv.abs().max())
    out["return_abs_mean"] = float(flat["returns"].detach().float().abs().mean())
    n_actions = int(flat["mask"].shape[-1])
    out["valid_actions"] = float(flat["mask"].float().sum(-1).mean())
    T, R = alive.shape
    out["agent_alive"] = [round(float(x), 4) for x in
                          alive.float().reshape(T, R // max(n_agents, 1), n_agents).mean((0, 1))]
    counts = torch.zeros(n_agents, n_actions, device=adv.device)
    counts.index_put_((flat["agent"], flat["actions"]), torch.ones_like(adv), accumulate=True)
    probs = counts / counts.sum(-1, keepdim=True).clamp_min(1.0)
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(-1)
    seen = counts.sum(-1) > 0
    out["agent_action_entropy"] = [round(float(e), 4) if s else None for e, s in
                                   zip(entropy, seen, strict=True)]
    return out
