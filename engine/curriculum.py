"""Scenario drivers: who does what to the village and when, by issuing commands as a player would.

A driver never reaches into the physics: at the start of a tick it queues `sim.command(...)` orders (the
same orders the sandbox and the bridge give), and an actor it directs may be given a new order when it
arrives where it strolled to (the body's `ActorDirector` hook). Drivers for `VillageSim(scenario=...)`:

- `world`: the world file's scenario events (village-v1: the player kills Alda at tick 30);
- `random_kill`: the player kills one random villager at a random tick of the kill window;
- `mixed` (the training curriculum): 1-3 killings an episode, sometimes a rampage (the killer strolls to a
  public place and hunts whoever is nearest), with `Tuning.curriculum_raid` a raid in the kill window, and with
  `Tuning.curriculum_armoured` a killer the villagers' blows cannot harm, who rampages, and with
  `Tuning.curriculum_late` a first killing late in the day (the evening and the night's start).

The bundled emergence scenarios (engine/scenarios.py) drive a sim the same way, from outside.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.body import nearest_villager
from engine.constants import Action, ActorMode
from engine.village import Village

MAX_KILLS = 3  # scheduled killings per village in the `mixed` curriculum
MIXED_KILL_COUNT_P = (0.45, 0.35, 0.2)  # how many killings a `mixed` episode has: 1, 2 or 3
LATER_KILL_GAP = (6, 30)  # later killings follow 1-5 hours after the one before (ticks)
LATE_KILL_WINDOW = (60, 108)  # Tuning.curriculum_late: a first killing from 16:00 to midnight (ticks)
RAMPAGE_HUNTS = (1, 3)  # a rampage hunts 1-2 more villagers (integers in [lo, hi))


class ScenarioDriver(Protocol):
    def new_episodes(self, v: Village, villages: np.ndarray | None) -> None:
        """Plan the episodes that start now (all villages, or only `villages`), drawing from `v.rng`."""

    def before_tick(self, v: Village) -> None:
        """Queue this tick's orders with `v.command`."""

    def on_arrival(self, v: Village, m: int, strolled_in: np.ndarray, mode: np.ndarray) -> None:
        """Actor m arrived where it strolled to in the villages `strolled_in` (B,); `mode` may be changed."""


class WorldEvents:
    """The world file's scenario events, at their ticks."""

    def new_episodes(self, v: Village, villages: np.ndarray | None) -> None:
        return None

    def before_tick(self, v: Village) -> None:
        s = v.state
        for b, spec in enumerate(v.specs):
            due = [ev for ev in spec.events if ev.tick == s.tick[b]]
            names = list(spec.npc_names) + list(spec.actor_names) if due else []
            for ev in due:
                actor = names.index(ev.actor)
                target = names.index(ev.target) if ev.target else -1
                if ev.type in ("kill", "attack", "gift") and actor >= v.N:
                    v.command(b, actor, ev.type, target)
                elif ev.type == "raid":
                    v.command(b, actor, "raid")

    def on_arrival(self, v: Village, m: int, strolled_in: np.ndarray, mode: np.ndarray) -> None:
        return None


