"""The mind phases of a tick: coping, perception, news, appraisal, emotion decay, rewards, attention, labels.

Each phase is a function of the `Village` (engine/village.py) and the tick's `TickContext` (engine/tick.py).
They read the bodies (positions, who is alive, the blows and deaths of the tick) and write only what NPCs
know and feel, so they run the same on the engine's own bodies (engine/sim.py) and on bodies that live in a
game (engine/external.py).
"""

from __future__ import annotations

import numpy as np

from engine.constants import (
    ALARM_FEAR_TIEBREAK,
    FEAR_WEIGHT_BASE,
    GLOAT_EVENT_MIN,
    GRIEF_WEIGHT_BASE,
    HEALTH_EPS,
    LABEL_ANGER_MIN,
    LABEL_GRIEF_MIN,
    Action,
    EntityKind,
    EventType,
    Personality,
    Reaction,
)
from engine.events import HOW_TOLD, HOW_WARNED
from engine.kernels import perceive as perceive_kernel
from engine.kernels import spread_knowledge, threat_fear_and_decay
from engine.tick import Relief, TickContext
from engine.village import Village, length


def begin_tick(v: Village, actions: np.ndarray, *, threat_buffer: bool = False) -> TickContext:
    """The context of a new tick; `threat_buffer`: the senses note threats apart from the state (for a game's
    witness lists to decide on), else straight into it."""
    s = v.state
    ctx = TickContext.begin(np.asarray(actions, np.int64).reshape(v.B, v.N), s.alive, v.B, v.N, v.E)
    ctx.seen_threat = np.zeros_like(s.knows_threat) if threat_buffer else s.knows_threat
    if v.t.w_relief > 0:
        # the ledger weighs the grief there is, not the grief felt: a flight that makes it wait eases nothing
        ctx.relief = Relief(lambda: emotion_cost(v, grief=v.state.grief), (v.B, v.N))
    return ctx


# ------------------------------------------------------------------ knowledge
def grudge_cause(v: Village, bb: np.ndarray, ii: np.ndarray, tt: np.ndarray) -> np.ndarray:
    """For NPC i attacking t: the death event i blames t for (-1 if none)."""
    s = v.state
    blames = s.known_culprit[bb, ii] == tt[:, None]  # (H, E) victims i believes t killed
    victim = np.argmax(blames, axis=1)
    return np.where(blames.any(1), s.death_event[bb, victim], -1)


def know_threat(v: Village, ctx: TickContext, bb: np.ndarray, ii: np.ndarray, ee: np.ndarray,
                sink: np.ndarray | None = None) -> None:
    """NPC ii in village bb now knows entity ee is dangerous (written to `sink`, default the state); a new
    threat catches the NPC's attention."""
    s = v.state
    sink = s.knows_threat if sink is None else sink
    known = s.knows_threat[bb, ii, ee]
    if sink is not s.knows_threat:
        known = known | sink[bb, ii, ee]
    sink[bb, ii, ee] = True
    fresh = ~known
    ctx.learned[bb[fresh], ii[fresh]] = True


def note_news(v: Village, ctx: TickContext, bb: np.ndarray, ii: np.ndarray, ee: np.ndarray, culprit: np.ndarray,
              sender: np.ndarray, how: np.ndarray | int, *, death_known: np.ndarray | None = None) -> None:
    """Record sparse news: deaths learned (with culprit, time, source), or only a culprit learned."""
    s = v.state
    if not len(bb):
        return
    new_death = np.ones(len(bb), bool) if death_known is None else ~death_known
    db, di, de = bb[new_death], ii[new_death], ee[new_death]
    s.knows_death[db, di, de] = True
    s.learned_tick[db, di, de] = s.tick[db]
    s.learned_from[db, di, de] = sender[new_death]
    culprit_new = (culprit >= 0) & (s.known_culprit[bb, ii, ee] < 0)
    s.known_culprit[bb[culprit_new], ii[culprit_new], ee[culprit_new]] = culprit[culprit_new]
    ctx.news.add(bb, ii, ee, new_death, culprit_new)
    ctx.learned[bb, ii] = True
    if v.record:
        how_k = np.broadcast_to(np.asarray(how), bb.shape)
        v.log.add_messages(bb, s.tick[bb], sender, ii, ee, culprit, how_k)


