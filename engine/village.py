"""What every simulation of B villages holds: world constants, state, tuning, the RNG, the event log, and orders.

`Village` is the data the tick's phases (engine/body.py, engine/mind.py) read and write. It has no tick of its
own: `engine.sim.VillageSim` composes the body and mind phases into the engine's tick, and
`engine.external.ExternalSim` composes the mind phases with bodies that live in a game.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.constants import (
    NIGHT_END,
    NIGHT_START,
    START_ENERGY,
    START_HUNGER,
    START_SOCIAL,
    START_TICK_OF_DAY,
    TARGETED,
    TICKS_PER_DAY,
    UNTARGETED,
    Action,
    ActorMode,
    EntityKind,
    Tuning,
)
from engine.events import EventLog
from engine.state import VillageState, WorldArrays, world_arrays
from worlds import WorldSpec

COMMAND_OPS = ("kill", "attack", "move", "gift", "talk", "stop", "raid")


@dataclass(frozen=True)
class Command:
    """An order for a non-NPC actor (the player in the sandbox or the bridge), applied at the next tick."""

    village: int
    actor: int  # entity index of the actor
    op: str  # "kill" | "attack" | "move" | "gift" | "talk" | "stop" | "raid"
    target: int = -1
    x: float = 0.0
    y: float = 0.0


def action_tables(slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat action index -> (Action kind, slot or -1)."""
    kinds = [int(a) for a in UNTARGETED] + [int(a) for a in TARGETED for _ in range(slots)]
    slot_of = [-1] * len(UNTARGETED) + [k for _ in TARGETED for k in range(slots)]
    return np.array(kinds, np.int64), np.array(slot_of, np.int64)


def flat_action(kind: Action, slot: int, slots: int) -> int:
    if kind in UNTARGETED:
        return int(UNTARGETED.index(kind))
    return len(UNTARGETED) + TARGETED.index(kind) * slots + slot


def length(v: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """Euclidean length over the last axis (x, y); cheaper than np.linalg.norm for pairs."""
    out = np.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1])
    return out[..., None] if keepdims else out


def _half_life_factor(half_life: float) -> float:
    return float(0.5 ** (1.0 / half_life))


@dataclass(frozen=True)
class Rates:
    """Per-tick factors derived once from the tuning."""

    perform_ticks: np.ndarray  # (N_KINDS,) performing ticks of each Action (FLEE: hiding at home, else 0)
    decay_grief: np.float32
    decay_joy: np.float32
    decay_fear: np.float32
    decay_fear_safe: np.float32
    decay_anger: np.float32
    decay_grudge: np.float32

    @classmethod
    def of(cls, t: Tuning) -> Rates:
        hide = t.hide_ticks if t.flee_home else 0  # a flight straight away never arrives
        perform = np.array([hide if a == Action.FLEE else getattr(t, f"{a.name.lower()}_ticks") for a in Action],
                           np.int64)
        f32 = np.float32
        return cls(perform, f32(_half_life_factor(t.grief_half_life)), f32(_half_life_factor(t.joy_half_life)),
                   f32(_half_life_factor(t.fear_half_life)), f32(_half_life_factor(t.fear_safe_half_life)),
                   f32(_half_life_factor(t.anger_half_life)), f32(_half_life_factor(t.grudge_half_life)))


