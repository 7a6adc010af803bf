"""The PettingZoo ParallelEnv over one village (`village-v1`), for conformance and third-party trainers."""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from engine.constants import REACTION_NAMES, Tuning
from engine.sim import VillageSim
from engine.vec_env import flat_action_names, resolve_world
from worlds import WorldSpec


class VillageParallelEnv(ParallelEnv):
    """Observations are dicts {"observation", "action_mask"}; the mask is also in infos[agent]["action_mask"]."""

    metadata = {"name": "village-v1", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self,
        world: str | WorldSpec = "village-v1",
        seed: int | None = None,
        *,
        slots: int = 4,
        max_ticks: int = 144,
        scenario: str = "world",
        record: bool = True,
        tuning: Tuning | None = None,
        render_mode: str | None = None,
    ):
        self.spec_world = resolve_world(world)
        self.sim = VillageSim(self.spec_world, 1, seed, slots=slots, max_ticks=max_ticks, scenario=scenario,
                              record=record, tuning=tuning)
        self.possible_agents = list(self.spec_world.npc_names)
        self.agents = list(self.possible_agents)
        self.render_mode = render_mode
        self.action_names = flat_action_names(self.sim.K)
        self._seed = seed

    @functools.cache  # noqa: B019 - spaces are memoised per agent by design
    def observation_space(self, agent: str) -> spaces.Dict:
        return spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, (self.sim.observer.obs_dim,), np.float32),
                "action_mask": spaces.MultiBinary(self.sim.n_actions),
            }
        )

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.sim.n_actions)

    @functools.cached_property
    def state_space(self) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (self.sim.observer.state_dim,), np.float32)

    def state(self) -> np.ndarray:
        return self.sim.observer.global_state()[0]

    def _obs(self) -> dict:
        idx = {name: i for i, name in enumerate(self.possible_agents)}
        return {
            a: {"observation": self.sim.obs[0, idx[a]].copy(), "action_mask": self.sim.mask[0, idx[a]].astype(np.int8)}
            for a in self.agents
        }

    def _infos(self) -> dict:
        idx = {name: i for i, name in enumerate(self.possible_agents)}
        return {
            a: {"action_mask": self.sim.mask[0, idx[a]].astype(np.int8),
                "reaction": REACTION_NAMES[int(self.sim.reaction[0, idx[a]])]}
            for a in self.agents
        }

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.sim.reset(seed if seed is not None else self._seed)
        self._seed = None
        self.agents = list(self.possible_agents)
        return self._obs(), self._infos()

    def step(self, actions: dict):
        n = self.sim.N
        flat = np.zeros((1, n), np.int64)
        for i, name in enumerate(self.possible_agents):
            if name in actions and actions[name] is not None:
                flat[0, i] = int(actions[name])
        self.sim.step(flat)
        truncated = bool(self.sim.truncated[0])
        alive = self.sim.state.alive[0, :n]
        rewards, terms, truncs = {}, {}, {}
        for i, name in enumerate(self.possible_agents):
            if name not in self.agents:
                continue
            rewards[name] = float(self.sim.last_reward[0, i])
            terms[name] = not bool(alive[i])
            truncs[name] = truncated and bool(alive[i])
        obs, infos = self._obs(), self._infos()
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        s = self.sim.state
        lines = [f"tick {int(s.tick[0])}"]
        for i, name in enumerate(self.possible_agents):
            lines.append(
                f"{name:>10} {'alive' if s.alive[0, i] else 'dead ':5} grief={s.grief[0, i]:.2f} "
                f"fear={s.fear[0, i].max():.2f} anger={s.anger[0, i].max():.2f} "
                f"{REACTION_NAMES[int(self.sim.reaction[0, i])]}"
            )
        return "\n".join(lines)

    def close(self) -> None:
        pass


def make_env(world: str | WorldSpec = "village-v1", seed: int | None = None, **options) -> VillageParallelEnv:
    """PettingZoo ParallelEnv for one village: a bundled id, a file path, `generated:N[:SEED]` or a WorldSpec."""
    return VillageParallelEnv(world, seed, **options)
