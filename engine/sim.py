"""The batched village simulation: B independent villages of N NPCs stepped together, no loop over NPCs.

A tick is a sequence of named phases over a typed per-tick context (engine/tick.py): the body phases
(engine/body.py: orders, activities, movement, performance, actors, combat, needs) and the mind phases
(engine/mind.py: coping, perception, news, appraisal, emotion decay, rewards, attention, labels), then the
observation (engine/observe.py). A scenario driver (engine/curriculum.py) issues the actors' orders.
"""

from __future__ import annotations

import numpy as np

from engine import body, mind
from engine.body import TALK_RANGE_FACTOR
from engine.constants import Tuning
from engine.curriculum import ScenarioDriver, scenario_driver
from engine.observe import Observer
from engine.state import VillageState
from engine.village import COMMAND_OPS, Command, Village, action_tables, flat_action
from worlds import WorldSpec

SCENARIOS = ("world", "random_kill", "mixed", "none")


class VillageSim(Village):
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
        if not 0 <= trait_noise <= 1:
            raise ValueError(f"trait_noise must be in [0, 1], got {trait_noise}")
        super().__init__(list(worlds), seed, slots=slots, tuning=tuning, record=record, max_ticks=max_ticks)
        self.scenario = scenario
        self.kill_window = kill_window
        self.trait_noise = trait_noise
        self.driver: ScenarioDriver | None = scenario_driver(self, scenario, kill_window)
        self._base_traits = self.w.traits.copy()
        self.state = self._new_episodes(None)
        self._jitter_traits(np.arange(self.B))
        self.observer = Observer(self)
        self.obs, self.mask = self.observer.observe()

    # ------------------------------------------------------------------ episodes
    def _new_episodes(self, villages: np.ndarray | None) -> VillageState:
        state = self.fresh_state()
        if self.driver is not None:
            self.driver.new_episodes(self, villages)
        return state

    def _jitter_traits(self, villages: np.ndarray) -> None:
        """Training only (trait_noise > 0): each episode, every NPC's traits are the world's plus Gaussian noise
        (clipped to [0, 1]), so a policy meets many personalities in the same social situations."""
        if self.trait_noise <= 0 or not len(villages):
            return
        noise = self.rng.normal(0.0, self.trait_noise, (len(villages), *self._base_traits.shape[1:]))
        self.w.traits[villages] = np.clip(self._base_traits[villages] + noise, 0.0, 1.0).astype(np.float32)

    def reset(self, seed: int | None = None, villages: np.ndarray | None = None) -> None:
        """Start new episodes in all villages (or only in `villages`), re-seeding the RNG if a seed is given."""
        if seed is not None:
            self.seed(seed)
        if villages is None:
            self.state = self._new_episodes(None)
            self.log.clear()
            self.commands.clear()
        else:
            fresh = self._new_episodes(villages)
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
        self.prev_reaction[rows] = 0
        self.obs, self.mask = self.observer.observe()

    @property
    def truncated(self) -> np.ndarray:
        """(B,) episodes that reached max_ticks."""
        return self.state.tick >= self.max_ticks

    # ------------------------------------------------------------------ the tick
    def step(self, actions: np.ndarray) -> None:
        """One tick: the scenario's orders, the body phases, the mind phases, the observation."""
        ctx = mind.begin_tick(self, actions)
        if self.driver is not None:
            self.driver.before_tick(self)
        body.npcs_act(self, ctx, self.mask, self.observer.slot_entity)
        body.move_actors(self, ctx, self.driver)
        body.resolve_combat(self, ctx)
        body.lay_out_the_dead(self)
        mind.feel_attacks(self, ctx)
        mind.note_first_hand(self, ctx, mind.perceive(self, ctx))
        mind.spread_news(self, ctx)
        mind.appraise_and_decay(self, ctx)
        body.needs(self, ctx)
        mind.conclude(self, ctx)
        self.obs, self.mask = self.observer.observe()


__all__ = ["COMMAND_OPS", "SCENARIOS", "TALK_RANGE_FACTOR", "Command", "VillageSim", "action_tables", "flat_action"]
