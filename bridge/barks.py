"""Short lines an NPC says when a reaction starts ("barks"), filled from templates.

The line is chosen by a stable hash of (session, NPC, tick), so a replayed or restored session says the
same thing and no random state needs saving. Games are free to ignore barks and use the reaction label.
"""

from __future__ import annotations

import zlib

# {npc}: the speaker; {target}: whom the reaction is about (may be "someone").
TEMPLATES: dict[str, tuple[str, ...]] = {
    "mourning": (
        "{target}... I can't believe you're gone.",
        "Rest now, {target}. We won't forget you.",
        "Why {target}? Why them?",
    ),
    "revenge": (
        "{target}! You'll pay for what you did!",
        "This is for the ones you took, {target}!",
        "I won't let you walk away from this, {target}.",
    ),
    "fear": (
        "Run! {target} is here!",
        "Stay away from me, {target}!",
        "Help! {target} will kill us all!",
    ),
    "consoling": (
        "I'm so sorry, {target}. I'm here for you.",
        "Come here, {target}. You're not alone.",
    ),
    "alarm": (
        "{target}, listen: we're in danger!",
        "{target}! Be careful, there's a killer about.",
    ),
    "gloating": (
        "Hmph. {target} had it coming.",
        "I won't be shedding any tears for {target}.",
    ),
    "defense": (
        "Back off, {target}!",
        "You won't hurt anyone else, {target}!",
    ),
    "aggression": (
        "Get over here, {target}!",
        "I've had enough of you, {target}!",
    ),
    "gossip": (
        "Did you hear what happened, {target}?",
    ),
}


def bark(reaction: str, npc: str, target: str | None, *, session: str, tick: int) -> str | None:
    """A line for `npc` starting `reaction` about `target`, or None when the reaction has no lines."""
    lines = TEMPLATES.get(reaction)
    if not lines:
        return None
    key = f"{session}:{npc}:{tick}:{reaction}".encode()
    line = lines[zlib.crc32(key) % len(lines)]
    return line.format(npc=npc, target=target or "someone")
