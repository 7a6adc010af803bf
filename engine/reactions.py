"""Reactions as they are shown: a label that lasts as long as the behaviour behind it, with a start and a duration.

The tick labels each NPC from what it is doing at the end of the tick (`VillageSim.reaction`, engine/mind.py):
a mourner between two spells at the grave, or an attacker whose blow has just landed, reads `none` for that
tick, and every restart of the action is a new label. `ReactionRuns` turns those labels into reactions that
persist: a reaction starts when a label appears and continues for as long as the NPC keeps doing the same
action to the same target (its label in between may be `none`); another label, another action or target, or
death ends it. Display only: nothing here is read by the simulation.
"""

from __future__ import annotations

import numpy as np

from engine.constants import Reaction


class ReactionRuns:
    """The running reaction of each of (B, N) NPCs: label, the action and target behind it, the tick it began."""

    def __init__(self, B: int, N: int):
        self.label = np.zeros((B, N), np.int64)  # Reaction, NONE where no reaction runs
        self.activity = np.zeros((B, N), np.int64)  # the Action behind it
        self.target = np.full((B, N), -1, np.int64)  # its target entity
        self.since = np.full((B, N), -1, np.int64)  # the tick of its first label, -1 none

    def update(self, raw: np.ndarray, activity: np.ndarray, target: np.ndarray, alive: np.ndarray,
               tick: np.ndarray) -> np.ndarray:
        """Take this tick's labels (B, N), activities, targets, alive NPCs and (B,) tick; returns where a
        reaction started (a new one: the moment for a bark)."""
        running = self.label != Reaction.NONE
        same_behaviour = alive & (activity == self.activity) & (target == self.target)
        keep = running & same_behaviour & ((raw == Reaction.NONE) | (raw == self.label))
        started = (raw != Reaction.NONE) & ~keep & alive
        self.label = np.where(started, raw, np.where(keep, self.label, Reaction.NONE))
        self.activity = np.where(started, activity, self.activity)
        self.target = np.where(started, target, self.target)
        self.since = np.where(started, np.broadcast_to(tick[:, None], raw.shape), np.where(keep, self.since, -1))
        return started

    def duration(self, tick: np.ndarray) -> np.ndarray:
        """(B, N) ticks each reaction has been shown, counting this one; 0 where none runs."""
        return np.where(self.label != Reaction.NONE, tick[:, None] - self.since + 1, 0)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"label": self.label, "activity": self.activity, "target": self.target, "since": self.since}

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        for name, value in arrays.items():
            current = getattr(self, name)
            if value.shape != current.shape:
                raise ValueError(f"reaction runs {name}: saved {value.shape}, expected {current.shape}")
            setattr(self, name, value.astype(np.int64))