class Village:
    """B villages of one shape (N NPCs, M actors): constants, state, tuning, RNG, log, queued orders."""

    state: VillageState
    obs: np.ndarray  # (B, N, obs_dim) float32: what each NPC observes now (set by the observation phase)
    mask: np.ndarray  # (B, N, n_actions) bool: the actions it may choose

    def __init__(self, worlds: list[WorldSpec], seed: int | None, *, slots: int, tuning: Tuning | None,
                 record: bool, max_ticks: int):
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.specs: list[WorldSpec] = list(worlds)
        self.w: WorldArrays = world_arrays(self.specs)
        self.B = len(self.specs)
        self.N = len(self.specs[0].npcs)
        self.M = len(self.specs[0].actors)
        self.E = self.N + self.M
        self.K = min(slots, self.E - 1)
        self.t = tuning or Tuning()
        self.max_ticks = max_ticks
        self.rates = Rates.of(self.t)
        self.record = record
        self.log = EventLog()
        self.action_kind, self.action_slot = action_tables(self.K)
        self.n_actions = len(self.action_kind)
        self.commands: list[Command] = []
        self.row_offset = (np.arange(self.B * self.N) * self.E).reshape(self.B, self.N)  # (b, i) -> row of (B, N, E)
        self.news_rows = np.empty((self.B * self.N * self.E, 5), np.int64)  # kernel outputs, reused every tick
        self.news_how = np.empty(self.B * self.N * self.E, np.int64)
        self.is_raider = self.w.entity_kind == EntityKind.RAIDER
        self.raider_cols = np.flatnonzero(self.is_raider)
        self.seed(seed)
        self.last_reward = np.zeros((self.B, self.N), np.float32)
        self._nobody_hiding = np.zeros((self.B, self.N), bool)  # read-only: `hiding` without flee_home
        self.everyone = np.ones((self.B, self.N), bool)  # read-only: a mask that leaves no NPC out
        self.armoured = np.zeros((self.B, self.E), bool)  # villagers' blows on these land but do no harm (a driver's)
        self.died = np.zeros((self.B, self.N), bool)
        self.reaction = np.zeros((self.B, self.N), np.int64)
        self.prev_reaction = self.reaction.copy()

    def seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    @property
    def entity_names(self) -> list[list[str]]:
        return [list(s.npc_names) + list(s.actor_names) for s in self.specs]

    @property
    def player(self) -> int:
        """Entity index of the first player actor, -1 if the world has none."""
        players = np.flatnonzero(self.w.entity_kind == EntityKind.PLAYER)
        return int(players[0]) if len(players) else -1

    @property
    def time_of_day(self) -> np.ndarray:
        """Tick of the day, 0..143 (0 = midnight)."""
        return (self.state.tick + START_TICK_OF_DAY) % TICKS_PER_DAY

    @property
    def hiding(self) -> np.ndarray:
        """(B, N) NPCs hiding at home from a threat (a flight home that arrived, Tuning.flee_home): out of a
        killer's reach and safe from their fear of it."""
        if not self.t.flee_home:  # a flight never arrives, so nobody hides: no work on every tick's hot path
            return self._nobody_hiding
        s = self.state
        return s.busy & s.performing & (s.activity == Action.FLEE)

    @property
    def safe_distance(self) -> np.ndarray:
        """(B,) how far from a threat counts as safe: the sight radius x Tuning.safe_distance_factor (the fear
        metrics' distance, where a flight may end, and where telling is out of his reach)."""
        return self.w.sight_radius * self.t.safe_distance_factor

    @property
    def is_night(self) -> np.ndarray:
        tod = self.time_of_day
        return (tod >= NIGHT_START) | (tod < NIGHT_END)

    def fresh_state(self) -> VillageState:
        """The state at the start of an episode, for every village (the needs are drawn from the RNG)."""
        B, N, M, E = self.B, self.N, self.M, self.E
        w = self.w
        f32 = np.float32
        present = np.ones((B, E), bool)
        present[:, N:] = w.entity_kind[N:] != EntityKind.RAIDER
        health = w.max_health.copy()
        health[:, N:] = np.where(w.entity_kind[N:] == EntityKind.PLAYER, self.t.player_health, health[:, N:])
        return VillageState(
            tick=np.zeros(B, np.int64),
            pos=w.start_pos.copy(),
            health=health.astype(f32),
            alive=np.ones((B, E), bool),
            present=present,
            hunger=self.rng.uniform(*START_HUNGER, (B, N)).astype(f32),
            energy=self.rng.uniform(*START_ENERGY, (B, N)).astype(f32),
            social=self.rng.uniform(*START_SOCIAL, (B, N)).astype(f32),
            granary=w.granary_start.astype(f32).copy(),
            death_tick=np.full((B, E), -1, np.int64),
            death_pos=np.zeros((B, E, 2), f32),
            killer=np.full((B, E), -1, np.int64),
            death_event=np.full((B, E), -1, np.int64),
            threat_event=np.full((B, E), -1, np.int64),
            threat_victim=np.full((B, E), -1, np.int64),
            activity=np.zeros((B, N), np.int64),
            target=np.full((B, N), -1, np.int64),
            dest=w.home_pos.copy(),
            performing=np.zeros((B, N), bool),
            perform_left=np.zeros((B, N), np.int64),
            travel_left=np.zeros((B, N), np.int64),
            busy=np.zeros((B, N), bool),
            grief=np.zeros((B, N), f32),
            loss_grief=np.zeros((B, N, N), f32),
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
            event_count=np.zeros(B, np.int64),
        )

    def new_event_ids(self, village: np.ndarray) -> np.ndarray:
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

    def command(self, village: int, actor: int | str, op: str, target: int | str = -1,
                x: float = 0.0, y: float = 0.0) -> None:
        """Queue an order for a non-NPC actor; names or entity indices are accepted."""
        if op not in COMMAND_OPS:
            raise ValueError(f"command op must be one of {COMMAND_OPS}, got {op!r}")
        if not 0 <= village < self.B:
            raise ValueError(f"village must be in 0..{self.B - 1}, got {village}")
        def entity(name: int | str, what: str) -> int:
            if isinstance(name, str):
                spec = self.specs[village]
                names = list(spec.npc_names) + list(spec.actor_names)
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
