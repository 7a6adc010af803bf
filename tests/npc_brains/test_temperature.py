"""Sampling temperature: a policy at T samples from softmax(logits / T), reports those probabilities, keeps its
most likely action, and refuses a bad T or a policy without learned probabilities in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.scenarios import load_scenario, run_scenario
from npc_brains import load_policy
from npc_brains.evaluate import UntrainedPopulation, policy_slots, policy_tuning, random_init_policy
from npc_brains.runtime import check_temperature, set_temperature, tempered_probs
from worlds import load_world


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks the bundled policy meets in a village (a killing and its aftermath)."""
    policy = load_policy("default", seed=0)
    trace = run_scenario(policy, load_scenario("kill-parent"), load_world("village-v1"), villages=2, seed=1,
                         slots=policy_slots(policy), tuning=policy_tuning(policy))
    return trace.probe_obs, trace.probe_mask


def softmax_of_logs(probs: np.ndarray, t: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        z = np.log(probs.astype(np.float64)) / t
    z = np.exp(z - z.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_probabilities_at_t_are_the_softmax_of_the_logits_over_t(rows, backend):
    obs, mask = rows
    base = load_policy("default", seed=0, backend=backend).act(obs, mask, deterministic=True, with_probs=True)
    for t in (0.25, 0.5, 2.0):
        policy = load_policy("default", seed=0, backend=backend)
        set_temperature(policy, t)
        out = policy.act(obs, mask, deterministic=True, with_probs=True)
        assert np.abs(out.probs - softmax_of_logs(base.probs, t)).max() < 1e-4
        assert (out.probs[~mask] == 0).all()
        assert np.array_equal(out.actions, base.actions)  # the most likely action does not move
    sharper = load_policy("default", seed=0, backend=backend)
    set_temperature(sharper, 0.25)
    top = sharper.act(obs, mask, deterministic=True, with_probs=True).probs.max(1)
    assert (top >= base.probs.max(1) - 1e-6).all() and (top > base.probs.max(1) + 1e-3).any()


def test_t_of_one_samples_exactly_as_before(rows):
    obs, mask = rows
    plain = load_policy("default", seed=3)
    one = load_policy("default", seed=3)
    set_temperature(one, 1.0)
    for _ in range(3):
        assert np.array_equal(plain.act(obs, mask).actions, one.act(obs, mask).actions)


def test_samples_follow_the_tempered_probabilities(rows):
    """Many draws on one observation: the frequencies are the tempered probabilities, not the trained ones."""
    obs, mask = rows
    probs = load_policy("default", seed=0).act(obs, mask, deterministic=True, with_probs=True).probs
    spread = (probs > 0.05).sum(1)
    k = int(np.argmax(spread))  # an observation with several likely actions, where T shows
    policy = load_policy("default", seed=7)
    set_temperature(policy, 0.5)
    n = 40_000
    actions = policy.act(np.repeat(obs[k:k + 1], n, 0), np.repeat(mask[k:k + 1], n, 0)).actions
    freq = np.bincount(actions, minlength=probs.shape[1]) / n
    want = softmax_of_logs(probs[k:k + 1], 0.5)[0]
    assert np.abs(freq - want).max() < 0.015
    assert np.abs(want - probs[k]).max() > 0.05  # and those differ from the trained ones by more than that


def test_tempered_probs_stay_finite_at_the_smallest_t():
    probs = np.array([[0.5, 0.3, 0.2, 0.0], [1e-6, 1e-6, 1.0 - 2e-6, 0.0]], np.float32)
    out = tempered_probs(probs, 0.01)
    assert np.isfinite(out).all() and np.allclose(out.sum(1), 1.0) and (out[:, 3] == 0).all()
    assert out[0, 0] == pytest.approx(1.0) and tempered_probs(probs, 1.0) is probs


@pytest.mark.parametrize("bad", [0, -1, 0.001, 101, math.nan, math.inf, "abc", None])
def test_a_bad_temperature_is_a_one_line_error_naming_the_flag(bad):
    with pytest.raises(ValueError, match=r"^--temperature: expected a number from 0.01 to 100 .*got") as info:
        check_temperature(bad, "--temperature")
    assert "\n" not in str(info.value)


def test_the_rules_and_random_actions_have_nothing_to_sharpen():
    for name in ("scripted", "random"):
        with pytest.raises(ValueError, match=f"temperature: {name} has no learned probabilities"):
            set_temperature(load_policy(name), 0.5)
    assert check_temperature("0.5") == 0.5 and check_temperature(100) == 100.0


def test_the_untrained_network_plays_at_the_trained_policys_temperature():
    policy = load_policy("default", seed=0)
    set_temperature(policy, 0.5)
    assert random_init_policy(policy, seed=2).temperature == 0.5
    population = random_init_policy(policy, seed=2, draws=3)
    assert isinstance(population, UntrainedPopulation)
    assert [d.temperature for d in population.draws] == [0.5] * 3
    set_temperature(population, 2.0)
    assert population.temperature == 2.0 and [d.temperature for d in population.draws] == [2.0] * 3
