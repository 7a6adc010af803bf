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
    op = "kill"                  # kill | raid | talk | gift | attack | move
    actor = "player"             # an actor kind (player, raider) or an actor's name
    victim = "parent"            # kill only: a victim rule (VICTIM_RULES) or an NPC name
    # target = "beloved"         # talk, gift, attack: a victim rule or an NPC name
    # place = "forest_edge"      # move: a location kind

    [gather]                     # optional, applied before tick 0
    place = "square"             # a location kind: the first victim, a crowd and the actor stand there
    crowd = 8                    # how many other NPCs (drawn per village)
    radius = 3.0

Kills and raids are orders given at their tick. Talk, gift, attack and move are *errands* of the scenario
driver (`Errands`): done in order per village, each starting at its tick or when the one before is done,
whichever is later; talk and gift walk the actor up to the target first (docs/emergence.md).
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
STEP_OPS: tuple[str, ...] = ("kill", "raid", "talk", "gift", "attack", "move")
SOCIAL_OPS: tuple[str, ...] = ("talk", "gift", "attack")  # an actor's acts on one NPC, chosen by a target rule
ERRAND_OPS: tuple[str, ...] = (*SOCIAL_OPS, "move")
ERRAND_TICKS = 18  # an errand not done this many ticks after it started lapses (3 hours)
REACH_MARGIN = 0.95  # talk and gift are ordered a little inside the engine's range (float32 positions)
VICTIM_RULES: tuple[str, ...] = ("parent", "loner", "rival", "fighter", "beloved", "random")


class ScenarioError(ValueError):
    """A scenario file or a scenario that cannot run on a world; the message names the field and what was expected."""


@dataclass(frozen=True)
class ScenarioStep:
    tick: int
    op: str
    actor: str
    victim: str | None = None
    target: str | None = None  # talk, gift, attack: a victim rule or an NPC name
    place: str | None = None  # move: a location kind


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
    suite: bool = True  # part of the bundled suite (`--scenarios all`)

    @property
    def kills(self) -> tuple[ScenarioStep, ...]:
        return tuple(s for s in self.steps if s.op == "kill")

    @property
    def errands(self) -> tuple[ScenarioStep, ...]:
        return tuple(s for s in self.steps if s.op in ERRAND_OPS)

    @property
    def return_tick(self) -> int:
        """The tick of the first talk, gift or attack step (the player's return among the villagers); -1 if
        none."""
        return min((s.tick for s in self.steps if s.op in SOCIAL_OPS), default=-1)


# ------------------------------------------------------------------ loading
def shipped_scenarios() -> list[str]:
    """Ids of every scenario file shipped in worlds/scenarios/ (file name order), in the suite or not."""
    return [p.stem for p in sorted(SCENARIO_DIR.glob("*.toml"))]


