"""The batched village simulation: B independent villages of N NPCs stepped together, no loop over NPCs.

One tick (10 game minutes), in order:
  1. scenario events and external commands set what the non-NPC actors do;
  2. free NPCs start the macro-action the policy chose (busy ones carry on);
  3. NPCs walk toward their activity's destination; those that arrive perform it;
  4. actors (player, raiders) move and strike;
  5. combat resolves (damage, deaths, with a seeded priority for who landed the killing blow);
  6. perception: witnesses within sight learn at once; bodies are found; raiders are seen;
  7. news spreads by talk, comfort, warn and ambient gossip along social ties (message records);
  8. appraisal (OCC-style grief, anger, fear, gloating), coping relief, then exponential decay;
  9. needs, rewards, reaction labels, interruptions of busy NPCs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.constants import (
    NIGHT_END,
    NIGHT_START,
    START_TICK_OF_DAY,
    TARGETED,
    TICKS_PER_DAY,
    UNTARGETED,
    Action,
    ActorMode,
    EntityKind,
    EventType,
    Reaction,
    Tuning,
)
from engine.events import HOW_TOLD, HOW_WARNED, EventLog
from engine.kernels import perceive, spread_knowledge, threat_fear_and_decay
from engine.state import VillageState, WorldArrays, world_arrays
from worlds import WorldSpec

SCENARIOS = ("world", "random_kill", "mixed", "none")
MAX_KILLS = 3  # scheduled killings per village in the training scenarios
# the "mixed" training curriculum: how many killings an episode has (1, 2 or 3); how often the killer goes on
# to hunt whoever is nearest (a rampage, so that standing near a killer is really dangerous) is
# Tuning.curriculum_rampage
MIXED_KILL_COUNT_P = (0.45, 0.35, 0.2)


@dataclass(frozen=True)
class Command:
    """An order for a non-NPC actor (the player in the sandbox or the bridge), applied at the next tick."""

    village: int
    actor: int  # entity index of the actor
    op: str  # "kill" | "attack" | "move" | "gift" | "talk" | "stop" | "raid"
    target: int = -1
    x: float = 0.0
    y: float = 0.0


COMMAND_OPS = ("kill", "attack", "move", "gift", "talk", "stop", "raid")
TALK_RANGE_FACTOR = 2.0  # an actor can talk with an NPC within this many talk radii


def action_tables(slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat action index -> (Action kind, slot or -1)."""
    kinds = [int(a) for a in UNTARGETED] + [int(a) for a in TARGETED for _ in range(slots)]
    slot_of = [-1] * len(UNTARGETED) + [k for _ in TARGETED for k in range(slots)]
    return np.array(kinds, np.int64), np.array(slot_of, np.int64)


def flat_action(kind: Action, slot: int, slots: int) -> int:
    if kind in UNTARGETED:
        return int(UNTARGETED.index(kind))
    return len(UNTARGETED) + TARGETED.index(kind) * slots + slot


def _length(v: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """Euclidean length over the last axis (x, y); cheaper than np.linalg.norm for pairs."""
    out = np.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1])
    return out[..., None] if keepdims else out


def _mode_in(mode: np.ndarray, *modes: ActorMode) -> np.ndarray:
    out = mode == modes[0]
    for m in modes[1:]:
        out |= mode == m
    return out


def _half_life_factor(half_life: float) -> float:
    return float(0.5 ** (1.0 / half_life))


