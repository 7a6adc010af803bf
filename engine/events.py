"""The typed event log with cause links, and the message records of who told whom what."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.constants import REACTION_NAMES, EventType

EVENT_FIELDS = ("id", "village", "tick", "type", "actor", "target", "x", "y", "cause", "reaction", "intensity")
MESSAGE_FIELDS = ("village", "tick", "sender", "receiver", "subject", "culprit", "how")
# how a piece of news reached its receiver
HOW_WITNESSED, HOW_FOUND_BODY, HOW_TOLD, HOW_WARNED = 0, 1, 2, 3
HOW_NAMES = ("witnessed", "found the body", "told", "warned")


@dataclass(frozen=True)
class Event:
    """One thing that happened. `cause` is the id of the event this one reacts to (-1: none)."""

    id: int
    village: int
    tick: int
    type: EventType
    actor: int
    target: int
    x: float
    y: float
    cause: int = -1
    reaction: int = 0
    intensity: float = 0.0

    @property
    def reaction_name(self) -> str:
        return REACTION_NAMES[self.reaction]

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "village": self.village,
            "tick": self.tick,
            "type": self.type.name.lower(),
            "actor": self.actor,
            "target": self.target,
            "x": round(self.x, 3),
            "y": round(self.y, 3),
            "cause": self.cause,
            "reaction": self.reaction_name,
            "intensity": round(self.intensity, 4),
        }


@dataclass(frozen=True)
class Message:
    """A transfer of news: `receiver` learned at `tick` that `subject` died (killed by `culprit`, -1 unknown).

    `sender` is the NPC who told it, or -1 when the receiver saw it happen or found the body.
    """

    village: int
    tick: int
    sender: int
    receiver: int
    subject: int
    culprit: int
    how: int

    @property
    def how_name(self) -> str:
        return HOW_NAMES[self.how]


@dataclass
class EventLog:
    """Append-only log of events and messages, filled only when the simulation records."""

    events: list[Event] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    def add_events(
        self,
        ids: np.ndarray,
        village: np.ndarray,
        tick: np.ndarray,
        type_: EventType | np.ndarray,
        actor: np.ndarray,
        target: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        cause: np.ndarray | None = None,
        reaction: np.ndarray | None = None,
        intensity: np.ndarray | None = None,
    ) -> None:
        n = len(ids)
        types = np.broadcast_to(np.asarray(type_), (n,))
        cause = np.full(n, -1) if cause is None else cause
        reaction = np.zeros(n, np.int64) if reaction is None else reaction
        intensity = np.zeros(n) if intensity is None else intensity
        for k in range(n):
            self.events.append(
                Event(
                    int(ids[k]), int(village[k]), int(tick[k]), EventType(int(types[k])), int(actor[k]),
                    int(target[k]), float(x[k]), float(y[k]), int(cause[k]), int(reaction[k]), float(intensity[k]),
                )
            )

    def add_messages(self, village, tick, sender, receiver, subject, culprit, how) -> None:
        for k in range(len(village)):
            self.messages.append(
                Message(int(village[k]), int(tick[k]), int(sender[k]), int(receiver[k]), int(subject[k]),
                        int(culprit[k]), int(how[k]))
            )

    def for_village(self, b: int) -> EventLog:
        return EventLog([e for e in self.events if e.village == b], [m for m in self.messages if m.village == b])

    def clear(self, village: int | None = None) -> None:
        if village is None:
            self.events.clear()
            self.messages.clear()
        else:
            self.events[:] = [e for e in self.events if e.village != village]
            self.messages[:] = [m for m in self.messages if m.village != village]

    def by_id(self, b: int, event_id: int) -> Event | None:
        for e in self.events:
            if e.village == b and e.id == event_id:
                return e
        return None
