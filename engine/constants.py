"""Names and numbers shared by the whole engine: actions, emotions, events, reactions, tuning."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from worlds import TRAIT_NAMES


class Action(IntEnum):
    """What an NPC chooses to do. Targeted actions take one of K salient observation slots.

    Every action is a macro-action: it persists (walk there, then act) until it is done or
    interrupted by news, an attack or a threat in sight. While an NPC is busy its mask allows
    only IDLE, which then means "carry on".
    """

    IDLE = 0
    WANDER = 1
    WORK = 2
    EAT = 3
    SLEEP = 4
    TALK = 5
    COMFORT = 6
    MOURN = 7
    ATTACK = 8
    FLEE = 9
    WARN = 10


UNTARGETED: tuple[Action, ...] = (Action.IDLE, Action.WANDER, Action.WORK, Action.EAT, Action.SLEEP)
TARGETED: tuple[Action, ...] = (
    Action.TALK,
    Action.COMFORT,
    Action.MOURN,
    Action.ATTACK,
    Action.FLEE,
    Action.WARN,
)
N_KINDS = len(Action)


class EntityKind(IntEnum):
    NPC = 0
    PLAYER = 1
    RAIDER = 2


class EventType(IntEnum):
    DEATH = 0
    ATTACK = 1
    RAID_START = 2
    GIFT = 3
    TALK = 4
    REACTION = 5


class Reaction(IntEnum):
    """Display labels derived from an action and its context. They never drive behaviour."""

    NONE = 0
    MOURNING = 1
    REVENGE = 2
    FEAR = 3
    CONSOLING = 4
    ALARM = 5
    GLOATING = 6
    DEFENSE = 7
    AGGRESSION = 8


class Trait(IntEnum):
    """The personality columns of `WorldArrays.traits` (B, N, 5), in the order of worlds.TRAIT_NAMES."""

    BRAVERY = 0
    AGGRESSION = 1
    EMPATHY = 2
    SOCIABILITY = 3
    DILIGENCE = 4


if tuple(t.name.lower() for t in Trait) != TRAIT_NAMES:  # the world files' order is the arrays' order
    raise ImportError(f"engine.constants.Trait is out of step with worlds.TRAIT_NAMES {TRAIT_NAMES}")


class Personality(NamedTuple):
    """Named views on a traits array's columns: `Personality.of(w.traits).bravery` is `w.traits[..., BRAVERY]`."""

    bravery: np.ndarray
    aggression: np.ndarray
    empathy: np.ndarray
    sociability: np.ndarray
    diligence: np.ndarray

    @classmethod
    def of(cls, traits: np.ndarray) -> Personality:
        return cls(*(traits[..., int(t)] for t in Trait))


REACTION_NAMES: tuple[str, ...] = tuple(r.name.lower() for r in Reaction)
ACTION_NAMES: tuple[str, ...] = tuple(a.name.lower() for a in Action)


class ActorMode(IntEnum):
    """What a non-NPC actor (player, raider) is doing."""

    OFF_MAP = 0
    IDLE = 1
    HUNT = 2  # walk to the target and kill it
    STRIKE = 3  # walk to the target and land one blow
    LINGER = 4  # stay at the scene for a few ticks
    STROLL = 5  # walk to a destination and stand there
    RETREAT = 6  # leave the map (raiders when hurt)
    RAID = 7  # raider: go for the nearest villager
    MOVE = 8  # externally commanded: walk to a destination
    DEFEND = 9  # the player turns on a villager who struck it (Tuning.fights_back)


TICKS_PER_DAY = 144  # 1 tick = 10 game minutes
START_TICK_OF_DAY = 36  # episodes start at 06:00
NIGHT_START = 22 * 6  # 22:00
NIGHT_END = 6 * 6  # 06:00

