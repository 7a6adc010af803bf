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

from engine.constants import TICKS_PER_DAY, Action

# Slot feature columns (must match engine.observe.SLOT_FEATURES; a test checks it).
F_PRESENT = 0
F_STATIC0 = 1  # 8 static features: is_npc, is_player, is_raider, affinity, kin, spouse, friend, rival
N_STATIC = 8
GRIEVANCE_ANGER = 0.05  # anger at an entity above which an NPC may attack it
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
F_NEWS = 22
N_SLOT_FEATURES = 23

# Untargeted actions the mask rules name (engine.constants.Action), and own_dynamic columns (engine/observe.py).
A_WORK, A_EAT, A_SLEEP = int(Action.WORK), int(Action.EAT), int(Action.SLEEP)
OWN_ENERGY, OWN_NIGHT = 3, 9
# Salience of another entity to an NPC (besides liking, kinship and proximity): a known living threat, the death
# of a loved one learned within a day, the death of one not close (pushed down), and anger or fear (each capped
# at 1) times this.
SALIENCE_THREAT = 3.0
SALIENCE_FRESH_LOSS = 3.0
SALIENCE_STRANGER_DEATH = 2.0
SALIENCE_EMOTION = 2.0
MAX_SIGHTS = 3.0  # slot offsets and distances are in sight radii, clipped to this
# Targeted action kinds, in engine.constants.TARGETED order.
T_TALK, T_COMFORT, T_MOURN, T_ATTACK, T_FLEE, T_WARN = range(6)
N_UNTARGETED = 5
NO_SLOT = -1e9
TAKEN = np.float32(-3e38)  # finite: fastmath assumes no infinities


@njit(cache=True, fastmath=True)
def has_news_for(knows_death: np.ndarray, knows_threat: np.ndarray, b: int, i: int, e: int, N: int,
                 threat_news: bool) -> bool:
    """Whether NPC e has not heard of a villager's death that i knows of (with threat_news: or of the death of
    one i knew as a threat): news worth telling e."""
    for v in range(N):
        if knows_death[b, i, v] and not knows_death[b, e, v]:
            return True
    if threat_news:
        for v in range(N, knows_death.shape[2]):
            if knows_death[b, i, v] and knows_threat[b, i, v] and not knows_death[b, e, v]:
                return True
    return False


