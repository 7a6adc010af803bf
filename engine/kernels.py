"""Compiled inner loops (numba) for the per-NPC x per-entity work of a tick.

Numpy handles the (B, N) arithmetic of the tick well, but the (B, N, E) salience ranking and slot
gathering of the observation cost dozens of temporaries per tick. These kernels do that work in one
pass over villages and NPCs, compiled, with no Python loop. They read state and write into
preallocated outputs; all decisions stay in engine/observe.py, which documents the features.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Slot feature columns (must match engine.observe.SLOT_FEATURES; a test checks it).
F_PRESENT = 0
F_STATIC0 = 1  # 8 static features: is_npc, is_player, is_raider, affinity, kin, spouse, friend, rival
N_STATIC = 8
F_BELIEVED_ALIVE = 9
F_DX = 10
F_DY = 11
F_DIST = 12
F_IN_REACH = 13
F_KNOWN_DEAD = 14
F_KNOWN_THREAT = 15
F_ANGER = 16
F_FEAR = 17
F_THEIR_GRIEF = 18
F_THEIR_HEALTH = 19
F_BLAMED = 20
F_SINCE = 21
N_SLOT_FEATURES = 22

# Targeted action kinds, in engine.constants.TARGETED order.
T_TALK, T_COMFORT, T_MOURN, T_ATTACK, T_FLEE, T_WARN = range(6)
N_UNTARGETED = 5
TICKS_PER_DAY = 144
NO_SLOT = -1e9


@njit(cache=True, fastmath=True)
def observe_slots(
    pos: np.ndarray,  # (B, E, 2) float32
    alive: np.ndarray,  # (B, E) bool
    present: np.ndarray,  # (B, E) bool
    health_frac: np.ndarray,  # (B, E) float32
    grief: np.ndarray,  # (B, N) float32
    sight: np.ndarray,  # (B,) float32
    tick: np.ndarray,  # (B,) int
    knows_death: np.ndarray,  # (B, N, E) bool
    knows_threat: np.ndarray,  # (B, N, E) bool
    anger: np.ndarray,  # (B, N, E) float32
    fear: np.ndarray,  # (B, N, E) float32
    learned_tick: np.ndarray,  # (B, N, E) int
    known_culprit: np.ndarray,  # (B, N, E) int
    static_score: np.ndarray,  # (B, N, E) float32: liking, kinship, tie-break
    close: np.ndarray,  # (B, N, E) bool: kin or affinity >= close_affinity
    static_feats: np.ndarray,  # (B, N, E, 8) float32
    free: np.ndarray,  # (B, N) bool: alive and not busy
    reach: float,
    slot_offset: int,
    obs: np.ndarray,  # (B, N, D) float32 out: slot features written at slot_offset
    slot_entity: np.ndarray,  # (B, N, K) int64 out
    mask: np.ndarray,  # (B, N, A) bool out: targeted part written
    anger_max: np.ndarray,  # (B, N) float32 out
    fear_max: np.ndarray,  # (B, N) float32 out
) -> None:
    B, N, E = knows_death.shape
    K = slot_entity.shape[2]
    score = np.empty(E, np.float32)
    blamed = np.zeros(E, np.bool_)
    for b in range(B):
        radius = sight[b]
        for i in range(N):
            px = pos[b, i, 0]
            py = pos[b, i, 1]
            for e in range(E):
                blamed[e] = False
            any_threat = False
            amax = np.float32(0.0)
            fmax = np.float32(0.0)
            for v in range(E):
                c = known_culprit[b, i, v]
                if c >= 0:
                    blamed[c] = True
                if knows_threat[b, i, v] and alive[b, v]:
                    any_threat = True
                if anger[b, i, v] > amax:
                    amax = anger[b, i, v]
                if fear[b, i, v] > fmax:
                    fmax = fear[b, i, v]
            anger_max[b, i] = amax
            fear_max[b, i] = fmax
            # salience: known threats, dead loved ones learned of recently, grudges, fear, liking, proximity
            for e in range(E):
                if e == i or not present[b, e]:
                    score[e] = NO_SLOT
                    continue
                dx = pos[b, e, 0] - px
                dy = pos[b, e, 1] - py
                d = math.sqrt(dx * dx + dy * dy)
                sc = static_score[b, i, e] + math.exp(-d / radius)
                if knows_threat[b, i, e] and alive[b, e]:
                    sc += 3.0
                if knows_death[b, i, e]:
                    if close[b, i, e]:
                        if tick[b] - learned_tick[b, i, e] < TICKS_PER_DAY:
                            sc += 3.0
                    else:
                        sc -= 2.0
                sc += 2.0 * min(anger[b, i, e], 1.0) + 2.0 * min(fear[b, i, e], 1.0)
                score[e] = sc
            for k in range(K):
                best = 0
                best_score = -np.inf
                for e in range(E):
                    if score[e] > best_score:
                        best_score = score[e]
                        best = e
                score[best] = -np.inf
                slot_entity[b, i, k] = best
                base = slot_offset + k * N_SLOT_FEATURES
                for f in range(N_SLOT_FEATURES):
                    obs[b, i, base + f] = 0.0
                a0 = N_UNTARGETED
                if best_score <= NO_SLOT / 2:
                    for kind in range(6):
                        mask[b, i, a0 + kind * K + k] = False
                    continue
                e = best
                dx = pos[b, e, 0] - px
                dy = pos[b, e, 1] - py
                d = math.sqrt(dx * dx + dy * dy)
                in_sight = d <= radius
                known_dead = knows_death[b, i, e]
                obs[b, i, base + F_PRESENT] = 1.0
                for f in range(N_STATIC):
                    obs[b, i, base + F_STATIC0 + f] = static_feats[b, i, e, f]
                obs[b, i, base + F_BELIEVED_ALIVE] = 0.0 if known_dead else 1.0
                obs[b, i, base + F_DX] = min(max(dx / radius, -3.0), 3.0)
                obs[b, i, base + F_DY] = min(max(dy / radius, -3.0), 3.0)
                obs[b, i, base + F_DIST] = min(d / radius, 3.0)
                obs[b, i, base + F_IN_REACH] = 1.0 if d <= reach * 1.5 else 0.0
                obs[b, i, base + F_KNOWN_DEAD] = 1.0 if known_dead else 0.0
                obs[b, i, base + F_KNOWN_THREAT] = 1.0 if knows_threat[b, i, e] else 0.0
                obs[b, i, base + F_ANGER] = anger[b, i, e]
                obs[b, i, base + F_FEAR] = fear[b, i, e]
                if in_sight:
                    if e < N and alive[b, e]:
                        obs[b, i, base + F_THEIR_GRIEF] = grief[b, e]
                    obs[b, i, base + F_THEIR_HEALTH] = health_frac[b, e]
                obs[b, i, base + F_BLAMED] = 1.0 if blamed[e] else 0.0
                if learned_tick[b, i, e] >= 0:
                    obs[b, i, base + F_SINCE] = min(max((tick[b] - learned_tick[b, i, e]) / TICKS_PER_DAY, 0.0), 1.0)
                # action mask for the targeted kinds on this slot
                on_map = alive[b, e] and present[b, e]
                is_npc = e < N
                ok = free[b, i]
                living_npc = ok and is_npc and on_map and not known_dead
                mask[b, i, a0 + T_TALK * K + k] = living_npc
                mask[b, i, a0 + T_COMFORT * K + k] = living_npc
                mask[b, i, a0 + T_MOURN * K + k] = ok and is_npc and known_dead
                mask[b, i, a0 + T_ATTACK * K + k] = ok and on_map and not known_dead
                mask[b, i, a0 + T_FLEE * K + k] = ok and on_map and knows_threat[b, i, e]
                mask[b, i, a0 + T_WARN * K + k] = living_npc and any_threat


@njit(cache=True, fastmath=True)
def threat_fear_and_decay(
    pos: np.ndarray,  # (B, E, 2)
    alive: np.ndarray,  # (B, E)
    present: np.ndarray,  # (B, E)
    sight: np.ndarray,  # (B,)
    bravery: np.ndarray,  # (B, N)
    knows_threat: np.ndarray,  # (B, N, E)
    fear: np.ndarray,  # (B, N, E) in/out
    anger: np.ndarray,  # (B, N, E) in/out
    sight_fear_gain: float,
    decay_fear: float,
    decay_anger: float,
    decay_grudge: float,
    cap: float,
) -> None:
    """A known threat in sight keeps fear up (proximity x timidity); then fear and anger decay.

    Anger at a living, known threat (a grudge) decays with its own, slower half-life."""
    B, N, E = fear.shape
    for b in range(B):
        radius = sight[b]
        for i in range(N):
            px = pos[b, i, 0]
            py = pos[b, i, 1]
            timid = 1.0 - bravery[b, i]
            for e in range(E):
                live_threat = knows_threat[b, i, e] and alive[b, e] and present[b, e]
                f = fear[b, i, e]
                if live_threat:
                    dx = pos[b, e, 0] - px
                    dy = pos[b, e, 1] - py
                    d = math.sqrt(dx * dx + dy * dy)
                    if d <= radius:
                        near_fear = sight_fear_gain * timid * math.exp(-d / radius)
                        if near_fear > f:
                            f = near_fear
                f *= decay_fear
                fear[b, i, e] = min(max(f, 0.0), cap)
                a = anger[b, i, e] * (decay_grudge if live_threat else decay_anger)
                anger[b, i, e] = min(max(a, 0.0), cap)


@njit(cache=True)
def spread_knowledge(
    transfer: np.ndarray,  # (B, N, N) bool: sender -> receiver this tick
    knows_death: np.ndarray,  # (B, N, E) bool
    known_culprit: np.ndarray,  # (B, N, E) int
    knows_threat: np.ndarray,  # (B, N, E) bool, updated in place
    learned: np.ndarray,  # (B, N) bool out: receivers that learned of a new threat
    out: np.ndarray,  # (B * N * E, 5) int64 out rows: village, receiver, subject, teller, death was known
) -> int:
    """Receivers learn what their tellers knew at the start of the transfer; the first teller (lowest
    index) who knew a piece of news is its source. Returns the number of news rows written."""
    B, N, E = knows_death.shape
    count = 0
    new_threat = np.zeros((N, E), np.bool_)
    for b in range(B):
        for j in range(N):
            for e in range(E):
                had_death = knows_death[b, j, e]
                had_culprit = known_culprit[b, j, e] >= 0
                if had_death and had_culprit:
                    continue
                for i in range(N):
                    if not transfer[b, i, j]:
                        continue
                    tells_death = knows_death[b, i, e] and not had_death
                    tells_culprit = known_culprit[b, i, e] >= 0 and not had_culprit and had_death
                    if tells_death or tells_culprit:
                        out[count, 0] = b
                        out[count, 1] = j
                        out[count, 2] = e
                        out[count, 3] = i
                        out[count, 4] = 1 if had_death else 0
                        count += 1
                        break
        # threats: receivers learn every threat their tellers knew before this transfer
        for j in range(N):
            for e in range(E):
                new_threat[j, e] = False
            for i in range(N):
                if not transfer[b, i, j]:
                    continue
                for e in range(E):
                    if knows_threat[b, i, e] and not knows_threat[b, j, e]:
                        new_threat[j, e] = True
        for j in range(N):
            for e in range(E):
                if new_threat[j, e]:
                    knows_threat[b, j, e] = True
                    learned[b, j] = True
    return count
