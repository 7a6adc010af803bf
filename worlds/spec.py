"""The immutable, validated description of a village: what a world file holds.

A `WorldSpec` is plain data. The engine builds its struct-of-arrays state from it; the loader,
saver and generator produce and consume it. Nothing here knows about ticks or policies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRAIT_NAMES: tuple[str, ...] = ("bravery", "aggression", "empathy", "sociability", "diligence")
LOCATION_KINDS: tuple[str, ...] = (
    "home",
    "field",
    "well",
    "tavern",
    "market",
    "graveyard",
    "forest_edge",
    "square",
    "smithy",
)
# Locations where an NPC can do its work (feeds the granary).
WORK_KINDS: tuple[str, ...] = ("field", "market", "smithy", "well")
ROLES: tuple[str, ...] = ("farmer", "smith", "guard", "merchant", "hunter", "healer", "elder", "child")
RELATION_KINDS: tuple[str, ...] = ("kin", "spouse", "friend", "rival")
ACTOR_KINDS: tuple[str, ...] = ("player", "raider")
EVENT_TYPES: tuple[str, ...] = ("kill", "attack", "gift", "talk", "raid")

# The largest world the loader accepts (docs/world-format.md). The engine keeps per-pair arrays (affinity,
# knowledge, anger and fear at each person), so a village's memory grows with the square of its people:
# 2,000 NPCs already take about 0.6 GiB for one village, and training steps dozens of villages at once.
MAX_NPCS = 1000
# The smallest world the loader accepts: each NPC observes the 4 most salient others (the policies' default
# --slots), so a village needs 5 people in all, and a training episode can plan up to 3 killings.
MIN_PEOPLE = 5  # NPCs and actors together
MIN_NPCS = 3
MAX_ACTORS = 64
MAX_LOCATIONS = 1000
MAX_RELATIONSHIPS = 50_000
MAX_EVENTS = 10_000
MAX_WORLD_FILE_BYTES = 16 * 1024 * 1024  # checked before parsing: a 1,000-NPC world is well under 1 MiB


@dataclass(frozen=True)
class Traits:
    """Personality, each in [0, 1]."""

    bravery: float = 0.5
    aggression: float = 0.5
    empathy: float = 0.5
    sociability: float = 0.5
    diligence: float = 0.5

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(getattr(self, name) for name in TRAIT_NAMES)


@dataclass(frozen=True)
class Location:
    name: str
    kind: str
    x: float
    y: float
    radius: float = 2.0


@dataclass(frozen=True)
class NPCSpec:
    name: str
    role: str
    home: str  # name of a location of kind "home"
    traits: Traits = field(default_factory=Traits)
    health: float = 1.0


@dataclass(frozen=True)
class Relationship:
    """An undirected tie between two NPCs; affinity in [-1, 1] (negative: dislike)."""

    a: str
    b: str
    kind: str
    affinity: float


@dataclass(frozen=True)
class ActorSpec:
    """A non-NPC actor: the player or a raider. Raiders start off the map until a raid."""

    name: str
    kind: str
    x: float
    y: float
    health: float = 1.0


@dataclass(frozen=True)
class ScenarioEvent:
    """Something that happens at a set tick: e.g. the player kills `target`."""

    tick: int
    type: str
    actor: str
    target: str | None = None
    x: float | None = None
    y: float | None = None


@dataclass(frozen=True)
class WorldSettings:
    sight_radius: float = 10.0
    raid_probability: float = 0.0  # per tick, while no raid is under way
    granary_start: float = 0.6  # fraction of capacity
    gossip_probability: float = 0.15  # per tick, per pair of acquainted NPCs in talking range


@dataclass(frozen=True)
class WorldSpec:
    id: str
    name: str
    width: float
    height: float
    locations: tuple[Location, ...]
    npcs: tuple[NPCSpec, ...]
    relationships: tuple[Relationship, ...] = ()
    actors: tuple[ActorSpec, ...] = ()
    events: tuple[ScenarioEvent, ...] = ()
    settings: WorldSettings = field(default_factory=WorldSettings)
    description: str = ""

    @property
    def npc_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.npcs)

    @property
    def actor_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actors)

    def npc_index(self, name: str) -> int:
        return self.npc_names.index(name)

    def location(self, name: str) -> Location:
        for loc in self.locations:
            if loc.name == name:
                return loc
        raise KeyError(name)

    def locations_of_kind(self, kind: str) -> tuple[Location, ...]:
        return tuple(loc for loc in self.locations if loc.kind == kind)


class WorldError(ValueError):
    """A world file or spec is invalid. The message names the file, the field path and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None):
        self.source = source
        self.path = path
        self.detail = message
        prefix = ""
        if source:
            prefix += f"{source}: "
        if path:
            prefix += f"{path}: "
        super().__init__(prefix + message)