@njit(cache=True, fastmath=True)
def observe(
    pos: np.ndarray,  # (B, E, 2) float32
    alive: np.ndarray,  # (B, E) bool
    present: np.ndarray,  # (B, E) bool
    health_frac: np.ndarray,  # (B, E) float32
    grief: np.ndarray,  # (B, N) float32
    loss_grief: np.ndarray,  # (B, N, N) float32: grief per loss (read only with grief_per_loss)
    grief_per_loss: bool,  # True: MOURN at a body needs mourn_grief_min of the grief for that death, not of all grief
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
    own_static: np.ndarray,  # (B, N, S) float32: own features that never change (traits, role)
    own_dynamic: np.ndarray,  # (B, N, 14) float32: alive, health, hunger, energy, social, grief, -, -, joy,
    #                           time_sin, time_cos, night, granary, dist_home, dist_work, busy (see observe.py)
    own_cols: np.ndarray,  # (16,) int: obs column of each own_dynamic field, then anger_max, fear_max
    activity: np.ndarray,  # (B, N) int: current Action
    activity_col0: int,
    n_kinds: int,
    busy: np.ndarray,  # (B, N) bool
    can_eat: np.ndarray,  # (B,) bool
    sleep_energy: float,  # by day an NPC can only sleep when its energy is below this
    work_at_night: bool,  # False: WORK is masked at night (the workplaces are closed)
    work_stops_for_threat: bool,  # True: WORK is masked for an NPC who knows of a living threat (a loose killer)
    strike_reach: float,  # a slot is in reach (a blow would land) within this distance
    grievance_anger: float,  # ATTACK needs anger above this at the target (or a known threat, a rival); < 0: no rule
    threat_news: bool,  # news_for_them also marks a face that has not heard that a threat i knew of is dead
    tell_salience: float,  # salience added to a face in sight that has not heard a death i know of (0: none)
    mourn_grief_min: float,  # MOURN needs at least this much grief (< 0: no rule)
    slot_offset: int,
    obs: np.ndarray,  # (B, N, D) float32 out
    slot_entity: np.ndarray,  # (B, N, K) int64 out
    mask: np.ndarray,  # (B, N, A) bool out
) -> None:
    """Each NPC's observation row and action mask, from its own knowledge. See engine/observe.py."""
    B, N, E = knows_death.shape
    K = slot_entity.shape[2]
    D = obs.shape[2]
    A = mask.shape[2]
    S = own_static.shape[2]
    score = np.empty(E, np.float32)
    blamed = np.zeros(E, np.bool_)
    for b in range(B):
        radius = sight[b]
        radius2 = radius * radius
        for i in range(N):
            row = obs[b, i]
            if not alive[b, i]:
                # the dead observe nothing and may only idle
                for f in range(D):
                    row[f] = 0.0
                for k in range(K):
                    slot_entity[b, i, k] = 0
                mask[b, i, 0] = True
                for a in range(1, A):
                    mask[b, i, a] = False
                continue
            free = not busy[b, i]
            px = pos[b, i, 0]
            py = pos[b, i, 1]
            # --- own state
            for f in range(S):
                row[f] = own_static[b, i, f]
            for f in range(own_dynamic.shape[2]):
                row[own_cols[f]] = own_dynamic[b, i, f]
            for a in range(n_kinds):
                row[activity_col0 + a] = 0.0
            if not free:
                row[activity_col0 + activity[b, i]] = 1.0
            for e in range(E):
                blamed[e] = False
            any_threat = False
            knows_a_death = False  # a death that can be news (a villager's, or a threat's): else skip the scan
            amax = np.float32(0.0)
            fmax = np.float32(0.0)
            for v in range(E):
                if (v < N or threat_news) and knows_death[b, i, v]:
                    knows_a_death = True
                c = known_culprit[b, i, v]
                if c >= 0:
                    blamed[c] = True
                if knows_threat[b, i, v] and alive[b, v]:
                    any_threat = True
                if anger[b, i, v] > amax:
                    amax = anger[b, i, v]
                if fear[b, i, v] > fmax:
                    fmax = fear[b, i, v]
            row[own_cols[own_dynamic.shape[2]]] = amax
            row[own_cols[own_dynamic.shape[2] + 1]] = fmax
            # --- untargeted actions; a busy NPC may only "carry on" (action 0)
            mask[b, i, 0] = True
            for a in range(1, N_UNTARGETED):
                mask[b, i, a] = free
            mask[b, i, A_EAT] = free and can_eat[b]  # EAT needs food in the granary
            night = own_dynamic[b, i, OWN_NIGHT] > 0.5
            if not work_at_night and night:  # WORK by day only, when so tuned
                mask[b, i, A_WORK] = False
            if work_stops_for_threat and any_threat:  # nobody goes to work while a killer it knows of is loose
                mask[b, i, A_WORK] = False
            # SLEEP: at night, or by day when tired (own_dynamic: 3 = energy, 9 = night)
            mask[b, i, A_SLEEP] = free and (night or own_dynamic[b, i, OWN_ENERGY] < sleep_energy)
            # --- salience: known threats, dead loved ones learned of recently, grudges, fear, liking, proximity
            for e in range(E):
                if e == i or not present[b, e]:
                    score[e] = NO_SLOT
                    continue
                dx = pos[b, e, 0] - px
                dy = pos[b, e, 1] - py
                # proximity 1 / (1 + (d / sight)^2): no sqrt or exp in the hot loop
                sc = static_score[b, i, e] + radius2 / (radius2 + dx * dx + dy * dy)
                if knows_threat[b, i, e] and alive[b, e]:
                    sc += SALIENCE_THREAT
                if knows_death[b, i, e]:
                    if close[b, i, e]:
                        if tick[b] - learned_tick[b, i, e] < TICKS_PER_DAY:
                            sc += SALIENCE_FRESH_LOSS
                    else:
                        sc -= SALIENCE_STRANGER_DEATH
                sc += SALIENCE_EMOTION * min(anger[b, i, e], 1.0) + SALIENCE_EMOTION * min(fear[b, i, e], 1.0)
                # a face in sight that has not heard yet (Tuning.tell_salience): someone to tell
                if (tell_salience > 0.0 and knows_a_death and e < N and alive[b, e] and not knows_death[b, i, e]
                        and dx * dx + dy * dy <= radius2
                        and has_news_for(knows_death, knows_threat, b, i, e, N, threat_news)):
                    sc += tell_salience
                score[e] = sc
            a0 = N_UNTARGETED
            for k in range(K):
                best = 0
                best_score = TAKEN
                for e in range(E):
                    if score[e] > best_score:
                        best_score = score[e]
                        best = e
                score[best] = TAKEN
                slot_entity[b, i, k] = best
                base = slot_offset + k * N_SLOT_FEATURES
                if best_score <= NO_SLOT / 2:
                    for f in range(N_SLOT_FEATURES):
                        row[base + f] = 0.0
                    for kind in range(6):
                        mask[b, i, a0 + kind * K + k] = False
                    continue
                e = best
                dx = pos[b, e, 0] - px
                dy = pos[b, e, 1] - py
                d = math.sqrt(dx * dx + dy * dy)
                in_sight = d <= radius
                known_dead = knows_death[b, i, e]
                row[base + F_PRESENT] = 1.0
                for f in range(N_STATIC):
                    row[base + F_STATIC0 + f] = static_feats[b, i, e, f]
                row[base + F_BELIEVED_ALIVE] = 0.0 if known_dead else 1.0
                row[base + F_DX] = min(max(dx / radius, -MAX_SIGHTS), MAX_SIGHTS)
                row[base + F_DY] = min(max(dy / radius, -MAX_SIGHTS), MAX_SIGHTS)
                row[base + F_DIST] = min(d / radius, MAX_SIGHTS)
                row[base + F_IN_REACH] = 1.0 if d <= strike_reach else 0.0
                row[base + F_KNOWN_DEAD] = 1.0 if known_dead else 0.0
                row[base + F_KNOWN_THREAT] = 1.0 if knows_threat[b, i, e] else 0.0
                row[base + F_ANGER] = anger[b, i, e]
                row[base + F_FEAR] = fear[b, i, e]
                row[base + F_THEIR_GRIEF] = grief[b, e] if (in_sight and e < N and alive[b, e]) else 0.0
                row[base + F_THEIR_HEALTH] = health_frac[b, e] if in_sight else 0.0
                row[base + F_BLAMED] = 1.0 if blamed[e] else 0.0
                learned = learned_tick[b, i, e]
                row[base + F_SINCE] = min((tick[b] - learned) / TICKS_PER_DAY, 1.0) if learned >= 0 else 0.0
                # the targeted kinds on this slot
                on_map = alive[b, e] and present[b, e]
                is_npc = e < N
                living_npc = free and is_npc and on_map and not known_dead
                # e has not heard of a villager's death that i knows of (read as a face that shows no news)
                news = knows_a_death and is_npc and on_map and not known_dead and has_news_for(
                    knows_death, knows_threat, b, i, e, N, threat_news)
                row[base + F_NEWS] = 1.0 if news else 0.0
                mask[b, i, a0 + T_TALK * K + k] = living_npc
                mask[b, i, a0 + T_COMFORT * K + k] = living_npc
                mask[b, i, a0 + T_MOURN * K + k] = free and is_npc and known_dead and (
                    loss_grief[b, i, e] if grief_per_loss else grief[b, i]) >= mourn_grief_min
                # ATTACK needs a grievance: a known threat, anger at it, or an old rivalry (no unprovoked assaults)
                grievance = knows_threat[b, i, e] or anger[b, i, e] > grievance_anger or static_feats[
                    b, i, e, N_STATIC - 1] > 0.5
                mask[b, i, a0 + T_ATTACK * K + k] = free and on_map and not known_dead and grievance
                mask[b, i, a0 + T_FLEE * K + k] = free and on_map and knows_threat[b, i, e]
                mask[b, i, a0 + T_WARN * K + k] = living_npc and any_threat


