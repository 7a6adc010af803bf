"""Generated villages of every size build a VillageSim and tick with random valid actions."""

from __future__ import annotations

import numpy as np
import pytest

from engine import make_vec_env
from engine.sim import VillageSim
from worlds import generate_world


@pytest.mark.parametrize("n, villages", [(4, 3), (12, 3), (100, 2), (500, 1)])
def test_generated_world_ticks(n, villages):
    spec = generate_world(n, seed=n)
    sim = VillageSim(spec, villages, seed=1, scenario="random_kill", kill_window=(2, 10))
    assert n == sim.N
    rng = np.random.default_rng(n)
    alive0 = sim.state.alive.copy()
    for _ in range(20):
        sim.step((rng.random(sim.mask.shape) * sim.mask).argmax(-1))
        assert np.isfinite(sim.obs).all() and np.isfinite(sim.last_reward).all()
        assert sim.mask.any(-1).all()
    assert sim.obs.shape == (villages, n, sim.observer.obs_dim)
    assert sim.observer.global_state().shape == (villages, sim.observer.state_dim)
    assert (sim.state.tick == 20).all()
    assert not (sim.state.alive & ~alive0).any()


def test_generated_world_string_in_vec_env():
    env = make_vec_env("generated:30:5", num_envs=2, seed=0)
    obs, info = env.reset()
    assert obs.shape == (2 * 30, env.obs_dim)
    rng = np.random.default_rng(0)
    for _ in range(10):
        mask = info["action_mask"]
        obs, reward, terminated, truncated, info = env.step((rng.random(mask.shape) * mask).argmax(-1))
    assert np.isfinite(obs).all()
