"""QMIX (Rashid et al. 2018), as EPyMARL runs it, for the village's NPCs and any discrete PettingZoo env.

    agent Q network   one parameter-shared network over every agent's observation, conditioned on the agent's
                      personality features (the PPO family's Actor: encoder -> FiLM on traits and role ->
                      head (+ the entity head); its unmasked logits are the Q-values)
    acting            epsilon-greedy over the valid actions only; greedy = masked argmax
    mixer             Q_tot = monotonic mix of the chosen Q_i: hypernetworks on the global state give the
                      mixing weights (|w|: dQ_tot/dQ_i >= 0) and biases
    targets           target agent + target mixer, hard copies every `target_update` gradient steps; double Q
                      (the online network picks the next action, the target network values it); one-step or
                      TD(lambda) targets over whole episodes from the replay
    reward            the team reward: the mean of the agents' rewards at each tick

One difference from EPyMARL, on purpose: the agent network is a feed-forward MLP, not a GRU (the village's
observation carries what the NPC remembers: its emotions and knowledge).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from npc_brains import offpolicy_maths as om
from npc_brains.networks import Actor, NetSpec
from npc_brains.replay import EpisodeBatch


class QMixer(nn.Module):
    """Q_tot(q (..., N), s (..., S)): elu(q . |W1(s)| + b1(s)) . |w2(s)| + V(s)."""

    def __init__(self, n_agents: int, state_dim: int, embed: int = 32, hypernet_hidden: int = 64):
        super().__init__()
        self.n_agents, self.embed = n_agents, embed
        self.hyper_w1 = nn.Sequential(nn.Linear(state_dim, hypernet_hidden), nn.ReLU(),
                                      nn.Linear(hypernet_hidden, n_agents * embed))
        self.hyper_b1 = nn.Linear(state_dim, embed)
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, hypernet_hidden), nn.ReLU(),
                                      nn.Linear(hypernet_hidden, embed))
        self.value = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        lead = qs.shape[:-1]
        q = qs.reshape(-1, 1, self.n_agents)
        s = state.reshape(-1, state.shape[-1])
        w1 = torch.abs(self.hyper_w1(s)).view(-1, self.n_agents, self.embed)
        b1 = self.hyper_b1(s).view(-1, 1, self.embed)
        hidden = F.elu(torch.bmm(q, w1) + b1)
        w2 = torch.abs(self.hyper_w2(s)).view(-1, self.embed, 1)
        v = self.value(s).view(-1, 1, 1)
        return (torch.bmm(hidden, w2) + v).view(lead)


def agent_q(agent: Actor, obs: torch.Tensor) -> torch.Tensor:
    """Q-values (..., A) of every row of obs (..., D): the network's unmasked logits."""
    flat = obs.reshape(-1, obs.shape[-1])
    q = agent.raw_logits(flat, agent.features(flat)[1])
    return q.reshape(*obs.shape[:-1], q.shape[-1])


@torch.no_grad()
def act(agent: Actor, obs: torch.Tensor, mask: torch.Tensor, epsilon: float, generator: torch.Generator
        ) -> torch.Tensor:
    """QMIX's acting rule (the learner's and a rollout worker's): epsilon-greedy on the agent's Q-values."""
    return om.epsilon_greedy(agent_q(agent, obs), mask, epsilon, generator)


class QMIXLearner:
    """The networks, their targets, one Adam and the update (see the module docstring)."""

    def __init__(self, spec: NetSpec, n_agents: int, cfg: Any, device: torch.device, target_interval: int):
        self.cfg, self.device, self.N = cfg, device, n_agents
        self.target_interval = target_interval
        self.agent = Actor(spec).to(device)
        self.mixer = QMixer(n_agents, spec.state_dim, cfg.mixer_embed, cfg.hypernet_hidden).to(device)
        self.target_agent = copy.deepcopy(self.agent).requires_grad_(False)
        self.target_mixer = copy.deepcopy(self.mixer).requires_grad_(False)
        self.params = [p for n, p in self.agent.named_parameters() if not n.startswith("runtime_value")]
        self.params += list(self.mixer.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=cfg.q_lr)
        self.updates = 0
        self.target_updates = 0

    def update(self, batch: EpisodeBatch) -> dict[str, float]:
        cfg = self.cfg
        filled = batch.filled.float()
        q_all = agent_q(self.agent, batch.obs)  # (E, T, N, A)
        chosen = q_all.gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)  # (E, T, N)
        q_tot = self.mixer(chosen, batch.state)  # (E, T)
        with torch.no_grad():
            target_q = agent_q(self.target_agent, batch.obs)
            if cfg.double_q:
                pick = om.masked_argmax(q_all.detach(), batch.mask)
                target_chosen = target_q.gather(-1, pick.unsqueeze(-1)).squeeze(-1)
            else:
                target_chosen = om.masked_max(target_q, batch.mask)
            next_tot = om.shift_next(self.target_mixer(target_chosen, batch.state))
            team_reward = batch.rewards.mean(-1)
            targets = om.td_lambda_targets(team_reward, next_tot, batch.last, cfg.gamma, cfg.td_lambda)
        td = (q_tot - targets) * filled
        n = filled.sum().clamp_min(1.0)
        loss = (td ** 2).sum() / n
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.q_grad_clip)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_interval == 0:
            om.hard_update(self.target_agent, self.agent)
            om.hard_update(self.target_mixer, self.mixer)
            self.target_updates += 1
        live = batch.filled.unsqueeze(-1) & batch.alive
        chosen_live = chosen.detach()[live]
        return {"loss": float(loss.detach()), "td_error": float(td.detach().abs().sum() / n),
                "q_mean": float(chosen_live.mean()) if chosen_live.numel() else float("nan"),
                "q_max": float(chosen_live.max()) if chosen_live.numel() else float("nan"),
                "q_tot_mean": float((q_tot.detach() * filled).sum() / n),
                "target_mean": float((targets * filled).sum() / n), "grad_norm": float(grad_norm),
                "target_updates": self.target_updates}

    # --- checkpoints
    def model_state(self) -> dict[str, torch.Tensor]:
        out = {f"actor.{k}": v for k, v in self.agent.state_dict().items()}
        out.update({f"mixer.{k}": v for k, v in self.mixer.state_dict().items()})
        out.update({f"target_actor.{k}": v for k, v in self.target_agent.state_dict().items()})
        out.update({f"target_mixer.{k}": v for k, v in self.target_mixer.state_dict().items()})
        return out

    def load_model_state(self, model: dict[str, torch.Tensor]) -> None:
        for prefix, module in (("actor.", self.agent), ("mixer.", self.mixer), ("target_actor.", self.target_agent),
                               ("target_mixer.", self.target_mixer)):
            module.load_state_dict({k[len(prefix):]: v for k, v in model.items() if k.startswith(prefix)})

    def optim_state(self) -> dict[str, Any]:
        return {"q": self.optimizer.state_dict(), "updates": self.updates, "target_updates": self.target_updates}

    def load_optim_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["q"])
        self.updates, self.target_updates = int(state["updates"]), int(state["target_updates"])


__all__ = ["QMIXLearner", "QMixer", "act", "agent_q"]
