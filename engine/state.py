"""Struct-of-arrays state of B villages, split into body (world physics) and mind (what NPCs know and feel).

Arrays are indexed [village, npc] or [village, npc, entity]. Entities are the N NPCs followed by the
M non-NPC actors (player, raiders), so a target is always one integer. Dead NPCs are masked rows,
never missing ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.constants import EntityKind
from worlds import RELATION_KINDS, ROLES, WORK_KINDS, WorldSpec, relation_matrices, social_graph

KIN = RELATION_KINDS.index("kin")
SPOUSE = RELATION_KINDS.index("spouse")
FRIEND = RELATION_KINDS.index("friend")
RIVAL = RELATION_KINDS.index("rival")


@dataclass
class WorldArrays:
    """Per-village constants derived from a WorldSpec (one row per village, so villages may differ)."""

    size: np.ndarray  # (B, 2) map width, height
    home_pos: np.ndarray  # (B, N, 2)
    work_pos: np.ndarray  # (B, N, 2)
    square_pos: np.ndarray  # (B, 2)
    hangout_pos: np.ndarray  # (B, 3, 2) square, tavern, market: where the player strolls to
    forest_pos: np.ndarray  # (B, 2)
    traits: np.ndarray  # (B, N, 5)
    role: np.ndarray  # (B, N) int
    base_affinity: np.ndarray  # (B, N, N)
    relation: np.ndarray  # (B, N, N) int8, -1 none
    entity_kind: np.ndarray  # (E,) int8
    start_pos: np.ndarray  # (B, E, 2)
    max_health: np.ndarray  # (B, E)
    sight_radius: np.ndarray  # (B,)
    raid_probability: np.ndarray  # (B,)
    granary_start: np.ndarray  # (B,)
    gossip_probability: np.ndarray  # (B,)

    @property
    def kin(self) -> np.ndarray:
        return (self.relation == KIN) | (self.relation == SPOUSE)


def _nearest(points: np.ndarray, targets: np.ndarray) -> np.ndarray:
    d = np.linalg.norm(points[:, None, :] - targets[None, :, :], axis=-1)
    return targets[np.argmin(d, axis=1)]


def world_arrays(specs: list[WorldSpec]) -> WorldArrays:
    """Stack per-village constants; all specs must have the same NPC and actor counts."""
    n, m = len(specs[0].npcs), len(specs[0].actors)
    for spec in specs:
        if len(spec.npcs) != n or len(spec.actors) != m:
            raise ValueError(
                f"all worlds in one batch need the same number of NPCs and actors; "
                f"{spec.id!r} has {len(spec.npcs)} NPCs and {len(spec.actors)} actors, expected {n} and {m}"
            )
    rows = [_one_world(spec) for spec in specs]
    kinds = rows[0].pop("entity_kind")
    for row in rows[1:]:
        row.pop("entity_kind")
    stacked = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    return WorldArrays(entity_kind=kinds, **stacked)


def _one_world(spec: WorldSpec) -> dict[str, np.ndarray]:
    def loc_pos(kind: str, fallback: tuple[float, float]) -> np.ndarray:
        found = spec.locations_of_kind(kind)
        return np.array([found[0].x, found[0].y] if found else fallback, dtype=np.float32)

    center = (spec.width / 2, spec.height / 2)
    home_pos = np.array([[spec.location(n.home).x, spec.location(n.home).y] for n in spec.npcs], np.float32)
    work_sites = np.array([[loc.x, loc.y] for loc in spec.locations if loc.kind in WORK_KINDS], np.float32)
    if len(work_sites) == 0:
        work_sites = np.array([center], np.float32)
    work_pos = _nearest(home_pos, work_sites).astype(np.float32)
    square = loc_pos("square", center)
    hangouts = np.stack([square, loc_pos("tavern", tuple(square)), loc_pos("market", tuple(square))])
    affinity, relation = relation_matrices(social_graph(spec), spec.npc_names)
    kinds = [EntityKind.NPC] * len(spec.npcs) + [
        EntityKind.PLAYER if a.kind == "player" else EntityKind.RAIDER for a in spec.actors
    ]
    start = [home_pos[i] for i in range(len(spec.npcs))] + [np.array([a.x, a.y], np.float32) for a in spec.actors]
    max_health = [npc.health for npc in spec.npcs] + [a.health for a in spec.actors]
    return {
        "size": np.array([spec.width, spec.height], np.float32),
        "home_pos": home_pos,
        "work_pos": work_pos,
        "square_pos": square,
        "hangout_pos": hangouts,
        "forest_pos": loc_pos("forest_edge", (0.0, 0.0)),
        "traits": np.array([npc.traits.as_tuple() for npc in spec.npcs], np.float32),
        "role": np.array([ROLES.index(npc.role) for npc in spec.npcs], np.int64),
        "base_affinity": affinity,
        "relation": relation,
        "entity_kind": np.array(kinds, np.int8),
        "start_pos": np.stack(start).astype(np.float32),
        "max_health": np.array(max_health, np.float32),
        "sight_radius": np.float32(spec.settings.sight_radius),
        "raid_probability": np.float32(spec.settings.raid_probability),
        "granary_start": np.float32(spec.settings.granary_start),
        "gossip_probability": np.float32(spec.settings.gossip_probability),
    }


@dataclass
class VillageState:
    """Everything that changes during an episode. Body first, then activity, then mind."""

    tick: np.ndarray  # (B,) int
    # body (entities: NPCs then actors)
    pos: np.ndarray  # (B, E, 2)
    health: np.ndarray  # (B, E)
    alive: np.ndarray  # (B, E) bool
    present: np.ndarray  # (B, E) bool: on the map (raiders arrive with a raid)
    hunger: np.ndarray  # (B, N)
    energy: np.ndarray  # (B, N)
    social: np.ndarray  # (B, N)
    granary: np.ndarray  # (B,)
    death_tick: np.ndarray  # (B, E) int, -1 alive
    death_pos: np.ndarray  # (B, E, 2)
    killer: np.ndarray  # (B, E) int, -1 none
    death_event: np.ndarray  # (B, E) int event id, -1 none
    threat_event: np.ndarray  # (B, E) int event id of the latest violence by this entity
    threat_victim: np.ndarray  # (B, E) int the entity that violence struck or killed, -1 none
    # NPC activity (macro-actions)
    activity: np.ndarray  # (B, N) int Action
    target: np.ndarray  # (B, N) int entity, -1 none
    dest: np.ndarray  # (B, N, 2)
    performing: np.ndarray  # (B, N) bool: arrived and acting
    perform_left: np.ndarray  # (B, N) int
    travel_left: np.ndarray  # (B, N) int
    busy: np.ndarray  # (B, N) bool
    # mind
    grief: np.ndarray  # (B, N)
    loss_grief: np.ndarray  # (B, N, N): i's grief for j's death (Tuning.grief_per_loss; zeros otherwise)
    anger: np.ndarray  # (B, N, E)
    fear: np.ndarray  # (B, N, E)
    joy: np.ndarray  # (B, N)
    affinity: np.ndarray  # (B, N, N)
    knows_death: np.ndarray  # (B, N, E) bool
    known_culprit: np.ndarray  # (B, N, E) int: who i believes killed e, -1 unknown
    learned_tick: np.ndarray  # (B, N, E) int: when i learned e died, -1
    learned_from: np.ndarray  # (B, N, E) int: NPC who told i, -1 saw it / found the body, -2 not known
    knows_threat: np.ndarray  # (B, N, E) bool: i knows e is dangerous
    # non-NPC actors
    actor_mode: np.ndarray  # (B, M) int ActorMode
    actor_target: np.ndarray  # (B, M) int entity
    actor_dest: np.ndarray  # (B, M, 2)
    actor_timer: np.ndarray  # (B, M) int
    event_count: np.ndarray  # (B,) int

    def copy(self) -> VillageState:
        return VillageState(**{f.name: getattr(self, f.name).copy() for f in fields(self)})