# Numbers of the tick that are not tuning: guards, thresholds of what is worth an event or a label, the
# personality weights of the emotions (also in the reward, docs/engine.md).
LETHAL_DAMAGE = 1e3  # a killing blow (HUNT, an injected death): more than any health
DIST_EPS = 1e-6  # guards a division by a distance
FLEE_EPS = 1e-3  # closer than this, a threat stands on the NPC: no direction leads away from it
HEALTH_EPS = 1e-6  # guards a division by max health
FOOD_EPS = 1e-9  # guards a division by the meal demand
GRIEF_WEIGHT_BASE = 0.5  # grief weighs (this + empathy): in mourning and consoling relief and in the reward
FEAR_WEIGHT_BASE = 1.5  # fear weighs (this - bravery) in the reward
GLOAT_EVENT_MIN = 0.2  # joy at a disliked one's death above which a gloating reaction event is logged
LABEL_ANGER_MIN = 0.05  # anger at a known threat above which an attack on it reads as revenge
LABEL_GRIEF_MIN = 0.05  # the comforted one's grief above which comforting reads as consoling
ALARM_FEAR_TIEBREAK = 1e-3  # an alarm's cause: the most feared known threat (known ones win ties with 0 fear)
START_HUNGER = (0.0, 0.4)  # an episode's needs start uniform in these ranges
START_ENERGY = (0.7, 1.0)
START_SOCIAL = (0.5, 1.0)
CLOSE_AFFINITY = 0.5  # a close relation: kin or spouse, or an affinity at least this (metrics, victim rules, timeline)


def close_relations(affinity: np.ndarray, kin: np.ndarray, threshold: float = CLOSE_AFFINITY) -> np.ndarray:
    """The one definition of a close relation: kin or spouse, or affinity >= threshold (same shapes in and out)."""
    return kin | (affinity >= threshold)


GRIEF_LEFT = 0.05  # grief below this is mourned away (Tuning.mourning_ends_with_grief)