# ------------------------------------------------------------------ coping
def cope(v: Village, ctx: TickContext, perf: np.ndarray) -> None:
    """Coping while performing: comforting eases both griefs, mourning eases grief, a landed blow eases
    anger at the target and fear of it (it can be hurt: coping potential)."""
    s, t = v.state, v.t
    act = s.activity
    p = Personality.of(v.w.traits)
    comforting = perf & (act == Action.COMFORT)
    mourning = perf & (act == Action.MOURN)
    if t.mourn_out_of_reach and mourning.any():  # no grief work with the killer still about: first get away
        mourning &= ~within_reach_of_threat(v)
    grief_work = grief_work_share(v, p) if t.grief_work_anger > 0 and (comforting.any() or mourning.any()) else None
    if comforting.any():
        bb, ii = np.nonzero(comforting)
        tt = s.target[bb, ii]
        share = 1.0 if grief_work is None else grief_work[bb, tt]
        relief = 1 - t.comfort_relief * (GRIEF_WEIGHT_BASE + p.empathy[bb, ii]) * share
        np.multiply.at(s.grief, (bb, tt), relief)
        own = 1.0 if grief_work is None else grief_work[bb, ii]
        s.grief[bb, ii] *= 1 - t.comforter_relief * t.comfort_relief * own
        if t.grief_per_loss:  # company eases every loss alike
            np.multiply.at(s.loss_grief, (bb, tt), np.asarray(relief, np.float32)[..., None])
            s.loss_grief[bb, ii] *= np.asarray(1 - t.comforter_relief * t.comfort_relief * own, np.float32)[..., None]
    work = t.mourn_relief * (GRIEF_WEIGHT_BASE + p.empathy) if t.mourn_relief_empathy else t.mourn_relief
    if grief_work is not None:
        work = work * grief_work
    if t.grief_per_loss:
        mourn_at_body(v, mourning, work)
    elif t.mourn_relief_linear:  # grief work: each tick at the body eases a fixed amount, so a great loss
        # takes longer to mourn and every tick of it is worth the same until the grief is spent
        s.grief = np.maximum(s.grief - mourning * work, 0.0).astype(np.float32)
    else:
        s.grief = s.grief * np.where(mourning, 1 - work, 1.0)
    if ctx.blows.any():
        bb, ii = np.nonzero(ctx.blows)
        tt = s.target[bb, ii]
        s.anger[bb, ii, tt] *= 1 - t.blow_anger_relief
        fear_relief = t.blow_fear_relief * p.bravery[bb, ii] if t.blow_relief_bravery else t.blow_fear_relief
        s.fear[bb, ii, tt] *= 1 - fear_relief


def mourn_at_body(v: Village, mourning: np.ndarray, work: np.ndarray | float) -> None:
    """Tuning.grief_per_loss: a mourning tick eases the grief for the death whose body it is held at, and no
    other: `work` of it (Tuning.mourn_relief_linear) or that share of it."""
    s = v.state
    if not mourning.any():
        return
    bb, ii = np.nonzero(mourning & (s.target < v.N))  # the MOURN mask offers only villagers' bodies
    jj = s.target[bb, ii]
    held = s.loss_grief[bb, ii, jj]
    work = np.broadcast_to(np.asarray(work, np.float32), mourning.shape)[bb, ii]
    eased = np.minimum(held, work) if v.t.mourn_relief_linear else held * work
    s.loss_grief[bb, ii, jj] = held - eased
    s.grief[bb, ii] = np.maximum(s.grief[bb, ii] - eased, 0.0)


def grief_work_share(v: Village, p: Personality) -> np.ndarray:
    """(B, N) the share of grief work (Tuning.grief_work_anger) that eases grief: max(0, 1 - grief_work_anger x
    aggression x anger at the living threats one knows), so rage at a killer still alive holds the mourning back."""
    s, t = v.state, v.t
    living = (s.alive & s.present)[:, None, :]
    anger = np.minimum(np.where(living, s.anger, 0.0).sum(-1), t.anger_sum_cap)
    return np.maximum(0.0, 1.0 - t.grief_work_anger * p.aggression * anger).astype(np.float32)