@njit(cache=True, fastmath=True)
def threat_fear_and_decay(
    pos: np.ndarray,  # (B, E, 2)
    alive: np.ndarray,  # (B, E)
    present: np.ndarray,  # (B, E)
    sight: np.ndarray,  # (B,)
    bravery: np.ndarray,  # (B, N)
    aggression: np.ndarray,  # (B, N)
    knows_threat: np.ndarray,  # (B, N, E)
    sheltered: np.ndarray,  # (B, N) bool: hiding at home (every threat counts as far)
    fades_fast: np.ndarray,  # (B, N) bool: whose fear of a living threat out of reach fades at the safe rate
    fear: np.ndarray,  # (B, N, E) in/out
    anger: np.ndarray,  # (B, N, E) in/out
    sight_fear_gain: float,
    fear_near: float,
    anger_fear_damping: float,
    decay_fear: float,
    decay_fear_safe: float,
    decay_anger: float,
    decay_grudge: float,
    cap: float,
    anger_sum: np.ndarray,  # (B, N) float32 out: total anger after decay (for the reward)
    fear_sum: np.ndarray,  # (B, N) float32 out
) -> None:
    """A known threat near (within fear_near x the sight radius) keeps fear up (proximity x timidity, damped by
    anger at it); then fear and anger decay. Fear of a threat farther away (safe) decays with its own, shorter
    half-life, so getting away (or hiding at home) brings relief; of a living threat, only for those `fades_fast`
    marks (the others' fades at the near rate).

    Anger at a living, known threat (a grudge) decays with its own, slower half-life."""
    B, N, E = fear.shape
    for b in range(B):
        radius = sight[b]
        near_radius = radius * fear_near
        for i in range(N):
            anger_sum[b, i] = 0.0
            fear_sum[b, i] = 0.0
            if not alive[b, i]:
                continue
            px = pos[b, i, 0]
            py = pos[b, i, 1]
            timid = 1.0 - bravery[b, i]
            damping = anger_fear_damping * aggression[b, i]
            for e in range(E):
                live_threat = knows_threat[b, i, e] and alive[b, e] and present[b, e]
                f = fear[b, i, e]
                near = False
                if live_threat and not sheltered[b, i]:
                    dx = pos[b, e, 0] - px
                    dy = pos[b, e, 1] - py
                    d = math.sqrt(dx * dx + dy * dy)
                    if d <= near_radius:
                        near = True
                        # anger lowers perceived risk (Lerner & Keltner 2001): the angry approach, the afraid flee
                        near_fear = sight_fear_gain * timid * math.exp(-d / radius) / (1.0 + damping * anger[b, i, e])
                        if near_fear > f:
                            f = near_fear
                slow = near or (live_threat and not fades_fast[b, i])
                f = min(max(f * (decay_fear if slow else decay_fear_safe), 0.0), cap)
                fear[b, i, e] = f
                fear_sum[b, i] += f
                a = min(max(anger[b, i, e] * (decay_grudge if live_threat else decay_anger), 0.0), cap)
                anger[b, i, e] = a
                anger_sum[b, i] += a


