"""MADDPG (Lowe et al. 2017) for discrete actions, as EPyMARL runs it.

    actor     one parameter-shared actor over every agent's observation, conditioned on the agent's personality
              features (the PPO family's Actor); invalid actions get a logit of -1e10; the action is a
              straight-through Gumbel-softmax sample (a one-hot forward, the softmax's gradient backward)
    critic    centralised, one network shared by the agents: Q_i(global state, every agent's one-hot action,
              agent i's one-hot index), trained on agent i's own reward
    targets   target actor and critic, soft updates (tau per gradient step)
    actor     agent i maximises Q_i with its own action from the current actor and the others' actions from
              the replay, plus a small penalty on its squared logits (EPyMARL's regulariser)

MADDPG is known to be weak on discrete tasks; it is built faithfully and reported as it is.
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


class CentralCritic(nn.Module):
    """Q_i(s, a_1..a_N one-hot, i) for every agent i at once: (..., S), (..., N, A) -> (..., N)."""

    def __init__(self, state_dim: int, n_agents: int, n_actions: int, hidden: int):
        super().__init__()
        self.n_agents, self.n_actions = n_agents, n_actions
        self.net = nn.Sequential(nn.Linear(state_dim + n_agents * n_actions + n_agents, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.register_buffer("eye", torch.eye(n_agents), persistent=False)

    def forward(self, state: torch.Tensor, joint: torch.Tensor) -> torch.Tensor:
        """joint (..., N, N * A): the joint action each agent's Q is evaluated at (they differ in the actor's
        update, where agent i's own action carries the gradient); or (..., N * A), the same for everyone."""
        N = self.n_agents
        lead = state.shape[:-1]
        if joint.dim() == state.dim():
            joint = joint.unsqueeze(-2).expand(*lead, N, joint.shape[-1])
        x = torch.cat([state.unsqueeze(-2).expand(*lead, N, state.shape[-1]), joint,
                       self.eye.expand(*lead, N, N)], -1)
        return self.net(x).squeeze(-1)


