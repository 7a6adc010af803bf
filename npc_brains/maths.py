"""The trainer's maths as small functions on tensors, so tests can check each against a hand computation.

Shapes: T ticks, R flat rows (village-major: row = village * num_agents + agent), A actions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MASKED_LOGIT = -1e9


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Invalid actions get a logit of -1e9 (probability exactly 0 after softmax in float32)."""
    return logits.masked_fill(~mask, MASKED_LOGIT)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
        gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over (T, R); `dones[t]` = the episode ended after step t.

    Returns (advantages, returns), both (T, R).
    """
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    next_value = last_value
    for t in range(T - 1, -1, -1):
        live = 1.0 - dones[t].to(rewards.dtype)
        delta = rewards[t] + gamma * next_value * live - values[t]
        running = delta + gamma * lam * live * running
        adv[t] = running
        next_value = values[t]
    return adv, adv + values


def normalize_advantages(adv: torch.Tensor, valid: torch.Tensor, groups: torch.Tensor | None,
                         eps: float = 1e-8) -> torch.Tensor:
    """(A - mean_g) / (std_g + eps) over the valid entries of each group g (Dr. MAS agent-wise normalisation).

    groups=None normalises with one global baseline. Invalid entries (dead rows) come back as 0.
    `std` is the population standard deviation of the group's valid entries.
    """
    adv = adv.reshape(-1)
    valid = valid.reshape(-1).to(adv.dtype)
    if groups is None:
        g = torch.zeros_like(adv, dtype=torch.long)
    else:
        g = groups.reshape(-1).long()
    n_groups = int(g.max().item()) + 1 if g.numel() else 1
    count = torch.zeros(n_groups, dtype=adv.dtype, device=adv.device).index_add_(0, g, valid)
    total = torch.zeros_like(count).index_add_(0, g, adv * valid)
    mean = total / count.clamp_min(1.0)
    centred = (adv - mean[g]) * valid
    var = torch.zeros_like(count).index_add_(0, g, centred * centred) / count.clamp_min(1.0)
    out = centred / (var.sqrt()[g] + eps)
    return out * valid


def ppo_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip: float
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row clipped surrogate loss (to be minimised) and the ratio pi / pi_old."""
    ratio = (logp - old_logp).exp()
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    return -surrogate, ratio