class KillingCurriculum:
    """The player's scheduled killings (`random_kill`: one; `mixed`: 1-3, rampages, raids)."""

    def __init__(self, v: Village, mixed: bool, kill_window: tuple[int, int]):
        self.mixed = mixed
        self.kill_window = kill_window
        B = v.B
        self.kill_tick = np.full((B, MAX_KILLS), -1, np.int64)  # tick and victim of each planned killing, -1 none
        self.kill_victim = np.full((B, MAX_KILLS), -1, np.int64)
        self.rampage = np.zeros(B, np.int64)  # how many more times the killer hunts the nearest villager
        self.raid_tick = np.full(B, -1, np.int64)  # the episode's raid (mixed, Tuning.curriculum_raid > 0), -1 none

    def new_episodes(self, v: Village, villages: np.ndarray | None) -> None:
        B, N, rng, t = v.B, v.N, v.rng, v.t
        kill_tick = np.full((B, MAX_KILLS), -1, np.int64)
        kill_victim = np.full((B, MAX_KILLS), -1, np.int64)
        rampage = np.zeros(B, np.int64)
        raid_tick = np.full(B, -1, np.int64)
        lo, hi = self.kill_window
        if v.player >= 0 and not self.mixed:
            kill_tick[:, 0] = rng.integers(lo, hi, B)
            kill_victim[:, 0] = rng.integers(0, N, B)
        elif v.player >= 0:
            kills = rng.choice(np.arange(1, MAX_KILLS + 1), size=B, p=MIXED_KILL_COUNT_P)
            gaps = rng.integers(*LATER_KILL_GAP, (B, MAX_KILLS))
            gaps[:, 0] = rng.integers(lo, hi, B)
            if t.curriculum_late > 0:  # no draw when off: same trajectories
                late = rng.random(B) < t.curriculum_late
                gaps[:, 0] = np.where(late, rng.integers(*LATE_KILL_WINDOW, B), gaps[:, 0])
            ticks = np.cumsum(gaps, axis=1)
            victims = np.argsort(rng.random((B, N)), axis=1)[:, :MAX_KILLS]  # distinct victims
            planned = np.arange(MAX_KILLS)[None, :] < kills[:, None]
            kill_tick[:] = np.where(planned, ticks, -1)
            kill_victim[:] = np.where(planned, victims, -1)
            rampaging = rng.random(B) < t.curriculum_rampage
            rampage[:] = rampaging * rng.integers(*RAMPAGE_HUNTS, B)
            if t.curriculum_raid > 0 and len(v.raider_cols):  # no draw when off: same trajectories
                raided = rng.random(B) < t.curriculum_raid
                raid_tick[:] = np.where(raided, rng.integers(lo, hi, B), -1)
            if t.curriculum_armoured > 0:  # no draw when off: same trajectories
                armoured = rng.random(B) < t.curriculum_armoured
                rampage[:] = np.where(armoured, RAMPAGE_HUNTS[1] - 1, rampage)
        rows = slice(None) if villages is None else villages
        if v.player >= 0 and self.mixed and t.curriculum_armoured > 0:
            v.armoured[rows, v.player] = armoured[rows]
        self.kill_tick[rows] = kill_tick[rows]
        self.kill_victim[rows] = kill_victim[rows]
        self.rampage[rows] = rampage[rows]
        self.raid_tick[rows] = raid_tick[rows]

    def before_tick(self, v: Village) -> None:
        s, N, player = v.state, v.N, v.player
        due_b, due_k = np.nonzero(self.kill_tick == s.tick[:, None])
        for b, k in zip(due_b.tolist(), due_k.tolist(), strict=True):
            if s.actor_mode[b, player - N] == ActorMode.HUNT and s.alive[b, player]:
                self.kill_tick[b, k] += 1  # still after someone: the next killing waits
                continue
            victim = int(self.kill_victim[b, k])
            if k > 0 and v.t.hunt_nearest:  # a killer already known: whoever stays near him is in danger
                prey, dist = killer_prey(v, np.array([b]), player)
                if dist[0] <= v.w.sight_radius[b]:
                    victim = int(prey[0])
            if not s.alive[b, victim]:  # already dead: the killer picks another villager
                living = np.flatnonzero(s.alive[b, :N])
                if not len(living):
                    continue
                victim = int(living[v.rng.integers(len(living))])
            v.command(b, player, "kill", victim)
        if v.t.rampage_linger >= 0:  # off by default: a rampage's next hunt waits for the end of the lingering
            self.hunt_from_the_scene(v)
        if v.t.curriculum_raid > 0:  # off by default: nothing added to the tick
            for b in np.flatnonzero(self.raid_tick == s.tick).tolist():
                band = v.raider_cols[s.alive[b, v.raider_cols]]
                if len(band):  # a slain raider stays dead; the survivors come
                    v.command(b, int(band[0]), "raid")

    def hunt_from_the_scene(self, v: Village) -> None:
        """Tuning.rampage_linger: a rampaging killer who has lingered that many ticks over his victim orders his
        next killing from the scene, the prey chosen as for any hunt (killer_prey), when someone is in sight."""
        s, N, player = v.state, v.N, v.player
        m = player - N
        lingering = ((self.rampage > 0) & (s.actor_mode[:, m] == ActorMode.LINGER) & s.alive[:, player]
                     & (s.actor_timer[:, m] <= v.t.linger_ticks - v.t.rampage_linger))
        if not lingering.any():
            return
        villages = np.flatnonzero(lingering)
        prey, dist = killer_prey(v, villages, player)
        seen = dist <= v.w.sight_radius[villages]
        for b, victim in zip(villages[seen].tolist(), prey[seen].tolist(), strict=True):
            v.command(b, player, "kill", victim)
            self.rampage[b] -= 1

    def on_arrival(self, v: Village, m: int, strolled_in: np.ndarray, mode: np.ndarray) -> None:
        """A killer on a rampage, arrived at a public place, hunts the nearest living villager in sight; with
        nobody in sight it roams on to another public place (not at the body, so that mourning there is not a
        death trap, unless Tuning.rampage_at_scene makes the end of lingering an arrival too)."""
        if v.N + m != v.player:
            return
        rampaging = strolled_in & (self.rampage > 0)
        if not rampaging.any():
            return
        s, w = v.state, v.w
        villages = np.flatnonzero(rampaging)
        prey, dist = killer_prey(v, villages, v.N + m)
        seen = dist <= w.sight_radius[villages]
        vb = villages[seen]
        mode[vb] = ActorMode.HUNT
        s.actor_target[vb, m] = prey[seen]
        self.rampage[vb] -= 1
        anyone = np.isfinite(nearest_villager(v, villages, v.N + m)[1] if v.t.hunt_afraid_only else dist)
        roam = villages[~seen & anyone]
        if len(roam):
            pick = v.rng.integers(0, w.hangout_pos.shape[1], len(roam))
            s.actor_dest[roam, m] = w.hangout_pos[roam, pick]
            mode[roam] = ActorMode.STROLL


