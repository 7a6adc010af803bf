"""Grief held per loss (Tuning.grief_per_loss): a villager who lost two loved ones holds a grief for each, mourning
at one body eases only that one, and a loss mourned away closes its body while the other stays open."""

from __future__ import annotations

import numpy as np
import pytest

from engine.constants import GRIEF_LEFT, Action, Tuning
from engine.sim import VillageSim, flat_action
from worlds import load_world

PER_LOSS = {"grief_per_loss": True, "mourning_ends_with_grief": True, "mourn_relief_linear": True,
            "mourn_relief": 0.05}


@pytest.fixture(scope="module")
def village():
    return load_world("village-v1")


def bereaved_twice(village, **tuning) -> tuple[VillageSim, int, int, int]:
    """A village where the player has killed the two villagers whom villager i likes most: (sim, i, a, b)."""
    sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(**tuning))
    liking = sim.state.affinity[0]
    i = 0
    a, b = (int(j) for j in np.argsort(-np.where(np.arange(sim.N) == i, -np.inf, liking[i]))[:2])
    idle = np.zeros((1, sim.N), np.int64)
    for victim in (a, b):
        sim.command(0, "player", "kill", target=victim)
        for _ in range(30):
            sim.step(idle)
            if not sim.state.alive[0, victim]:
                break
    assert not sim.state.alive[0, [a, b]].any() and sim.state.knows_death[0, i, [a, b]].all()
    return sim, i, a, b


def mourn_action(sim: VillageSim, i: int, body: int) -> int:
    slot = np.flatnonzero(sim.observer.slot_entity[0, i] == body)
    assert len(slot), "a fresh loss is always among the mourner's slots"
    return flat_action(Action.MOURN, int(slot[0]), sim.K)


def test_each_loss_is_held_apart_and_the_grief_is_their_sum(village):
    sim, i, a, b = bereaved_twice(village, **PER_LOSS)
    s = sim.state
    assert s.loss_grief[0, i, a] > 0.5 and s.loss_grief[0, i, b] > 0.5
    others = np.setdiff1d(np.arange(sim.N), [a, b])
    assert not s.loss_grief[0, :, others].any(), "nobody grieves for the living"
    rng = np.random.default_rng(0)
    for _ in range(60):  # random valid actions: mourning, comforting, flights, decay and the cap all act on grief
        sim.step((rng.random(sim.mask.shape) * sim.mask).argmax(-1))
        assert (s.loss_grief >= 0).all()
        np.testing.assert_allclose(s.grief, s.loss_grief.sum(-1), rtol=1e-5, atol=1e-6)


def test_mourning_at_one_body_eases_only_that_loss(village):
    sim, i, a, b = bereaved_twice(village, **PER_LOSS)
    s = sim.state
    s.busy[0, i] = False
    sim.obs, sim.mask = sim.observer.observe()
    actions = np.zeros((1, sim.N), np.int64)
    actions[0, i] = mourn_action(sim, i, a)
    before = s.loss_grief[0, i, [a, b]].copy()
    ticks = 0
    while not s.performing[0, i] or ticks < 12:
        sim.step(actions)
        actions[:] = 0
        ticks += 1
        if not s.busy[0, i]:
            break
    assert s.activity[0, i] == Action.MOURN and s.target[0, i] == a
    after = s.loss_grief[0, i, [a, b]]
    decayed = before[1] * sim.rates.decay_grief ** ticks
    assert after[1] == pytest.approx(decayed, rel=1e-4), "the other loss only fades"
    assert after[0] < before[0] * sim.rates.decay_grief ** ticks - 0.05, "the mourned loss eases"


def test_a_loss_mourned_away_closes_its_body_and_ends_the_vigil(village):
    sim, i, a, b = bereaved_twice(village, **PER_LOSS)
    s = sim.state
    s.busy[0, i] = False
    s.loss_grief[0, i, a] = 2 * GRIEF_LEFT  # nearly mourned: one or two ticks at the body will do
    s.grief[0, i] = s.loss_grief[0, i].sum()
    sim.obs, sim.mask = sim.observer.observe()
    actions = np.zeros((1, sim.N), np.int64)
    actions[0, i] = mourn_action(sim, i, a)
    for _ in range(40):
        sim.step(actions)
        actions[:] = 0
        if s.performing[0, i] or not s.busy[0, i]:
            break
    for _ in range(3):  # at the body: its loss is mourned away within a tick or two, and the vigil ends
        sim.step(actions)
    assert s.loss_grief[0, i, a] < GRIEF_LEFT
    assert not (s.busy[0, i] and s.activity[0, i] == Action.MOURN), "no vigil over a loss mourned away"
    assert s.grief[0, i] > 0.5, "the other loss is still to be mourned"
    assert not sim.mask[0, i, mourn_action(sim, i, a)]
    assert sim.mask[0, i, mourn_action(sim, i, b)]


def test_without_the_lever_no_loss_is_held(village):
    sim, i, a, b = bereaved_twice(village, mourning_ends_with_grief=True)
    assert sim.state.grief[0, i] > 1.0
    assert not sim.state.loss_grief.any()
