"""engine.reactions.ReactionRuns: a reaction lasts as long as the behaviour behind it (hand-worked cases)."""

from __future__ import annotations

import numpy as np

from engine.constants import Action, Reaction
from engine.reactions import ReactionRuns

M, R, N0 = int(Reaction.MOURNING), int(Reaction.REVENGE), int(Reaction.NONE)


def feed(runs: ReactionRuns, tick: int, raw: list[int], act: list[int], tgt: list[int], alive=None):
    alive = np.ones((1, len(raw)), bool) if alive is None else np.array([alive])
    return runs.update(np.array([raw]), np.array([act]), np.array([tgt]), alive, np.array([tick]))[0]


def test_a_label_runs_through_none_while_the_same_action_on_the_same_target_continues():
    runs = ReactionRuns(1, 1)
    mourn, work = int(Action.MOURN), int(Action.WORK)
    assert feed(runs, 5, [M], [mourn], [3]).tolist() == [True]  # starts: a bark
    assert not feed(runs, 6, [N0], [mourn], [3]).any()  # the spell ended, it walks on: still mourning
    assert runs.label[0, 0] == M and runs.since[0, 0] == 5 and runs.duration(np.array([6]))[0, 0] == 2
    assert not feed(runs, 7, [M], [mourn], [3]).any()  # a new spell: the same reaction, no new bark
    assert runs.duration(np.array([7]))[0, 0] == 3
    assert not feed(runs, 8, [N0], [work], [-1]).any()  # back to work: it ends
    assert runs.label[0, 0] == N0 and runs.since[0, 0] == -1 and runs.duration(np.array([8]))[0, 0] == 0


def test_another_target_another_label_or_death_ends_it():
    runs = ReactionRuns(1, 3)
    attack, mourn = int(Action.ATTACK), int(Action.MOURN)
    feed(runs, 0, [R, R, M], [attack, attack, mourn], [12, 12, 4])
    started = feed(runs, 1, [N0, R, N0], [attack, attack, mourn], [13, 12, 4], alive=[True, True, False])
    assert started.tolist() == [False, False, False]
    assert runs.label[0].tolist() == [N0, R, N0]  # new target: over (none now); same: on; dead: over
    started = feed(runs, 2, [N0, int(Reaction.DEFENSE), N0], [attack, attack, mourn], [13, 12, 4])
    assert started.tolist() == [False, True, False]  # another label on the same behaviour is a new reaction
    assert runs.since[0, 1] == 2