class VillageSim:
    """B villages stepped in lockstep. `step(actions)` takes one flat action per NPC, shape (B, N)."""

    def __init__(
        self,
        worlds: WorldSpec | list[WorldSpec],
        num_villages: int | None = None,
        seed: int | None = None,
        *,
        slots: int = 4,
        max_ticks: int = 144,
        scenario: str = "world",
        tuning: Tuning | None = None,
        record: bool = False,
        kill_window: tuple[int, int] = (8, 60),
        trait_noise: float = 0.0,
    ):
        if isinstance(worlds, WorldSpec):
            worlds = [worlds] * (num_villages or 1)
        elif num_villages is not None and num_villages != len(worlds):
            worlds = [worlds[b % len(worlds)] for b in range(num_villages)]
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.specs: list[WorldSpec] = list(worlds)
        self.w: WorldArrays = world_arrays(self.specs)
        self.B = len(self.specs)
        self.N = len(self.specs[0].npcs)
        self.M = len(self.specs[0].actors)
        self.E = self.N + self.M
        self.K = min(slots, self.E - 1)
        self.max_ticks = max_ticks
        self.scenario = scenario
        self.kill_window = kill_window
        if not 0 <= trait_noise <= 1:
            raise ValueError(f"trait_noise must be in [0, 1], got {trait_noise}")
        self.trait_noise = trait_noise
        self.t = tuning or Tuning()
        self.record = record
        self.log = EventLog()
        self.action_kind, self.action_slot = action_tables(self.K)
        self.n_actions = len(self.action_kind)
        self.commands: list[Command] = []
        self._perform_ticks = np.array(
            [getattr(self.t, f"{a.name.lower()}_ticks") for a in Action if a != Action.FLEE] + [0], np.int64
        )[self._kind_order()]
        self._npc_index = np.arange(self.N)
        self._row_offset = (np.arange(self.B * self.N) * (self.N + self.M)).reshape(self.B, self.N)
        self._anger_sum: np.ndarray | None = None
        self._fear_sum: np.ndarray | None = None
        self._news_buffer = np.empty((self.B * self.N * self.E, 5), np.int64)
        self._how_buffer = np.empty(self.B * self.N * self.E, np.int64)
        self._is_raider = self.w.entity_kind == EntityKind.RAIDER
        self._raider_cols = np.flatnonzero(self.w.entity_kind == EntityKind.RAIDER)
        t = self.t
        self._decay_grief = np.float32(_half_life_factor(t.grief_half_life))
        self._decay_joy = np.float32(_half_life_factor(t.joy_half_life))
        self._decay_fear = np.float32(_half_life_factor(t.fear_half_life))
        self._decay_fear_safe = np.float32(_half_life_factor(t.fear_safe_half_life))
        self._decay_anger = np.float32(_half_life_factor(t.anger_half_life))
        self._decay_grudge = np.float32(_half_life_factor(t.grudge_half_life))
        self._base_traits = self.w.traits.copy()
        self.seed(seed)
        self.state = self._initial_state(np.arange(self.B))
        self._jitter_traits(np.arange(self.B))
        from engine.observe import Observer  # local: observe imports this module's constants

        self.observer = Observer(self)
        self.last_reward = np.zeros((self.B, self.N), np.float32)
        self.died = np.zeros((self.B, self.N), bool)
        self.reaction = np.zeros((self.B, self.N), np.int64)
        self._prev_reaction = self.reaction.copy()
        self.obs, self.mask = self.observer.observe()

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def _kind_order() -> np.ndarray:
        # _perform_ticks is built in Action order with FLEE moved last; undo that permutation
        order = [a for a in Action if a != Action.FLEE] + [Action.FLEE]
        inverse = np.empty(len(order), np.int64)
        for pos, a in enumerate(order):
            inverse[int(a)] = pos
        return inverse

    def seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    @property
    def entity_names(self) -> list[list[str]]:
        return [list(s.npc_names) + list(s.actor_names) for s in self.specs]

    def _initial_state(self, villages: np.ndarray) -> VillageState:
        B, N, M, E = self.B, self.N, self.M, self.E
        w = self.w
        f32 = np.float32
        present = np.ones((B, E), bool)
        present[:, N:] = w.entity_kind[N:] != EntityKind.RAIDER
        health = w.max_health.copy()
        health[:, N:] = np.where(w.entity_kind[N:] == EntityKind.PLAYER, self.t.player_health, health[:, N:])
        state = VillageState(
            tick=np.zeros(B, np.int64),
            pos=w.start_pos.copy(),
            health=health.astype(f32),
            alive=np.ones((B, E), bool),
            present=present,
            hunger=self.rng.uniform(0.0, 0.4, (B, N)).astype(f32),
            energy=self.rng.uniform(0.7, 1.0, (B, N)).astype(f32),
            social=self.rng.uniform(0.5, 1.0, (B, N)).astype(f32),
            granary=w.granary_start.astype(f32).copy(),
            death_tick=np.full((B, E), -1, np.int64),
            death_pos=np.zeros((B, E, 2), f32),
            killer=np.full((B, E), -1, np.int64),
            death_event=np.full((B, E), -1, np.int64),
            threat_event=np.full((B, E), -1, np.int64),
            activity=np.zeros((B, N), np.int64),
            target=np.full((B, N), -1, np.int64),
            dest=w.home_pos.copy(),
            performing=np.zeros((B, N), bool),
            perform_left=np.zeros((B, N), np.int64),
            travel_left=np.zeros((B, N), np.int64),
            busy=np.zeros((B, N), bool),
            grief=np.zeros((B, N), f32),
            anger=np.zeros((B, N, E), f32),
            fear=np.zeros((B, N, E), f32),
            joy=np.zeros((B, N), f32),
            affinity=w.base_affinity.copy(),
            knows_death=np.zeros((B, N, E), bool),
            known_culprit=np.full((B, N, E), -1, np.int32),
            learned_tick=np.full((B, N, E), -1, np.int32),
            learned_from=np.full((B, N, E), -2, np.int32),
            knows_threat=np.zeros((B, N, E), bool),
            actor_mode=np.where(present[:, N:], ActorMode.IDLE, ActorMode.OFF_MAP).astype(np.int64),
            actor_target=np.full((B, M), -1, np.int64),
            actor_dest=w.start_pos[:, N:].copy(),
            actor_timer=np.zeros((B, M), np.int64),
            kill_tick=np.full((B, MAX_KILLS), -1, np.int64),
            kill_victim=np.full((B, MAX_KILLS), -1, np.int64),
            rampage=np.zeros(B, np.int64),
            raid_tick=np.full(B, -1, np.int64),
            event_count=np.zeros(B, np.int64),
        )
        if self.scenario == "random_kill" and self._player_index() >= 0:
            lo, hi = self.kill_window
            state.kill_tick[:, 0] = self.rng.integers(lo, hi, B)
            state.kill_victim[:, 0] = self.rng.integers(0, N, B)
        elif self.scenario == "mixed" and self._player_index() >= 0:
            lo, hi = self.kill_window
            kills = self.rng.choice(np.arange(1, MAX_KILLS + 1), size=B, p=MIXED_KILL_COUNT_P)
            gaps = self.rng.integers(6, 30, (B, MAX_KILLS))  # later killings follow 1-5 hours apart
            gaps[:, 0] = self.rng.integers(lo, hi, B)
            ticks = np.cumsum(gaps, axis=1)
            victims = np.argsort(self.rng.random((B, N)), axis=1)[:, :MAX_KILLS]  # distinct victims
            planned = np.arange(MAX_KILLS)[None, :] < kills[:, None]
            state.kill_tick[:] = np.where(planned, ticks, -1)
            state.kill_victim[:] = np.where(planned, victims, -1)
            rampaging = self.rng.random(B) < self.t.curriculum_rampage
            state.rampage[:] = rampaging * self.rng.integers(1, 3, B)  # 1-2 hunts
            if self.t.curriculum_raid > 0 and len(self._raider_cols):  # no draw when off: same trajectories
                raided = self.rng.random(B) < self.t.curriculum_raid
                state.raid_tick[:] = np.where(raided, self.rng.integers(lo, hi, B), -1)
        return state

    def _jitter_traits(self, villages: np.ndarray) -> None:
        """Training only (trait_noise > 0): each episode, every NPC's traits are the world's plus Gaussian noise
        (clipped to [0, 1]), so a policy meets many personalities in the same social situations."""
        if self.trait_noise <= 0 or not len(villages):
            return
        noise = self.rng.normal(0.0, self.trait_noise, (len(villages), *self._base_traits.shape[1:]))
        self.w.traits[villages] = np.clip(self._base_traits[villages] + noise, 0.0, 1.0).astype(np.float32)

    def _player_index(self) -> int:
        players = np.flatnonzero(self.w.entity_kind == EntityKind.PLAYER)
        return int(players[0]) if len(players) else -1

    def reset(self, seed: int | None = None, villages: np.ndarray | None = None) -> None:
        """Start new episodes in all villages (or only in `villages`), re-seeding the RNG if a seed is given."""
        if seed is not None:
            self.seed(seed)
        if villages is None:
            self.state = self._initial_state(np.arange(self.B))
            self.log.clear()
            self.commands.clear()
        else:
            fresh = self._initial_state(np.arange(self.B))
            for name, value in vars(fresh).items():
                getattr(self.state, name)[villages] = value[villages]
            for b in villages:
                self.log.clear(int(b))
            self.commands = [c for c in self.commands if c.village not in set(villages.tolist())]
        rows = slice(None) if villages is None else villages
        if self.trait_noise > 0:
            self._jitter_traits(np.arange(self.B) if villages is None else np.asarray(villages))
            self.observer.refresh_world()
        self.last_reward[rows] = 0
        self.died[rows] = False
        self.reaction[rows] = 0
        self._prev_reaction[rows] = 0
        self.obs, self.mask = self.observer.observe()

    def command(self, village: int, actor: int | str, op: str, target: int | str = -1,
                x: float = 0.0, y: float = 0.0) -> None:
        """Queue an order for a non-NPC actor; names or entity indices are accepted."""
        if op not in COMMAND_OPS:
            raise ValueError(f"command op must be one of {COMMAND_OPS}, got {op!r}")
        if not 0 <= village < self.B:
            raise ValueError(f"village must be in 0..{self.B - 1}, got {village}")
        names = self.entity_names[village]

        def entity(name: int | str, what: str) -> int:
            if isinstance(name, str):
                if name not in names:
                    raise ValueError(f"unknown {what} {name!r}; expected one of {', '.join(names)}")
                return names.index(name)
            return int(name)

        actor_i = entity(actor, "actor")
        target_i = entity(target, "target")
        if not self.N <= actor_i < self.E:
            raise ValueError(f"actor must be a non-NPC actor (index {self.N}..{self.E - 1}), got {actor!r}")
        if op in ("kill", "attack", "gift", "talk") and not 0 <= target_i < self.E:
            raise ValueError(f"command {op!r} needs a target entity, got {target!r}")
        self.commands.append(Command(village, actor_i, op, target_i, float(x), float(y)))

    # ------------------------------------------------------------------ helpers
    @property
    def time_of_day(self) -> np.ndarray:
        """Tick of the day, 0..143 (0 = midnight)."""
        return (self.state.tick + START_TICK_OF_DAY) % TICKS_PER_DAY

    @property
    def is_night(self) -> np.ndarray:
        tod = self.time_of_day
        return (tod >= NIGHT_START) | (tod < NIGHT_END)

    def _new_event_ids(self, village: np.ndarray) -> np.ndarray:
        """Consecutive ids per village for a batch of new events, in the given order."""
        village = np.asarray(village, np.int64)
        n = len(village)
        order = np.argsort(village, kind="stable")
        in_order = village[order]
        first_of_village = np.r_[True, in_order[1:] != in_order[:-1]] if n else np.zeros(0, bool)
        group_start = np.maximum.accumulate(np.where(first_of_village, np.arange(n), 0)) if n else order
        ids = np.empty(n, np.int64)
        ids[order] = self.state.event_count[in_order] + (np.arange(n) - group_start)
        np.add.at(self.state.event_count, village, 1)
        return ids

    def _gather_pos(self, entity: np.ndarray) -> np.ndarray:
        """Positions of entity indices of shape (B, X) -> (B, X, 2)."""
        return np.take_along_axis(self.state.pos, np.clip(entity, 0, self.E - 1)[..., None], axis=1)

    # ------------------------------------------------------------------ the tick
    def step(self, actions: np.ndarray) -> None:
        s, w, t = self.state, self.w, self.t
        B, N, E = self.B, self.N, self.E
        actions = np.asarray(actions, np.int64).reshape(B, N)
        # what each NPC learns this tick, kept sparse: (village, npc, subject, is a new death, culprit learned)
        self._news: list[tuple[np.ndarray, ...]] = []
        self._learned = np.zeros((B, N), bool)  # learned anything (news or a new threat): interrupts
        npc_alive = s.alive[:, :N].copy()
        # relief reward (t.w_relief > 0): the emotion cost's decreases are counted where they happen
        relief_on = t.w_relief > 0
        if relief_on:
            cost_start = self._emotion_cost()
            relieved = np.zeros((B, N), np.float32)
        damage = np.zeros((B, E), np.float32)
        hitter = np.full((B, E), -1, np.int64)
        hitter_prio = np.full((B, E), -1.0)
        hits: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (b, attacker, target, cause)

        # 1. scenario events and commands
        self._apply_scenario()
        self._apply_commands()

        # 2. free NPCs start the chosen macro-action
        in_range = (actions >= 0) & (actions < self.n_actions)
        actions = np.where(in_range, actions, 0)
        valid = np.take_along_axis(self.mask, actions[..., None], axis=2)[..., 0]
        actions = np.where(valid, actions, 0)
        kind = self.action_kind[actions]
        slot = self.action_slot[actions]
        chosen_target = np.where(
            slot >= 0, np.take_along_axis(self.observer.slot_entity, np.maximum(slot, 0)[..., None], 2)[..., 0], -1
        )
        start = ~s.busy & npc_alive
        s.activity = np.where(start, kind, s.activity)
        s.target = np.where(start, chosen_target, s.target)
        s.performing = np.where(start, False, s.performing)
        s.perform_left = np.where(start, self._perform_ticks[kind], s.perform_left)
        s.travel_left = np.where(start, t.max_travel_ticks, s.travel_left)
        s.busy = s.busy | start
        wander = start & (kind == Action.WANDER)
        if wander.any():
            offset = self.rng.uniform(-t.wander_radius, t.wander_radius, (B, N, 2)).astype(np.float32)
            s.dest = np.where(wander[..., None], np.clip(s.pos[:, :N] + offset, 0, w.size[:, None, :]), s.dest)
        idle = start & (kind == Action.IDLE)
        s.dest = np.where(idle[..., None], s.pos[:, :N], s.dest)

        # abandon activities whose target no longer makes sense
        tgt = np.maximum(s.target, 0)
        tgt_alive = np.take_along_axis(s.alive & s.present, tgt, 1)
        act = s.activity
        needs_living = (act == Action.TALK) | (act == Action.COMFORT) | (act == Action.WARN) | (
            act == Action.ATTACK) | (act == Action.FLEE)
        abandon = s.busy & needs_living & ~tgt_alive
        s.busy &= ~abandon

        # 3. movement toward destinations; arrival starts the performance
        target_pos = self._gather_pos(tgt)
        death_pos = np.take_along_axis(s.death_pos, tgt[..., None], 1)
        npc_pos = s.pos[:, :N]
        away = npc_pos - target_pos
        away_len = _length(away, keepdims=True)
        flee_dest = np.clip(npc_pos + away / np.maximum(away_len, 1e-3) * 8.0, 0, w.size[:, None, :])
        dest = s.dest
        dest = np.where((act == Action.WORK)[..., None], w.work_pos, dest)
        dest = np.where(((act == Action.EAT) | (act == Action.SLEEP))[..., None], w.home_pos, dest)
        follows = (act == Action.TALK) | (act == Action.COMFORT) | (act == Action.WARN) | (act == Action.ATTACK)
        dest = np.where(follows[..., None], target_pos, dest)
        dest = np.where((act == Action.MOURN)[..., None], death_pos, dest)
        dest = np.where((act == Action.FLEE)[..., None], flee_dest, dest)
        s.dest = dest.astype(np.float32)
        moving = s.busy & ~s.performing & npc_alive
        speed = np.where(act == Action.FLEE, t.flee_speed, np.where(act == Action.ATTACK, t.charge_speed, t.walk_speed))
        step_vec = dest - npc_pos
        dist = _length(step_vec)
        frac = np.where(dist > 0, np.minimum(1.0, speed / np.maximum(dist, 1e-6)), 0.0)
        new_pos = npc_pos + step_vec * (frac * moving)[..., None]
        s.pos[:, :N] = new_pos
        remaining = dist * (1 - frac)
        arrived = moving & (remaining <= t.reach) & (act != Action.FLEE)
        s.performing |= arrived
        s.travel_left = s.travel_left - moving
        # fleeing ends when the threat is a safe distance away
        safe = w.sight_radius[:, None] * t.safe_distance_factor
        flee_done = s.busy & (act == Action.FLEE) & (_length(new_pos - target_pos) >= safe)
        gave_up = moving & ~arrived & (s.travel_left <= 0)
        s.busy &= ~(flee_done | gave_up)

        # 4. performing NPCs act
        perf = s.busy & s.performing & npc_alive
        first = arrived & perf  # first tick of the performance
        in_reach = _length(s.pos[:, :N] - target_pos) <= t.reach * 1.5
        sleeping = perf & (act == Action.SLEEP)
        working = perf & (act == Action.WORK)
        eating = perf & (act == Action.EAT)
        mourning = perf & (act == Action.MOURN)
        comforting = perf & (act == Action.COMFORT)
        talking_first = first & ((act == Action.TALK) | (act == Action.COMFORT))
        warning_first = first & (act == Action.WARN)
        blows = first & (act == Action.ATTACK) & in_reach & tgt_alive
        traits = w.traits
        bravery, aggression, empathy, sociability, diligence = (traits[..., k] for k in range(5))

        s.granary = s.granary + (working * diligence).sum(1) * t.work_output
        meal_demand = eating.sum(1) * t.eat_cost
        fed_share = np.where(meal_demand > 0, np.minimum(1.0, s.granary / np.maximum(meal_demand, 1e-9)), 1.0)
        s.granary = np.clip(s.granary - meal_demand * fed_share - t.granary_spoil, 0.0, 1.0).astype(np.float32)
        s.hunger = s.hunger - eating * t.eat_relief * fed_share[:, None]
        s.energy = s.energy + sleeping * t.sleep_gain
        chatting = perf & ((act == Action.TALK) | (act == Action.COMFORT))
        s.social = s.social + chatting * t.talk_gain
        # the comforted feel the company too
        comfort_tgt = np.where(comforting, s.target, -1)
        if comforting.any():
            bb, ii = np.nonzero(comforting)
            relief = 1 - t.comfort_relief * (0.5 + empathy[bb, ii])
            np.multiply.at(s.grief, (bb, comfort_tgt[bb, ii]), relief)
            np.add.at(s.social, (bb, comfort_tgt[bb, ii]), t.talk_gain)
            s.grief[bb, ii] *= 1 - 0.5 * t.comfort_relief
        if t.mourn_relief_linear:  # grief work: each tick at the body eases a fixed amount, so a great loss
            # takes longer to mourn and every tick of it is worth the same until the grief is spent
            s.grief = np.maximum(s.grief - mourning * (t.mourn_relief * (0.5 + empathy)), 0.0).astype(np.float32)
        else:
            s.grief = s.grief * np.where(mourning, 1 - t.mourn_relief * (0.5 + empathy), 1.0)
        if blows.any():
            bb, ii = np.nonzero(blows)
            tt = s.target[bb, ii]
            dmg = t.blow_damage + t.blow_damage_aggression * aggression[bb, ii]
            cause = self._grudge_cause(bb, ii, tt)
            hits.append((bb, ii, tt, cause))
            self._accumulate_hits(damage, hitter, hitter_prio, bb, ii, tt, dmg)
            s.anger[bb, ii, tt] *= 1 - t.blow_anger_relief
            s.fear[bb, ii, tt] *= 1 - t.blow_fear_relief  # it can be hurt: coping potential
        done_performing = perf & (s.perform_left <= 1)
        s.perform_left = s.perform_left - perf
        s.busy &= ~done_performing

        if relief_on:  # coping: mourning, comforting, blows
            cost_coped = self._emotion_cost()
            relieved += np.maximum(cost_start - cost_coped, 0.0)

        # 5. non-NPC actors
        self._step_actors(damage, hitter, hitter_prio, hits)

        # 6. combat resolution
        was_alive = s.alive.copy()
        s.health = np.clip(s.health - damage, 0.0, None).astype(np.float32)
        just_died = was_alive & (s.health <= 0)
        attacked = damage[:, :N] > 0
        s.alive &= ~just_died
        s.death_tick = np.where(just_died, s.tick[:, None], s.death_tick)
        s.death_pos = np.where(just_died[..., None], s.pos, s.death_pos)
        s.killer = np.where(just_died, hitter, s.killer)
        self._record_hits(hits, just_died)
        awake = s.alive[:, :N] & ~sleeping
        # attacked NPCs wake up, feel fear and anger toward the attacker, and know the threat
        if hits:
            bb = np.concatenate([h[0] for h in hits])
            aa = np.concatenate([h[1] for h in hits])
            tt = np.concatenate([h[2] for h in hits])
            victim_npc = tt < N
            victim_npc[victim_npc] &= s.alive[bb[victim_npc], tt[victim_npc]]  # the killed feel nothing more
            vb, va, vt = bb[victim_npc], aa[victim_npc], tt[victim_npc]
            np.add.at(s.fear, (vb, vt, va), t.fear_gain * 0.5 * (1 - bravery[vb, vt]))
            np.add.at(s.anger, (vb, vt, va), t.anger_gain * 0.5 * aggression[vb, vt])
            self._know_threat(vb, vt, va)
            # witnesses of an attack learn who is dangerous, unless the one attacked is a threat they know
            # (striking a known killer is defence or justice, not a danger sign)
            attack_pos = s.pos[bb, aa]
            d_w = _length(s.pos[bb, :N] - attack_pos[:, None, :])
            seen = (d_w <= w.sight_radius[bb][:, None]) & awake[bb]
            seen &= ~s.knows_threat[bb, :, tt]
            wb, wi = np.nonzero(seen)
            not_attacker = wi != aa[wb]
            self._know_threat(bb[wb][not_attacker], wi[not_attacker], aa[wb][not_attacker])

        # 7. first-hand perception: witnesses of deaths, bodies found, raiders seen
        self.died = just_died[:, :N].copy()
        dead_body = ~s.alive & (s.death_tick >= 0)
        if dead_body.any() or (len(self._raider_cols) and s.present[:, self._raider_cols].any()):
            rows, how = self._news_buffer, self._how_buffer
            count = perceive(
                s.pos, s.alive, s.present, just_died, dead_body, s.killer, self._is_raider, awake, w.sight_radius,
                t.body_discovery_radius, s.knows_death, s.knows_threat, self._learned, rows[:, :4], how,
            )
            if count:
                bb, ii, ee, culprit = (rows[:count, k].copy() for k in range(4))
                self._note_news(bb, ii, ee, culprit, np.full(count, -1, np.int64), how[:count].copy())

        # 8. news spreads: talk, comfort, warn and ambient gossip along positive ties
        self._spread_news(talking_first, warning_first, awake)

        # 9. appraisal of what was learned this tick
        if relief_on:
            cost_before_news = self._emotion_cost()
        self._appraise()
        if relief_on:  # news brings grief, anger and fear (not counted) and justice (counted)
            cost_appraised = self._emotion_cost()
            relieved += np.maximum(cost_before_news - cost_appraised, 0.0)
        cap = t.emotion_cap
        # anger and fear only ever arise toward known threats: skip the (B, N, E) work until there is one.
        # A known threat in sight keeps fear up (proximity x timidity); grudges against a living, known
        # threat fade slowly.
        self._anger_sum = self._fear_sum = None
        if s.knows_threat.any():
            self._anger_sum = np.empty((B, N), np.float32)
            self._fear_sum = np.empty((B, N), np.float32)
            threat_fear_and_decay(
                s.pos, s.alive, s.present, w.sight_radius, bravery, aggression, s.knows_threat, s.fear, s.anger,
                t.sight_fear, t.fear_near, t.anger_fear_damping, self._decay_fear, self._decay_fear_safe,
                self._decay_anger, self._decay_grudge, cap,
                self._anger_sum, self._fear_sum,
            )
        s.grief *= self._decay_grief
        s.joy *= self._decay_joy
        np.clip(s.grief, 0, cap, out=s.grief)
        np.clip(s.joy, 0, cap, out=s.joy)

        # 10. needs
        alive_now = s.alive[:, :N]
        s.hunger = np.clip(s.hunger + t.hunger_rate * alive_now, 0, 1).astype(np.float32)
        drain = t.energy_rate * np.where(working, t.work_energy_factor, 1.0) * ~sleeping
        s.energy = np.clip(s.energy - drain * alive_now, 0, 1).astype(np.float32)
        s.social = np.clip(s.social - t.social_rate * sociability * alive_now, 0, 1).astype(np.float32)

        # 11. rewards
        self.last_reward = self._reward(working, npc_alive)
        if relief_on:  # fading: grief's slow decay, fear's fast fade once safe, grudges' end
            relieved += np.maximum(cost_appraised - self._emotion_cost(), 0.0)
            self.last_reward += (t.w_relief * t.reward_scale * relieved * npc_alive * s.alive[:, :N]).astype(np.float32)

        # 12. interruptions: news, an attack or a threat coming into sight frees a busy NPC to re-decide
        s.busy &= ~((self._learned | attacked) & (s.activity != Action.FLEE))
        s.busy &= s.alive[:, :N]
        s.performing &= s.busy

        s.tick = s.tick + 1
        self.reaction = self._label_reactions()
        self._record_reactions()
        self.obs, self.mask = self.observer.observe()

    # ------------------------------------------------------------------ pieces of the tick
    def _accumulate_hits(self, damage, hitter, hitter_prio, bb, attacker, target, dmg) -> None:
        np.add.at(damage, (bb, target), dmg)
        prio = self.rng.random(len(bb))  # seeded tie-break for who landed the killing blow
        for k in np.argsort(prio, kind="stable"):  # few hits per tick
            b, tgt = bb[k], target[k]
            if prio[k] > hitter_prio[b, tgt]:
                hitter_prio[b, tgt] = prio[k]
                hitter[b, tgt] = attacker[k]

    def _grudge_cause(self, bb: np.ndarray, ii: np.ndarray, tt: np.ndarray) -> np.ndarray:
        """For NPC i attacking t: the death event i blames t for (-1 if none)."""
        s = self.state
        blames = s.known_culprit[bb, ii] == tt[:, None]  # (H, E) victims i believes t killed
        victim = np.argmax(blames, axis=1)
        return np.where(blames.any(1), s.death_event[bb, victim], -1)

    def _record_hits(self, hits, just_died) -> None:
        """Assign event ids to attacks and deaths (always: cause links use them) and log them if recording."""
        s = self.state
        if hits:
            bb = np.concatenate([h[0] for h in hits])
            aa = np.concatenate([h[1] for h in hits])
            tt = np.concatenate([h[2] for h in hits])
            cc = np.concatenate([h[3] for h in hits])
            ids = self._new_event_ids(bb)
            s.threat_event[bb, aa] = ids
            if self.record:
                self.log.add_events(ids, bb, s.tick[bb], EventType.ATTACK, aa, tt, s.pos[bb, aa, 0],
                                    s.pos[bb, aa, 1], cause=cc)
        db, de = np.nonzero(just_died)
        if len(db):
            ids = self._new_event_ids(db)
            s.death_event[db, de] = ids
            killer = s.killer[db, de]
            has_killer = killer >= 0
            s.threat_event[db[has_killer], killer[has_killer]] = ids[has_killer]
            if self.record:
                self.log.add_events(ids, db, s.tick[db], EventType.DEATH, killer, de, s.death_pos[db, de, 0],
                                    s.death_pos[db, de, 1])

    def _know_threat(self, bb: np.ndarray, ii: np.ndarray, ee: np.ndarray) -> None:
        """NPC ii in village bb now knows entity ee is dangerous."""
        s = self.state
        fresh = ~s.knows_threat[bb, ii, ee]
        s.knows_threat[bb, ii, ee] = True
        self._learned[bb[fresh], ii[fresh]] = True

    def _learn(self, new: np.ndarray, culprit_of: np.ndarray | None, how: int) -> tuple[np.ndarray, ...]:
        """NPCs learn first-hand (witnessed, found the body) of deaths in the (B, N, E) mask `new`.

        `culprit_of` (B, E) is who killed each subject (witnesses see it), None when unknown."""
        s = self.state
        bb, ii, ee = np.nonzero(new & ~s.knows_death)
        culprit = culprit_of[bb, ee] if culprit_of is not None else np.full(len(bb), -1, np.int64)
        self._note_news(bb, ii, ee, culprit, np.full(len(bb), -1, np.int64), how)
        return bb, ii, ee

    def _note_news(self, bb, ii, ee, culprit, sender, how, *, death_known=None) -> None:
        """Record sparse news: deaths learned (with culprit, time, source), or only a culprit learned."""
        s = self.state
        if not len(bb):
            return
        new_death = np.ones(len(bb), bool) if death_known is None else ~death_known
        db, di, de = bb[new_death], ii[new_death], ee[new_death]
        s.knows_death[db, di, de] = True
        s.learned_tick[db, di, de] = s.tick[db]
        s.learned_from[db, di, de] = sender[new_death]
        culprit_new = (culprit >= 0) & (s.known_culprit[bb, ii, ee] < 0)
        s.known_culprit[bb[culprit_new], ii[culprit_new], ee[culprit_new]] = culprit[culprit_new]
        self._news.append((bb, ii, ee, new_death, culprit_new))
        self._learned[bb, ii] = True
        if self.record:
            how_k = np.broadcast_to(np.asarray(how), bb.shape)
            self.log.add_messages(bb, s.tick[bb], sender, ii, ee, culprit, how_k)

    def _spread_news(self, talking_first: np.ndarray, warning_first: np.ndarray, awake: np.ndarray) -> None:
        """Talk and comfort pass news both ways, warn one way, and acquainted NPCs in talking range gossip."""
        s, w, t = self.state, self.w, self.t
        B, N = self.B, self.N
        if not (s.knows_death.any() or s.knows_threat.any()):
            return
        directed = np.zeros((B, N, N), bool)
        b_idx, i_idx = np.nonzero(talking_first | warning_first)
        warned = np.zeros((B, N, N), bool)
        if len(b_idx):
            tgt = s.target[b_idx, i_idx]
            npc_tgt = tgt < N
            b2, i2, t2 = b_idx[npc_tgt], i_idx[npc_tgt], tgt[npc_tgt]
            directed[b2, i2, t2] = True
            warn = warning_first[b2, i2]
            warned[b2[warn], i2[warn], t2[warn]] = True
            talk = ~warn
            directed[b2[talk], t2[talk], i2[talk]] = True
        chance = self.rng.random((B, N, N), dtype=np.float32)
        gossip_p = w.gossip_probability[:, None] * w.traits[:, :, 3]
        rows = self._news_buffer
        count = spread_knowledge(directed, s.pos, awake, s.affinity, gossip_p, chance, t.talk_radius,
                                 s.knows_death, s.known_culprit, s.knows_threat, self._learned, rows)
        if not count:
            return
        bb, jj, ee, teller, death_known = (rows[:count, k].copy() for k in range(5))
        culprit = s.known_culprit[bb, teller, ee]
        how = np.where(warned[bb, teller, jj], HOW_WARNED, HOW_TOLD)
        self._note_news(bb, jj, ee, culprit, teller, how, death_known=death_known.astype(bool))

    def _appraise(self) -> None:
        """OCC-style appraisal of the news of this tick: deaths (grief, gloating) and culprits (anger, fear)."""
        s, w, t = self.state, self.w, self.t
        if not self._news:
            return
        bb, ii, vv, new_death, culprit_new = (np.concatenate(parts) for parts in zip(*self._news, strict=True))
        npc_victim = vv < self.N
        dead_threat = ~npc_victim & new_death  # a killer or raider is dead: justice, and nothing more to fear
        if dead_threat.any():
            s.anger[bb[dead_threat], ii[dead_threat], vv[dead_threat]] *= 1 - t.justice_relief
        bb, ii, vv = bb[npc_victim], ii[npc_victim], vv[npc_victim]
        new_death, culprit_new = new_death[npc_victim], culprit_new[npc_victim]
        like = s.affinity[bb, ii, vv]
        closeness = np.maximum(like, 0) * (1 + t.kin_bonus * w.kin[bb, ii, vv])
        np.add.at(s.grief, (bb, ii), t.grief_gain * closeness * new_death)
        gloat = t.gloat_gain * np.maximum(-like, 0) * new_death
        np.add.at(s.joy, (bb, ii), gloat)
        if (gloat > 0.2).any():  # ids are taken whether or not the log records, so runs stay identical
            g = gloat > 0.2
            gb, gi, gv = bb[g], ii[g], vv[g]
            ids = self._new_event_ids(gb)
            if self.record:
                self.log.add_events(ids, gb, s.tick[gb], EventType.REACTION, gi, gv, s.pos[gb, gi, 0],
                                    s.pos[gb, gi, 1], cause=s.death_event[gb, gv],
                                    reaction=np.full(len(gb), Reaction.GLOATING), intensity=s.joy[gb, gi])
        c = culprit_new
        if c.any():
            cb, ci, cv = bb[c], ii[c], vv[c]
            kk = s.known_culprit[cb, ci, cv]
            close = closeness[c]
            near = s.learned_from[cb, ci, cv] == -1
            bravery, aggression = w.traits[cb, ci, 0], w.traits[cb, ci, 1]
            not_self = kk != ci
            np.add.at(s.anger, (cb, ci, kk), not_self * t.anger_gain * close * (0.3 + aggression))
            dist = np.sqrt(((s.pos[cb, ci] - s.pos[cb, kk]) ** 2).sum(-1))
            proximity = np.exp(-dist / w.sight_radius[cb])
            fear = t.fear_gain * (1 - bravery) * (1 + close) * np.where(near, proximity, t.hearsay_fear)
            fear = fear / (1 + t.anger_fear_damping * aggression * s.anger[cb, ci, kk])  # anger lowers felt risk
            np.add.at(s.fear, (cb, ci, kk), not_self * fear)
            self._know_threat(cb[not_self], ci[not_self], kk[not_self])

    def _emotion_cost(self, anger_sum: np.ndarray | None = None, fear_sum: np.ndarray | None = None) -> np.ndarray:
        """(B, N) the personality-weighted cost of the negative emotions (the reward's emotion terms), from the
        summed anger and fear given, or from the state's when none are."""
        s, t = self.state, self.t
        bravery, aggression, empathy = (self.w.traits[..., k] for k in range(3))
        if anger_sum is None:
            anger_sum, fear_sum = s.anger.sum(-1), s.fear.sum(-1)
        anger = np.minimum(anger_sum, t.anger_sum_cap)
        fear = np.minimum(fear_sum, t.fear_sum_cap)
        cost = (0.5 + empathy) * s.grief + (t.anger_weight_base + aggression) * anger + (1.5 - bravery) * fear
        if t.w_dread > 0:
            cost = cost + t.w_dread * (1.5 - bravery) * self._dread()
        return cost

    def _dread(self) -> np.ndarray:
        """(B, N) 1 where the NPC knows a villager was murdered, the murderer lives and it does not know who
        that is (a killer is loose among us), else 0."""
        s, N = self.state, self.N
        killer = s.killer[:, :N]
        loose = (killer >= 0) & np.take_along_axis(s.alive, np.maximum(killer, 0), 1)  # (B, N victims)
        return (s.knows_death[:, :, :N] & (s.known_culprit[:, :, :N] < 0) & loose[:, None, :]).any(-1)

    def _reward(self, working: np.ndarray, npc_alive: np.ndarray) -> np.ndarray:
        """Per-NPC reward: needs, personality-weighted negative emotions, health, work and village welfare."""
        s, w, t = self.state, self.w, self.t
        N = self.N
        bravery, aggression, empathy, sociability, diligence = (w.traits[..., k] for k in range(5))
        needs = t.w_hunger * s.hunger + t.w_energy * (1 - s.energy) + t.w_social * sociability * (1 - s.social)
        if self._anger_sum is not None or t.w_dread > 0:  # anger and fear exist only toward known threats
            emotions = self._emotion_cost(self._anger_sum, self._fear_sum)
        else:
            emotions = (0.5 + empathy) * s.grief
        emotions = emotions * t.w_emotion_level
        health = t.w_health * (1 - s.health[:, :N] / np.maximum(self.w.max_health[:, :N], 1e-6))
        # free time is worth what work is not, to a lazy NPC: one trade-off that personality decides
        loafing = (s.activity == Action.IDLE) | (s.activity == Action.WANDER)
        gains = (t.w_alive + t.w_work * diligence * working + t.w_leisure * (1 - diligence) * loafing
                 + t.w_welfare * s.granary[:, None] + t.w_joy * s.joy)
        reward = (gains - needs - emotions - health) * t.reward_scale
        reward = np.where(s.alive[:, :N], reward, 0.0)
        reward = reward - self.died * t.death_penalty * t.reward_scale
        return (reward * npc_alive).astype(np.float32)

    def _label_reactions(self) -> np.ndarray:
        """Display labels from the current activity and its context. Never read by the behaviour."""
        s, N = self.state, self.N
        act, tgt = s.activity, np.maximum(s.target, 0)
        active = s.busy & s.alive[:, :N]
        flat_target = self._row_offset + tgt  # (b, i, target) into any (B, N, E) array
        anger_at = s.anger.reshape(-1).take(flat_target)
        threat = s.knows_threat.reshape(-1).take(flat_target)
        raider = self.w.entity_kind[tgt] == EntityKind.RAIDER
        tgt_grief = np.take_along_axis(s.grief, np.minimum(tgt, N - 1), 1) * (tgt < N)
        label = np.zeros_like(act)
        label = np.where(active & (act == Action.MOURN) & s.performing, Reaction.MOURNING, label)
        attack = active & (act == Action.ATTACK)
        label = np.where(attack, Reaction.AGGRESSION, label)
        label = np.where(attack & threat, Reaction.DEFENSE, label)
        label = np.where(attack & threat & (anger_at > 0.05) & ~raider, Reaction.REVENGE, label)
        label = np.where(active & (act == Action.FLEE) & threat, Reaction.FEAR, label)
        label = np.where(active & (act == Action.COMFORT) & (tgt_grief > 0.05), Reaction.CONSOLING, label)
        label = np.where(active & (act == Action.WARN), Reaction.ALARM, label)
        return label

    def _record_reactions(self) -> None:
        """A reaction event when an NPC starts showing a label, with a cause link (logged when recording)."""
        s = self.state
        started = (self.reaction != self._prev_reaction) & (self.reaction != Reaction.NONE)
        self._prev_reaction = self.reaction.copy()
        bb, ii = np.nonzero(started)
        if not len(bb):
            return
        ids = self._new_event_ids(bb)  # taken whether or not the log records, so runs stay identical
        if not self.record:
            return
        tgt = s.target[bb, ii]
        label = self.reaction[bb, ii]
        tt = np.maximum(tgt, 0)
        cause = np.where(label == Reaction.MOURNING, s.death_event[bb, tt], s.threat_event[bb, tt])
        revenge = label == Reaction.REVENGE
        cause = np.where(revenge, self._grudge_cause(bb, ii, tt), cause)
        consoling = label == Reaction.CONSOLING
        learned = s.learned_tick[bb, ii]
        latest_known = np.argmax(learned, axis=1)
        knows_a_death = learned.max(axis=1) >= 0
        cause = np.where(consoling, np.where(knows_a_death, s.death_event[bb, latest_known], -1), cause)
        # an alarm is about the threat the warner fears most among those it knows
        feared = np.argmax(np.where(s.knows_threat[bb, ii], s.fear[bb, ii] + 1e-3, -1.0), axis=1)
        cause = np.where(label == Reaction.ALARM, s.threat_event[bb, feared], cause)
        intensity = np.select(
            [label == Reaction.MOURNING, revenge, label == Reaction.FEAR],
            [s.grief[bb, ii], s.anger[bb, ii, tt], s.fear[bb, ii, tt]],
            default=s.fear[bb, ii].max(-1),
        )
        self.log.add_events(ids, bb, s.tick[bb] - 1, EventType.REACTION, ii, tgt, s.pos[bb, ii, 0],
                            s.pos[bb, ii, 1], cause=cause, reaction=label, intensity=intensity)

    # ------------------------------------------------------------------ actors
    def _apply_scenario(self) -> None:
        s = self.state
        if self.scenario == "world":
            for b, spec in enumerate(self.specs):
                names = self.entity_names[b]
                for ev in spec.events:
                    if ev.tick != s.tick[b]:
                        continue
                    actor = names.index(ev.actor)
                    target = names.index(ev.target) if ev.target else -1
                    if ev.type in ("kill", "attack", "gift") and actor >= self.N:
                        self.commands.append(Command(b, actor, ev.type, target))
                    elif ev.type == "raid":
                        self.commands.append(Command(b, actor, "raid"))
        elif self.scenario in ("random_kill", "mixed"):
            player = self._player_index()
            due_b, due_k = np.nonzero(s.kill_tick == s.tick[:, None])
            for b, k in zip(due_b.tolist(), due_k.tolist(), strict=True):
                if s.actor_mode[b, player - self.N] == ActorMode.HUNT and s.alive[b, player]:
                    s.kill_tick[b, k] += 1  # still after someone: the next killing waits
                    continue
                victim = int(s.kill_victim[b, k])
                if not s.alive[b, victim]:  # already dead: the killer picks another villager
                    living = np.flatnonzero(s.alive[b, : self.N])
                    if not len(living):
                        continue
                    victim = int(living[self.rng.integers(len(living))])
                self.commands.append(Command(b, player, "kill", victim))
            if self.t.curriculum_raid > 0:  # off by default: nothing added to the tick
                raid_due = np.flatnonzero(s.raid_tick == s.tick)
                if len(raid_due):
                    self._start_raid(raid_due)

    def _apply_commands(self) -> None:
        s, N = self.state, self.N
        pending, self.commands = self.commands, []
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
                s.actor_dest[c.village, m] = np.clip([c.x, c.y], 0, self.w.size[c.village])
            elif c.op == "stop":
                s.actor_mode[c.village, m] = ActorMode.IDLE
            elif c.op == "gift" and c.target < N and s.alive[c.village, c.target]:
                s.joy[c.village, c.target] += 0.3
                s.anger[c.village, c.target, c.actor] *= 0.7
                s.fear[c.village, c.target, c.actor] *= 0.7
                self._log_simple(c.village, EventType.GIFT, c.actor, c.target)
            elif c.op == "talk" and c.target < N and s.alive[c.village, c.target]:
                # a chat eases loneliness and fear of the speaker, if the two are close enough to talk
                gap = _length(s.pos[c.village, c.actor] - s.pos[c.village, c.target])
                if gap <= self.t.talk_radius * TALK_RANGE_FACTOR:
                    s.social[c.village, c.target] = min(1.0, s.social[c.village, c.target] + self.t.talk_gain)
                    s.fear[c.village, c.target, c.actor] *= 0.85
                    self._log_simple(c.village, EventType.TALK, c.actor, c.target)
            elif c.op == "raid":
                self._start_raid(np.array([c.village]))

    def _log_simple(self, b: int, type_: EventType, actor: int, target: int) -> None:
        ids = self._new_event_ids(np.array([b]))
        if self.record:
            s = self.state
            self.log.add_events(ids, np.array([b]), s.tick[[b]], type_, np.array([actor]), np.array([target]),
                                s.pos[[b], actor, 0], s.pos[[b], actor, 1])

    def _start_raid(self, villages: np.ndarray) -> None:
        s, N = self.state, self.N
        raiders = np.flatnonzero(self.w.entity_kind == EntityKind.RAIDER)
        if not len(raiders) or not len(villages):
            return
        for e in raiders:  # a slain raider stays dead; the survivors come back healed
            m = e - N
            back = villages[s.alive[villages, e]]
            s.present[back, e] = True
            s.health[back, e] = self.w.max_health[back, e]
            s.pos[back, e] = self.w.forest_pos[back]
            s.actor_mode[back, m] = ActorMode.RAID
        for b in villages:
            self._log_simple(int(b), EventType.RAID_START, int(raiders[0]), -1)

    def _step_actors(self, damage, hitter, hitter_prio, hits) -> None:
        s, w, t, N = self.state, self.w, self.t, self.N
        raiders = w.entity_kind[N:] == EntityKind.RAIDER
        if raiders.any():
            raid_on = (s.present[:, N:][:, raiders] & s.alive[:, N:][:, raiders]).any(1)
            start = ~raid_on & (self.rng.random(self.B) < w.raid_probability)
            self._start_raid(np.flatnonzero(start))
        for m in range(self.M):  # a handful of actors, vectorised over villages
            e = N + m
            mode = s.actor_mode[:, m]
            live = s.alive[:, e] & s.present[:, e]
            pos = s.pos[:, e]
            # raiders pick the nearest living villager
            raiding = live & (mode == ActorMode.RAID)
            if raiding.any():
                prey, _ = self._nearest_villager(np.arange(self.B), e)
                s.actor_target[:, m] = np.where(raiding, prey, s.actor_target[:, m])
                hurt = s.health[:, e] < t.raider_retreat_health * w.max_health[:, e]
                mode = np.where(raiding & hurt, ActorMode.RETREAT, mode)
            tgt = np.maximum(s.actor_target[:, m], 0)
            tgt_pos = s.pos[np.arange(self.B), tgt]
            tgt_alive = s.alive[np.arange(self.B), tgt]
            chasing = live & _mode_in(mode, ActorMode.HUNT, ActorMode.STRIKE, ActorMode.RAID)
            mode = np.where(chasing & ~tgt_alive & (mode != ActorMode.RAID), ActorMode.IDLE, mode)
            chasing &= tgt_alive
            dest = np.where(chasing[:, None], tgt_pos, s.actor_dest[:, m])
            dest = np.where((mode == ActorMode.RETREAT)[:, None], w.forest_pos, dest)
            moving = live & (chasing | _mode_in(mode, ActorMode.STROLL, ActorMode.MOVE, ActorMode.RETREAT))
            vec = dest - pos
            dist = _length(vec)
            frac = np.where(dist > 0, np.minimum(1.0, t.actor_speed / np.maximum(dist, 1e-6)), 0.0) * moving
            s.pos[:, e] = pos + vec * frac[:, None]
            remaining = dist * (1 - frac)
            reached = remaining <= t.reach
            strike = chasing & reached
            if strike.any():
                bb = np.flatnonzero(strike)
                tt = tgt[bb]
                kill = mode[bb] == ActorMode.HUNT
                dmg = np.where(kill, 1e3, np.where(mode[bb] == ActorMode.RAID, t.raider_damage, t.blow_damage))
                att = np.full(len(bb), e)
                self._accumulate_hits(damage, hitter, hitter_prio, bb, att, tt, dmg)
                hits.append((bb, att, tt, np.full(len(bb), -1)))
                after = np.where(mode[bb] == ActorMode.HUNT, ActorMode.LINGER,
                                 np.where(mode[bb] == ActorMode.STRIKE, ActorMode.IDLE, mode[bb]))
                mode[bb] = after
                s.actor_timer[bb, m] = np.where(kill, 3, 0)
            # linger at the scene, then stroll to a public place and stay there
            lingering = live & (mode == ActorMode.LINGER)
            s.actor_timer[:, m] -= lingering
            leave = lingering & (s.actor_timer[:, m] <= 0)
            if leave.any():
                bb = np.flatnonzero(leave)
                pick = self.rng.integers(0, w.hangout_pos.shape[1], len(bb))
                s.actor_dest[bb, m] = w.hangout_pos[bb, pick]
                mode[bb] = ActorMode.STROLL
            arrived = live & _mode_in(mode, ActorMode.STROLL, ActorMode.MOVE) & reached
            # a killer on a rampage leaves the scene and strikes again where it arrives (not at the body, so that
            # mourning there is not a death trap)
            rampaging = arrived & (mode == ActorMode.STROLL) & (s.rampage > 0)
            mode = np.where(arrived, ActorMode.IDLE, mode)
            if w.entity_kind[e] == EntityKind.PLAYER and rampaging.any():
                self._rampage(np.flatnonzero(rampaging), m, mode)
            gone = live & (mode == ActorMode.RETREAT) & reached
            s.present[:, e] &= ~gone
            mode = np.where(gone, ActorMode.OFF_MAP, mode)
            s.actor_mode[:, m] = mode

    def _nearest_villager(self, villages: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray]:
        """For entity e in each of `villages`: the nearest living NPC and its distance (inf if none)."""
        s, N = self.state, self.N
        d = _length(s.pos[villages, :N] - s.pos[villages, e][:, None])
        d = np.where(s.alive[villages, :N], d, np.inf)
        prey = np.argmin(d, 1)
        return prey, d[np.arange(len(villages)), prey]

    def _rampage(self, villages: np.ndarray, m: int, mode: np.ndarray) -> None:
        """A killer on a rampage, arrived at a public place, hunts the nearest living villager in sight; with
        nobody in sight it roams on to another public place."""
        s = self.state
        prey, dist = self._nearest_villager(villages, self.N + m)
        seen = dist <= self.w.sight_radius[villages]
        vb = villages[seen]
        mode[vb] = ActorMode.HUNT
        s.actor_target[vb, m] = prey[seen]
        s.rampage[vb] -= 1
        roam = villages[~seen & np.isfinite(dist)]
        if len(roam):
            pick = self.rng.integers(0, self.w.hangout_pos.shape[1], len(roam))
            s.actor_dest[roam, m] = self.w.hangout_pos[roam, pick]
            mode[roam] = ActorMode.STROLL

    # ------------------------------------------------------------------ episode bookkeeping
    @property
    def truncated(self) -> np.ndarray:
        """(B,) episodes that reached max_ticks."""
        return self.state.tick >= self.max_ticks
