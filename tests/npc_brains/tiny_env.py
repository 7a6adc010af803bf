"""A tiny PettingZoo ParallelEnv for trainer tests: each agent sees a target one-hot and is paid 1 for
choosing it. One action (never the target) is masked out each step. Random play earns ~1/3 per step,
a learned policy ~1 per step."""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

N_ACTIONS = 4
EPISODE = 8


class MatchEnv(ParallelEnv):
    metadata = {"name": "match-v0"}

    def __init__(self, n_agents: int = 3):
        self.possible_agents = [f"a{i}" for i in range(n_agents)]
        self.agents: list[str] = []
        self.rng = np.random.default_rng(0)
        self.t = 0

    @functools.cache  # noqa: B019
    def observation_space(self, agent: str) -> spaces.Dict:
        return spaces.Dict({"observation": spaces.Box(0, 1, (N_ACTIONS,), np.float32),
                            "action_mask": spaces.MultiBinary(N_ACTIONS)})

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(N_ACTIONS)

    def _draw(self) -> dict:
        self.target = self.rng.integers(0, N_ACTIONS, len(self.possible_agents))
        out = {}
        for i, a in enumerate(self.agents):
            obs = np.zeros(N_ACTIONS, np.float32)
            obs[self.target[i]] = 1
            mask = np.ones(N_ACTIONS, np.int8)
            mask[(self.target[i] + 1 + self.rng.integers(0, N_ACTIONS - 1)) % N_ACTIONS] = 0
            out[a] = {"observation": obs, "action_mask": mask}
        return out

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._draw(), {a: {} for a in self.agents}

    def step(self, actions):
        rewards = {a: float(actions[a] == self.target[i]) for i, a in enumerate(self.possible_agents)
                   if a in actions}
        self.t += 1
        done = self.t >= EPISODE
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        obs = self._draw()
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        return np.eye(N_ACTIONS, dtype=np.float32)[self.target].reshape(-1)


def make_env() -> MatchEnv:
    return MatchEnv()


def make_box_env():
    """A non-discrete env, to check the trainer refuses it with a clear error."""
    env = MatchEnv()
    env.action_space = lambda agent: spaces.Box(-1, 1, (2,), np.float32)
    return env
