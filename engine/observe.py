"""What each NPC perceives: its own state, K salient others (slots), an action mask, and a global state.

Slots are chosen per NPC by salience from its own knowledge (known threats, dead loved ones, grudges,
fear, liking, proximity), so an NPC only ever sees what it knows. Targeted actions address a slot.
"""

from __future__ import annotations

import numpy as np

from engine.constants import GRIEF_LEFT, HEALTH_EPS, N_KINDS, TICKS_PER_DAY, Action, EntityKind, Trait, close_relations
from engine.kernels import GRIEVANCE_ANGER, N_SLOT_FEATURES, OWN_ENERGY, OWN_NIGHT
from engine.kernels import observe as observe_kernel
from engine.state import FRIEND, RIVAL, SPOUSE
from engine.village import Village
from worlds import ROLES

SELF_FEATURES: tuple[str, ...] = (
    # static (personality and role): first, so they are copied as one block
    *(t.name.lower() for t in Trait),
    *(f"role_{r}" for r in ROLES),
    # dynamic
    "alive", "health", "hunger", "energy", "social", "grief", "anger_max", "fear_max", "joy",
    "time_sin", "time_cos", "night", "granary", "dist_home", "dist_work", "busy",
    *(f"doing_{a.name.lower()}" for a in Action),
)
# own features the kernel copies from a (B, N, 14) array, in this order, then anger_max and fear_max
_OWN_DYNAMIC = ("alive", "health", "hunger", "energy", "social", "grief", "joy", "time_sin", "time_cos", "night",
                "granary", "dist_home", "dist_work", "busy")
SLOT_FEATURES: tuple[str, ...] = (
    "present",
    # static (from the world): contiguous so one gather fills them
    "is_npc", "is_player", "is_raider", "affinity", "kin", "spouse", "friend", "rival",
    # dynamic
    "believed_alive", "dx", "dy", "dist", "in_reach", "known_dead", "known_threat", "anger", "fear",
    "their_grief", "their_health", "blamed_for_death", "since_learned", "news_for_them",
)
_SELF_COL = {name: k for k, name in enumerate(SELF_FEATURES)}
_SLOT_COL = {name: k for k, name in enumerate(SLOT_FEATURES)}
_STATIC_SLOT_COLS = slice(_SLOT_COL["is_npc"], _SLOT_COL["rival"] + 1)
_ACTIVITY_COL0 = _SELF_COL["doing_idle"]
_OWN_COLS = np.array([_SELF_COL[n] for n in (*_OWN_DYNAMIC, "anger_max", "fear_max")], np.int64)
_N_OWN_STATIC = _SELF_COL["alive"]
TRAIT_SLICE = slice(SELF_FEATURES.index("bravery"), SELF_FEATURES.index("diligence") + 1)
ROLE_SLICE = slice(SELF_FEATURES.index(f"role_{ROLES[0]}"), SELF_FEATURES.index(f"role_{ROLES[-1]}") + 1)


def observation_layout(slots: int) -> list[str]:
    """Names of every observation feature, in order (used by docs, the bridge's hello and tests)."""
    return list(SELF_FEATURES) + [f"slot{k}.{f}" for k in range(slots) for f in SLOT_FEATURES]


# salience of a slot: liking, plus half a point for kin, plus a tiny index tie-break that keeps slot order stable
KIN_SALIENCE = 0.5
TIE_BREAK = 1e-4


