"""Tasks with a win condition over a world (docs/training.md "The raid-defence task").

A task is a small TOML file in `worlds/tasks/` named after the world it runs on:

    [task]
    id = "raid-defence-v1"
    world = "raid-defence-v1"   # the world file (a bundled id or a path)
    win = "raiders_gone"        # the only rule so far: every raider dead or off the map
    max_losses = 3              # ... before the raiders have killed this many villagers
    ticks = 48                  # episode length (the default of --max-ticks for this world)
    scenario = "world"          # training scenario (the world's own events: its raid)
    damage_reward = 1.0         # team reward: every living villager gets this per unit of raider health lost
    win_reward = 5.0            # ... and this at the tick the raid is won

The team reward is added to every living NPC's own (needs and emotions) reward: the village's reward alone
pays for fleeing, not for fighting, and a task's win must be worth something to the learners.

`RaidOutcome` follows B villages tick by tick and says which finished episodes were won. It reads the
simulation's state arrays only; it never changes them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import worlds
from engine.constants import EntityKind

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TASK_DIR = Path(worlds.__file__).resolve().parent / "tasks"  # package data of worlds
WIN_RULES = ("raiders_gone",)
TASK_SCENARIOS = ("world", "none", "mixed", "random_kill")


class TaskError(ValueError):
    """A task file that cannot be used; the message names the file, the field and what was expected."""


@dataclass(frozen=True)
class Task:
    id: str
    world: str
    win: str
    max_losses: int
    ticks: int
    scenario: str
    damage_reward: float = 1.0
    win_reward: float = 5.0
    source: str = ""


def bundled_tasks() -> list[str]:
    return [p.stem for p in sorted(TASK_DIR.glob("*.toml"))]


def _expect(cond: bool, source: str, where: str, what: str, got: Any) -> None:
    if not cond:
        raise TaskError(f"{source}: {where}: expected {what}, got {got!r}")


def task_from_dict(data: dict[str, Any], *, source: str = "task") -> Task:
    head = data.get("task") if isinstance(data, dict) else None
    _expect(isinstance(head, dict), source, "task", "a [task] table", head)
    extra = sorted(set(head) - {"id", "world", "win", "max_losses", "ticks", "scenario", "damage_reward",
                                "win_reward"})
    if extra:
        raise TaskError(f"{source}: task: unknown key {extra[0]!r}")
    tid, world, win = head.get("id"), head.get("world"), head.get("win", "raiders_gone")
    losses, ticks, scenario = head.get("max_losses", 3), head.get("ticks", 48), head.get("scenario", "world")
    _expect(isinstance(tid, str) and tid != "", source, "task.id", "a non-empty string", tid)
    _expect(isinstance(world, str) and world != "", source, "task.world", "a world id or file", world)
    _expect(win in WIN_RULES, source, "task.win", f"one of {', '.join(WIN_RULES)}", win)
    _expect(isinstance(losses, int) and not isinstance(losses, bool) and losses >= 1, source,
            "task.max_losses", "an integer >= 1", losses)
    _expect(isinstance(ticks, int) and not isinstance(ticks, bool) and 2 <= ticks <= 10_000, source,
            "task.ticks", "an integer in 2..10000", ticks)
    _expect(scenario in TASK_SCENARIOS, source, "task.scenario", f"one of {', '.join(TASK_SCENARIOS)}", scenario)
    rewards = {}
    for key in ("damage_reward", "win_reward"):
        value = head.get(key, 1.0 if key == "damage_reward" else 5.0)
        _expect(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0, source,
                f"task.{key}", "a number >= 0", value)
        rewards[key] = float(value)
    return Task(tid, world, win, losses, ticks, scenario, source=source, **rewards)


def load_task(path: str | Path) -> Task:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{p}: not valid TOML: {exc}") from None
    return task_from_dict(data, source=str(p))


def task_for_world(world_id: str) -> Task | None:
    """The bundled task whose world is `world_id` (a world id, as in `--world`), or None."""
    path = TASK_DIR / f"{world_id}.toml"
    if not path.is_file():
        return None
    task = load_task(path)
    return task if task.world == world_id else None


class RaidOutcome:
    """Per village: has the raid begun, is it over (every raider dead or off the map), how many villagers had
    died by then. `update(...)` after every step returns each village's team reward for that tick;
    `finish(villages)` returns their win flags and starts their next episode."""

    def __init__(self, task: Task, num_envs: int, num_npcs: int, entity_kind: np.ndarray):
        self.task = task
        self.N = num_npcs
        self.raiders = np.flatnonzero(np.asarray(entity_kind) == EntityKind.RAIDER)
        self.started = np.zeros(num_envs, bool)
        self.won = np.zeros(num_envs, bool)
        self.lost = np.zeros(num_envs, bool)
        self.raider_health: np.ndarray | None = None  # (B, raiders) after the previous tick

    def update(self, present: np.ndarray, alive: np.ndarray, health: np.ndarray, active: np.ndarray
               ) -> np.ndarray:
        """present, alive, health: (B, E) state after a tick; active: (B,) villages whose episode goes on (the
        others were just reset). Returns (B,) the team reward of the tick for each living villager."""
        bonus = np.zeros(len(active), np.float32)
        if not len(self.raiders):
            return bonus
        on_map = (present[:, self.raiders] & alive[:, self.raiders]).any(1)
        hp = np.where(alive[:, self.raiders], health[:, self.raiders], 0.0)
        if self.raider_health is not None:
            # a raider coming out of the forest is healed: only losses count
            lost_hp = np.clip(self.raider_health - hp, 0.0, None).sum(1)
            bonus += np.where(active & self.started, self.task.damage_reward * lost_hp, 0.0).astype(np.float32)
        self.raider_health = hp
        self.started |= on_map & active
        losses = (~alive[:, : self.N]).sum(1)
        decided = self.won | self.lost
        self.lost |= active & ~decided & (losses >= self.task.max_losses)
        newly_won = active & ~decided & ~self.lost & self.started & ~on_map
        self.won |= newly_won
        bonus += np.where(newly_won, self.task.win_reward, 0.0).astype(np.float32)
        return bonus

    def finish(self, villages: np.ndarray) -> np.ndarray:
        wins = self.won[villages].copy()
        self.started[villages] = False
        self.won[villages] = False
        self.lost[villages] = False
        return wins


__all__ = ["RaidOutcome", "Task", "TaskError", "bundled_tasks", "load_task", "task_for_world"]