# ------------------------------------------------------------------ perception
def feel_attacks(v: Village, ctx: TickContext) -> None:
    """The attacked wake, fear and resent the attacker and know the threat; awake witnesses of an attack
    learn who is dangerous, unless the one attacked is a threat they know (defence or justice)."""
    if not ctx.hits:
        return
    s, w, t, N = v.state, v.w, v.t, v.N
    sink = ctx.seen_threat
    p = Personality.of(w.traits)
    bb, aa, tt, _ = ctx.hits.columns()
    victim_npc = tt < N
    victim_npc[victim_npc] &= s.alive[bb[victim_npc], tt[victim_npc]]  # the killed feel nothing more
    vb, va, vt = bb[victim_npc], aa[victim_npc], tt[victim_npc]
    np.add.at(s.fear, (vb, vt, va), t.fear_gain * t.hit_fear * (1 - p.bravery[vb, vt]))
    np.add.at(s.anger, (vb, vt, va), t.anger_gain * t.hit_anger * p.aggression[vb, vt])
    know_threat(v, ctx, vb, vt, va, sink)
    attack_pos = s.pos[bb, aa]
    d_w = length(s.pos[bb, :N] - attack_pos[:, None, :])
    seen = (d_w <= w.sight_radius[bb][:, None]) & ctx.awake[bb]
    known = s.knows_threat[bb, :, tt] if sink is s.knows_threat else s.knows_threat[bb, :, tt] | sink[bb, :, tt]
    seen &= ~known
    if t.outsider_fights_not_feared:  # the village sides with its own against the player or a raider
        seen &= ~((tt >= N) & (aa < N))[:, None]
    wb, wi = np.nonzero(seen)
    not_attacker = wi != aa[wb]
    know_threat(v, ctx, bb[wb][not_attacker], wi[not_attacker], aa[wb][not_attacker], sink)


def perceive(v: Village, ctx: TickContext) -> tuple[np.ndarray, ...] | None:
    """First-hand perception: witnesses of deaths (and their culprits), bodies found, raiders seen.
    Returns the news rows (village, npc, subject, culprit, how), None when there is nothing to see."""
    s, w, t = v.state, v.w, v.t
    dead_body = ~s.alive & (s.death_tick >= 0)
    if not (dead_body.any() or (len(v.raider_cols) and s.present[:, v.raider_cols].any())):
        return None
    rows, how = v.news_rows, v.news_how
    count = perceive_kernel(
        s.pos, s.alive, s.present, ctx.just_died, dead_body, s.killer, v.is_raider, ctx.awake, w.sight_radius,
        t.body_discovery_radius, s.knows_death, s.knows_threat, ctx.seen_threat, ctx.learned, rows[:, :4], how,
        t.avenger_not_feared, t.outsider_fights_not_feared,
    )
    if not count:
        return None
    bb, ii, ee, culprit = (rows[:count, k].copy() for k in range(4))
    return bb, ii, ee, culprit, how[:count].copy()


def note_first_hand(v: Village, ctx: TickContext, rows: tuple[np.ndarray, ...] | None) -> None:
    if rows is not None:
        bb, ii, ee, culprit, how = rows
        note_news(v, ctx, bb, ii, ee, culprit, np.full(len(bb), -1, np.int64), how)


def spread_news(v: Village, ctx: TickContext, first: np.ndarray | None = None,
                targets: np.ndarray | None = None) -> None:
    """Talk and comfort pass news both ways, warn one way, and acquainted NPCs in talking range gossip.

    `first` (B, N) marks the NPCs whose conversation starts this tick and `targets` (B, N) whom they address;
    by default the talkers, comforters and warners of this tick and their activity targets."""
    s, w, t = v.state, v.w, v.t
    B, N = v.B, v.N
    if not (s.knows_death.any() or s.knows_threat.any()):
        return
    first = ctx.talking_first | ctx.warning_first if first is None else first
    targets = s.target if targets is None else targets
    directed = np.zeros((B, N, N), bool)
    b_idx, i_idx = np.nonzero(first)
    warned = np.zeros((B, N, N), bool)
    if len(b_idx):
        tgt = targets[b_idx, i_idx]
        npc_tgt = tgt < N
        b2, i2, t2 = b_idx[npc_tgt], i_idx[npc_tgt], tgt[npc_tgt]
        directed[b2, i2, t2] = True
        warn = ctx.warning_first[b2, i2]
        warned[b2[warn], i2[warn], t2[warn]] = True
        talk = ~warn
        directed[b2[talk], t2[talk], i2[talk]] = True
    if t.refuge_tells or t.flight_warns:
        shouted_warnings(v, ctx, directed, warned)
    chance = v.rng.random((B, N, N), dtype=np.float32)
    gossip_p = w.gossip_probability[:, None] * Personality.of(w.traits).sociability
    rows = v.news_rows
    count = spread_knowledge(directed, s.pos, ctx.awake, s.affinity, gossip_p, chance, t.talk_radius,
                             s.knows_death, s.known_culprit, s.knows_threat, ctx.learned, rows,
                             s.threat_victim, t.hearsay_justice)
    if not count:
        return
    bb, jj, ee, teller, death_known = (rows[:count, k].copy() for k in range(5))
    culprit = s.known_culprit[bb, teller, ee]
    if t.rumour_error > 0:  # drawn only when on, so the default run's random stream is unchanged
        culprit = garble_culprits(v, bb, jj, ee, culprit, t.rumour_error)
    how = np.where(warned[bb, teller, jj], HOW_WARNED, HOW_TOLD)
    if t.w_inform > 0:
        count_informed(v, ctx, bb, ee, teller, death_known.astype(bool))
    note_news(v, ctx, bb, jj, ee, culprit, teller, how, death_known=death_known.astype(bool))


