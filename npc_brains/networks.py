"""Dr. MAS networks: intent encoder, personality FiLM, masked policy head, critics, value normaliser.

    obs ──> IntentEncoder (shared by every NPC; auxiliary InfoNCE on its projection)
             └─> FiLM(traits, role) ──> policy head ──> masked logits
    (global state of the village, own obs) ──> centralised critic (MAPPO, Dr. MAS)
    own obs ──> local critic (IPPO)

The personality ("conditioning") features are a fixed set of observation columns (`cond_index`):
traits and role one-hot in the village, an agent one-hot for wrapped PettingZoo envs. Swapping them
asks "what would NPC i do in this situation", which is how the sync check compares agents.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from npc_brains.maths import masked_logits


def _layer(n_in: int, n_out: int, gain: float = float(np.sqrt(2))) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


@dataclass(frozen=True)
class NetSpec:
    """Everything needed to rebuild the networks (stored in checkpoints)."""

    obs_dim: int
    n_actions: int
    state_dim: int
    cond_index: tuple[int, ...]
    hidden: int = 128
    intent_dim: int = 64
    film: bool = True
    central_critic: bool = True
    # entity head: (first column of slot 0, features per slot, slots, untargeted actions, targeted kinds);
    # empty = no entity head (older policies, PettingZoo envs without slots)
    slot_layout: tuple[int, ...] = ()
    slot_hidden: int = 64  # width of the entity head's per-slot layer

    def to_dict(self) -> dict:
        return {"obs_dim": self.obs_dim, "n_actions": self.n_actions, "state_dim": self.state_dim,
                "cond_index": list(self.cond_index), "hidden": self.hidden, "intent_dim": self.intent_dim,
                "film": self.film, "central_critic": self.central_critic, "slot_layout": list(self.slot_layout),
                "slot_hidden": self.slot_hidden}

    @classmethod
    def from_dict(cls, d: dict) -> NetSpec:
        return cls(int(d["obs_dim"]), int(d["n_actions"]), int(d["state_dim"]),
                   tuple(int(i) for i in d["cond_index"]), int(d["hidden"]), int(d["intent_dim"]),
                   bool(d["film"]), bool(d["central_critic"]), tuple(int(i) for i in d.get("slot_layout", ())),
                   int(d.get("slot_hidden", LEGACY_SLOT_HIDDEN)))


LEGACY_SLOT_HIDDEN = 64  # the entity head's width in policy files that do not record it (the default's too)


class SlotHead(nn.Module):
    """Entity (pointer-style) logits for the targeted actions: one small MLP shared by every slot scores
    (this NPC's adapted features, that slot's features) for each targeted kind, so what is learned about
    "attack the one I blame" or "mourn the dead I loved" holds whichever slot the entity lands in.

    Output (R, kinds x slots) in the flat action layout (kind-major: untargeted + kind * K + k)."""

    def __init__(self, hidden: int, layout: tuple[int, ...], slot_hidden: int = LEGACY_SLOT_HIDDEN):
        super().__init__()
        self.offset, self.features, self.slots, self.untargeted, self.kinds = layout
        self.from_self = _layer(hidden, slot_hidden)
        self.from_slot = _layer(self.features, slot_hidden)
        self.out = _layer(slot_hidden, self.kinds, 0.01)

    def forward(self, adapted: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        R = obs.shape[0]
        # one (R x K, F) matrix: a (R, K, F) view of the obs columns is not contiguous, and where the weights do
        # not require grad (the collector's and the runtime's copies, the teacher) torch multiplies such a view
        # as a batch of R small matrices, much slower than one matrix product
        slots = obs[:, self.offset:self.offset + self.slots * self.features].reshape(R * self.slots, self.features)
        # in place: the (R, K, H) activations are the largest of the actor, and a fresh buffer for each of the
        # add and the tanh costs memory bandwidth (autograd keeps what the backward needs: tanh's output)
        z = self.from_slot(slots).view(R, self.slots, -1).add_(self.from_self(adapted).unsqueeze(1)).tanh_()
        return self.out(z).transpose(1, 2).reshape(R, self.kinds * self.slots)  # (R, kinds * K)


class IntentEncoder(nn.Module):
    """Shared trunk: obs -> intent features h; `project(h)` is the InfoNCE embedding."""

    def __init__(self, obs_dim: int, hidden: int, intent_dim: int):
        super().__init__()
        self.l1 = _layer(obs_dim, hidden)
        self.l2 = _layer(hidden, hidden)
        self.proj = _layer(hidden, intent_dim, 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.l2(torch.tanh(self.l1(obs))))

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.proj(h)


class FiLM(nn.Module):
    """h * (1 + gamma(c)) + beta(c); starts as the identity (zero init)."""

    def __init__(self, cond_dim: int, hidden: int):
        super().__init__()
        self.lin = nn.Linear(cond_dim, 2 * hidden)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        # = h * (1 + gamma) + beta with (gamma, beta) = lin(cond).chunk(2), computed without the chunk (whose
        # backward concatenates the two gradients) and with the 1 folded into the bias: two small matmuls and
        # one fused multiply-add over the (rows, hidden) activations instead of four passes (CPU training cost)
        n = h.shape[-1]
        w, b = self.lin.weight, self.lin.bias
        scale = F.linear(cond, w[:n], b[:n] + 1)
        return torch.addcmul(F.linear(cond, w[n:], b[n:]), h, scale)


class Actor(nn.Module):
    """Intent encoder + personality adaptation + masked policy head (+ a detached local value head
    used only by the runtime, so a policy file can report values without the global state)."""

    def __init__(self, spec: NetSpec):
        super().__init__()
        self.spec = spec
        self.encoder = IntentEncoder(spec.obs_dim, spec.hidden, spec.intent_dim)
        self.film = FiLM(len(spec.cond_index), spec.hidden) if spec.film and spec.cond_index else None
        self.head = _layer(spec.hidden, spec.n_actions, 0.01)
        self.slot_head = SlotHead(spec.hidden, spec.slot_layout, spec.slot_hidden) if spec.slot_layout else None
        self.runtime_value = _layer(spec.hidden, 1, 1.0)
        self.register_buffer("cond_index", torch.tensor(spec.cond_index, dtype=torch.long), persistent=False)

    def features(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(intent h, personality-adapted h)."""
        h = self.encoder(obs)
        if self.film is None:
            return h, h
        return h, self.film(h, obs.index_select(-1, self.cond_index))

    def raw_logits(self, obs: torch.Tensor, adapted: torch.Tensor) -> torch.Tensor:
        logits = self.head(adapted)
        if self.slot_head is None:
            return logits
        u = self.slot_head.untargeted
        return torch.cat([logits[:, :u], logits[:, u:] + self.slot_head(adapted, obs)], dim=1)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked logits."""
        return masked_logits(self.raw_logits(obs, self.features(obs)[1]), mask)

    def logits_and_features(self, obs: torch.Tensor, mask: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, adapted = self.features(obs)
        return masked_logits(self.raw_logits(obs, adapted), mask), h, adapted


class Critic(nn.Module):
    """Centralised: V(global state of the village, own obs). Local (IPPO): V(own obs)."""

    def __init__(self, spec: NetSpec):
        super().__init__()
        self.central = spec.central_critic
        self.state_dim = spec.state_dim
        n_in = spec.obs_dim + (spec.state_dim if spec.central_critic else 0)
        self.net = nn.Sequential(_layer(n_in, spec.hidden), nn.Tanh(), _layer(spec.hidden, spec.hidden), nn.Tanh(),
                                 _layer(spec.hidden, 1, 1.0))

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        x = torch.cat([state, obs], -1) if self.central else obs
        return self.net(x).squeeze(-1)

    # The centralised critic's first layer splits as W [state, obs] + b = (W_s state + b) + W_o obs. The state
    # part is the same for every NPC of a village at a tick, so the trainer computes it once per village and tick
    # (`state_features`) and gathers it per row (`from_state_features`): the same function, about half the
    # first layer's work, and no per-row copy of the village state.
    def state_features(self, state: torch.Tensor) -> torch.Tensor:
        """W_s state + b of the first layer (centralised critic only)."""
        first = self.net[0]
        return F.linear(state, first.weight[:, :self.state_dim], first.bias)

    def from_state_features(self, obs: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
        """`forward(obs, state)` from `feats = state_features(state)`, one row of feats per row of obs."""
        first = self.net[0]
        x = torch.addmm(feats, obs, first.weight[:, self.state_dim:].t())
        for layer in self.net[1:]:
            x = layer(x)
        return x.squeeze(-1)


class ValueNorm(nn.Module):
    """Running normalisation of value targets (MAPPO's ValueNorm): debiased EMA of mean and mean square.

    With `beta` per update: after one update on a batch x the statistics equal x's mean and variance exactly.
    """

    def __init__(self, beta: float = 0.99, eps: float = 1e-5):
        super().__init__()
        self.beta = beta
        self.eps = eps
        self.register_buffer("running_mean", torch.zeros(()))
        self.register_buffer("running_mean_sq", torch.zeros(()))
        self.register_buffer("debias", torch.zeros(()))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1).to(self.running_mean.dtype)
        if x.numel() == 0:
            return
        b = self.beta
        self.running_mean.mul_(b).add_(x.mean() * (1 - b))
        self.running_mean_sq.mul_(b).add_((x * x).mean() * (1 - b))
        self.debias.mul_(b).add_(1 - b)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.debias.clamp_min(self.eps)
        mean = self.running_mean / d
        var = (self.running_mean_sq / d - mean * mean).clamp_min(1e-2 * self.eps)
        return mean, var.sqrt().clamp_min(1e-3)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.stats()
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.stats()
        return x * std + mean


class Brain(nn.Module):
    """Actor, critic, EMA teacher and value normaliser: everything the trainer optimises or tracks."""

    def __init__(self, spec: NetSpec, value_norm: bool):
        super().__init__()
        self.spec = spec
        self.actor = Actor(spec)
        self.critic = Critic(spec)
        self.teacher = copy.deepcopy(self.actor).requires_grad_(False)
        self.value_norm = ValueNorm() if value_norm else None

    @torch.no_grad()
    def update_teacher(self, tau: float) -> None:
        for t, s in zip(self.teacher.parameters(), self.actor.parameters(), strict=True):
            t.lerp_(s, tau)

    def value(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """Critic output in return units (denormalised when a value normaliser is on)."""
        v = self.critic(obs, state)
        return self.value_norm.denormalize(v) if self.value_norm is not None else v