def masked_actor_logits(actor: Actor, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(..., A) logits with invalid actions at -1e10."""
    flat = obs.reshape(-1, obs.shape[-1])
    raw = actor.raw_logits(flat, actor.features(flat)[1]).reshape(*obs.shape[:-1], -1)
    return raw.masked_fill(~mask, om.GUMBEL_MASK)


@torch.no_grad()
def act(agent: Actor, obs: torch.Tensor, mask: torch.Tensor, temperature: float, generator: torch.Generator
        ) -> torch.Tensor:
    """MADDPG's acting rule (the learner's and a rollout worker's): a sample of the Gumbel-softmax policy (its
    hard forward value: argmax of logits / temperature + Gumbel noise)."""
    logits = masked_actor_logits(agent, obs, mask) / temperature
    return (logits + om.gumbel_noise(logits.shape, generator, logits.device)).argmax(-1)


class MADDPGLearner:
    def __init__(self, spec: NetSpec, n_agents: int, cfg: Any, device: torch.device):
        self.cfg, self.device, self.N, self.A = cfg, device, n_agents, spec.n_actions
        self.agent = Actor(spec).to(device)  # "agent": the acting network, as in QMIXLearner
        self.critic = CentralCritic(spec.state_dim, n_agents, spec.n_actions, cfg.hidden).to(device)
        self.target_agent = copy.deepcopy(self.agent).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_params = [p for n, p in self.agent.named_parameters() if not n.startswith("runtime_value")]
        self.actor_opt = torch.optim.Adam(self.actor_params, lr=cfg.q_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.q_lr)
        self.updates = 0
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(int(cfg.seed) + 11)

    def update(self, batch: EpisodeBatch) -> dict[str, float]:
        cfg, N, A = self.cfg, self.N, self.A
        E, T = batch.filled.shape
        weight = (batch.filled.unsqueeze(-1) & batch.alive).float()  # (E, T, N): living agents' real ticks
        n = weight.sum().clamp_min(1.0)
        taken = F.one_hot(batch.actions, A).float()  # (E, T, N, A)
        joint_taken = taken.reshape(E, T, N * A)

        # critic: y_i = r_i + gamma * Q'_i(s', a' ~ target actor)
        with torch.no_grad():
            next_logits = masked_actor_logits(self.target_agent, batch.obs, batch.mask)
            next_actions = om.st_gumbel_softmax(next_logits, cfg.gumbel_temperature, self.generator)
            next_q = om.shift_next(self.target_critic(batch.state, next_actions.reshape(E, T, N * A)))
            cont = (~batch.last).float().unsqueeze(-1)
            targets = batch.rewards + cfg.gamma * cont * next_q
        q = self.critic(batch.state, joint_taken)
        td = (q - targets) * weight
        critic_loss = (td ** 2).sum() / n
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_grad = torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.q_grad_clip)
        self.critic_opt.step()

        # actor: agent i's own action from the current actor (straight-through), the others' from the replay
        logits = masked_actor_logits(self.agent, batch.obs, batch.mask)
        pi = om.st_gumbel_softmax(logits, cfg.gumbel_temperature, self.generator)  # (E, T, N, A)
        own = torch.eye(N, dtype=torch.bool, device=pi.device).view(1, 1, N, N, 1)
        joint = torch.where(own, pi.unsqueeze(2), taken.unsqueeze(2)).reshape(E, T, N, N * A)
        self.critic.requires_grad_(False)
        q_pi = self.critic(batch.state, joint)
        self.critic.requires_grad_(True)
        valid_logits = torch.where(batch.mask, logits, torch.zeros_like(logits))
        reg = (valid_logits ** 2).sum(-1)
        actor_loss = -(q_pi * weight).sum() / n + cfg.actor_reg * (reg * weight).sum() / n
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_grad = torch.nn.utils.clip_grad_norm_(self.actor_params, cfg.q_grad_clip)
        self.actor_opt.step()

        om.soft_update(self.target_agent, self.agent, cfg.target_tau)
        om.soft_update(self.target_critic, self.critic, cfg.target_tau)
        self.updates += 1
        live = weight.bool()
        q_live = q.detach()[live]
        critic_value = float(critic_loss.detach())
        return {"loss": critic_value, "critic_loss": critic_value, "actor_loss": float(actor_loss.detach()),
                "td_error": float(td.detach().abs().sum() / n),
                "q_mean": float(q_live.mean()) if q_live.numel() else float("nan"),
                "q_max": float(q_live.max()) if q_live.numel() else float("nan"),
                "target_mean": float((targets * weight).sum() / n),
                "grad_norm": float(critic_grad), "actor_grad_norm": float(actor_grad)}

    # --- checkpoints
    def model_state(self) -> dict[str, torch.Tensor]:
        out = {f"actor.{k}": v for k, v in self.agent.state_dict().items()}
        out.update({f"critic.{k}": v for k, v in self.critic.state_dict().items()})
        out.update({f"target_actor.{k}": v for k, v in self.target_agent.state_dict().items()})
        out.update({f"target_critic.{k}": v for k, v in self.target_critic.state_dict().items()})
        return out

    def load_model_state(self, model: dict[str, torch.Tensor]) -> None:
        for prefix, module in (("actor.", self.agent), ("critic.", self.critic), ("target_actor.", self.target_agent),
                               ("target_critic.", self.target_critic)):
            module.load_state_dict({k[len(prefix):]: v for k, v in model.items() if k.startswith(prefix)})

    def optim_state(self) -> dict[str, Any]:
        return {"actor": self.actor_opt.state_dict(), "critic": self.critic_opt.state_dict(),
                "updates": self.updates, "generator": self.generator.get_state()}

    def load_optim_state(self, state: dict[str, Any]) -> None:
        self.actor_opt.load_state_dict(state["actor"])
        self.critic_opt.load_state_dict(state["critic"])
        self.updates = int(state["updates"])
        self.generator.set_state(state["generator"].cpu())


__all__ = ["CentralCritic", "MADDPGLearner", "act", "masked_actor_logits"]