def killer_prey(v: Village, villages: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray]:
    """The villager killer e goes for next in each of `villages`, and its distance: the nearest one in his sight
    who fears him (fear >= Tuning.hunt_afraid; with Tuning.hunt_spares_chargers, not charging him) when that is on
    and there is one, else the nearest (with Tuning.hunt_afraid_only, else nobody: distance inf)."""
    if v.t.hunt_afraid <= 0:
        return nearest_villager(v, villages, e)
    s = v.state
    afraid = s.fear[villages, :v.N, e] >= v.t.hunt_afraid
    if v.t.hunt_spares_chargers:
        afraid &= ~((s.activity[villages, :v.N] == Action.ATTACK) & (s.target[villages, :v.N] == e))
    prey_afraid, dist_afraid = nearest_villager(v, villages, e, among=afraid)
    if v.t.hunt_afraid_only:
        return prey_afraid, dist_afraid
    prey, dist = nearest_villager(v, villages, e)
    take = dist_afraid <= v.w.sight_radius[villages]
    return np.where(take, prey_afraid, prey), np.where(take, dist_afraid, dist)


def scenario_driver(v: Village, scenario: str, kill_window: tuple[int, int]) -> ScenarioDriver | None:
    """The driver of a `VillageSim` scenario name (None for "none")."""
    if scenario == "world":
        return WorldEvents()
    if scenario in ("random_kill", "mixed"):
        return KillingCurriculum(v, scenario == "mixed", kill_window)
    return None
