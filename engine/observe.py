"""What each NPC perceives: its own state, K salient others (slots), an action mask, and a global state.

Slots are chosen per NPC by salience from its own knowledge (known threats, dead loved ones, grudges,
fear, liking, proximity), so an NPC only ever sees what it knows. Targeted actions address a slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.constants import N_KINDS, TARGETED, TICKS_PER_DAY, UNTARGETED, Action, EntityKind
from engine.state import FRIEND, RIVAL, SPOUSE
from worlds import ROLES

if TYPE_CHECKING:
    from engine.sim import VillageSim

SELF_FEATURES: tuple[str, ...] = (
    "alive", "health", "hunger", "energy", "social", "grief", "anger_max", "fear_max", "joy",
    "bravery", "aggression", "empathy", "sociability", "diligence",
    *(f"role_{r}" for r in ROLES),
    "time_sin", "time_cos", "night", "granary", "dist_home", "dist_work", "busy",
    *(f"doing_{a.name.lower()}" for a in Action),
)
SLOT_FEATURES: tuple[str, ...] = (
    "present", "is_npc", "is_player", "is_raider", "believed_alive", "dx", "dy", "dist", "in_reach",
    "affinity", "kin", "spouse", "friend", "rival", "known_dead", "known_threat", "anger", "fear",
    "their_grief", "their_health", "blamed_for_death", "since_learned",
)
TRAIT_SLICE = slice(SELF_FEATURES.index("bravery"), SELF_FEATURES.index("diligence") + 1)
ROLE_SLICE = slice(SELF_FEATURES.index(f"role_{ROLES[0]}"), SELF_FEATURES.index(f"role_{ROLES[-1]}") + 1)


def observation_layout(slots: int) -> list[str]:
    """Names of every observation feature, in order (used by docs, the bridge's hello and tests)."""
    return list(SELF_FEATURES) + [f"slot{k}.{f}" for k in range(slots) for f in SLOT_FEATURES]


@dataclass
class Geometry:
    dx: np.ndarray  # (B, N, E) entity minus NPC
    dy: np.ndarray
    dist: np.ndarray


class Observer:
    def __init__(self, sim: VillageSim):
        self.sim = sim
        self.obs_dim = len(SELF_FEATURES) + sim.K * len(SLOT_FEATURES)
        self.slot_entity = np.zeros((sim.B, sim.N, sim.K), np.int64)
        self._self_index = np.arange(sim.N)
        self._tiebreak = (np.arange(sim.E, dtype=np.float32) * 1e-4)[None, None, :]
        self._role_onehot = np.eye(len(ROLES), dtype=np.float32)[sim.w.role]
        kind = sim.w.entity_kind
        self._is_npc = (kind == EntityKind.NPC).astype(np.float32)
        self._is_player = (kind == EntityKind.PLAYER).astype(np.float32)
        self._is_raider = (kind == EntityKind.RAIDER).astype(np.float32)
        self._untargeted = np.array([int(a) for a in UNTARGETED])
        self._geo: Geometry | None = None
        self._geo_tick: np.ndarray | None = None

    def geometry(self) -> Geometry:
        s = self.sim.state
        npc = s.pos[:, : self.sim.N]
        dx = s.pos[:, None, :, 0] - npc[:, :, None, 0]
        dy = s.pos[:, None, :, 1] - npc[:, :, None, 1]
        self._geo = Geometry(dx, dy, np.sqrt(dx * dx + dy * dy))
        return self._geo

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """(B, N, obs_dim) float32 observations and (B, N, n_actions) bool masks."""
        sim = self.sim
        s, w, t = sim.state, sim.w, sim.t
        B, N, E, K = sim.B, sim.N, sim.E, sim.K
        geo = self.geometry()
        sight = w.sight_radius[:, None, None]
        alive_npc = s.alive[:, :N]
        npc_slice = slice(0, N)

        # --- salience and slot choice
        aff = np.zeros((B, N, E), np.float32)
        aff[:, :, npc_slice] = s.affinity
        kin = np.zeros((B, N, E), bool)
        kin[:, :, npc_slice] = w.kin
        close = (aff >= t.close_affinity) | kin
        exists = s.present[:, None, :] & np.ones((1, N, 1), bool)
        exists[:, self._self_index, self._self_index] = False
        live_threat = s.knows_threat & s.alive[:, None, :]
        recent = (s.tick[:, None, None] - s.learned_tick) < TICKS_PER_DAY
        score = (
            3.0 * live_threat
            + 3.0 * (s.knows_death & close & recent)
            + 2.0 * np.minimum(s.anger, 1.0)
            + 2.0 * np.minimum(s.fear, 1.0)
            + np.maximum(aff, 0.0)
            + 0.5 * kin
            + np.exp(-geo.dist / sight)
            - 2.0 * (s.knows_death & ~close)
            + self._tiebreak
        )
        score = np.where(exists, score, -1e9)
        top = np.argpartition(-score, K - 1, axis=-1)[..., :K]
        top_score = np.take_along_axis(score, top, -1)
        order = np.argsort(-top_score, axis=-1, kind="stable")
        slot = np.take_along_axis(top, order, -1)
        self.slot_entity = slot
        valid = np.take_along_axis(score, slot, -1) > -1e8

        def g(a: np.ndarray) -> np.ndarray:
            return np.take_along_axis(a, slot, -1)

        believed_alive = ~g(s.knows_death)
        dist = g(geo.dist)
        grief_e = np.zeros((B, N, E), np.float32)
        grief_e[:, :, npc_slice] = (s.grief * alive_npc)[:, None, :]
        health_e = np.broadcast_to((s.health / np.maximum(w.max_health, 1e-6))[:, None, :], (B, N, E))
        in_sight = geo.dist <= sight
        blamed = np.zeros((B, N, E), bool)
        if (s.known_culprit >= 0).any():
            bb, ii, vv = np.nonzero(s.known_culprit >= 0)
            blamed[bb, ii, s.known_culprit[bb, ii, vv]] = True
        since = np.where(s.learned_tick >= 0, (s.tick[:, None, None] - s.learned_tick) / TICKS_PER_DAY, 0.0)
        rel = np.full((B, N, E), -1, np.int8)
        rel[:, :, npc_slice] = w.relation
        rel_s = g(rel)
        slot_feats = np.stack(
            [
                valid,
                self._is_npc[slot],
                self._is_player[slot],
                self._is_raider[slot],
                believed_alive & valid,
                np.clip(g(geo.dx) / sight, -3, 3),
                np.clip(g(geo.dy) / sight, -3, 3),
                np.clip(dist / sight, 0, 3),
                dist <= t.reach * 1.5,
                g(aff),
                g(kin),
                rel_s == SPOUSE,
                rel_s == FRIEND,
                rel_s == RIVAL,
                g(s.knows_death),
                g(s.knows_threat),
                g(s.anger),
                g(s.fear),
                g(grief_e * in_sight),
                g(health_e * in_sight),
                g(blamed),
                np.clip(g(since), 0, 1),
            ],
            axis=-1,
        ).astype(np.float32)
        slot_feats *= valid[..., None]

        # --- own state
        tod = sim.time_of_day / TICKS_PER_DAY * 2 * np.pi
        size = np.linalg.norm(w.size, axis=-1)[:, None]
        npc_pos = s.pos[:, :N]
        activity = np.eye(N_KINDS, dtype=np.float32)[s.activity] * s.busy[..., None]
        own = np.concatenate(
            [
                np.stack(
                    [
                        alive_npc,
                        s.health[:, :N] / np.maximum(w.max_health[:, :N], 1e-6),
                        s.hunger,
                        s.energy,
                        s.social,
                        s.grief,
                        s.anger.max(-1),
                        s.fear.max(-1),
                        s.joy,
                    ],
                    -1,
                ),
                w.traits,
                self._role_onehot,
                np.stack(
                    [
                        np.broadcast_to(np.sin(tod)[:, None], (B, N)),
                        np.broadcast_to(np.cos(tod)[:, None], (B, N)),
                        np.broadcast_to(sim.is_night[:, None], (B, N)),
                        np.broadcast_to(s.granary[:, None], (B, N)),
                        np.linalg.norm(npc_pos - w.home_pos, axis=-1) / size,
                        np.linalg.norm(npc_pos - w.work_pos, axis=-1) / size,
                        s.busy,
                    ],
                    -1,
                ),
                activity,
            ],
            -1,
        ).astype(np.float32)
        obs = np.concatenate([own, slot_feats.reshape(B, N, -1)], -1)
        obs *= alive_npc[..., None]

        # --- action mask
        mask = self._mask(valid, slot, believed_alive)
        return obs, mask

    def _mask(self, valid: np.ndarray, slot: np.ndarray, believed_alive: np.ndarray) -> np.ndarray:
        sim = self.sim
        s = sim.state
        B, N, K = sim.B, sim.N, sim.K
        alive_npc = s.alive[:, :N]
        free = alive_npc & ~s.busy
        truly_alive = np.take_along_axis(np.broadcast_to(s.alive[:, None, :], (B, N, sim.E)), slot, -1)
        is_npc = self._is_npc[slot] > 0
        living_npc = valid & is_npc & believed_alive & truly_alive
        known_dead = valid & is_npc & np.take_along_axis(s.knows_death, slot, -1)
        threat = valid & truly_alive & np.take_along_axis(s.knows_threat, slot, -1)
        knows_any_threat = (s.knows_threat & s.alive[:, None, :]).any(-1)
        per_kind = {
            Action.TALK: living_npc,
            Action.COMFORT: living_npc,
            Action.MOURN: known_dead,
            Action.ATTACK: valid & truly_alive & believed_alive,
            Action.FLEE: threat,
            Action.WARN: living_npc & knows_any_threat[..., None],
        }
        untargeted = np.ones((B, N, len(UNTARGETED)), bool)
        untargeted[..., UNTARGETED.index(Action.EAT)] = s.granary[:, None] > 0
        targeted = np.concatenate([per_kind[a] for a in TARGETED], -1)
        mask = np.concatenate([untargeted, targeted], -1) & free[..., None]
        # busy or dead: only IDLE ("carry on" for the busy, nothing for the dead)
        mask[..., 0] |= ~free
        return mask

    def global_state(self) -> np.ndarray:
        """(B, state_dim) for centralised critics: every NPC's body and mood, actors, time, granary."""
        sim = self.sim
        s, w = sim.state, sim.w
        N = sim.N
        size = w.size[:, None, :]
        npc = np.stack(
            [
                s.alive[:, :N],
                s.health[:, :N],
                s.hunger,
                s.energy,
                s.social,
                s.grief,
                s.anger.max(-1),
                s.fear.max(-1),
                s.pos[:, :N, 0] / size[..., 0],
                s.pos[:, :N, 1] / size[..., 1],
            ],
            -1,
        ).reshape(sim.B, -1)
        actors = np.stack(
            [s.alive[:, N:] & s.present[:, N:], s.health[:, N:], s.pos[:, N:, 0] / size[..., 0],
             s.pos[:, N:, 1] / size[..., 1]],
            -1,
        ).reshape(sim.B, -1)
        tod = sim.time_of_day / TICKS_PER_DAY * 2 * np.pi
        glob = np.stack([np.sin(tod), np.cos(tod), s.granary, s.tick / sim.max_ticks], -1)
        return np.concatenate([npc, actors, glob], -1).astype(np.float32)

    @property
    def state_dim(self) -> int:
        return self.sim.N * 10 + self.sim.M * 4 + 4