@dataclass(frozen=True)
class Tuning:
    """Every physical and psychological constant of the tick, documented in docs/engine.md."""

    # movement (map units per tick)
    walk_speed: float = 1.6
    flee_speed: float = 2.2
    charge_speed: float = 2.2  # an NPC going for someone (ATTACK) runs: it can catch a walking killer
    actor_speed: float = 2.0
    reach: float = 1.2  # interaction distance
    talk_radius: float = 2.5  # ambient gossip distance
    max_travel_ticks: int = 40  # a macro-action that has not arrived by then is abandoned
    wander_radius: float = 6.0
    flee_distance: float = 8.0  # a fleeing NPC heads this far straight away from the threat (recomputed each tick)
    flee_home: bool = False  # True: FLEE runs home when the way there leads away from the threat, and hides
    # there hide_ticks: out of a killer's reach (his hunts pass it over) and feeling safe (fear fades at the safe rate)
    hide_ticks: int = 6
    hide_until_clear: bool = False  # True: hiding at home ends as soon as the threat is out of sight of the house
    # (farther than his sight radius from it), hide_ticks at most; False: it lasts hide_ticks whatever he does
    hide_clear_factor: float = 1.0  # with hide_until_clear: the threat must be this many sight radii from the house
    # before the hider comes out (1 = just out of sight); more keeps a household in while a killer lingers nearby
    flee_margin: float = 1.0  # a flight straight away runs to this many times the safe distance before it stops
    # (and, with refuge_out_of_sight, a refuge lies at least that far from the threat): 1 = stop at the safe distance
    flee_along_walls: bool = False  # True: a flight straight away that the village's edge would stop turns (up to
    # 135 degrees either way) to the heading whose end lies farthest from the threat, so a villager backed against a
    # wall runs along it; False: it heads for the nearest point of the edge and waits there
    flight_escapes_hunt: bool = False  # True: a killer hunting a villager who flees from him and gets out of his sight
    # loses her: the hunt ends and he strolls to a public place. False: a hunt ends only with the prey dead or hidden
    refuge_tells: bool = False  # True (with flee_home): a villager hiding at home warns every awake villager within
    # talking range of it, each tick it hides: a witness who ran home tells the household what it saw. False: hiding
    # is silent (ambient gossip only)
    flight_warns: bool = False  # True: a villager fleeing from a threat warns every awake villager within talking
    # range of it, each tick it runs: a witness shouts the news as it goes, so running away and telling are one act.
    # False: a flight is silent (a warning needs WARN, or refuge_tells once home)
    refuge_out_of_sight: bool = False  # True (with flee_home): home is a refuge only when it lies at least the safe
    # distance from the threat; a flight from a killer who can see one's door runs straight away until safe
    fear_fades_in_flight: bool = False  # True: fear of a loose, known threat out of reach fades at the safe rate
    # (fear_safe_half_life) only while the NPC flees from it or hides; walking off on other business it fades at the
    # near rate (fear_half_life): fleeing is the coping that relieves fear, as mourning is grief's
    grief_waits: bool = False  # True: grief neither stings nor fades while the NPC flees or hides (fear first)
    strike_reach_factor: float = 1.5  # a blow lands within reach x this (the observation's in_reach says the same)
    # how long each macro-action performs once there (ticks)
    work_ticks: int = 6
    eat_ticks: int = 2
    sleep_ticks: int = 18
    talk_ticks: int = 2
    comfort_ticks: int = 3
    mourn_ticks: int = 6
    warn_ticks: int = 1
    attack_ticks: int = 1
    wander_ticks: int = 1
    idle_ticks: int = 1
    # needs (hunger 0 sated..1 starving; energy and social 1 good..0 bad)
    hunger_rate: float = 1 / 72
    energy_rate: float = 1 / 110
    social_rate: float = 1 / 96
    eat_relief: float = 0.35
    sleep_gain: float = 0.07
    sleep_energy: float = 0.5  # by day, SLEEP is allowed only below this energy (no hiding in bed)
    work_at_night: bool = True  # False: the workplaces close from 22:00 to 06:00 (WORK is masked)
    work_stops_for_threat: bool = False  # True: an NPC who knows of a living threat (a loose killer) does not go to
    # work (WORK is masked): the village's work stops while he is about, so going back to work is not going to him
    curriculum_raid: float = 0.0  # training scenario `mixed`: share of episodes with a raid in the kill window
    curriculum_rampage: float = 0.25  # training scenario `mixed`: share of episodes whose killer goes on a rampage
    curriculum_armoured: float = 0.0  # training scenario `mixed`: share of episodes whose killer is armoured (blows on
    # him land and ease anger but do no harm) and rampages: a threat the crowd cannot end, from which only getting
    # away keeps the afraid alive (0 = off)
    curriculum_late: float = 0.0  # training scenario `mixed`: share of episodes whose first killing falls from 16:00
    # to midnight (curriculum.LATE_KILL_WINDOW) instead of in the kill window, so that the village also learns what
    # to do after a killing in the evening and at night (0 = off)
    rampage_at_scene: bool = False  # True: a rampaging killer's next hunt starts at the scene, once it has lingered
    hunt_nearest: bool = False  # True: a killer still loose takes the nearest villager in his sight for his next
    # planned killing (training scenario `mixed`), so that keeping away from a known killer keeps one alive
    rampage_linger: int = -1  # >= 0: a rampaging killer orders his next killing from the scene after lingering this
    # many ticks over his victim (0: at once), his prey chosen as for any hunt; -1 = off (he lingers, then strolls)
    hunt_afraid: float = 0.0  # > 0: a loose killer choosing his next prey (hunt_nearest, a rampage) takes the nearest
    # villager in his sight whose fear of him is at least this, if there is one: he goes for those who fear him (who
    # saw him kill and stayed), not for those who stand up to him (0 = off: the nearest, whoever it is)
    hunt_afraid_only: bool = False  # True (with hunt_afraid > 0): those who fear him are his only prey; with none of
    # them in sight his next hunt waits (a rampage roams on, a later killing takes its planned victim), so standing up
    # to him is no danger. False: with nobody afraid in sight, the nearest villager
    hunt_spares_chargers: bool = False  # True (with hunt_afraid > 0): a villager charging him (ATTACK on him) does
    # not count as afraid when he picks his prey, however much it fears him: he goes for those who cower, so a
    # timid avenger who charges is no likelier prey than a bold one
    work_energy_factor: float = 1.5  # energy drains this much faster while working
    talk_gain: float = 0.2
    work_output: float = 0.012  # granary fraction per worker-tick at diligence 1
    eat_cost: float = 0.01  # granary fraction per meal-tick
    granary_spoil: float = 0.0005
    # combat
    blow_damage: float = 0.3
    blow_damage_aggression: float = 0.4
    raider_damage: float = 0.25
    player_health: float = 2.0
    raider_retreat_health: float = 0.5
    linger_ticks: int = 3  # a killer stays at the scene this long before strolling off
    fights_back: float = 0.0  # > 0: the player, struck by a villager, turns on it and lands blows of this damage
    hit_fear: float = 0.5  # the attacked: fear of the attacker += fear_gain x this x (1 - bravery)
    hit_anger: float = 0.5  # the attacked: anger at the attacker += anger_gain x this x aggression
    gift_joy: float = 0.3  # a gift: joy += this; anger and fear of the giver x gift_calm
    gift_calm: float = 0.7
    talk_calm: float = 0.85  # an actor's chat: fear of the speaker x this
    # appraisal (OCC-style)
    grief_gain: float = 1.0
    kin_bonus: float = 0.5
    anger_gain: float = 1.0
    anger_base: float = 0.3  # anger at a culprit scales with liking x (this + aggression)
    fear_gain: float = 1.0
    hearsay_fear: float = 0.35
    rumour_error: float = 0.0  # chance that a culprit passed on by word of mouth comes out as someone else (0 = off)
    sight_fear: float = 1.5  # fear floor near a known threat: sight_fear x timidity x proximity
    fear_near: float = 0.75  # a threat within this fraction of the sight radius sustains fear (floor, slow fade)
    justice_relief: float = 0.8  # share of anger at a threat relieved on learning that it is dead
    gloat_gain: float = 0.8
    close_affinity: float = 0.3  # a dead loved one (kin, or affinity at least this) draws an NPC's attention (salience)
    body_discovery_radius: float = 4.0
    emotion_cap: float = 3.0
    # half-lives in ticks
    grief_half_life: float = 288.0
    anger_half_life: float = 144.0
    grudge_half_life: float = 2880.0  # anger at a living, known culprit (persistent grudges)
    fear_half_life: float = 12.0  # while the threat is near (within fear_near x sight radius)
    fear_safe_half_life: float = 3.0  # once it is farther (or dead): safety brings relief
    joy_half_life: float = 24.0
    wake_at_home: int = 0  # > 0: a dead villager's body is carried home this many ticks after the death and lies
    # there (a wake): MOURN goes to the house, and whoever comes home finds it (0 = off: it lies where it fell)
    # coping relief per performing tick (multiplicative, personality-weighted)
    mourn_relief: float = 0.2
    mourn_relief_linear: bool = False  # True: a mourning tick eases mourn_relief x (0.5 + empathy) of grief, not
    # that share of it (grief work: a great loss takes longer to mourn)
    mourn_relief_empathy: bool = True  # False: a mourning tick eases mourn_relief for everyone; empathy weighs the
    # grief (its cost) without also hastening its work, so the empathic do not mourn a loss away in one short spell
    mourn_out_of_reach: bool = False  # True: a mourning tick within the safe distance of a loose threat the mourner
    # knows of eases no grief (the vigil waits until the killer has gone); False: it eases grief wherever it is held
    grief_work_anger: float = 0.0  # > 0: grief work (mourning, comforting and being comforted) eases grief times
    # max(0, 1 - this x aggression x anger at living threats one knows): the enraged cannot mourn while the killer
    # lives, so the victim's aggressive kin deal with him first (0 = off)
    mourning_ends_with_grief: bool = False  # True: MOURN is open only to an NPC with grief >= GRIEF_LEFT, and a
    # mourning ends once its grief is below that: no vigil at the body after the grief is mourned away. False: a
    # mourning runs its ticks, and anyone who knows of the death may mourn, grieving or not
    grief_per_loss: bool = False  # True: grief is held per loss (VillageState.loss_grief; the grief is their sum):
    # mourning at a body eases only the grief for that death, MOURN is open only at a body whose grief is left (with
    # mourning_ends_with_grief), and a mourning there ends once it is mourned away, so a villager who lost two
    # loved ones has reason to go to both. Comforting, decay and the cap scale every loss alike
    comfort_relief: float = 0.10
    comforter_relief: float = 0.5  # the comforter's own grief eases by this share of comfort_relief
    blow_anger_relief: float = 0.5
    blow_fear_relief: float = 0.5  # landing a blow on a threat halves the fear of it
    blow_relief_bravery: bool = False  # True: a landed blow eases fear of its target by blow_fear_relief x bravery,
    # so striking calms the brave and leaves the timid afraid of the one they hit (False: by blow_fear_relief for all)
    anger_fear_damping: float = 3.0  # sight fear / (1 + damping x aggression x anger at the threat)
    safe_distance_factor: float = 1.0  # safe = sight_radius * factor
    # reward weights (per tick; total scaled by reward_scale)
    reward_scale: float = 0.1
    w_hunger: float = 1.0
    w_energy: float = 0.5
    w_social: float = 0.5
    w_health: float = 1.0
    w_work: float = 2.0
    w_leisure: float = 1.0  # per tick of idling or wandering, times (1 - diligence)
    grief_dulls_pay: float = 0.0  # > 0: the pay of work and free time (w_work, w_leisure) is scaled by
    # max(0, 1 - this x felt grief): a bereaved villager takes no satisfaction in either until the grief is mourned,
    # so going back to work is not worth more than going to the body (0 = off)
    w_welfare: float = 0.2
    w_joy: float = 0.2
    anger_weight_base: float = 0.5  # anger costs (this + aggression) per unit: at 0, anger costs only the aggressive
    w_emotion_level: float = 1.0  # the per-tick cost of the negative emotions' level (the terms below, times this)
    w_grief: float = 1.0  # grief's weight in that cost (reward only: how the body and the mind run is unchanged), so
    # a lever can make unmourned grief cost more without making fear or anger cost more too
    w_relief: float = 0.0  # reward per unit of that cost relieved (coping, justice, fading); 0 = off
    w_dread: float = 0.0  # per tick of knowing of a murder but not who did it, times (1.5 - bravery); 0 = off
    w_inform: float = 0.0  # to the teller, per villager it tells of a death that one did not know; 0 = off
    tell_salience: float = 0.0  # > 0: a face in sight that has not heard a death one knows of draws attention
    inform_threat_deaths: bool = False  # True: telling that a threat one knew of (a killer) is dead is news too
    # (w_inform), and news_for_them marks a face that has not heard of it: justice reaches those who fled
    inform_grief_damping: bool = False  # True: w_inform x (1 - grief), floored at 0: the bereaved take no
    # pleasure in spreading the news, so telling falls to those the death did not wound
    inform_grief_scale: float = 1.0  # with inform_grief_damping: w_inform x max(0, 1 - this x grief); above 1 a
    # bereaved villager who has mourned only part of its grief still takes no pleasure in telling (as grief_dulls_pay
    # does for work), so the telling does not draw it from the body
    inform_emotion_damping: bool = False  # True: w_inform x (1 - anger - fear at known threats), floored at 0:
    # while the killer is loose and near, the angry and the frightened deal with him before they spread the news
    inform_fear_scale: float = 1.0  # with inform_emotion_damping: w_inform x max(0, 1 - anger - this x fear); above 1
    # a frightened witness earns nothing for an alarm raised near the killer: it saves itself first
    inform_out_of_reach: bool = False  # True: no w_inform for news told within the safe distance of a loose threat
    # the teller knows of: the alarm is raised from safety, and a witness does not walk back to the killer to tell
    anger_sum_cap: float = 2.0
    fear_sum_cap: float = 2.0
    death_penalty: float = 10.0
    death_dread_bravery: bool = False  # True: the death penalty is scaled by (2 x (1 - bravery)) ** death_dread_power
    # (1 at bravery 0.5): the timid dread dying more than the brave, who risk it for justice. False: one price for all
    death_dread_power: float = 1.0  # the dread's steepness (at 2: 2.56x at bravery 0.2, 0.16x at 0.8)
    death_dread_anger: float = 0.0  # > 0 (with death_dread_bravery): the dread is divided by (1 + this x aggression x
    # anger at known threats), as sight fear is by anger_fear_damping: an enraged avenger risks death, a bystander flees
    death_dread_grief: float = 0.0  # > 0 (with death_dread_bravery): the dread is divided by (1 + this x aggression x
    # grief): grief comes only from liking the dead, so the kin of the victim forget themselves and a bystander does not
    hearsay_justice: bool = False  # True: a villager told of a threat does not take him for one when his latest
    # violence struck someone it knows (or is told in the same breath) to be a threat, and told that someone is a
    # threat, it no longer takes those whose latest violence struck him for threats: the crowd's avengers are not
    # feared on hearsay. False: a threat passes from ear to ear whatever he did
    outsider_fights_not_feared: bool = False  # True: a witness does not take a villager it sees strike or kill an
    # outsider (the player, a raider) for a threat, whatever it knows of him: the village sides with its own. False:
    # only avenger_not_feared's witnesses (who knew the outsider was a threat) hold the villager blameless
    avenger_not_feared: bool = False  # True: a witness who knew the victim was a threat (the killer, a raider) does
    # not take the one who killed it for a threat, as a blow on a known threat is not (feel_attacks): justice, not
    # danger. False: the rule of the bundled policies' world, in which the villager who kills the killer is feared
    attack_needs_grievance: bool = True  # ATTACK is masked unless the NPC knows a threat, is angry at it, or is a rival
    w_alive: float = 3.0  # being alive is worth something, even in grief and anger: else dying ends a stream of costs
