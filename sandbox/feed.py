"""The event feed: the engine's event log and news messages as short readable lines, read incrementally."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.constants import REACTION_NAMES, EventType, Reaction
from engine.events import HOW_FOUND_BODY, HOW_TOLD, HOW_WARNED, HOW_WITNESSED, Event, Message

# line kinds, for colours
VIOLENCE, REACTION, NEWS, INFO, EDIT = "violence", "reaction", "news", "info", "edit"

_REACTION_PHRASE = {
    Reaction.MOURNING: "mourns {t}",
    Reaction.REVENGE: "seeks revenge on {t}",
    Reaction.FEAR: "flees from {t}",
    Reaction.CONSOLING: "consoles {t}",
    Reaction.ALARM: "warns {t}",
    Reaction.GLOATING: "gloats over {t}",
    Reaction.DEFENSE: "fights back against {t}",
    Reaction.AGGRESSION: "attacks {t}",
}


@dataclass(frozen=True)
class FeedLine:
    tick: int
    text: str
    kind: str
    actor: int = -1  # entity index of who did it (for filtering by the selected NPC)
    target: int = -1
    reaction: int = 0


def describe_event(event: Event, names: list[str]) -> FeedLine:
    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else "someone"

    a, t = event.actor, event.target
    if event.type == EventType.DEATH:
        text = f"{name(a)} killed {name(t)}" if a >= 0 else f"{name(t)} died"
        return FeedLine(event.tick, text, VIOLENCE, a, t)
    if event.type == EventType.ATTACK:
        return FeedLine(event.tick, f"{name(a)} hits {name(t)}", VIOLENCE, a, t)
    if event.type == EventType.RAID_START:
        return FeedLine(event.tick, "raiders come out of the forest", VIOLENCE, a, t)
    if event.type == EventType.GIFT:
        return FeedLine(event.tick, f"{name(a)} gives {name(t)} a gift", INFO, a, t)
    if event.type == EventType.TALK:
        return FeedLine(event.tick, f"{name(a)} talks with {name(t)}", INFO, a, t)
    if event.type == EventType.REACTION:
        try:
            phrase = _REACTION_PHRASE[Reaction(event.reaction)].format(t=name(t))
        except (KeyError, ValueError):
            phrase = REACTION_NAMES[event.reaction] if 0 <= event.reaction < len(REACTION_NAMES) else "reacts"
        label = REACTION_NAMES[event.reaction] if 0 <= event.reaction < len(REACTION_NAMES) else "?"
        return FeedLine(event.tick, f"{name(a)} {phrase} [{label} {event.intensity:.2f}]", REACTION, a, t,
                        event.reaction)
    return FeedLine(event.tick, f"{event.type.name.lower()}: {name(a)} -> {name(t)}", INFO, a, t)


def describe_message(message: Message, names: list[str]) -> FeedLine:
    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else "someone"

    r, s, subject = message.receiver, message.sender, message.subject
    culprit = f" ({name(message.culprit)} did it)" if message.culprit >= 0 else ""
    if message.how == HOW_WITNESSED:
        text = f"{name(r)} saw {name(subject)} die{culprit}"
    elif message.how == HOW_FOUND_BODY:
        text = f"{name(r)} found {name(subject)}'s body"
    elif message.how == HOW_WARNED:
        text = f"{name(s)} warned {name(r)}: {name(subject)} is dead{culprit}"
    elif message.how == HOW_TOLD:
        text = f"{name(s)} told {name(r)}: {name(subject)} is dead{culprit}"
    else:
        text = f"{name(r)} learned {name(subject)} is dead{culprit}"
    return FeedLine(message.tick, text, NEWS, r, subject)


class Feed:
    """Reads new events and messages of village 0 from a recording simulation's log since the last call."""

    def __init__(self, capacity: int = 400):
        self.lines: deque[FeedLine] = deque(maxlen=capacity)
        self._events_seen = 0
        self._messages_seen = 0

    def reset(self) -> None:
        self.lines.clear()
        self._events_seen = 0
        self._messages_seen = 0

    @property
    def seen(self) -> tuple[int, int]:
        """How many events and messages of the log have been read."""
        return self._events_seen, self._messages_seen

    def note(self, tick: int, text: str, kind: str = INFO) -> None:
        """A line from the sandbox itself (an edit, a saved file, a replay result)."""
        self.lines.append(FeedLine(tick, text, kind))

    def update(self, log: object, names: list[str]) -> list[FeedLine]:
        """Append and return the lines for everything logged since the last update."""
        events = log.events  # type: ignore[attr-defined]
        messages = log.messages  # type: ignore[attr-defined]
        if len(events) < self._events_seen or len(messages) < self._messages_seen:  # the log was cleared
            self._events_seen = self._messages_seen = 0
        new = [describe_event(e, names) for e in events[self._events_seen:] if e.village == 0]
        new += [describe_message(m, names) for m in messages[self._messages_seen:] if m.village == 0]
        self._events_seen, self._messages_seen = len(events), len(messages)
        new.sort(key=lambda line: line.tick)  # stable: events before messages within a tick
        self.lines.extend(new)
        return new
