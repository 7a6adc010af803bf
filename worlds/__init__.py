"""Worlds as data: the world schema, loader/validator/saver, generator and the bundled worlds."""

from worlds.graph import relation_matrices, social_graph
from worlds.spec import (
    ACTOR_KINDS,
    EVENT_TYPES,
    LOCATION_KINDS,
    RELATION_KINDS,
    ROLES,
    TRAIT_NAMES,
    WORK_KINDS,
    ActorSpec,
    Location,
    NPCSpec,
    Relationship,
    ScenarioEvent,
    Traits,
    WorldError,
    WorldSettings,
    WorldSpec,
)

__all__ = [
    "ACTOR_KINDS", "EVENT_TYPES", "LOCATION_KINDS", "RELATION_KINDS", "ROLES", "TRAIT_NAMES", "WORK_KINDS",
    "ActorSpec", "Location", "NPCSpec", "Relationship", "ScenarioEvent", "Traits", "WorldError",
    "WorldSettings", "WorldSpec", "relation_matrices", "social_graph",
    "load_world", "save_world", "generate_world", "bundled_worlds",
]


def __getattr__(name: str):
    # The loader, saver and generator live in their own modules; import them on first use.
    if name in ("load_world", "save_world", "bundled_worlds", "world_to_dict", "world_from_dict"):
        from worlds import io

        return getattr(io, name)
    if name == "generate_world":
        from worlds.generate import generate_world

        return generate_world
    raise AttributeError(name)
