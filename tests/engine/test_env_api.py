"""The two env APIs: PettingZoo conformance for make_env, and the batched make_vec_env contract."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from engine import make_env, make_vec_env
from engine.observe import observation_layout
from worlds import WorldError, generate_world


def test_parallel_api_conformance():
    parallel_api_test(make_env(seed=0), num_cycles=300)


def test_parallel_api_conformance_random_kill():
    parallel_api_test(make_env(seed=1, scenario="random_kill"), num_cycles=300)


def test_parallel_seed_test():
    parallel_seed_test(lambda: make_env(seed=0), num_cycles=300)


def test_spaces_are_memoised():
    env = make_env(seed=0)
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
    assert env.state_space is env.state_space


def test_state_matches_state_space():
    env = make_env(seed=0)
    env.reset(seed=0)
    state = env.state()
    assert state.shape == env.state_space.shape
    assert state.dtype == env.state_space.dtype
    assert np.isfinite(state).all()


def test_observations_fit_their_spaces_and_masks_agree():
    env = make_env(seed=0, scenario="random_kill")
    obs, infos = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        for agent, o in obs.items():
            assert env.observation_space(agent).contains(o)
            np.testing.assert_array_equal(o["action_mask"], infos[agent]["action_mask"])
        actions = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, rewards, terms, truncs, infos = env.step(actions)
        if not env.agents:
            break


def test_dead_agent_leaves_and_episode_truncates():
    env = make_env(seed=0, max_ticks=60)  # village-v1's scenario kills Alda at tick 30
    env.reset(seed=0)
    terminated = []
    steps = 0
    while env.agents:
        _, rewards, terms, truncs, _ = env.step({a: 0 for a in env.agents})
        terminated += [a for a, t in terms.items() if t]
        steps += 1
    assert terminated == ["Alda"]
    assert steps == 60


def test_vec_env_shapes_and_info():
    env = make_vec_env("village-v1", num_envs=3, seed=0)
    obs, info = env.reset()
    rows = env.num_rows
    assert rows == 3 * env.num_agents
    assert obs.shape == (rows, env.obs_dim) and obs.dtype == np.float32
    assert info["action_mask"].shape == (rows, env.n_actions)
    assert info["alive"].shape == (rows,) and info["alive"].all()
    assert info["state"].shape == (3, env.state_dim)
    assert info["traits"].shape == (rows, 5)
    assert info["role"].shape == (rows,)
    assert info["village"].tolist() == np.repeat(np.arange(3), env.num_agents).tolist()
    assert len(env.action_names) == env.n_actions
    assert env.observation_layout == observation_layout(env.sim.K)
    obs, reward, terminated, truncated, info = env.step(np.zeros(rows, np.int64))
    assert reward.shape == terminated.shape == truncated.shape == (rows,)
    assert reward.dtype == np.float32


def test_vec_env_death_truncation_and_auto_reset():
    env = make_vec_env("village-v1", num_envs=4, seed=0, max_ticks=80)
    obs, info = env.reset()
    total = np.zeros(env.num_rows)
    ever_terminated = np.zeros(env.num_rows, bool)
    for tick in range(80):
        obs, reward, terminated, truncated, info = env.step(np.zeros(env.num_rows, np.int64))
        total += reward
        dead_before = ever_terminated.copy()
        ever_terminated |= terminated
        # rows that died earlier: reward 0 and only action 0 allowed
        assert (reward[dead_before] == 0).all()
        if tick < 79:
            assert not truncated.any()
            assert "final_obs" not in info
            mask = info["action_mask"][dead_before]
            assert mask[:, 0].all() and not mask[:, 1:].any()
            assert not info["alive"][dead_before].any()
    assert ever_terminated.reshape(4, -1).sum(1).tolist() == [1, 1, 1, 1]  # random_kill: one death each
    assert (truncated == ~terminated).all()
    assert info["final_obs"].shape == obs.shape
    np.testing.assert_allclose(info["episode_returns"], total, rtol=1e-5, atol=1e-4)
    assert info["episode_return_mean"] == pytest.approx(total.mean(), rel=1e-5, abs=1e-5)
    assert (env.sim.state.tick == 0).all() and info["alive"].all()  # auto-reset happened


def test_vec_env_world_forms():
    spec = generate_world(6, 2)
    assert make_vec_env(spec, num_envs=2, seed=0).num_agents == 6
    assert make_vec_env("generated:7:1", num_envs=2, seed=0).num_agents == 7
    assert make_vec_env("generated:5", num_envs=1, seed=0).num_agents == 5
    mixed = make_vec_env([generate_world(6, 1), generate_world(6, 2)], num_envs=4, seed=0)
    assert mixed.num_envs == 4
    with pytest.raises(WorldError, match="generated:N"):
        make_vec_env("generated:many", num_envs=1)