def bundled_scenarios() -> list[str]:
    """Ids of the bundled suite (`--scenarios all`), in suite order (file name order): the shipped scenarios
    whose `[scenario]` table does not say `suite = false`."""
    return [sid for sid in shipped_scenarios() if load_scenario(sid).suite]


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
                                f"{', '.join(shipped_scenarios())}")
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
    _keys(head, ("id", "name", "ticks", "description", "suite"), source, "scenario")
    sid, name, ticks = head.get("id"), head.get("name", head.get("id")), head.get("ticks")
    _expect(isinstance(sid, str) and sid.strip() != "", source, "scenario.id", "a non-empty string", sid)
    _expect(isinstance(name, str), source, "scenario.name", "a string", name)
    _expect(_int(ticks) and 1 <= ticks <= 10_000, source, "scenario.ticks", "an integer in 1..10000", ticks)
    description = head.get("description", "")
    _expect(isinstance(description, str), source, "scenario.description", "a string", description)
    suite = head.get("suite", True)
    _expect(isinstance(suite, bool), source, "scenario.suite", "true or false", suite)
    raw_steps = data.get("steps", [])
    _expect(isinstance(raw_steps, list) and len(raw_steps) > 0, source, "steps",
            "at least one [[steps]] table", raw_steps)
    steps = []
    for k, st in enumerate(raw_steps):
        where = f"steps[{k}]"
        _expect(isinstance(st, dict), source, where, "a table", st)
        _keys(st, ("tick", "op", "actor", "victim", "target", "place"), source, where)
        tick, op, actor = st.get("tick"), st.get("op"), st.get("actor")
        victim, target, place = st.get("victim"), st.get("target"), st.get("place")
        _expect(_int(tick) and 0 <= tick < ticks, source, f"{where}.tick", f"an integer in 0..{ticks - 1}", tick)
        _expect(op in STEP_OPS, source, f"{where}.op", f"one of {', '.join(STEP_OPS)}", op)
        _expect(isinstance(actor, str) and actor != "", source, f"{where}.actor",
                "an actor kind (player, raider) or an actor name", actor)
        rule = f"a victim rule ({', '.join(VICTIM_RULES)}) or an NPC name"
        if op == "kill":
            _expect(isinstance(victim, str) and victim != "", source, f"{where}.victim", rule, victim)
        else:
            _expect(victim is None, source, f"{where}.victim", f"no victim for {op!r} (a kill's key)", victim)
        if op in SOCIAL_OPS:
            _expect(isinstance(target, str) and target != "", source, f"{where}.target", rule, target)
        else:
            _expect(target is None, source, f"{where}.target", f"no target for {op!r} (a talk, gift or attack's "
                    "key)", target)
        if op == "move":
            _expect(place in LOCATION_KINDS, source, f"{where}.place",
                    f"a location kind ({', '.join(LOCATION_KINDS)})", place)
        else:
            _expect(place is None, source, f"{where}.place", f"no place for {op!r} (a move's key)", place)
        steps.append(ScenarioStep(int(tick), str(op), str(actor), victim, target, place))
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
    return Scenario(sid, name, int(ticks), tuple(steps), description.strip(), gather, source, suite)


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
    # per errand step (talk, gift, attack, move), in `scenario.errands` order
    targets: np.ndarray | None = None  # (B, errands) NPC index of a talk, gift or attack (-1 for a move)
    places: list[tuple[float, float] | None] = field(default_factory=list)  # a move's destination

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
        k = j = 0
        verbs = {"talk": "talks to", "gift": "gives a gift to", "attack": "strikes"}
        for step, actor in zip(self.scenario.steps, self.actors, strict=True):
            if step.op == "kill":
                who = sorted({names[v] for v in self.victims[:, k]})
                parts.append(f"t{step.tick}: {names[actor]} kills {step.victim} ({'/'.join(who)})")
                k += 1
            elif step.op in SOCIAL_OPS and self.targets is not None:
                who = sorted({names[v] for v in self.targets[:, j]})
                parts.append(f"t{step.tick}: {names[actor]} {verbs[step.op]} {step.target} ({'/'.join(who)})")
                j += 1
            elif step.op == "move":
                parts.append(f"t{step.tick}: {names[actor]} goes to the {step.place}")
                j += 1
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
    targets, places = plan_errands(scenario, spec, villages, victims, rng)
    return ScenarioPlan(scenario, spec, villages, victims, actors, crowd, targets=targets, places=places)


def plan_errands(scenario: Scenario, spec: WorldSpec, villages: int, victims: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[float, float] | None]]:
    """Targets (B, errands) of the talk, gift and attack steps, first picked among the NPCs the scenario's
    earlier kills leave alive (re-picked among the living when the errand starts), and the moves' places."""
    errands = scenario.errands
    targets = np.full((villages, len(errands)), -1, np.int64)
    places: list[tuple[float, float] | None] = []
    where = {id(step): k for k, step in enumerate(scenario.steps)}
    kill_ticks = [step.tick for step in scenario.kills]
    for j, step in enumerate(errands):
        field_path = f"{scenario.source or scenario.id}: steps[{where[id(step)]}]"
        if step.op == "move":
            found = spec.locations_of_kind(str(step.place))
            if not found:
                raise ScenarioError(f"{field_path}.place: world {spec.id!r} has no location of kind {step.place!r}")
            places.append((float(found[0].x), float(found[0].y)))
            continue
        places.append(None)
        rule = str(step.target)
        for b in range(villages):
            if rule in spec.npc_names:
                targets[b, j] = spec.npc_index(rule)
                continue
            earlier = [int(v) for v, t in zip(victims[b], kill_ticks, strict=True) if t <= step.tick]
            try:
                targets[b, j] = select_victim(spec, rule, earlier, rng)
            except ScenarioError as exc:
                raise ScenarioError(f"{field_path}.target: {exc}") from None
    return targets, places


