"""The typed context of one tick: what its phases hand to each other (engine/body.py, engine/mind.py).

A tick's phases read and write the `Village` (state, world, tuning, RNG, log) and pass what happened in
this tick only through a `TickContext`: the blows dealt, who died, who is awake, what was learned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


def _unset() -> np.ndarray:
    """A placeholder until the phase that sets the field has run."""
    return np.zeros(0)


@dataclass
class Hits:
    """Blows of this tick in the order dealt: village, attacker, target, cause (the event id a blow answers)."""

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    def add(self, bb: np.ndarray, attacker: np.ndarray, target: np.ndarray, cause: np.ndarray) -> None:
        self.parts.append((bb, attacker, target, cause))

    def __bool__(self) -> bool:
        return bool(self.parts)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        bb, aa, tt, cc = (np.concatenate(col) for col in zip(*self.parts, strict=True))
        return bb, aa, tt, cc


@dataclass
class News:
    """What NPCs learned this tick, sparse: (village, npc, subject, a new death, a culprit learned) per batch."""

    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(self, bb: np.ndarray, ii: np.ndarray, ee: np.ndarray, new_death: np.ndarray,
            culprit_new: np.ndarray) -> None:
        self.parts.append((bb, ii, ee, new_death, culprit_new))

    def __bool__(self) -> bool:
        return bool(self.parts)

    def columns(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(col) for col in zip(*self.parts, strict=True))


class Relief:
    """The relief reward's ledger (Tuning.w_relief > 0): decreases of the emotion cost over the phases that
    cope (performing), appraise (justice) and fade (decay) are counted; rises and other phases are not."""

    def __init__(self, cost: Callable[[], np.ndarray], shape: tuple[int, int]):
        self.cost = cost
        self.relieved = np.zeros(shape, np.float32)
        self.mark = cost()

    def count(self) -> None:
        """Add the decrease since the mark; the mark moves here."""
        now = self.cost()
        self.relieved += np.maximum(self.mark - now, 0.0)
        self.mark = now

    def skip(self) -> None:
        """Move the mark here without counting (what happened since is not relief)."""
        self.mark = self.cost()


@dataclass
class TickContext:
    """One tick's hand-offs between phases. Arrays are (B, N) unless noted; set by the phase named."""

    actions: np.ndarray  # the policy's flat actions (start_activities)
    npc_alive: np.ndarray  # alive at the start of the tick
    damage: np.ndarray  # (B, E) damage dealt this tick (perform, move_actors, game hits)
    hitter: np.ndarray  # (B, E) who lands the killing blow on each entity, -1 none
    hitter_prio: np.ndarray  # (B, E) the seeded priority of that blow
    learned: np.ndarray  # learned anything (news or a new threat): interrupts a busy NPC
    hits: Hits = field(default_factory=Hits)
    news: News = field(default_factory=News)
    relief: Relief | None = None
    # movement and performance
    target: np.ndarray = field(default_factory=_unset)  # activity target, -1 as 0 (index-safe)
    target_pos: np.ndarray = field(default_factory=_unset)  # (B, N, 2)
    target_alive: np.ndarray = field(default_factory=_unset)  # the target is alive and on the map
    arrived: np.ndarray = field(default_factory=_unset)
    sleeping: np.ndarray = field(default_factory=_unset)
    working: np.ndarray = field(default_factory=_unset)
    talking_first: np.ndarray = field(default_factory=_unset)  # first tick of a talk or comfort: news both ways
    warning_first: np.ndarray = field(default_factory=_unset)  # first tick of a warning: news one way
    blows: np.ndarray = field(default_factory=_unset)  # a charge arrived and struck (perform)
    # combat resolution
    just_died: np.ndarray = field(default_factory=_unset)  # (B, E)
    attacked: np.ndarray = field(default_factory=_unset)
    awake: np.ndarray = field(default_factory=_unset)
    # where the senses write the threats they notice: the state's knows_threat, or a separate (B, N, E) buffer
    # when a game's witness lists decide which sightings count (engine/external.py)
    seen_threat: np.ndarray = field(default_factory=_unset)
    # emotion decay: the summed anger and fear after decay, None while nobody knows a threat
    anger_sum: np.ndarray | None = None
    fear_sum: np.ndarray | None = None
    # news: how many villagers each NPC told of a death they did not know (only counted when it is rewarded)
    informed: np.ndarray | None = None

    def count_relief(self) -> None:
        if self.relief is not None:
            self.relief.count()

    def skip_relief(self) -> None:
        if self.relief is not None:
            self.relief.skip()

    @classmethod
    def begin(cls, actions: np.ndarray, alive: np.ndarray, B: int, N: int, E: int) -> TickContext:
        return cls(
            actions=actions,
            npc_alive=alive[:, :N].copy(),
            damage=np.zeros((B, E), np.float32),
            hitter=np.full((B, E), -1, np.int64),
            hitter_prio=np.full((B, E), -1.0),
            learned=np.zeros((B, N), bool),
        )
