"""The body phases of a tick: orders, activities, movement, performance, actors, combat, deaths, needs.

Each phase is a function of the `Village` (engine/village.py) and the tick's `TickContext` (engine/tick.py);
`VillageSim.step` (engine/sim.py) runs them in order. The mind phases are in engine/mind.py.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.constants import (
    DIST_EPS,
    FLEE_EPS,
    FOOD_EPS,
    GRIEF_LEFT,
    LETHAL_DAMAGE,
    Action,
    ActorMode,
    EntityKind,
    EventType,
    Personality,
)
from engine.mind import cope, grudge_cause
from engine.tick import TickContext
from engine.village import Village, length

TALK_RANGE_FACTOR = 2.0  # an actor can talk with an NPC within this many talk radii
# activities whose target must be alive and on the map (else they are dropped), and those that follow it
NEEDS_LIVING_TARGET = (Action.TALK, Action.COMFORT, Action.WARN, Action.ATTACK, Action.FLEE)
FOLLOWS_TARGET = (Action.TALK, Action.COMFORT, Action.WARN, Action.ATTACK)


class ActorDirector(Protocol):
    """Whoever directs the non-NPC actors beyond single orders (a training curriculum): told when an actor
    that strolled somewhere arrives, it may give it a new order at once (mode and target, in place)."""

    def on_arrival(self, v: Village, m: int, strolled_in: np.ndarray, mode: np.ndarray) -> None: ...


def _is(kinds: np.ndarray, *wanted: Action | ActorMode) -> np.ndarray:
    out = kinds == wanted[0]
    for k in wanted[1:]:
        out |= kinds == k
    return out


def gather_pos(v: Village, entity: np.ndarray) -> np.ndarray:
    """Positions of entity indices of shape (B, X) -> (B, X, 2)."""
    return np.take_along_axis(v.state.pos, np.clip(entity, 0, v.E - 1)[..., None], axis=1)


def log_simple(v: Village, b: int, type_: EventType, actor: int, target: int) -> None:
    ids = v.new_event_ids(np.array([b]))
    if v.record:
        s = v.state
        v.log.add_events(ids, np.array([b]), s.tick[[b]], type_, np.array([actor]), np.array([target]),
                         s.pos[[b], actor, 0], s.pos[[b], actor, 1])


def accumulate_hits(v: Village, ctx: TickContext, bb: np.ndarray, attacker: np.ndarray, target: np.ndarray,
                    dmg: np.ndarray) -> None:
    """Add damage; the killing blow goes to the hit with the highest seeded priority."""
    np.add.at(ctx.damage, (bb, target), dmg)
    prio = v.rng.random(len(bb))
    for k in np.argsort(prio, kind="stable"):  # few hits per tick
        b, tgt = bb[k], target[k]
        if prio[k] > ctx.hitter_prio[b, tgt]:
            ctx.hitter_prio[b, tgt] = prio[k]
            ctx.hitter[b, tgt] = attacker[k]


# ------------------------------------------------------------------ orders
def start_raid(v: Village, villages: np.ndarray) -> None:
    """The raiders come out of the forest (a slain raider stays dead; the survivors come back healed)."""
    s, N = v.state, v.N
    raiders = v.raider_cols
    if not len(raiders) or not len(villages):
        return
    for e in raiders:
        m = e - N
        back = villages[s.alive[villages, e]]
        s.present[back, e] = True
        s.health[back, e] = v.w.max_health[back, e]
        s.pos[back, e] = v.w.forest_pos[back]
        s.actor_mode[back, m] = ActorMode.RAID
    for b in villages:
        log_simple(v, int(b), EventType.RAID_START, int(raiders[0]), -1)


def apply_commands(v: Village, ctx: TickContext) -> None:
    """The queued orders of the non-NPC actors (the scenario driver's, the sandbox's, the bridge's)."""
    s, t, N = v.state, v.t, v.N
    pending, v.commands = v.commands, []
    for c in pending:
        m = c.actor - N
        if not s.alive[c.village, c.actor]:
            continue
        if c.op in ("kill", "attack"):
            s.actor_mode[c.village, m] = ActorMode.HUNT if c.op == "kill" else ActorMode.STRIKE
            s.actor_target[c.village, m] = c.target
            s.present[c.village, c.actor] = True
        elif c.op == "move":
            s.actor_mode[c.village, m] = ActorMode.MOVE
            s.actor_dest[c.village, m] = np.clip([c.x, c.y], 0, v.w.size[c.village])
        elif c.op == "stop":
            s.actor_mode[c.village, m] = ActorMode.IDLE
        elif c.op == "gift" and c.target < N and s.alive[c.village, c.target]:
            s.joy[c.village, c.target] += t.gift_joy
            s.anger[c.village, c.target, c.actor] *= t.gift_calm
            s.fear[c.village, c.target, c.actor] *= t.gift_calm
            log_simple(v, c.village, EventType.GIFT, c.actor, c.target)
        elif c.op == "talk" and c.target < N and s.alive[c.village, c.target]:
            # a chat eases loneliness and fear of the speaker, if the two are close enough to talk
            gap = length(s.pos[c.village, c.actor] - s.pos[c.village, c.target])
            if gap <= t.talk_radius * TALK_RANGE_FACTOR:
                s.social[c.village, c.target] = min(1.0, s.social[c.village, c.target] + t.talk_gain)
                s.fear[c.village, c.target, c.actor] *= t.talk_calm
                log_simple(v, c.village, EventType.TALK, c.actor, c.target)
        elif c.op == "raid":
            start_raid(v, np.array([c.village]))


# ------------------------------------------------------------------ NPC activities
def start_activities(v: Village, ctx: TickContext, mask: np.ndarray, slot_entity: np.ndarray) -> None:
    """Free NPCs start the macro-action the policy chose (masked or out-of-range choices: action 0)."""
    s, w, t = v.state, v.w, v.t
    B, N = v.B, v.N
    actions = ctx.actions
    in_range = (actions >= 0) & (actions < v.n_actions)
    actions = np.where(in_range, actions, 0)
    valid = np.take_along_axis(mask, actions[..., None], axis=2)[..., 0]
    actions = np.where(valid, actions, 0)
    kind = v.action_kind[actions]
    slot = v.action_slot[actions]
    chosen_target = np.where(slot >= 0, np.take_along_axis(slot_entity, np.maximum(slot, 0)[..., None], 2)[..., 0], -1)
    start = ~s.busy & ctx.npc_alive
    s.activity = np.where(start, kind, s.activity)
    s.target = np.where(start, chosen_target, s.target)
    s.performing = np.where(start, False, s.performing)
    s.perform_left = np.where(start, v.rates.perform_ticks[kind], s.perform_left)
    s.travel_left = np.where(start, t.max_travel_ticks, s.travel_left)
    s.busy = s.busy | start
    wander = start & (kind == Action.WANDER)
    if wander.any():
        offset = v.rng.uniform(-t.wander_radius, t.wander_radius, (B, N, 2)).astype(np.float32)
        s.dest = np.where(wander[..., None], np.clip(s.pos[:, :N] + offset, 0, w.size[:, None, :]), s.dest)
    idle = start & (kind == Action.IDLE)
    s.dest = np.where(idle[..., None], s.pos[:, :N], s.dest)
    # abandon activities whose target no longer makes sense
    ctx.target = np.maximum(s.target, 0)
    ctx.target_alive = np.take_along_axis(s.alive & s.present, ctx.target, 1)
    s.busy &= ~(s.busy & _is(s.activity, *NEEDS_LIVING_TARGET) & ~ctx.target_alive)


FLIGHT_TURNS = np.deg2rad([0.0, 45.0, -45.0, 90.0, -90.0, 135.0, -135.0]).astype(np.float32)


def _widest_flight(pos: np.ndarray, heading: np.ndarray, threat: np.ndarray, distance: float,
                   size: np.ndarray) -> np.ndarray:
    """(B, N, 2) where a flight heads: of the headings turned from straight away by FLIGHT_TURNS, the one whose
    end, held inside the village, lies farthest from the threat (straight away wins ties: it comes first)."""
    cos, sin = np.cos(FLIGHT_TURNS), np.sin(FLIGHT_TURNS)
    hx, hy = heading[..., 0:1], heading[..., 1:2]
    turned = np.stack([hx * cos - hy * sin, hx * sin + hy * cos], -1)  # (B, N, turns, 2)
    ends = np.clip(pos[..., None, :] + turned * distance, 0, size[..., None, :])
    gap = length(ends - threat[..., None, :])
    best = np.argmax(gap, -1)  # unhindered, straight away ends farthest: the turns matter only at the edge
    return np.take_along_axis(ends, best[..., None, None], -2)[..., 0, :]


def flight_heading(away: np.ndarray, npc_pos: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """(B, N, 2) unit headings of flights straight away from a threat (`away`: NPC minus threat position). One who
    stands on the threat (a charge that reached him) has no "away": it runs for the open middle of the village
    (`centre`, (B, 1, 2)), where no wall stops the flight, and due east from the very centre. Without this such a
    flight heads nowhere and the NPC stays on the killer, fleeing in place until the flight is given up."""
    away_len = length(away, keepdims=True)
    heading = away / np.maximum(away_len, FLEE_EPS)
    on_threat = away_len < FLEE_EPS
    if on_threat.any():  # rare: the tick pays for the fallback only when someone stands on its threat
        to_centre = centre - npc_pos
        centre_len = length(to_centre, keepdims=True)
        fallback = np.where(centre_len >= FLEE_EPS, to_centre / np.maximum(centre_len, FLEE_EPS),
                            np.array([1.0, 0.0], np.float32))
        heading = np.where(on_threat, fallback, heading)
    return heading


def move_npcs(v: Village, ctx: TickContext) -> None:
    """NPCs walk (run, when fleeing or charging) toward their activity's destination; arrival starts it."""
    s, w, t, N = v.state, v.w, v.t, v.N
    act = s.activity
    ctx.target_pos = target_pos = gather_pos(v, ctx.target)
    death_pos = np.take_along_axis(s.death_pos, ctx.target[..., None], 1)
    npc_pos = s.pos[:, :N]
    away = npc_pos - target_pos
    heading = flight_heading(away, npc_pos, w.size[:, None, :] / 2)
    fleeing = act == Action.FLEE
    if t.flee_along_walls and fleeing.any():  # the turned headings cost seven ends per NPC: only when anyone flees
        flee_dest = _widest_flight(npc_pos, heading, target_pos, t.flee_distance, w.size[:, None, :])
    else:
        flee_dest = np.clip(npc_pos + heading * t.flee_distance, 0, w.size[:, None, :])
    to_home = np.zeros_like(fleeing)
    safe = v.safe_distance[:, None] * t.flee_margin  # where a flight may stop
    if t.flee_home:  # a refuge: home, when the way there leads away from the threat (not past it)
        homeward = w.home_pos - npc_pos
        refuge = ((homeward * away).sum(-1) >= 0) | (length(homeward) <= t.reach)  # at home: stays put
        if t.refuge_out_of_sight:  # a door the killer can see from where he stands shuts out no one: run on
            refuge &= length(w.home_pos - target_pos) >= safe
        to_home = fleeing & (refuge | s.performing)  # once hidden, hidden: the hunts pass the house over
        flee_dest = np.where(to_home[..., None], w.home_pos, flee_dest)
    dest = s.dest
    dest = np.where((act == Action.WORK)[..., None], w.work_pos, dest)
    dest = np.where(((act == Action.EAT) | (act == Action.SLEEP))[..., None], w.home_pos, dest)
    dest = np.where(_is(act, *FOLLOWS_TARGET)[..., None], target_pos, dest)
    dest = np.where((act == Action.MOURN)[..., None], death_pos, dest)
    dest = np.where(fleeing[..., None], flee_dest, dest)
    s.dest = dest.astype(np.float32)
    moving = s.busy & ~s.performing & ctx.npc_alive
    speed = np.where(fleeing, t.flee_speed, np.where(act == Action.ATTACK, t.charge_speed, t.walk_speed))
    step_vec = dest - npc_pos
    dist = length(step_vec)
    frac = np.where(dist > 0, np.minimum(1.0, speed / np.maximum(dist, DIST_EPS)), 0.0)
    new_pos = npc_pos + step_vec * (frac * moving)[..., None]
    s.pos[:, :N] = new_pos
    remaining = dist * (1 - frac)
    ctx.arrived = arrived = moving & (remaining <= t.reach) & (~fleeing | to_home)  # home: the flight arrives
    s.performing |= arrived
    s.travel_left = s.travel_left - moving
    # a flight straight away ends when the threat is a safe distance away; one home ends when hiding there has
    flee_done = s.busy & fleeing & ~to_home & (length(new_pos - target_pos) >= safe)
    gave_up = moving & ~arrived & (s.travel_left <= 0)
    s.busy &= ~(flee_done | gave_up)


def perform(v: Village, ctx: TickContext) -> np.ndarray:
    """Performing NPCs act: work fills the granary, meals, sleep, chats; a charge that arrives lands a blow.
    Returns the NPCs that perform this tick (the mind's coping reads them)."""
    s, w, t, N = v.state, v.w, v.t, v.N
    act = s.activity
    perf = s.busy & s.performing & ctx.npc_alive
    first = ctx.arrived & perf  # first tick of the performance
    in_reach = length(s.pos[:, :N] - ctx.target_pos) <= t.reach * t.strike_reach_factor
    ctx.sleeping = sleeping = perf & (act == Action.SLEEP)
    ctx.working = working = perf & (act == Action.WORK)
    eating = perf & (act == Action.EAT)
    comforting = perf & (act == Action.COMFORT)
    ctx.talking_first = first & ((act == Action.TALK) | (act == Action.COMFORT))
    ctx.warning_first = first & (act == Action.WARN)
    blows = first & (act == Action.ATTACK) & in_reach & ctx.target_alive
    p = Personality.of(w.traits)

    s.granary = s.granary + (working * p.diligence).sum(1) * t.work_output
    meal_demand = eating.sum(1) * t.eat_cost
    fed_share = np.where(meal_demand > 0, np.minimum(1.0, s.granary / np.maximum(meal_demand, FOOD_EPS)), 1.0)
    s.granary = np.clip(s.granary - meal_demand * fed_share - t.granary_spoil, 0.0, 1.0).astype(np.float32)
    s.hunger = s.hunger - eating * t.eat_relief * fed_share[:, None]
    s.energy = s.energy + sleeping * t.sleep_gain
    chatting = perf & ((act == Action.TALK) | (act == Action.COMFORT))
    s.social = s.social + chatting * t.talk_gain
    if comforting.any():  # the comforted feel the company too
        bb, ii = np.nonzero(comforting)
        np.add.at(s.social, (bb, s.target[bb, ii]), t.talk_gain)
    ctx.blows = blows
    if blows.any():
        bb, ii = np.nonzero(blows)
        tt = s.target[bb, ii]
        dmg = t.blow_damage + t.blow_damage_aggression * p.aggression[bb, ii]
        dmg = np.where(v.armoured[bb, tt], 0.0, dmg)  # the blow lands (anger eases) and does no harm
        ctx.hits.add(bb, ii, tt, grudge_cause(v, bb, ii, tt))
        accumulate_hits(v, ctx, bb, ii, tt, dmg)
    return perf


def finish_performing(v: Village, perf: np.ndarray) -> None:
    """A performance that has run its ticks ends (the NPC is free to choose again); with
    Tuning.hide_until_clear, so does hiding at home once the threat is out of sight of the house."""
    s = v.state
    done_performing = perf & (s.perform_left <= 1)
    if v.t.hide_until_clear:  # nobody hides without flee_home (`v.hiding` is empty then)
        done_performing |= perf & hiding_is_over(v)
    if v.t.mourning_ends_with_grief:  # the grief is mourned away: nothing left to do at the body
        done_performing |= perf & (s.activity == Action.MOURN) & (mourning_left(v) < GRIEF_LEFT)
    s.perform_left = s.perform_left - perf
    s.busy &= ~done_performing


def mourning_left(v: Village) -> np.ndarray:
    """(B, N) the grief a mourning can still ease: for the death at the mourner's target with
    Tuning.grief_per_loss, else all of it."""
    s = v.state
    if not v.t.grief_per_loss:
        return s.grief
    at_body = (s.target >= 0) & (s.target < v.N)
    body = np.clip(s.target, 0, v.N - 1)[..., None]
    return np.where(at_body, np.take_along_axis(s.loss_grief, body, 2)[..., 0], s.grief)


def hiding_is_over(v: Village) -> np.ndarray:
    """(B, N) NPCs hiding at home whose threat is out of sight of the house (farther than his sight radius, times
    Tuning.hide_clear_factor): the danger that sent them home has passed, so they may choose again. (A threat
    that died or left the village already ends a flight, and a hunt never targets a hider.)"""
    s, w, N = v.state, v.w, v.N
    hiding = v.hiding
    if not hiding.any():
        return hiding
    every = np.arange(v.B)[:, None]
    threat = np.clip(s.target, 0, s.pos.shape[1] - 1)
    clear = w.sight_radius[:, None] * v.t.hide_clear_factor
    far = length(s.pos[every, threat] - s.pos[:, :N]) > clear
    return hiding & far


def npcs_act(v: Village, ctx: TickContext, mask: np.ndarray, slot_entity: np.ndarray) -> None:
    """The orders of the actors are applied, then the NPCs start, walk to and perform what they chose, and
    cope (the relief ledger counts coping and gifts)."""
    apply_commands(v, ctx)
    start_activities(v, ctx, mask, slot_entity)
    move_npcs(v, ctx)
    performing = perform(v, ctx)
    cope(v, ctx, performing)
    finish_performing(v, performing)
    ctx.count_relief()


# ------------------------------------------------------------------ the non-NPC actors
def nearest_villager(v: Village, villages: np.ndarray, e: int,
                     among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For entity e in each of `villages`: the nearest living NPC not hiding at home (and, given `among`
    (len(villages), N), one of those), and its distance (inf if none)."""
    s, N = v.state, v.N
    d = length(s.pos[villages, :N] - s.pos[villages, e][:, None])
    eligible = s.alive[villages, :N] & ~v.hiding[villages]
    if among is not None:
        eligible = eligible & among
    d = np.where(eligible, d, np.inf)
    prey = np.argmin(d, 1)
    return prey, d[np.arange(len(villages)), prey]


def move_actors(v: Village, ctx: TickContext, director: ActorDirector | None = None) -> None:
    """The player and the raiders walk and strike as ordered; raids start by the world's raid probability."""
    s, w, t, N = v.state, v.w, v.t, v.N
    raiders = w.entity_kind[N:] == EntityKind.RAIDER
    if raiders.any():
        raid_on = (s.present[:, N:][:, raiders] & s.alive[:, N:][:, raiders]).any(1)
        start = ~raid_on & (v.rng.random(v.B) < w.raid_probability)
        start_raid(v, np.flatnonzero(start))
    every = np.arange(v.B)
    if t.fights_back > 0 and ctx.hits:
        turn_on_attackers(v, ctx)
    for m in range(v.M):  # a handful of actors, vectorised over villages
        e = N + m
        mode = s.actor_mode[:, m]
        live = s.alive[:, e] & s.present[:, e]
        pos = s.pos[:, e]
        # raiders pick the nearest living villager
        raiding = live & (mode == ActorMode.RAID)
        if raiding.any():
            prey, _ = nearest_villager(v, every, e)
            s.actor_target[:, m] = np.where(raiding, prey, s.actor_target[:, m])
            hurt = s.health[:, e] < t.raider_retreat_health * w.max_health[:, e]
            mode = np.where(raiding & hurt, ActorMode.RETREAT, mode)
        tgt = np.maximum(s.actor_target[:, m], 0)
        tgt_pos = s.pos[every, tgt]
        tgt_alive = s.alive[every, tgt]
        if t.flee_home:  # a villager hiding at home is out of reach: the chase ends
            tgt_alive = tgt_alive & ~(v.hiding[every, np.minimum(tgt, N - 1)] & (tgt < N))
        if t.flight_escapes_hunt:
            lose_prey(v, m, live & (mode == ActorMode.HUNT), tgt, tgt_pos, mode)
        chasing = live & _is(mode, ActorMode.HUNT, ActorMode.STRIKE, ActorMode.RAID, ActorMode.DEFEND)
        mode = np.where(chasing & ~tgt_alive & (mode != ActorMode.RAID), ActorMode.IDLE, mode)
        chasing &= tgt_alive
        dest = np.where(chasing[:, None], tgt_pos, s.actor_dest[:, m])
        dest = np.where((mode == ActorMode.RETREAT)[:, None], w.forest_pos, dest)
        moving = live & (chasing | _is(mode, ActorMode.STROLL, ActorMode.MOVE, ActorMode.RETREAT))
        vec = dest - pos
        dist = length(vec)
        frac = np.where(dist > 0, np.minimum(1.0, t.actor_speed / np.maximum(dist, DIST_EPS)), 0.0) * moving
        s.pos[:, e] = pos + vec * frac[:, None]
        remaining = dist * (1 - frac)
        reached = remaining <= t.reach
        strike = chasing & reached
        if strike.any():
            bb = np.flatnonzero(strike)
            tt = tgt[bb]
            kill = mode[bb] == ActorMode.HUNT
            dmg = np.where(kill, LETHAL_DAMAGE,
                           np.where(mode[bb] == ActorMode.RAID, t.raider_damage, t.blow_damage))
            if t.fights_back > 0:
                dmg = np.where(mode[bb] == ActorMode.DEFEND, t.fights_back, dmg)
            att = np.full(len(bb), e)
            accumulate_hits(v, ctx, bb, att, tt, dmg)
            ctx.hits.add(bb, att, tt, np.full(len(bb), -1))
            after = np.where(mode[bb] == ActorMode.HUNT, ActorMode.LINGER,
                             np.where(_is(mode[bb], ActorMode.STRIKE, ActorMode.DEFEND), ActorMode.IDLE, mode[bb]))
            mode[bb] = after
            s.actor_timer[bb, m] = np.where(kill, t.linger_ticks, 0)
        # linger at the scene, then stroll to a public place and stay there
        lingering = live & (mode == ActorMode.LINGER)
        s.actor_timer[:, m] -= lingering
        leave = lingering & (s.actor_timer[:, m] <= 0)
        if leave.any():
            bb = np.flatnonzero(leave)
            pick = v.rng.integers(0, w.hangout_pos.shape[1], len(bb))
            s.actor_dest[bb, m] = w.hangout_pos[bb, pick]
            mode[bb] = ActorMode.STROLL
            if director is not None and t.rampage_at_scene:  # who is still near the body is the next in sight
                director.on_arrival(v, m, leave, mode)
        arrived = live & _is(mode, ActorMode.STROLL, ActorMode.MOVE) & reached
        strolled_in = arrived & (mode == ActorMode.STROLL)
        mode = np.where(arrived, ActorMode.IDLE, mode)
        if director is not None:
            director.on_arrival(v, m, strolled_in, mode)
        gone = live & (mode == ActorMode.RETREAT) & reached
        s.present[:, e] &= ~gone
        mode = np.where(gone, ActorMode.OFF_MAP, mode)
        s.actor_mode[:, m] = mode


def lose_prey(v: Village, m: int, hunting: np.ndarray, tgt: np.ndarray, tgt_pos: np.ndarray,
              mode: np.ndarray) -> None:
    """Tuning.flight_escapes_hunt: actor m, hunting in the villages `hunting` (B,), loses a prey that flees from
    him and is out of his sight; the hunt ends and he strolls to a public place (`mode` is changed in place)."""
    s, w, N = v.state, v.w, v.N
    every = np.arange(v.B)
    prey = np.minimum(tgt, N - 1)
    fled = (tgt < N) & (s.activity[every, prey] == Action.FLEE) & (s.target[every, prey] == N + m)
    out_of_sight = length(tgt_pos - s.pos[:, N + m]) > w.sight_radius
    lost = np.flatnonzero(hunting & fled & out_of_sight)
    if len(lost):  # no draw unless a prey got away: the same trajectories until then
        pick = v.rng.integers(0, w.hangout_pos.shape[1], len(lost))
        s.actor_dest[lost, m] = w.hangout_pos[lost, pick]
        mode[lost] = ActorMode.STROLL


def turn_on_attackers(v: Village, ctx: TickContext) -> None:
    """The player, struck by a villager this tick, turns on the last one who struck it (unless it is in the
    middle of a killing): a killer who defends himself makes an attack on him a risk to the attacker."""
    s, N = v.state, v.N
    bb, aa, tt, _ = ctx.hits.columns()
    on_player = (aa < N) & (tt >= N)
    on_player[on_player] &= v.w.entity_kind[tt[on_player]] == EntityKind.PLAYER
    bb, aa, m = bb[on_player], aa[on_player], tt[on_player] - N
    free = s.actor_mode[bb, m] != ActorMode.HUNT
    s.actor_mode[bb[free], m[free]] = ActorMode.DEFEND
    s.actor_target[bb[free], m[free]] = aa[free]


# ------------------------------------------------------------------ combat and deaths
def record_hits(v: Village, ctx: TickContext) -> None:
    """Assign event ids to attacks and deaths (always: cause links use them) and log them if recording."""
    s = v.state
    if ctx.hits:
        bb, aa, tt, cc = ctx.hits.columns()
        ids = v.new_event_ids(bb)
        s.threat_event[bb, aa] = ids
        s.threat_victim[bb, aa] = tt
        if v.record:
            v.log.add_events(ids, bb, s.tick[bb], EventType.ATTACK, aa, tt, s.pos[bb, aa, 0], s.pos[bb, aa, 1],
                             cause=cc)
    db, de = np.nonzero(ctx.just_died)
    if len(db):
        ids = v.new_event_ids(db)
        s.death_event[db, de] = ids
        killer = s.killer[db, de]
        has_killer = killer >= 0
        s.threat_event[db[has_killer], killer[has_killer]] = ids[has_killer]
        s.threat_victim[db[has_killer], killer[has_killer]] = de[has_killer]
        if v.record:
            v.log.add_events(ids, db, s.tick[db], EventType.DEATH, killer, de, s.death_pos[db, de, 0],
                             s.death_pos[db, de, 1])


def lay_out_the_dead(v: Village) -> None:
    """With Tuning.wake_at_home, a villager's body is carried home that many ticks after the death and lies
    there: mourners go to the house, and those who come home find it."""
    t = v.t
    if t.wake_at_home <= 0:  # off by default: nothing added to the tick
        return
    s, N = v.state, v.N
    due = ~s.alive[:, :N] & (s.death_tick[:, :N] >= 0) & (s.tick[:, None] - s.death_tick[:, :N] == t.wake_at_home)
    if due.any():
        home = v.w.home_pos
        s.pos[:, :N] = np.where(due[..., None], home, s.pos[:, :N])
        s.death_pos[:, :N] = np.where(due[..., None], home, s.death_pos[:, :N])


def resolve_combat(v: Village, ctx: TickContext) -> None:
    """Damage is dealt; the dying die where they stand, credited to the killing blow's attacker."""
    s, N = v.state, v.N
    was_alive = s.alive.copy()
    s.health = np.clip(s.health - ctx.damage, 0.0, None).astype(np.float32)
    ctx.just_died = just_died = was_alive & (s.health <= 0)
    ctx.attacked = ctx.damage[:, :N] > 0
    s.alive &= ~just_died
    s.death_tick = np.where(just_died, s.tick[:, None], s.death_tick)
    s.death_pos = np.where(just_died[..., None], s.pos, s.death_pos)
    s.killer = np.where(just_died, ctx.hitter, s.killer)
    record_hits(v, ctx)
    ctx.awake = s.alive[:, :N] & ~ctx.sleeping
    v.died = just_died[:, :N].copy()


def needs(v: Village, ctx: TickContext) -> None:
    """Hunger grows, energy drains (faster at work, not asleep), loneliness grows with sociability."""
    s, t = v.state, v.t
    alive_now = s.alive[:, :v.N]
    sociability = Personality.of(v.w.traits).sociability
    s.hunger = np.clip(s.hunger + t.hunger_rate * alive_now, 0, 1).astype(np.float32)
    drain = t.energy_rate * np.where(ctx.working, t.work_energy_factor, 1.0) * ~ctx.sleeping
    s.energy = np.clip(s.energy - drain * alive_now, 0, 1).astype(np.float32)
    s.social = np.clip(s.social - t.social_rate * sociability * alive_now, 0, 1).astype(np.float32)