class Errands:
    """The scenario driver's errands (talk, gift, attack, move), done in order per village and actor: each
    starts at its step's tick or when the one before is done, whichever is later, and lapses when not done
    within ERRAND_TICKS. Talk and gift walk the actor up to the target (within the engine's talking range of
    an actor) before the order; attack is the engine's own walk-and-strike; move walks to a place."""

    def __init__(self, plan: ScenarioPlan, reach: float, rng: np.random.Generator):
        self.plan, self.reach, self.rng = plan, reach, rng
        errands = plan.scenario.errands
        step_actor = {id(step): a for step, a in zip(plan.scenario.steps, plan.actors, strict=True)}
        self.actor = [step_actor[id(step)] for step in errands]
        by_actor: dict[int, list[int]] = {}
        for j, a in enumerate(self.actor):
            by_actor.setdefault(a, []).append(j)
        self.pending = [{a: list(js) for a, js in by_actor.items()} for _ in range(plan.villages)]
        self.started = np.full((plan.villages, len(errands)), -1, np.int64)
        self.ordered = np.zeros((plan.villages, len(errands)), bool)
        self.targets = (plan.targets.copy() if plan.targets is not None
                        else np.full((plan.villages, 0), -1, np.int64))

    def _living_target(self, b: int, j: int, alive: np.ndarray) -> bool:
        """Keep the errand's target, or re-pick it by its rule among the living; False if nobody fits."""
        if alive[self.targets[b, j]]:
            return True
        rule = str(self.plan.scenario.errands[j].target)
        try:
            self.targets[b, j] = select_victim(self.plan.spec, rule, np.flatnonzero(~alive).tolist(), self.rng)
        except ScenarioError:
            return False
        return True

    def commands(self, sim: Any, tick: int) -> list[tuple[int, int, str, int, float, float]]:
        """(village, actor, op, target, x, y) orders to queue before the step of `tick`."""
        from engine.constants import ActorMode

        s, N = sim.state, sim.N
        errands = self.plan.scenario.errands
        out: list[tuple[int, int, str, int, float, float]] = []
        for b in range(self.plan.villages):
            alive = s.alive[b, :N]
            for actor, queue in self.pending[b].items():
                while queue and errands[queue[0]].tick <= tick:
                    j = queue[0]
                    step = errands[j]
                    if not s.alive[b, actor]:  # a dead actor runs no more errands
                        queue.clear()
                        break
                    if self.started[b, j] < 0:
                        self.started[b, j] = tick
                    mode = int(s.actor_mode[b, actor - N])
                    late = tick - self.started[b, j] >= ERRAND_TICKS
                    order: tuple[str, int, float, float] | None = None
                    finished = lapsed = False
                    if step.op == "move":
                        if mode == ActorMode.HUNT:
                            break  # a killing in progress is finished first
                        x, y = self.plan.places[j] or (0.0, 0.0)
                        order, finished = ("move", -1, x, y), True
                    elif not self._living_target(b, j, alive):
                        lapsed = True
                    elif step.op == "attack":
                        if not self.ordered[b, j]:
                            order = ("attack", int(self.targets[b, j]), 0.0, 0.0)
                            self.ordered[b, j] = True
                        elif mode != ActorMode.STRIKE:
                            finished = True  # the blow landed (or the actor turned on someone who struck it)
                        elif late:
                            order, lapsed = ("stop", -1, 0.0, 0.0), True
                    else:  # talk, gift: face to face
                        t = int(self.targets[b, j])
                        gap = float(np.linalg.norm(s.pos[b, actor] - s.pos[b, t]))
                        if gap <= self.reach:
                            order, finished = (step.op, t, 0.0, 0.0), True
                        elif late:
                            order, lapsed = ("stop", -1, 0.0, 0.0), True
                        else:
                            order = ("move", -1, float(s.pos[b, t, 0]), float(s.pos[b, t, 1]))
                    if order is not None:
                        out.append((b, actor, *order))
                    if finished or lapsed:
                        queue.pop(0)
                        if order is None:
                            continue  # nothing ordered this tick: the next errand may start now
                    break
        return out


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


