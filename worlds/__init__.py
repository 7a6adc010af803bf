"""Worlds as data: the world schema, loader/validator/saver, generator and the bundled worlds."""

from worlds.generate import generate_world
from worlds.graph import relation_matrices, social_graph
from worlds.io import bundled_worlds, load_world, save_world, world_from_dict, world_to_dict
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
    "load_world", "save_world", "generate_world", "bundled_worlds", "world_to_dict", "world_from_dict",
]

