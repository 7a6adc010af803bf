"""Batched training environment: B villages, flat (B*N, ...) arrays, auto-reset.

Dead NPCs stay as masked rows (alive=False, reward 0, only IDLE allowed) until their village resets.
"""

from __future__ import annotations

import numpy as np

from engine.constants import ACTION_NAMES, TARGETED, UNTARGETED, Tuning
from engine.observe import observation_layout
from engine.sim import VillageSim
from worlds import WorldSpec


def resolve_world(world: str | WorldSpec) -> WorldSpec:
    """A bundled id, a file path, `generated:N[:SEED]`, or a WorldSpec."""
    if isinstance(world, WorldSpec):
        return world
    from worlds import generate_world, load_world

    text = str(world)
    if text.startswith("generated:"):
        parts = text.split(":")
        try:
            n = int(parts[1])
            seed = int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            from worlds import WorldError

            raise WorldError(f"expected 'generated:N' or 'generated:N:SEED' with integers, got {text!r}") from None
        return generate_world(n, seed)
    return load_world(text)


def flat_action_names(slots: int) -> list[str]:
    """Readable names of the flat actions: 'work', 'mourn@slot2', ..."""
    return [ACTION_NAMES[a] for a in UNTARGETED] + [
        f"{ACTION_NAMES[a]}@slot{k}" for a in TARGETED for k in range(slots)
    ]


class VillageVecEnv:
    """`make_vec_env(world, num_envs, seed)`: the training interface."""

    def __init__(
        self,
        world: str | WorldSpec | list[str | WorldSpec] = "village-v1",
        num_envs: int = 64,
        seed: int | None = None,
        *,
        slots: int = 4,
        max_ticks: int = 144,
        scenario: str = "random_kill",
        tuning: Tuning | None = None,
        trait_noise: float = 0.0,
    ):
        worlds = world if isinstance(world, list) else [world]
        specs = [resolve_world(w) for w in worlds]
        self.sim = VillageSim(specs, num_envs, seed, slots=slots, max_ticks=max_ticks, scenario=scenario,
                              tuning=tuning, trait_noise=trait_noise)
        self.num_envs = self.sim.B
        self.num_agents = self.sim.N
        self.num_rows = self.sim.B * self.sim.N
        self.obs_dim = self.sim.observer.obs_dim
        self.n_actions = self.sim.n_actions
        self.state_dim = self.sim.observer.state_dim
        self.action_names = flat_action_names(self.sim.K)
        self.observation_layout = observation_layout(self.sim.K)
        self.returns = np.zeros(self.num_rows, np.float64)
        self._village_of_row = np.repeat(np.arange(self.num_envs), self.num_agents)

    def _info(self) -> dict:
        sim = self.sim
        return {
            "action_mask": sim.mask.reshape(self.num_rows, -1),
            "alive": sim.state.alive[:, : sim.N].reshape(-1).copy(),  # state arrays change in place
            "state": sim.observer.global_state(),
            "traits": sim.w.traits.reshape(self.num_rows, -1),
            "role": sim.w.role.reshape(-1),
            "village": self._village_of_row,
        }

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        self.sim.reset(seed)
        self.returns[:] = 0
        return self.sim.obs.reshape(self.num_rows, -1), self._info()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        sim = self.sim
        sim.step(np.asarray(actions).reshape(sim.B, sim.N))
        reward = sim.last_reward.reshape(-1).copy()  # reset() zeroes rows in place
        terminated = sim.died.reshape(-1).copy()
        done_villages = sim.truncated
        truncated = np.repeat(done_villages, sim.N) & ~terminated
        self.returns += reward
        info: dict = {}
        if done_villages.any():
            finished = np.repeat(done_villages, sim.N)
            info["final_obs"] = sim.obs.reshape(self.num_rows, -1)
            info["final_state"] = sim.observer.global_state()  # (B, S) before the reset, for bootstrapping
            info["episode_returns"] = self.returns[finished].copy()
            info["episode_return_mean"] = float(self.returns[finished].mean())
            self.returns[finished] = 0
            sim.reset(villages=np.flatnonzero(done_villages))
        info.update(self._info())
        # the sim builds fresh obs and mask arrays every tick, so these views are never overwritten
        return sim.obs.reshape(self.num_rows, -1), reward, terminated, truncated, info


def make_vec_env(world: str | WorldSpec | list = "village-v1", num_envs: int = 64, seed: int | None = None,
                 **options) -> VillageVecEnv:
    return VillageVecEnv(world, num_envs, seed, **options)