@njit(cache=True, fastmath=True)
def perceive(
    pos: np.ndarray,  # (B, E, 2)
    alive: np.ndarray,  # (B, E)
    present: np.ndarray,  # (B, E)
    just_died: np.ndarray,  # (B, E) bool: died this tick
    dead_body: np.ndarray,  # (B, E) bool: a body lies here (dead, died at some tick)
    killer: np.ndarray,  # (B, E) int, -1 unknown
    is_raider: np.ndarray,  # (E,) bool
    awake: np.ndarray,  # (B, N) bool
    sight: np.ndarray,  # (B,)
    body_radius: float,
    knows_death: np.ndarray,  # (B, N, E) bool (read)
    knows_threat: np.ndarray,  # (B, N, E) bool (read)
    seen_threat: np.ndarray,  # (B, N, E) bool out: culprits seen killing, raiders seen (may be knows_threat)
    learned: np.ndarray,  # (B, N) bool out: learned of a new threat
    out: np.ndarray,  # (B * N * E, 4) int64 out rows: village, npc, subject, culprit (-1 unknown)
    how: np.ndarray,  # (B * N * E,) int64 out: HOW_WITNESSED (0) or HOW_FOUND_BODY (1)
    justice: bool = False,  # a known threat's killer is not taken for a threat (Tuning.avenger_not_feared)
    side_with_own: bool = False,  # a villager who kills an outsider is not (Tuning.outsider_fights_not_feared)
) -> int:
    """First-hand perception: witnesses within sight of a death see it and its culprit; NPCs passing
    within body_radius of a body find it; raiders on the map within sight are known threats.
    Asleep or dead NPCs perceive nothing. Returns the number of news rows written."""
    B, N, E = knows_death.shape
    count = 0
    for b in range(B):
        radius2 = sight[b] * sight[b]
        body2 = body_radius * body_radius
        for i in range(N):
            if not alive[b, i]:
                continue
            asleep = not awake[b, i]
            px = pos[b, i, 0]
            py = pos[b, i, 1]
            for e in range(E):
                if asleep:
                    # a sleeper perceives nothing but a killing right beside it, which wakes it
                    if not (just_died[b, e] and not knows_death[b, i, e]):
                        continue
                    dx = pos[b, e, 0] - px
                    dy = pos[b, e, 1] - py
                    if dx * dx + dy * dy > body2:
                        continue
                watch_body = dead_body[b, e] and not knows_death[b, i, e]
                watch_raider = is_raider[e] and present[b, e] and alive[b, e] and not (
                    knows_threat[b, i, e] or seen_threat[b, i, e])
                if not (watch_body or watch_raider):
                    continue
                dx = pos[b, e, 0] - px
                dy = pos[b, e, 1] - py
                d2 = dx * dx + dy * dy
                if watch_raider and d2 <= radius2 and not asleep:
                    seen_threat[b, i, e] = True
                    learned[b, i] = True
                if watch_body:
                    if just_died[b, e] and d2 <= radius2:
                        culprit = killer[b, e]
                        out[count, 0] = b
                        out[count, 1] = i
                        out[count, 2] = e
                        out[count, 3] = culprit
                        how[count] = 0
                        count += 1
                        justice_done = (justice and (knows_threat[b, i, e] or seen_threat[b, i, e])) or (
                            side_with_own and e >= N and 0 <= culprit < N)
                        if culprit >= 0 and culprit != i and not justice_done and not (
                                knows_threat[b, i, culprit] or seen_threat[b, i, culprit]):
                            seen_threat[b, i, culprit] = True
                            learned[b, i] = True
                    elif d2 <= body2 and not asleep:
                        out[count, 0] = b
                        out[count, 1] = i
                        out[count, 2] = e
                        out[count, 3] = -1
                        how[count] = 1
                        count += 1
    return count


