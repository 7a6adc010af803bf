"""World edits for designers, as pure functions WorldSpec -> WorldSpec.

Every result goes through the world validator (worlds.world_from_dict), so an edit either gives a
world that loads and saves, or raises `WorldError` naming what is wrong; the sandbox then rebuilds
its simulation from the new spec.
"""

from __future__ import annotations

import dataclasses
import math

from worlds import (
    RELATION_KINDS,
    ROLES,
    TRAIT_NAMES,
    Location,
    NPCSpec,
    Relationship,
    WorldError,
    WorldSpec,
    world_from_dict,
    world_to_dict,
)

HOME_SNAP = 3.0  # a new NPC moves into a home this close to the click, else gets a new house there
NEW_NAMES = ("Wynn", "Orla", "Piet", "Rhea", "Tobin", "Una", "Vance", "Ysolde", "Marek", "Nell", "Quill", "Sable")


def validated(spec: WorldSpec) -> WorldSpec:
    """The spec as the loader would produce it (raises WorldError when invalid)."""
    return world_from_dict(world_to_dict(spec), source="sandbox edit")


def _npc(spec: WorldSpec, name: str) -> NPCSpec:
    for npc in spec.npcs:
        if npc.name == name:
            return npc
    raise WorldError(f"no NPC named {name!r}", path="npcs")


def _fresh_name(spec: WorldSpec) -> str:
    taken = set(spec.npc_names) | set(spec.actor_names) | {loc.name for loc in spec.locations}
    for base in NEW_NAMES:
        if base not in taken:
            return base
    k = 1
    while f"Villager{k}" in taken:
        k += 1
    return f"Villager{k}"


def add_npc(spec: WorldSpec, x: float, y: float, *, role: str = "farmer",
            name: str | None = None) -> tuple[WorldSpec, str]:
    """A new NPC living in the home nearest (x, y) if one is within HOME_SNAP, else in a new house there."""
    if role not in ROLES:
        raise WorldError(f"expected one of {', '.join(ROLES)}, got {role!r}", path="role")
    name = name or _fresh_name(spec)
    x = min(max(float(x), 0.0), float(spec.width))
    y = min(max(float(y), 0.0), float(spec.height))
    homes = sorted(spec.locations_of_kind("home"), key=lambda loc: math.hypot(loc.x - x, loc.y - y))
    locations = spec.locations
    if homes and math.hypot(homes[0].x - x, homes[0].y - y) <= HOME_SNAP:
        home = homes[0].name
    else:
        home = f"{name}'s House"
        locations = (*locations, Location(home, "home", round(x, 2), round(y, 2)))
    npc = NPCSpec(name=name, role=role, home=home)
    return validated(dataclasses.replace(spec, locations=locations, npcs=(*spec.npcs, npc))), name


def remove_npc(spec: WorldSpec, name: str) -> WorldSpec:
    """Drop an NPC with its relationships and the scenario events that name it."""
    _npc(spec, name)
    return validated(dataclasses.replace(
        spec,
        npcs=tuple(n for n in spec.npcs if n.name != name),
        relationships=tuple(r for r in spec.relationships if name not in (r.a, r.b)),
        events=tuple(e for e in spec.events if name not in (e.actor, e.target)),
    ))


def set_trait(spec: WorldSpec, name: str, trait: str, value: float) -> WorldSpec:
    if trait not in TRAIT_NAMES:
        raise WorldError(f"expected one of {', '.join(TRAIT_NAMES)}, got {trait!r}", path="traits")
    npc = _npc(spec, name)
    value = round(min(max(float(value), 0.0), 1.0), 2)
    traits = dataclasses.replace(npc.traits, **{trait: value})
    return _replace_npc(spec, dataclasses.replace(npc, traits=traits))


def set_role(spec: WorldSpec, name: str, role: str) -> WorldSpec:
    if role not in ROLES:
        raise WorldError(f"expected one of {', '.join(ROLES)}, got {role!r}", path="role")
    return _replace_npc(spec, dataclasses.replace(_npc(spec, name), role=role))


def _replace_npc(spec: WorldSpec, npc: NPCSpec) -> WorldSpec:
    return validated(dataclasses.replace(spec, npcs=tuple(npc if n.name == npc.name else n for n in spec.npcs)))


def relationship(spec: WorldSpec, a: str, b: str) -> Relationship | None:
    for rel in spec.relationships:
        if {rel.a, rel.b} == {a, b}:
            return rel
    return None


def set_relationship(spec: WorldSpec, a: str, b: str, kind: str, affinity: float) -> WorldSpec:
    """Create or replace the tie between a and b (undirected, one per pair)."""
    if kind not in RELATION_KINDS:
        raise WorldError(f"expected one of {', '.join(RELATION_KINDS)}, got {kind!r}", path="relationships.kind")
    _npc(spec, a)
    _npc(spec, b)
    if a == b:
        raise WorldError(f"an NPC cannot be related to itself ({a!r})", path="relationships")
    affinity = round(min(max(float(affinity), -1.0), 1.0), 2)
    new = Relationship(a, b, kind, affinity)
    kept = tuple(r for r in spec.relationships if {r.a, r.b} != {a, b})
    return validated(dataclasses.replace(spec, relationships=(*kept, new)))


def remove_relationship(spec: WorldSpec, a: str, b: str) -> WorldSpec:
    return validated(dataclasses.replace(
        spec, relationships=tuple(r for r in spec.relationships if {r.a, r.b} != {a, b})))


# Default affinity of a tie when it is created or its kind changes by cycling.
KIND_AFFINITY = {"friend": 0.5, "kin": 0.8, "spouse": 0.85, "rival": -0.5}


def cycle_relationship(spec: WorldSpec, a: str, b: str) -> tuple[WorldSpec, str | None]:
    """none -> friend -> kin -> spouse -> rival -> none; returns the new spec and the new kind."""
    order = ("friend", "kin", "spouse", "rival")
    current = relationship(spec, a, b)
    if current is None:
        kind: str | None = order[0]
    else:
        k = order.index(current.kind) if current.kind in order else -1
        kind = order[k + 1] if k + 1 < len(order) else None
    if kind is None:
        return remove_relationship(spec, a, b), None
    return set_relationship(spec, a, b, kind, KIND_AFFINITY[kind]), kind