class Observer:
    """The observation phase: every NPC's observation row, action mask and slots, from its own mind."""

    def __init__(self, sim: Village):
        self.sim = sim
        self.obs_dim = len(SELF_FEATURES) + sim.K * len(SLOT_FEATURES)
        self.slot_entity = np.zeros((sim.B, sim.N, sim.K), np.int64)
        self.refresh_world()

    def refresh_world(self) -> None:
        """Precompute what depends only on the world (relations, kinds, traits): call after worlds change."""
        sim = self.sim
        w, t = sim.w, sim.t
        B, N, E = sim.B, sim.N, sim.E
        kind = w.entity_kind
        aff = np.zeros((B, N, E), np.float32)
        aff[:, :, :N] = w.base_affinity
        kin = np.zeros((B, N, E), bool)
        kin[:, :, :N] = w.kin
        rel = np.full((B, N, E), -1, np.int8)
        rel[:, :, :N] = w.relation
        self._close = close_relations(aff, kin, t.close_affinity)  # a loved one's death draws attention
        tiebreak = (np.arange(E, dtype=np.float32) * TIE_BREAK)[None, None, :]
        self._static_score = np.maximum(aff, 0.0) + KIN_SALIENCE * kin.astype(np.float32) + tiebreak
        # static slot features, gathered per slot each tick: is_npc, is_player, is_raider, affinity, kin,
        # spouse, friend, rival
        self._static_feats = np.stack(
            [
                np.broadcast_to((kind == EntityKind.NPC)[None, None, :], (B, N, E)),
                np.broadcast_to((kind == EntityKind.PLAYER)[None, None, :], (B, N, E)),
                np.broadcast_to((kind == EntityKind.RAIDER)[None, None, :], (B, N, E)),
                aff,
                kin,
                rel == SPOUSE,
                rel == FRIEND,
                rel == RIVAL,
            ],
            -1,
        ).astype(np.float32)
        self._own_static = np.concatenate([w.traits, np.eye(len(ROLES), dtype=np.float32)[w.role]], -1)
        if self._own_static.shape[-1] != _N_OWN_STATIC:
            raise ValueError("static own features out of step with SELF_FEATURES")
        self._size = np.sqrt((w.size**2).sum(-1))[:, None].astype(np.float32)

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """(B, N, obs_dim) float32 observations and (B, N, n_actions) bool masks (one compiled pass)."""
        sim = self.sim
        s, w, t = sim.state, sim.w, sim.t
        B, N = sim.B, sim.N
        obs = np.empty((B, N, self.obs_dim), np.float32)
        mask = np.empty((B, N, sim.n_actions), bool)
        tod = sim.time_of_day / TICKS_PER_DAY * 2 * np.pi
        npc_pos = s.pos[:, :N]
        ones = np.ones((B, N), np.float32)
        own_dynamic = np.stack(
            [
                s.alive[:, :N],
                s.health[:, :N] / np.maximum(w.max_health[:, :N], HEALTH_EPS),
                s.hunger,
                s.energy,
                s.social,
                s.grief,
                s.joy,
                ones * np.sin(tod)[:, None],
                ones * np.cos(tod)[:, None],
                ones * sim.is_night[:, None],
                ones * s.granary[:, None],
                np.sqrt(((npc_pos - w.home_pos) ** 2).sum(-1)) / self._size,
                np.sqrt(((npc_pos - w.work_pos) ** 2).sum(-1)) / self._size,
                s.busy,
            ],
            -1,
        ).astype(np.float32)
        observe_kernel(
            s.pos, s.alive, s.present, s.health / np.maximum(w.max_health, HEALTH_EPS), s.grief, s.loss_grief,
            t.grief_per_loss, w.sight_radius,
            s.tick, s.knows_death, s.knows_threat, s.anger, s.fear, s.learned_tick, s.known_culprit,
            self._static_score, self._close, self._static_feats, self._own_static, own_dynamic, _OWN_COLS,
            s.activity, _ACTIVITY_COL0, N_KINDS, s.busy, s.granary > 0, t.sleep_energy, t.work_at_night,
            t.work_stops_for_threat,
            t.reach * t.strike_reach_factor,
            GRIEVANCE_ANGER if t.attack_needs_grievance else -1.0, t.inform_threat_deaths, t.tell_salience,
            GRIEF_LEFT if t.mourning_ends_with_grief else -1.0,
            len(SELF_FEATURES),
            obs, self.slot_entity, mask,
        )
        return obs, mask

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
                sim.obs[..., _SELF_COL["anger_max"]],  # computed by the observation pass this tick
                sim.obs[..., _SELF_COL["fear_max"]],
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


if (_OWN_DYNAMIC.index("energy"), _OWN_DYNAMIC.index("night")) != (OWN_ENERGY, OWN_NIGHT):
    raise ImportError("engine.kernels own_dynamic columns are out of date with _OWN_DYNAMIC")
if len(SLOT_FEATURES) != N_SLOT_FEATURES:  # the compiled kernel writes columns by number
    raise ImportError("engine.kernels slot columns are out of date with SLOT_FEATURES")
