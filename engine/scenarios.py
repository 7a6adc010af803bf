"""The emergence scenario suite: what the player (or a raid) does, to whom, and when (docs/emergence.md).

A scenario is a small TOML data file (bundled ones live in `worlds/scenarios/`). It never names an NPC of
one world: victims are chosen by rule from the world (`parent`, `loner`, `rival`, `fighter`, ...), so the
same scenario runs on `village-v1` and on generated worlds. `run_scenario` plays it over B villages of one
world at once (each village its own random draws), with a policy choosing every NPC's action, and returns a
recorded `engine.metrics.Trace`.

    [scenario]
    id = "kill-parent"
    name = "The player kills a parent"
    ticks = 108                  # episode length; tick 0 is 06:00, one tick is 10 minutes

    [[steps]]
    tick = 30
    op = "kill"                  # kill | raid
    actor = "player"             # an actor kind (player, raider) or an actor's name
    victim = "parent"            # kill only: a victim rule (VICTIM_RULES) or an NPC name

    [gather]                     # optional, applied before tick 0
    place = "square"             # a location kind: the first victim, a crowd and the actor stand there
    crowd = 8                    # how many other NPCs (drawn per village)
    radius = 3.0
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import worlds
from engine.constants import Personality, close_relations
from engine.policy_api import Policy
from worlds import LOCATION_KINDS, WorldSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCENARIO_DIR = Path(worlds.__file__).resolve().parent / "scenarios"  # package data of worlds
STEP_OPS: tuple[str, ...] = ("kill", "raid")
VICTIM_RULES: tuple[str, ...] = ("parent", "loner", "rival", "fighter", "beloved", "random")


class ScenarioError(ValueError):
    """A scenario file or a scenario that cannot run on a world; the message names the field and what was expected."""


@dataclass(frozen=True)
class ScenarioStep:
    tick: int
    op: str
    actor: str
    victim: str | None = None


@dataclass(frozen=True)
class Gather:
    place: str = "square"
    crowd: int = 8
    radius: float = 3.0


@dataclass(frozen=True)
class Scenario:
    id: str
    name: str
    ticks: int
    steps: tuple[ScenarioStep, ...]
    description: str = ""
    gather: Gather | None = None
    source: str = ""

    @property
    def kills(self) -> tuple[ScenarioStep, ...]:
        return tuple(s for s in self.steps if s.op == "kill")


# ------------------------------------------------------------------ loading
def bundled_scenarios() -> list[str]:
    """Ids of the scenarios shipped in worlds/scenarios/, in suite order (file name order)."""
    return [p.stem for p in sorted(SCENARIO_DIR.glob("*.toml"))]


def default_suite() -> list[Scenario]:
    return [load_scenario(s) for s in bundled_scenarios()]


def load_scenario(id_or_path: str | Path) -> Scenario:
    """A bundled scenario id (e.g. "kill-parent") or a path to a scenario TOML file."""
    text_id = str(id_or_path)
    path = Path(text_id)
    if not (text_id.endswith(".toml") or path.is_file()):
        path = SCENARIO_DIR / f"{text_id}.toml"
        if not path.is_file():
            raise ScenarioError(f"unknown scenario {text_id!r}; expected a scenario file or one of "
                                f"{', '.join(bundled_scenarios())}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: expected UTF-8 text, got undecodable bytes at offset {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    return scenario_from_dict(data, source=str(path))


def _expect(cond: bool, source: str, where: str, what: str, got: Any) -> None:
    if not cond:
        raise ScenarioError(f"{source}: {where}: expected {what}, got {got!r}")


def _keys(table: dict, allowed: Sequence[str], source: str, where: str) -> None:
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise ScenarioError(f"{source}: {where}: unknown key {extra[0]!r}; expected {', '.join(allowed)}")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def scenario_from_dict(data: dict[str, Any], *, source: str = "scenario") -> Scenario:
    """Validate a parsed scenario file (errors name the file, the field and what was expected)."""
    _expect(isinstance(data, dict), source, "(top level)", "a table", type(data).__name__)
    _keys(data, ("scenario", "steps", "gather"), source, "(top level)")
    head = data.get("scenario")
    _expect(isinstance(head, dict), source, "scenario", "a [scenario] table", head)
    _keys(head, ("id", "name", "ticks", "description"), source, "scenario")
    sid, name, ticks = head.get("id"), head.get("name", head.get("id")), head.get("ticks")
    _expect(isinstance(sid, str) and sid.strip() != "", source, "scenario.id", "a non-empty string", sid)
    _expect(isinstance(name, str), source, "scenario.name", "a string", name)
    _expect(_int(ticks) and 1 <= ticks <= 10_000, source, "scenario.ticks", "an integer in 1..10000", ticks)
    description = head.get("description", "")
    _expect(isinstance(description, str), source, "scenario.description", "a string", description)
    raw_steps = data.get("steps", [])
    _expect(isinstance(raw_steps, list) and len(raw_steps) > 0, source, "steps",
            "at least one [[steps]] table", raw_steps)
    steps = []
    for k, st in enumerate(raw_steps):
        where = f"steps[{k}]"
        _expect(isinstance(st, dict), source, where, "a table", st)
        _keys(st, ("tick", "op", "actor", "victim"), source, where)
        tick, op, actor, victim = st.get("tick"), st.get("op"), st.get("actor"), st.get("victim")
        _expect(_int(tick) and 0 <= tick < ticks, source, f"{where}.tick", f"an integer in 0..{ticks - 1}", tick)
        _expect(op in STEP_OPS, source, f"{where}.op", f"one of {', '.join(STEP_OPS)}", op)
        _expect(isinstance(actor, str) and actor != "", source, f"{where}.actor",
                "an actor kind (player, raider) or an actor name", actor)
        if op == "kill":
            _expect(isinstance(victim, str) and victim != "", source, f"{where}.victim",
                    f"a victim rule ({', '.join(VICTIM_RULES)}) or an NPC name", victim)
        else:
            _expect(victim is None, source, f"{where}.victim", "no victim for a raid", victim)
        steps.append(ScenarioStep(int(tick), str(op), str(actor), victim))
    gather = None
    if "gather" in data:
        g = data["gather"]
        _expect(isinstance(g, dict), source, "gather", "a [gather] table", g)
        _keys(g, ("place", "crowd", "radius"), source, "gather")
        place, crowd, radius = g.get("place", "square"), g.get("crowd", 8), g.get("radius", 3.0)
        _expect(place in LOCATION_KINDS, source, "gather.place", f"a location kind ({', '.join(LOCATION_KINDS)})",
                place)
        _expect(_int(crowd) and crowd >= 0, source, "gather.crowd", "an integer >= 0", crowd)
        _expect(isinstance(radius, (int, float)) and not isinstance(radius, bool) and 0 < radius <= 50,
                source, "gather.radius", "a number in (0, 50]", radius)
        _expect(any(s.op == "kill" for s in steps), source, "gather", "a scenario with a kill step", "no kill")
        gather = Gather(str(place), int(crowd), float(radius))
    steps.sort(key=lambda s: s.tick)
    return Scenario(sid, name, int(ticks), tuple(steps), description.strip(), gather, source)


# ------------------------------------------------------------------ victim rules
def _relations(spec: WorldSpec) -> tuple[np.ndarray, np.ndarray]:
    """(affinity (N, N), kin or spouse (N, N) bool) from the world's relationships."""
    index = {n: i for i, n in enumerate(spec.npc_names)}
    n = len(index)
    affinity = np.zeros((n, n))
    kin = np.zeros((n, n), bool)
    for r in spec.relationships:
        i, j = index[r.a], index[r.b]
        affinity[i, j] = affinity[j, i] = r.affinity
        kin[i, j] = kin[j, i] = r.kind in ("kin", "spouse")
    return affinity, kin