def decoupled_ppo_loss(logp: torch.Tensor, prox_logp: torch.Tensor, behaviour_logp: torch.Tensor,
                       adv: torch.Tensor, clip: float, weight_cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO with a decoupled proximal policy (Hilton et al. 2021) for stale or replayed rows.

    The clip is centred on the proximal policy (the actor at the start of this update), and the
    off-policyness of the rows, prox / behaviour, enters as an importance weight truncated at
    `weight_cap`. With prox = behaviour this is the ordinary clipped surrogate. Returns (loss rows, ratio).
    """
    ratio = (logp - prox_logp).exp()
    weight = (prox_logp - behaviour_logp).exp().clamp(max=weight_cap)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    return -surrogate * weight, ratio


def categorical_kl(p_logp: torch.Tensor, q_logp: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last axis from log-probabilities; masked actions (p = 0) contribute 0."""
    p = p_logp.exp()
    return (p * (p_logp - q_logp)).where(p > 0, torch.zeros_like(p)).sum(-1)


def kl_reference_terms(p_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a fixed reference policy p given by (masked) logits: (p, sum_a p log p), so that
    KL(p || q) = sum_a p log p - sum_a p log q costs one product per evaluation (`kl_from_terms`).

    p comes from softmax, not exp(log_softmax): exp of the masked entries (about -1e9) takes a slow path
    in torch's CPU exp, many times slower than the whole softmax.
    """
    p = torch.softmax(p_logits, -1)
    p_logp = torch.log_softmax(p_logits, -1)
    return p, (p * p_logp).where(p > 0, torch.zeros_like(p)).sum(-1)


def kl_from_terms(p: torch.Tensor, p_neg_entropy: torch.Tensor, q_logp: torch.Tensor) -> torch.Tensor:
    """KL(p || q) from `kl_reference_terms(p_logits)` and q's log-probabilities; equals
    `categorical_kl(log p, q_logp)` up to float rounding. Masked actions have p = 0 and contribute 0
    (q_logp must be finite there, as `masked_logits` makes it: 0 * -1e9 = 0, where 0 * -inf would be nan)."""
    return p_neg_entropy - (p * q_logp).sum(-1)


def kl_matrix(logps: torch.Tensor) -> torch.Tensor:
    """logps (G, S, A): G agents' log-policies on the same S probe states -> (G, G) with
    M[i, j] = mean_s KL(pi_i(.|s) || pi_j(.|s))."""
    p = logps.exp()
    # sum_a p_i (log p_i - log p_j) = sum_a p_i log p_i - sum_a p_i log p_j
    p_safe_log = logps.where(p > 0, torch.zeros_like(logps))
    neg_entropy = (p * p_safe_log).sum(-1)  # (G, S)
    q_log = logps.clamp_min(MASKED_LOGIT)
    cross = torch.einsum("isa,jsa->ijs", p, q_log)  # sum_a p_i log p_j
    return (neg_entropy[:, None, :] - cross).mean(-1).clamp_min(0.0)


def divergence_from_population(logps: torch.Tensor) -> torch.Tensor:
    """logps (G, S, A) -> (G,) mean_s KL(pi_i || mean_j pi_j): how far each agent is from the population."""
    p = logps.exp()
    population_logp = p.mean(0, keepdim=True).clamp_min(1e-12).log()
    return categorical_kl(logps, population_logp.expand_as(logps)).mean(-1)


def shaping_weight(joint_steps: int, anneal: int) -> float:
    """Weight of the shaping reward: 1 at the start, linearly to 0 after `anneal` joint steps (seed text)."""
    if anneal <= 0:
        return 0.0
    return max(0.0, 1.0 - joint_steps / anneal)


def cosine_alignment(probs: torch.Tensor, group: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """cos(pi_r, mean pi over the valid rows of r's group) for each row r. probs (R, A), group (R,) int."""
    n = int(group.max().item()) + 1
    w = valid.to(probs.dtype)
    total = torch.zeros(n, probs.shape[1], dtype=probs.dtype, device=probs.device).index_add_(
        0, group.long(), probs * w[:, None])
    count = torch.zeros(n, dtype=probs.dtype, device=probs.device).index_add_(0, group.long(), w)
    mean = total / count.clamp_min(1.0)[:, None]
    return F.cosine_similarity(probs, mean[group.long()], dim=-1, eps=1e-8) * w


def knn_state_entropy(features: torch.Tensor, reference: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Particle estimate of state entropy (up to constants): log(1 + distance to the k-th nearest
    reference state). features (..., D), reference (M, D). Larger in rarely visited regions."""
    d = torch.cdist(features.reshape(-1, features.shape[-1]), reference)
    kth = d.topk(min(k + 1, reference.shape[0]), dim=-1, largest=False).values[:, -1]
    return torch.log1p(kth).reshape(features.shape[:-1])


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE: anchor i's positive is positives[i]; every other positives[j] is a negative."""
    a = F.normalize(anchors, dim=-1)
    p = F.normalize(positives, dim=-1)
    logits = a @ p.T / temperature
    return F.cross_entropy(logits, torch.arange(a.shape[0], device=a.device))


def gradient_conflict(grads: list[torch.Tensor]) -> float:
    """||sum_i g_i|| / sum_i ||g_i|| for per-agent gradient vectors: 1 = all aligned, 0 = they cancel."""
    if not grads:
        return float("nan")
    stacked = torch.stack([g.reshape(-1) for g in grads])
    denom = stacked.norm(dim=1).sum()
    if float(denom) == 0.0:
        return float("nan")
    return float(stacked.sum(0).norm() / denom)


def cosine_lr(update: int, total_updates: int, lr: float, final_frac: float) -> float:
    """Cosine decay from lr (update 0) to lr * final_frac (last update)."""
    if total_updates <= 1:
        return lr
    progress = min(max(update / (total_updates - 1), 0.0), 1.0)
    return lr * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * progress)))


def constraint_weights(num_agents: int, over_threshold: torch.Tensor | None, many_agents_boost: float,
                       sync_boost: float) -> torch.Tensor:
    """Per-agent weight of the KL-to-teacher term: 1, raised by `many_agents_boost` above 8 agents, and
    multiplied by `sync_boost` for agents the sync check flagged."""
    w = torch.ones(num_agents)
    if num_agents > 8:
        w = w * (1.0 + many_agents_boost)
    if over_threshold is not None:
        w = torch.where(over_threshold.cpu(), w * sync_boost, w)
    return w