def step_recorded(sim: Any, policy: Policy, recorder: Any, tick: int, *, deterministic: bool = False,
                  steer: Callable[[Any, int, np.ndarray], None] | None = None) -> None:
    """One step of a recorded play: the policy chooses every NPC's action (which `steer`, when given, may
    overwrite in place), the sim steps, the recorder keeps the step."""
    B, N = sim.B, sim.N
    recorder.before_step()
    out = policy.act(sim.obs.reshape(B * N, -1), sim.mask.reshape(B * N, -1), deterministic=deterministic)
    actions = np.asarray(out.actions).reshape(B, N)
    if steer is not None:
        actions = actions.copy()
        steer(sim, tick, actions)
    sim.step(actions)
    recorder.after_step()


def run_scenario(policy: Policy, scenario: Scenario, spec: WorldSpec, *, villages: int = 32, seed: int = 0,
                 slots: int = 4, max_ticks: int | None = None, deterministic: bool = False,
                 probe_rows: int = 256, tuning: Any = None,
                 on_tick: Callable[[int], None] | None = None,
                 steer: Callable[[Any, int, np.ndarray], None] | None = None) -> Any:
    """Play `scenario` on B = `villages` copies of `spec` (different random draws) with `policy` choosing every
    NPC's action; return the recorded `engine.metrics.Trace`. `max_ticks` caps the episode length. `steer(sim,
    tick, actions)`, when given, may overwrite the (B, N) flat actions in place before each step (what-if probes:
    bench/flight_value.py)."""
    from engine.metrics import TraceRecorder
    from engine.sim import TALK_RANGE_FACTOR, VillageSim

    ticks = scenario.ticks if max_ticks is None else min(scenario.ticks, max_ticks)
    rng = np.random.default_rng([seed, 17])
    plan = plan_scenario(scenario, spec, villages, rng)
    sim = VillageSim(spec, villages, seed, slots=slots, max_ticks=ticks, scenario="none", record=True,
                     tuning=tuning)
    gather_crowd(sim, plan, rng)
    recorder = TraceRecorder(sim, scenario=scenario.id, world=spec.id, probe_rows=probe_rows,
                             rng=np.random.default_rng([seed, 29]))
    N = sim.N
    kill_ticks = [step.tick for step in scenario.kills]
    errands = Errands(plan, sim.t.talk_radius * TALK_RANGE_FACTOR * REACH_MARGIN, rng) if scenario.errands else None
    for tick in range(ticks):
        for k, when in enumerate(kill_ticks):
            if when == tick:
                plan.replace_dead(k, sim.state.alive[:, :N], rng)
        for b, actor, op, target in scenario_commands(plan, tick):
            sim.command(b, actor, op, target=target)
        if errands is not None:
            for b, actor, op, target, x, y in errands.commands(sim, tick):
                sim.command(b, actor, op, target=target, x=x, y=y)
        step_recorded(sim, policy, recorder, tick, deterministic=deterministic, steer=steer)
        if on_tick is not None:
            on_tick(tick)
    trace = recorder.finish()
    trace.plan = plan.describe()
    trace.return_tick = scenario.return_tick
    return trace