def shouted_warnings(v: Village, ctx: TickContext, directed: np.ndarray, warned: np.ndarray) -> None:
    """Villagers who warn everyone awake within talking range of them, each tick: those hiding at home
    (Tuning.refuge_tells) and those running from a threat (Tuning.flight_warns)."""
    shouting = np.zeros((v.B, v.N), bool)
    if v.t.refuge_tells:
        shouting |= v.hiding
    if v.t.flight_warns:
        shouting |= in_flight(v)
    shouting &= ctx.awake
    if not shouting.any():
        return
    bb = np.flatnonzero(shouting.any(1))
    pos = v.state.pos[bb, :v.N]
    near = length(pos[:, :, None] - pos[:, None, :]) <= v.t.talk_radius
    tells = near & shouting[bb][:, :, None] & ctx.awake[bb][:, None, :]
    tells[:, np.arange(v.N), np.arange(v.N)] = False
    directed[bb] |= tells
    warned[bb] |= tells


def count_informed(v: Village, ctx: TickContext, bb: np.ndarray, ee: np.ndarray, teller: np.ndarray,
                   death_known: np.ndarray) -> None:
    """Credit each teller with the villagers it told of a death they did not know (a culprit added to a
    death already known is not news of a death): a villager's, or with Tuning.inform_threat_deaths the death of
    one the teller knew as a threat (a killer's death is news to the whole village)."""
    if ctx.informed is None:
        ctx.informed = np.zeros((v.B, v.N), np.float32)
    told = ee < v.N
    if v.t.inform_threat_deaths:
        told = told | v.state.knows_threat[bb, teller, ee]
    news = ~death_known & told
    np.add.at(ctx.informed, (bb[news], teller[news]), 1.0)


def garble_culprits(v: Village, bb: np.ndarray, jj: np.ndarray, ee: np.ndarray, culprit: np.ndarray,
                    error: float) -> np.ndarray:
    """Hearsay can go wrong: each culprit passed on comes out, with probability `error`, as another entity of
    that village (uniform over the living NPCs and present actors other than the culprit, the subject and the
    hearer). What the hearer then believes, it passes on."""
    s = v.state
    wrong = np.flatnonzero((culprit >= 0) & (v.rng.random(len(culprit)) < error))
    if not len(wrong):
        return culprit
    b = bb[wrong]
    ok = (s.alive & s.present)[b].copy()  # (W, E)
    rows = np.arange(len(wrong))
    ok[rows, culprit[wrong]] = False
    ok[rows, ee[wrong]] = False
    ok[rows, jj[wrong]] = False
    score = np.where(ok, v.rng.random(ok.shape), -1.0)
    pick = score.argmax(1)
    out = culprit.copy()
    out[wrong] = np.where(score[rows, pick] >= 0, pick, culprit[wrong])
    return out


