"""engine.external: the minds of a world whose bodies live in a game (the bridge's sessions use it)."""

from __future__ import annotations

import numpy as np

from engine.external import ExternalSim, InjectedHit, InjectedSighting
from worlds import load_world


def test_an_injected_death_reaches_exactly_the_listed_witnesses():
    sim = ExternalSim(load_world("village-v1"), seed=0, slots=4)
    N = sim.N
    player = int(np.flatnonzero(sim.w.entity_kind >= 1)[0])
    victim, listed, bystander = 0, 1, 2
    for npc in (listed, bystander):  # both stand right by the victim: the engine's sight test would pick both
        sim.state.pos[0, npc] = sim.state.pos[0, victim] + np.array([0.5, 0.0], np.float32)
    sim.state.pos[0, player] = sim.state.pos[0, victim] + np.array([0.0, 0.5], np.float32)
    witnesses = np.zeros(N, bool)
    witnesses[listed] = True
    sim.injected_hits.append(InjectedHit(player, victim, True, None))
    sim.injected_sightings.append(InjectedSighting("death", victim, player, victim, witnesses))
    sim.tick(np.zeros(N, np.int64))
    assert not sim.state.alive[0, victim]
    assert sim.state.knows_death[0, listed, victim] and sim.state.known_culprit[0, listed, victim] == player
    assert not sim.state.knows_death[0, bystander, victim]
    assert sim.state.knows_threat[0, listed, player] and not sim.state.knows_threat[0, bystander, player]
    assert not sim.injected_hits and not sim.injected_sightings  # consumed by the tick