def _best(score: np.ndarray, allowed: np.ndarray) -> int:
    """Index of the highest score among allowed NPCs (ties: lowest index). Scores are tuples as columns."""
    cand = np.flatnonzero(allowed)
    keys = score[cand]
    order = np.lexsort(tuple(-keys[:, c] for c in reversed(range(keys.shape[1]))))
    return int(cand[order[0]])


def victim_rule_scores(spec: WorldSpec) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For each deterministic rule: (score columns (N, k), eligible (N,)); the victim maximises the scores
    lexicographically (ties: the lowest index)."""
    affinity, kin = _relations(spec)
    n = len(spec.npcs)
    close = close_relations(affinity, kin) & ~np.eye(n, dtype=bool)
    n_close = close.sum(1).astype(float)
    pos_sum = np.maximum(affinity, 0).sum(1)
    n_pos = (affinity > 0).sum(1).astype(float)
    n_neg = (affinity < 0).sum(1).astype(float)
    neg_sum = np.minimum(affinity, 0).sum(1)
    p = Personality.of(np.array([npc.traits.as_tuple() for npc in spec.npcs]))
    child = np.array([npc.role == "child" for npc in spec.npcs])
    parent = ~child & (kin & child[None, :]).any(1)
    everyone = np.ones(n, bool)
    return {
        # an adult with a kin tie to a child, the one with the most close relations (else anyone)
        "parent": (np.stack([n_close, pos_sum], 1), parent if parent.any() else everyone),
        # fewest positive ties, then the weakest ones
        "loner": (np.stack([-n_pos, -pos_sum], 1), everyone),
        # most negative ties, then the strongest dislike
        "rival": (np.stack([n_neg, -neg_sum], 1), everyone),
        # the strongest fighter: bravery + aggression
        "fighter": (np.stack([p.bravery + p.aggression, p.aggression], 1), everyone),
        # the most loved: most close relations (witness and fear scenarios need mourners)
        "beloved": (np.stack([n_close, pos_sum], 1), everyone),
    }


def select_victim(spec: WorldSpec, rule: str, exclude: Sequence[int] = (),
                  rng: np.random.Generator | None = None) -> int:
    """The NPC index a victim rule (or an NPC name) picks in this world, never one of `exclude`."""
    n = len(spec.npcs)
    allowed = np.ones(n, bool)
    allowed[list(exclude)] = False
    if not allowed.any():
        raise ScenarioError(f"victim {rule!r}: no NPC left to choose in world {spec.id!r}")
    if rule in spec.npc_names:
        i = spec.npc_index(rule)
        if not allowed[i]:
            raise ScenarioError(f"victim {rule!r} is chosen twice in one scenario")
        return i
    if rule == "random":
        if rng is None:
            raise ScenarioError("victim 'random' needs a random generator")
        return int(rng.choice(np.flatnonzero(allowed)))
    scores = victim_rule_scores(spec)
    if rule not in scores:
        raise ScenarioError(f"victim {rule!r}: expected a victim rule ({', '.join(VICTIM_RULES)}) or an NPC "
                            f"name of world {spec.id!r}")
    score, eligible = scores[rule]
    ok = eligible & allowed
    return _best(score, ok if ok.any() else allowed)


def _actor_index(spec: WorldSpec, actor: str) -> int | None:
    """Entity index of an actor given by name or kind (first of that kind), None if the world has none."""
    n = len(spec.npcs)
    for m, a in enumerate(spec.actors):
        if a.name == actor:
            return n + m
    for m, a in enumerate(spec.actors):
        if a.kind == actor:
            return n + m
    return None


# ------------------------------------------------------------------ the plan of one run
@dataclass
class ScenarioPlan:
    """A scenario bound to a world and B villages: who acts, on whom, when (victims per village)."""

    scenario: Scenario
    spec: WorldSpec
    villages: int
    victims: np.ndarray  # (B, kills) NPC index of each kill step's victim (re-picked if dead by then)
    actors: list[int]  # entity index per step
    crowd: np.ndarray | None = None  # (B, N) bool: placed at the gathering (victim included)
    notes: list[str] = field(default_factory=list)

    def replace_dead(self, kill: int, alive: np.ndarray, rng: np.random.Generator) -> None:
        """Before kill step `kill`: where its victim already died, the rule picks again among the living
        (never an earlier step's victim). `alive` is (B, N)."""
        step = self.scenario.kills[kill]
        for b in range(self.villages):
            if alive[b, self.victims[b, kill]]:
                continue
            dead = np.flatnonzero(~alive[b]).tolist()
            try:
                self.victims[b, kill] = select_victim(self.spec, str(step.victim),
                                                      sorted(set(dead) | set(self.victims[b, :kill].tolist())), rng)
            except ScenarioError:
                continue  # nobody left (or a named victim is dead): the order targets the dead and lapses

    def describe(self) -> str:
        names = list(self.spec.npc_names) + list(self.spec.actor_names)
        parts = []
        k = 0
        for step, actor in zip(self.scenario.steps, self.actors, strict=True):
            if step.op == "kill":
                who = sorted({names[v] for v in self.victims[:, k]})
                parts.append(f"t{step.tick}: {names[actor]} kills {step.victim} ({'/'.join(who)})")
                k += 1
            else:
                parts.append(f"t{step.tick}: {names[actor]} raids")
        return "; ".join(parts)


def plan_scenario(scenario: Scenario, spec: WorldSpec, villages: int, rng: np.random.Generator) -> ScenarioPlan:
    """Bind a scenario to a world: resolve actors and pick victims (rules are per world; `random` per village)."""
    actors = []
    for k, step in enumerate(scenario.steps):
        actor = _actor_index(spec, step.actor)
        if actor is None:
            raise ScenarioError(f"{scenario.id}: steps[{k}].actor: world {spec.id!r} has no actor "
                                f"{step.actor!r} (actors: {', '.join(spec.actor_names) or 'none'})")
        if step.op == "raid" and spec.actors[actor - len(spec.npcs)].kind != "raider":
            raise ScenarioError(f"{scenario.id}: steps[{k}].actor: a raid needs a raider, got {step.actor!r}")
        actors.append(actor)
    kills = scenario.kills
    victims = np.zeros((villages, len(kills)), np.int64)
    for b in range(villages):
        chosen: list[int] = []
        for k, step in enumerate(kills):
            chosen.append(select_victim(spec, str(step.victim), chosen, rng))
            victims[b, k] = chosen[-1]
    crowd = None
    if scenario.gather is not None:
        n = len(spec.npcs)
        crowd = np.zeros((villages, n), bool)
        for b in range(villages):
            others = np.setdiff1d(np.arange(n), victims[b, :1])
            picked = rng.choice(others, size=min(scenario.gather.crowd, len(others)), replace=False)
            crowd[b, picked] = True
            crowd[b, victims[b, 0]] = True
    return ScenarioPlan(scenario, spec, villages, victims, actors, crowd)


def gather_crowd(sim: Any, plan: ScenarioPlan, rng: np.random.Generator) -> None:
    """Before tick 0: place the first victim and the crowd around the gathering place and the killer beside
    the victim, by writing the sim's positions (a harness set-up, documented in docs/emergence.md)."""
    g = plan.scenario.gather
    if g is None or plan.crowd is None:
        return
    spec = plan.spec
    found = spec.locations_of_kind(g.place)
    s = sim.state
    first_kill = plan.scenario.steps.index(plan.scenario.kills[0])
    killer = plan.actors[first_kill]
    for b in range(plan.villages):
        centre = np.array([found[0].x, found[0].y]) if found else np.asarray(sim.w.square_pos[b], float)
        who = np.flatnonzero(plan.crowd[b])
        angle = rng.uniform(0, 2 * math.pi, len(who))
        dist = g.radius * np.sqrt(rng.uniform(0, 1, len(who)))
        spots = centre + np.stack([np.cos(angle), np.sin(angle)], 1) * dist[:, None]
        spots = np.clip(spots, 0, [spec.width, spec.height]).astype(np.float32)
        s.pos[b, who] = spots
        s.dest[b, who] = spots
        victim = plan.victims[b, 0]
        s.pos[b, killer] = np.clip(s.pos[b, victim] + np.float32([0.8, 0.0]), 0, [spec.width, spec.height])
    sim.obs, sim.mask = sim.observer.observe()


def scenario_commands(plan: ScenarioPlan, tick: int) -> list[tuple[int, int, str, int]]:
    """(village, actor, op, target) commands to queue before the step of `tick`."""
    out = []
    k = 0
    for step, actor in zip(plan.scenario.steps, plan.actors, strict=True):
        if step.op == "kill":
            if step.tick == tick:
                out.extend((b, actor, "kill", int(plan.victims[b, k])) for b in range(plan.villages))
            k += 1
        elif step.tick == tick:
            out.extend((b, actor, "raid", -1) for b in range(plan.villages))
    return out


def run_scenario(policy: Policy, scenario: Scenario, spec: WorldSpec, *, villages: int = 32, seed: int = 0,
                 slots: int = 4, max_ticks: int | None = None, deterministic: bool = False,
                 probe_rows: int = 256, tuning: Any = None,
                 on_tick: Callable[[int], None] | None = None) -> Any:
    """Play `scenario` on B = `villages` copies of `spec` (different random draws) with `policy` choosing every
    NPC's action; return the recorded `engine.metrics.Trace`. `max_ticks` caps the episode length."""
    from engine.metrics import TraceRecorder
    from engine.sim import VillageSim

    ticks = scenario.ticks if max_ticks is None else min(scenario.ticks, max_ticks)
    rng = np.random.default_rng([seed, 17])
    plan = plan_scenario(scenario, spec, villages, rng)
    sim = VillageSim(spec, villages, seed, slots=slots, max_ticks=ticks, scenario="none", record=True,
                     tuning=tuning)
    gather_crowd(sim, plan, rng)
    recorder = TraceRecorder(sim, scenario=scenario.id, world=spec.id, probe_rows=probe_rows,
                             rng=np.random.default_rng([seed, 29]))
    B, N = sim.B, sim.N
    kill_ticks = [step.tick for step in scenario.kills]
    for tick in range(ticks):
        for k, when in enumerate(kill_ticks):
            if when == tick:
                plan.replace_dead(k, sim.state.alive[:, :N], rng)
        for b, actor, op, target in scenario_commands(plan, tick):
            sim.command(b, actor, op, target=target)
        recorder.before_step()
        out = policy.act(sim.obs.reshape(B * N, -1), sim.mask.reshape(B * N, -1), deterministic=deterministic)
        sim.step(np.asarray(out.actions).reshape(B, N))
        recorder.after_step()
        if on_tick is not None:
            on_tick(tick)
    trace = recorder.finish()
    trace.plan = plan.describe()
    return trace
