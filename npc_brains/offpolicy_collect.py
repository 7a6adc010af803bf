"""How the replay learners collect: the acting rule of each algorithm and the EpisodeCollector that plays B envs
round by round with it. The learner's process (npc_brains.offpolicy) and every Ray rollout worker
(npc_brains.distributed.ReplayWorker) run this same code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from npc_brains.config import TrainConfig
from npc_brains.networks import Actor
from npc_brains.replay import EpisodeBuilder, EpisodeSink

ActingRule = Callable[[Actor, torch.Tensor, torch.Tensor, float, torch.Generator], torch.Tensor]


def acting_rule(cfg: TrainConfig) -> ActingRule:
    """How cfg.algo acts while collecting, (agent, obs, mask, epsilon, generator) -> actions: QMIX epsilon-greedy
    on its Q-values, MADDPG a Gumbel-softmax sample (epsilon unused). The learner's process and every rollout
    worker act through this."""
    if cfg.algo == "qmix":
        from npc_brains.qmix import act as qmix_act

        return qmix_act
    from npc_brains.maddpg import act as maddpg_act

    temperature = cfg.gumbel_temperature

    def sample(agent: Actor, obs: torch.Tensor, mask: torch.Tensor, epsilon: float, generator: torch.Generator
               ) -> torch.Tensor:
        return maddpg_act(agent, obs, mask, temperature, generator)

    return sample


@dataclass
class Round:
    """What one round of collection gave: episodes stored, and the returns and win flags of those that ended."""

    stored: int = 0
    returns: list[np.ndarray] = field(default_factory=list)
    wins: list[np.ndarray] = field(default_factory=list)


class EpisodeCollector:
    """The envs of one process played round by round with the acting network and the algorithm's acting rule;
    finished episodes go to a sink (the replay, or a rollout worker's EpisodeList bound for it)."""

    def __init__(self, env: Any, agent: Actor, rule: ActingRule, device: torch.device, max_len: int,
                 act_seed: int):
        self.env, self.agent, self.rule, self.device = env, agent, rule, device
        self.builder = EpisodeBuilder(env.num_envs, max_len, env.num_agents, env.obs_dim, env.n_actions,
                                      env.state_dim)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(act_seed)
        self.obs: np.ndarray | None = None
        self.info: dict[str, Any] = {}

    def reset(self, seed: int) -> None:
        """Fresh episodes from `seed` (what was staged of the episodes in progress is dropped)."""
        self.obs, self.info = self.env.reset(seed)
        self.builder.t[:] = 0

    def sync(self, agent: Actor) -> None:
        """The acting network's weights for the next round (nothing to do when it is the learner's own)."""
        if agent is not self.agent:
            self.agent.load_state_dict(agent.state_dict())

    def rng_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def events(self) -> list[dict[str, Any]]:
        return []  # nothing to report: only workers elsewhere restart

    def collect(self, epsilons: Sequence[float], sink: EpisodeSink, update: int) -> Round:
        """len(epsilons) ticks of every env, tick t exploring with epsilons[t]; finished episodes go to `sink`,
        stamped with `update` (the learner's gradient steps so far)."""
        env, dev = self.env, self.device
        out = Round()
        for epsilon in epsilons:
            info = self.info
            o = torch.from_numpy(self.obs).to(dev)
            m = torch.from_numpy(info["action_mask"]).to(dev)
            actions = self.rule(self.agent, o, m, epsilon, self.generator).cpu().numpy()
            obs, reward, _, _, new_info = env.step(actions)
            self.builder.record(self.obs, info["action_mask"], actions, np.asarray(reward, np.float32),
                                info["alive"], np.asarray(info["state"], np.float32))
            out.stored += self.builder.finish(np.asarray(new_info["done_envs"], bool), sink, update)
            if "episode_returns" in new_info:
                out.returns.append(np.asarray(new_info["episode_returns"], np.float64))
            if "episode_wins" in new_info:
                out.wins.append(np.asarray(new_info["episode_wins"], bool))
            self.obs, self.info = obs, new_info
        return out


__all__ = ["ActingRule", "EpisodeCollector", "Round", "acting_rule"]