@njit(cache=True, fastmath=True)
def spread_knowledge(
    directed: np.ndarray,  # (B, N, N) bool: talk / comfort / warn transfers sender -> receiver this tick
    pos: np.ndarray,  # (B, E, 2)
    awake: np.ndarray,  # (B, N) bool
    affinity: np.ndarray,  # (B, N, N)
    gossip_p: np.ndarray,  # (B, N): per-tick chance that i passes news to a liked NPC in talking range
    chance: np.ndarray,  # (B, N, N) float32 uniform draws from the village RNG
    talk_radius: float,
    knows_death: np.ndarray,  # (B, N, E) bool
    known_culprit: np.ndarray,  # (B, N, E) int
    knows_threat: np.ndarray,  # (B, N, E) bool, updated in place
    learned: np.ndarray,  # (B, N) bool out: receivers that learned of a new threat
    out: np.ndarray,  # (B * N * E, 5) int64 out rows: village, receiver, subject, teller, death was known
    threat_victim: np.ndarray,  # (B, E) int: whom each entity's latest violence struck, -1 none
    justice: bool,  # Tuning.hearsay_justice: no threat passed on whose latest victim the receiver knows as a threat,
    #                 and one told of a threat stops taking those whose latest violence struck it for threats
) -> int:
    """News travels sender -> receiver by the directed transfers and by ambient gossip between awake
    NPCs with a positive tie within talking range. Receivers learn what their tellers knew before this
    tick's transfers; the first teller (lowest index) who knew a piece of news is its source.
    Returns the number of news rows written (threat knowledge is updated in place)."""
    B, N, E = knows_death.shape
    count = 0
    tellers = np.empty((N, N), np.int64)  # tellers[j, :n_tellers[j]]: who tells j this tick, ascending
    n_tellers = np.zeros(N, np.int64)
    pending_threat = np.zeros((N, E), np.bool_)
    r2 = talk_radius * talk_radius
    for b in range(B):
        any_transfer = False
        for j in range(N):
            n_tellers[j] = 0
        for i in range(N):
            if not awake[b, i]:
                continue
            for j in range(N):
                if i == j or not awake[b, j]:
                    continue
                t = directed[b, i, j]
                if not t and affinity[b, i, j] > 0.0:
                    dx = pos[b, j, 0] - pos[b, i, 0]
                    dy = pos[b, j, 1] - pos[b, i, 1]
                    t = dx * dx + dy * dy <= r2 and chance[b, i, j] < gossip_p[b, i]
                if t:
                    tellers[j, n_tellers[j]] = i
                    n_tellers[j] += 1
                    any_transfer = True
        if not any_transfer:
            continue
        for j in range(N):
            if n_tellers[j] == 0:
                continue
            for e in range(E):
                had_death = knows_death[b, j, e]
                had_culprit = known_culprit[b, j, e] >= 0
                if had_death and had_culprit:
                    continue
                for t_k in range(n_tellers[j]):
                    i = tellers[j, t_k]
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
        # threats: receivers learn every threat their tellers knew before this transfer. Tellers' rows
        # are read before any receiver's row is written (a receiver may also be a teller this tick).
        for j in range(N):
            if n_tellers[j] == 0:
                continue
            for e in range(E):
                pending_threat[j, e] = False
                if knows_threat[b, j, e]:
                    continue
                for t_k in range(n_tellers[j]):
                    if knows_threat[b, tellers[j, t_k], e]:
                        pending_threat[j, e] = True
                        break
        for j in range(N):
            if n_tellers[j] == 0:
                continue
            for e in range(E):
                if pending_threat[j, e]:
                    # justice: he struck one the receiver knows, or hears now, to be a threat (a blow on the killer)
                    struck = threat_victim[b, e]
                    if justice and struck >= 0 and (knows_threat[b, j, struck] or pending_threat[j, struck]):
                        continue
                    knows_threat[b, j, e] = True
                    learned[b, j] = True
                    if justice:  # told he is a threat, it no longer takes those whose latest blow struck him for one
                        for x in range(E):
                            if threat_victim[b, x] == e and knows_threat[b, j, x]:
                                knows_threat[b, j, x] = False
    return count