# ------------------------------------------------------------------ appraisal and emotions
def grief_closeness(v: Village, bb: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """How much villager i grieves villager j's death, per unit of grief: its liking (none for the disliked),
    kin more (the indices broadcast)."""
    s, w = v.state, v.w
    return np.maximum(s.affinity[bb, ii, jj], 0) * (1 + v.t.kin_bonus * w.kin[bb, ii, jj])


def appraise(v: Village, ctx: TickContext) -> None:
    """OCC-style appraisal of the news of this tick: deaths (grief, gloating) and culprits (anger, fear)."""
    s, w, t = v.state, v.w, v.t
    if not ctx.news:
        return
    bb, ii, vv, new_death, culprit_new = ctx.news.columns()
    npc_victim = vv < v.N
    dead_threat = ~npc_victim & new_death  # a killer or raider is dead: justice, and nothing more to fear
    if dead_threat.any():
        s.anger[bb[dead_threat], ii[dead_threat], vv[dead_threat]] *= 1 - t.justice_relief
    bb, ii, vv = bb[npc_victim], ii[npc_victim], vv[npc_victim]
    new_death, culprit_new = new_death[npc_victim], culprit_new[npc_victim]
    like = s.affinity[bb, ii, vv]
    closeness = grief_closeness(v, bb, ii, vv)
    np.add.at(s.grief, (bb, ii), t.grief_gain * closeness * new_death)
    if t.grief_per_loss:
        np.add.at(s.loss_grief, (bb, ii, vv), t.grief_gain * closeness * new_death)
    gloat = t.gloat_gain * np.maximum(-like, 0) * new_death
    np.add.at(s.joy, (bb, ii), gloat)
    if (gloat > GLOAT_EVENT_MIN).any():  # ids are taken whether or not the log records, so runs stay identical
        g = gloat > GLOAT_EVENT_MIN
        gb, gi, gv = bb[g], ii[g], vv[g]
        ids = v.new_event_ids(gb)
        if v.record:
            v.log.add_events(ids, gb, s.tick[gb], EventType.REACTION, gi, gv, s.pos[gb, gi, 0], s.pos[gb, gi, 1],
                             cause=s.death_event[gb, gv], reaction=np.full(len(gb), Reaction.GLOATING),
                             intensity=s.joy[gb, gi])
    c = culprit_new
    if c.any():
        cb, ci, cv = bb[c], ii[c], vv[c]
        kk = s.known_culprit[cb, ci, cv]
        close = closeness[c]
        near = s.learned_from[cb, ci, cv] == -1
        p = Personality.of(w.traits)
        bravery, aggression = p.bravery[cb, ci], p.aggression[cb, ci]
        not_self = kk != ci
        np.add.at(s.anger, (cb, ci, kk), not_self * t.anger_gain * close * (t.anger_base + aggression))
        dist = np.sqrt(((s.pos[cb, ci] - s.pos[cb, kk]) ** 2).sum(-1))
        proximity = np.exp(-dist / w.sight_radius[cb])
        fear = t.fear_gain * (1 - bravery) * (1 + close) * np.where(near, proximity, t.hearsay_fear)
        fear = fear / (1 + t.anger_fear_damping * aggression * s.anger[cb, ci, kk])  # anger lowers felt risk
        np.add.at(s.fear, (cb, ci, kk), not_self * fear)
        know_threat(v, ctx, cb[not_self], ci[not_self], kk[not_self])


def appraise_and_decay(v: Village, ctx: TickContext) -> None:
    """The news of the tick is appraised (the relief ledger counts justice, not the news' sting), then the
    emotions decay."""
    ctx.skip_relief()
    appraise(v, ctx)
    ctx.count_relief()
    decay_emotions(v, ctx)


def conclude(v: Village, ctx: TickContext) -> None:
    """Rewards, interruptions, the clock, and the reaction labels of the tick."""
    v.last_reward = reward(v, ctx)
    interrupt(v, ctx)
    v.state.tick = v.state.tick + 1
    v.reaction = label_reactions(v)
    record_reactions(v)


def decay_emotions(v: Village, ctx: TickContext) -> None:
    """A known threat near keeps fear up (proximity x timidity); then every emotion decays exponentially.

    Anger and fear only ever arise toward known threats: the (B, N, E) work is skipped until there is one;
    grudges against a living, known threat fade slowly."""
    s, w, t, r = v.state, v.w, v.t, v.rates
    cap = t.emotion_cap
    ctx.anger_sum = ctx.fear_sum = None
    if s.knows_threat.any():
        ctx.anger_sum = np.empty((v.B, v.N), np.float32)
        ctx.fear_sum = np.empty((v.B, v.N), np.float32)
        p = Personality.of(w.traits)
        # fear_fades_in_flight: relief from a loose killer is the flight's (coping), not any walk that ends far away
        fades_fast = in_flight(v) if t.fear_fades_in_flight else v.everyone
        threat_fear_and_decay(
            s.pos, s.alive, s.present, w.sight_radius, p.bravery, p.aggression, s.knows_threat, v.hiding, fades_fast,
            s.fear, s.anger, t.sight_fear, t.fear_near, t.anger_fear_damping, r.decay_fear, r.decay_fear_safe,
            r.decay_anger, r.decay_grudge, cap, ctx.anger_sum, ctx.fear_sum,
        )
    waiting = grief_waiting(v)
    if t.grief_per_loss:
        hold_losses_to_grief(v, waiting, r.decay_grief, cap)
    else:
        s.grief *= r.decay_grief if waiting is None else np.where(waiting, np.float32(1.0), r.decay_grief)
        np.clip(s.grief, 0, cap, out=s.grief)
    s.joy *= r.decay_joy
    np.clip(s.joy, 0, cap, out=s.joy)


def hold_losses_to_grief(v: Village, waiting: np.ndarray | None, decay: np.float32, cap: float) -> None:
    """Tuning.grief_per_loss: every loss fades at the grief's rate and shares its cap, and the grief is set to
    their sum, so the two never drift apart."""
    s = v.state
    s.loss_grief *= decay if waiting is None else np.where(waiting, np.float32(1.0), decay)[..., None]
    held = s.loss_grief.sum(-1)
    over = held > cap
    if over.any():
        s.loss_grief *= np.where(over, cap / np.maximum(held, cap), np.float32(1.0))[..., None]
        held = np.minimum(held, cap)
    s.grief = held.astype(np.float32)


def losses_from_grief(v: Village) -> np.ndarray:
    """(B, N, N) each villager's grief shared out over the deaths it knows of, in proportion to how much each
    grieves it (grief_closeness): the grief per loss of a state that held only the sum (a bridge snapshot saved
    before Tuning.grief_per_loss existed)."""
    s, N = v.state, v.N
    every, npc = np.arange(v.B)[:, None, None], np.arange(N)
    weight = grief_closeness(v, every, npc[None, :, None], npc[None, None, :])
    weight = weight * (s.knows_death[:, :, :N] & ~s.alive[:, None, :N])
    total = weight.sum(-1, keepdims=True)
    share = np.divide(weight, total, out=np.zeros_like(weight), where=total > 0)
    return (share * s.grief[..., None]).astype(np.float32)


def in_flight(v: Village) -> np.ndarray:
    """(B, N) NPCs fleeing, or hiding at home at the end of a flight (a FLEE under way)."""
    s = v.state
    return s.busy & (s.activity == Action.FLEE)


def grief_waiting(v: Village) -> np.ndarray | None:
    """(B, N) NPCs whose grief waits (Tuning.grief_waits): those in flight, whose fear comes first; the grief is
    felt, and fades, once the flight is over. None when the lever is off."""
    return in_flight(v) if v.t.grief_waits else None


def felt_grief(v: Village) -> np.ndarray:
    """(B, N) the grief that stings this tick: all of it, but none while it waits (grief_waiting)."""
    waiting = grief_waiting(v)
    return v.state.grief if waiting is None else np.where(waiting, np.float32(0.0), v.state.grief)


def emotion_cost(v: Village, anger_sum: np.ndarray | None = None, fear_sum: np.ndarray | None = None, *,
                 grief: np.ndarray | None = None) -> np.ndarray:
    """(B, N) the personality-weighted cost of the negative emotions (the reward's emotion terms), from the
    summed anger and fear given, or from the state's when none are; the grief is the felt grief unless given."""
    s, t = v.state, v.t
    p = Personality.of(v.w.traits)
    if anger_sum is None:
        anger_sum, fear_sum = s.anger.sum(-1), s.fear.sum(-1)
    anger = np.minimum(anger_sum, t.anger_sum_cap)
    fear = np.minimum(fear_sum, t.fear_sum_cap)
    grief = felt_grief(v) if grief is None else grief
    cost = (grief_cost(v, p, grief) + (t.anger_weight_base + p.aggression) * anger
            + (FEAR_WEIGHT_BASE - p.bravery) * fear)
    if t.w_dread > 0:
        cost = cost + t.w_dread * (FEAR_WEIGHT_BASE - p.bravery) * dread(v)
    return cost


def grief_cost(v: Village, p: Personality, grief: np.ndarray) -> np.ndarray:
    """(B, N) grief's term in the emotion cost: w_grief x (0.5 + empathy) x grief."""
    return v.t.w_grief * (GRIEF_WEIGHT_BASE + p.empathy) * grief


def dread(v: Village) -> np.ndarray:
    """(B, N) 1 where the NPC knows a villager was murdered, the murderer lives and it does not know who
    that is (a killer is loose among us), else 0."""
    s, N = v.state, v.N
    killer = s.killer[:, :N]
    loose = (killer >= 0) & np.take_along_axis(s.alive, np.maximum(killer, 0), 1)  # (B, N victims)
    return (s.knows_death[:, :, :N] & (s.known_culprit[:, :, :N] < 0) & loose[:, None, :]).any(-1)


def reward(v: Village, ctx: TickContext) -> np.ndarray:
    """Per-NPC reward: needs, personality-weighted negative emotions, health, work and village welfare,
    plus the relief reward where it is on."""
    s, w, t = v.state, v.w, v.t
    N = v.N
    p = Personality.of(w.traits)
    needs = t.w_hunger * s.hunger + t.w_energy * (1 - s.energy) + t.w_social * p.sociability * (1 - s.social)
    grief = felt_grief(v)
    if ctx.anger_sum is not None or t.w_dread > 0:  # anger and fear exist only toward known threats
        emotions = emotion_cost(v, ctx.anger_sum, ctx.fear_sum, grief=grief)
    else:
        emotions = grief_cost(v, p, grief)
    emotions = emotions * t.w_emotion_level
    health = t.w_health * (1 - s.health[:, :N] / np.maximum(w.max_health[:, :N], HEALTH_EPS))
    # free time is worth what work is not, to a lazy NPC: one trade-off that personality decides
    loafing = (s.activity == Action.IDLE) | (s.activity == Action.WANDER)
    pay = t.w_work * p.diligence * ctx.working + t.w_leisure * (1 - p.diligence) * loafing
    if t.grief_dulls_pay > 0:  # grief takes the satisfaction out of work and free time until it is mourned
        pay = pay * np.maximum(0.0, 1.0 - t.grief_dulls_pay * grief)
    gains = t.w_alive + pay + t.w_welfare * s.granary[:, None] + t.w_joy * s.joy
    if ctx.informed is not None:  # telling others what happened (w_inform > 0)
        informed = ctx.informed
        if t.inform_grief_damping:
            informed = informed * np.maximum(0.0, 1.0 - t.inform_grief_scale * s.grief)
        if t.inform_emotion_damping and ctx.anger_sum is not None:  # None: no threat known anywhere
            informed = informed * np.maximum(0.0, 1.0 - ctx.anger_sum - t.inform_fear_scale * ctx.fear_sum)
        if t.inform_out_of_reach:
            informed = informed * ~within_reach_of_threat(v)
        gains = gains + t.w_inform * informed
    out = (gains - needs - emotions - health) * t.reward_scale
    out = np.where(s.alive[:, :N], out, 0.0)
    if v.died.any():
        out = out - v.died * death_dread(v, p) * t.death_penalty * t.reward_scale
    out = (out * ctx.npc_alive).astype(np.float32)
    if ctx.relief is not None:  # fading: grief's slow decay, fear's fast fade once safe, grudges' end
        ctx.relief.count()
        out += (t.w_relief * t.reward_scale * ctx.relief.relieved * ctx.npc_alive * s.alive[:, :N]).astype(np.float32)
    return out


def within_reach_of_threat(v: Village) -> np.ndarray:
    """(B, N) villagers within the safe distance (Village.safe_distance) of a living threat on the map that they
    know of."""
    s, N = v.state, v.N
    known = s.knows_threat & (s.alive & s.present)[:, None, :]
    if not known.any():
        return np.zeros((v.B, N), bool)
    gap = length(s.pos[:, None, :, :] - s.pos[:, :N, None, :])  # (B, N, E)
    return (known & (gap < v.safe_distance[:, None, None])).any(-1)


def death_dread(v: Village, p: Personality) -> np.ndarray | float:
    """The death penalty's multiplier per NPC: 1, or with death_dread_bravery (2 x (1 - bravery)) ** power,
    which death_dread_anger > 0 damps by anger at known threats as anger_fear_damping damps sight fear (the
    enraged timid forget themselves; the frightened bystander does not) and death_dread_grief > 0 by grief (which
    only the dead's friends and kin feel, unlike anger, which reaches anyone who saw the killing)."""
    t = v.t
    if not t.death_dread_bravery:
        return 1.0
    dread = (2.0 * (1.0 - p.bravery)) ** t.death_dread_power
    if t.death_dread_anger > 0:
        # the state's anger, not this tick's anger_sum: the mind phase has already zeroed the dead's sums
        anger = np.minimum(v.state.anger.sum(-1), t.anger_sum_cap)
        dread = dread / (1.0 + t.death_dread_anger * p.aggression * anger)
    if t.death_dread_grief > 0:
        dread = dread / (1.0 + t.death_dread_grief * p.aggression * v.state.grief)
    return dread


def interrupt(v: Village, ctx: TickContext) -> None:
    """News, an attack or a threat coming into sight frees a busy NPC to re-decide (unless it is fleeing)."""
    s = v.state
    s.busy &= ~((ctx.learned | ctx.attacked) & (s.activity != Action.FLEE))
    s.busy &= s.alive[:, :v.N]
    s.performing &= s.busy


# ------------------------------------------------------------------ reaction labels (never read by behaviour)
def label_reactions(v: Village) -> np.ndarray:
    """Display labels from the current activity and its context."""
    s, N = v.state, v.N
    act, tgt = s.activity, np.maximum(s.target, 0)
    active = s.busy & s.alive[:, :N]
    flat_target = v.row_offset + tgt  # (b, i, target) into any (B, N, E) array
    anger_at = s.anger.reshape(-1).take(flat_target)
    threat = s.knows_threat.reshape(-1).take(flat_target)
    raider = v.w.entity_kind[tgt] == EntityKind.RAIDER
    tgt_grief = np.take_along_axis(s.grief, np.minimum(tgt, N - 1), 1) * (tgt < N)
    label = np.zeros_like(act)
    label = np.where(active & (act == Action.MOURN) & s.performing, Reaction.MOURNING, label)
    attack = active & (act == Action.ATTACK)
    label = np.where(attack, Reaction.AGGRESSION, label)
    label = np.where(attack & threat, Reaction.DEFENSE, label)
    label = np.where(attack & threat & (anger_at > LABEL_ANGER_MIN) & ~raider, Reaction.REVENGE, label)
    label = np.where(active & (act == Action.FLEE) & threat, Reaction.FEAR, label)
    label = np.where(active & (act == Action.COMFORT) & (tgt_grief > LABEL_GRIEF_MIN), Reaction.CONSOLING, label)
    label = np.where(active & (act == Action.WARN), Reaction.ALARM, label)
    return label


def consolation_cause(v: Village, bb: np.ndarray, ii: np.ndarray, tt: np.ndarray) -> np.ndarray:
    """The death consoler i consoles villager t over: of the villagers' deaths both know of, the one t grieves
    (`grief_closeness`) that i learned of last; else the villager's death i learned of last; -1 if i knows of
    none. An actor's death (a killer's, a raider's) is nobody's grief, so it never is the cause."""
    s, N = v.state, v.N
    learned = s.learned_tick[bb, ii, :N]  # (n, N): when the consoler learned each villager died
    known = learned >= 0
    grieves = grief_closeness(v, bb[:, None], tt[:, None], np.arange(N)) > 0  # (n, N): whom t would grieve
    grieved = known & s.knows_death[bb, tt, :N] & grieves
    pick = np.where(grieved.any(1), np.argmax(np.where(grieved, learned, -1), axis=1), np.argmax(learned, axis=1))
    return np.where(known.any(1), s.death_event[bb, pick], -1)


def record_reactions(v: Village) -> None:
    """A reaction event when an NPC starts showing a label, with a cause link (logged when recording)."""
    s = v.state
    started = (v.reaction != v.prev_reaction) & (v.reaction != Reaction.NONE)
    v.prev_reaction = v.reaction.copy()
    bb, ii = np.nonzero(started)
    if not len(bb):
        return
    ids = v.new_event_ids(bb)  # taken whether or not the log records, so runs stay identical
    if not v.record:
        return
    tgt = s.target[bb, ii]
    label = v.reaction[bb, ii]
    tt = np.maximum(tgt, 0)
    cause = np.where(label == Reaction.MOURNING, s.death_event[bb, tt], s.threat_event[bb, tt])
    revenge = label == Reaction.REVENGE
    cause = np.where(revenge, grudge_cause(v, bb, ii, tt), cause)
    consoling = label == Reaction.CONSOLING
    if consoling.any():
        cause[consoling] = consolation_cause(v, bb[consoling], ii[consoling], tt[consoling])
    # an alarm is about the threat the warner fears most among those it knows
    feared = np.argmax(np.where(s.knows_threat[bb, ii], s.fear[bb, ii] + ALARM_FEAR_TIEBREAK, -1.0), axis=1)
    cause = np.where(label == Reaction.ALARM, s.threat_event[bb, feared], cause)
    intensity = np.select(
        [label == Reaction.MOURNING, revenge, label == Reaction.FEAR],
        [s.grief[bb, ii], s.anger[bb, ii, tt], s.fear[bb, ii, tt]],
        default=s.fear[bb, ii].max(-1),
    )
    v.log.add_events(ids, bb, s.tick[bb] - 1, EventType.REACTION, ii, tgt, s.pos[bb, ii, 0], s.pos[bb, ii, 1],
                     cause=cause, reaction=label, intensity=intensity)
