"""A flight from a threat that stands on the fleeing NPC (engine.body.flight_heading): a villager whose charge
reached the killer and who then flees has no "away" to run to; it runs for the open middle of the village."""

from __future__ import annotations

import numpy as np
import pytest

from engine.body import flight_heading
from engine.constants import Action, Tuning
from engine.sim import VillageSim, flat_action
from worlds import load_world


@pytest.fixture(scope="module")
def village():
    return load_world("village-v1")


def test_the_heading_is_straight_away_unless_the_threat_stands_on_the_npc():
    away = np.array([[[3.0, 4.0], [0.0, 0.0], [0.0, 0.0]]], np.float32)
    centre = np.array([[[5.0, 5.0]]], np.float32)
    npc_pos = np.array([[[6.0, 5.0], [5.0, 7.0], [5.0, 5.0]]], np.float32)
    heading = flight_heading(away, npc_pos, centre)
    np.testing.assert_allclose(heading[0, 0], [0.6, 0.8], atol=1e-6)  # straight away, whatever the centre
    np.testing.assert_allclose(heading[0, 1], [0.0, -1.0], atol=1e-6)  # on the threat: toward the centre
    np.testing.assert_allclose(heading[0, 2], [1.0, 0.0], atol=1e-6)  # on the threat at the very centre: east
    np.testing.assert_allclose(np.linalg.norm(heading, axis=-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("tuning", [{}, {"flee_along_walls": True},
                                    {"flee_home": True, "refuge_out_of_sight": True, "flee_along_walls": True}],
                         ids=["straight", "along-walls", "home-out-of-sight"])
def test_a_villager_standing_on_the_killer_gets_away_from_him(village, tuning):
    """Before the fix such a flight headed nowhere: the villager stood on the killer, fleeing in place, until the
    flight was given up 40 ticks later. Now each tick takes it farther, until it is safe and the flight ends."""
    sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(**tuning))
    s, player, npc = sim.state, sim.player, 2
    s.pos[0, player] = np.array([10.0, 8.0], np.float32)
    s.pos[0, npc] = s.pos[0, player]
    s.knows_threat[0, npc, player] = True
    s.fear[0, npc, player] = 1.0
    sim.obs, sim.mask = sim.observer.observe()
    slot = int(np.flatnonzero(sim.observer.slot_entity[0, npc] == player)[0])
    actions = np.zeros((sim.B, sim.N), np.int64)
    actions[0, npc] = flat_action(Action.FLEE, slot, sim.K)
    assert sim.mask[0, npc, actions[0, npc]]
    gaps = []
    for _ in range(4):
        sim.step(actions)
        actions[:] = 0
        gaps.append(float(np.linalg.norm(s.pos[0, npc] - s.pos[0, player])))
    assert gaps[0] > 1.0, "the first tick of the flight already moves it off him"
    assert all(b > a for a, b in zip(gaps, gaps[1:], strict=False)) or gaps[-1] >= sim.safe_distance[0]
