"""The scenario suite: loading and validation, victim rules, and short runs on village-v1 and a generated world."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.constants import EventType
from engine.metrics import trace_stats
from engine.scenarios import (
    SCENARIO_DIR,
    VICTIM_RULES,
    ScenarioError,
    bundled_scenarios,
    default_suite,
    load_scenario,
    plan_scenario,
    run_scenario,
    scenario_commands,
    scenario_from_dict,
    select_victim,
    shipped_scenarios,
)
from npc_brains.baselines import get_baseline
from worlds import ActorSpec, Location, NPCSpec, Relationship, Traits, WorldSpec, generate_world, load_world

SUITE = {"kill-parent", "kill-loner", "kill-rival", "kill-fighter", "kill-in-square", "kill-at-night",
         "repeated-killings", "raid"}


def small_world() -> WorldSpec:
    """Seven NPCs whose victims are known by construction (see each rule in the test below)."""
    def npc(name: str, role: str = "farmer", bravery: float = 0.4, aggression: float = 0.3) -> NPCSpec:
        return NPCSpec(name, role, "Home", Traits(bravery=bravery, aggression=aggression))

    rel = [("A", "B", "spouse", 0.9), ("A", "C", "kin", 0.8), ("B", "C", "kin", 0.7), ("A", "F", "friend", 0.6),
           ("D", "A", "rival", -0.4), ("D", "E", "rival", -0.7), ("D", "B", "friend", 0.3),
           ("E", "F", "friend", 0.2), ("E", "C", "friend", 0.4)]
    return WorldSpec(
        id="small", name="Small", width=20.0, height=20.0,
        locations=(Location("Home", "home", 5.0, 5.0), Location("Square", "square", 10.0, 10.0)),
        npcs=(npc("A"), npc("B", "guard", 0.9, 0.9), npc("C", "child"), npc("D"), npc("E", "hunter", 0.7, 0.6),
              npc("F"), npc("G")),
        relationships=tuple(Relationship(*r) for r in rel),
        actors=(ActorSpec("player", "player", 10.0, 10.0),),  # no raiders
    )


# ------------------------------------------------------------------ loading and validation
def test_the_bundled_suite_loads_with_ids_matching_file_names() -> None:
    assert set(bundled_scenarios()) == SUITE
    for scenario in default_suite():
        assert Path(scenario.source).stem == scenario.id
        assert scenario.steps and scenario.ticks > max(s.tick for s in scenario.steps)
        for step in scenario.kills:
            assert step.victim in VICTIM_RULES
    night = load_scenario("kill-at-night")
    assert night.steps[0].tick >= 96  # 22:00 or later
    assert len(load_scenario("repeated-killings").kills) >= 2
    assert load_scenario("kill-in-square").gather is not None
    assert load_scenario(SCENARIO_DIR / "raid.toml").id == "raid"


@pytest.mark.parametrize(("patch", "field"), [
    ({"scenario": {"id": "x", "ticks": 0}}, "scenario.ticks"),
    ({"scenario": {"id": "", "ticks": 10}}, "scenario.id"),
    ({"steps": [{"tick": 50, "op": "kill", "actor": "player", "victim": "parent"}]}, "steps[0].tick"),
    ({"steps": [{"tick": 1, "op": "dance", "actor": "player"}]}, "steps[0].op"),
    ({"steps": [{"tick": 1, "op": "kill", "actor": "player"}]}, "steps[0].victim"),
    ({"steps": [{"tick": 1, "op": "raid", "actor": "raider", "victim": "parent"}]}, "steps[0].victim"),
    ({"steps": [{"tick": 1, "op": "kill", "actor": "player", "victim": "loner", "when": 3}]}, "unknown key 'when'"),
    ({"steps": []}, "steps"),
    ({"steps": [{"tick": 1, "op": "talk", "actor": "player"}]}, "steps[0].target"),
    ({"steps": [{"tick": 1, "op": "gift", "actor": "player", "target": 3}]}, "steps[0].target"),
    ({"steps": [{"tick": 1, "op": "attack", "actor": "player", "victim": "fighter"}]}, "steps[0].victim"),
    ({"steps": [{"tick": 1, "op": "kill", "actor": "player", "victim": "loner", "target": "loner"}]},
     "steps[0].target"),
    ({"steps": [{"tick": 1, "op": "move", "actor": "player", "place": "moon"}]}, "steps[0].place"),
    ({"steps": [{"tick": 1, "op": "talk", "actor": "player", "target": "loner", "place": "square"}]},
     "steps[0].place"),
    ({"scenario": {"id": "x", "ticks": 20, "suite": "no"}}, "scenario.suite"),
    ({"gather": {"place": "moon"}}, "gather.place"),
    ({"gather": {"crowd": -1}}, "gather.crowd"),
    ({"extra": 1}, "unknown key 'extra'"),
])
def test_bad_scenarios_name_the_field(patch: dict, field: str) -> None:
    data = {"scenario": {"id": "x", "name": "X", "ticks": 20},
            "steps": [{"tick": 1, "op": "kill", "actor": "player", "victim": "parent"}]}
    data.update(patch)
    with pytest.raises(ScenarioError, match=field.replace("[", r"\[").replace("]", r"\]")) as info:
        scenario_from_dict(data, source="bad.toml")
    assert str(info.value).startswith("bad.toml: ")
    assert "\n" not in str(info.value)


def test_unknown_scenarios_and_broken_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'.*kill-parent"):
        load_scenario("nope")
    broken = tmp_path / "broken.toml"
    broken.write_text("[scenario\nid = 1\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(broken)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.toml")


# ------------------------------------------------------------------ victim rules
def test_victim_rules_pick_the_npc_each_rule_describes() -> None:
    world = small_world()
    name = {rule: world.npcs[select_victim(world, rule)].name for rule in VICTIM_RULES if rule != "random"}
    assert name == {"parent": "A",  # a parent of the child C, with the most close relations
                    "loner": "G",  # no positive tie at all
                    "rival": "D",  # two negative ties
                    "fighter": "B",  # highest bravery + aggression
                    "beloved": "A"}
    assert world.npcs[select_victim(world, "fighter", exclude=[1])].name == "E"
    assert select_victim(world, "F") == 5
    picks = {select_victim(world, "random", exclude=[0, 1, 2], rng=np.random.default_rng(s)) for s in range(40)}
    assert picks == {3, 4, 5, 6}


def test_victim_rule_errors() -> None:
    world = small_world()
    with pytest.raises(ScenarioError, match="victim 'Zed'"):
        select_victim(world, "Zed")
    with pytest.raises(ScenarioError, match="chosen twice"):
        select_victim(world, "B", exclude=[1])
    with pytest.raises(ScenarioError, match="no NPC left"):
        select_victim(world, "loner", exclude=range(7))


@pytest.mark.parametrize("world_id", ["village-v1", "generated:12:10000"])
def test_rules_fit_their_definition_on_real_worlds(world_id: str) -> None:
    from engine.vec_env import resolve_world

    world = resolve_world(world_id)
    names = world.npc_names
    kin = {(r.a, r.b) for r in world.relationships if r.kind in ("kin", "spouse")}
    kin |= {(b, a) for a, b in kin}
    parent = names[select_victim(world, "parent")]
    children = {n.name for n in world.npcs if n.role == "child"}
    if children:
        assert world.npcs[names.index(parent)].role != "child"
        assert any((parent, c) in kin for c in children)
    pos = {n: sum(1 for r in world.relationships if n in (r.a, r.b) and r.affinity > 0) for n in names}
    neg = {n: sum(1 for r in world.relationships if n in (r.a, r.b) and r.affinity < 0) for n in names}
    assert pos[names[select_victim(world, "loner")]] == min(pos.values())
    assert neg[names[select_victim(world, "rival")]] == max(neg.values())
    fight = [n.traits.bravery + n.traits.aggression for n in world.npcs]
    assert fight[select_victim(world, "fighter")] == max(fight)


def test_plans_pick_distinct_victims_and_schedule_commands() -> None:
    world = small_world()
    plan = plan_scenario(load_scenario("repeated-killings"), world, 3, np.random.default_rng(0))
    assert plan.victims.shape == (3, 3)
    assert [world.npcs[v].name for v in plan.victims[0]] == ["A", "B", "C"]
    first = load_scenario("repeated-killings").steps[0].tick
    assert scenario_commands(plan, first) == [(b, 7, "kill", 0) for b in range(3)]  # entity 7: the player
    assert scenario_commands(plan, first + 1) == []
    assert "A" in plan.describe() and "kills parent" in plan.describe()


def test_a_victim_already_dead_is_replaced_by_the_rule_among_the_living() -> None:
    world = small_world()
    plan = plan_scenario(load_scenario("kill-parent"), world, 2, np.random.default_rng(0))
    assert plan.victims[:, 0].tolist() == [0, 0]  # A
    alive = np.ones((2, 7), bool)
    alive[1, 0] = False  # A died before the kill in village 1
    plan.replace_dead(0, alive, np.random.default_rng(0))
    assert plan.victims[:, 0].tolist() == [0, 1]  # B, the other parent
    alive[:, :] = False
    plan.replace_dead(0, alive, np.random.default_rng(0))  # nobody left: the order lapses, nothing raised
    assert plan.victims[:, 0].tolist() == [0, 1]


def test_a_world_without_the_actor_cannot_run_the_scenario() -> None:
    with pytest.raises(ScenarioError, match="no actor 'raider'"):
        plan_scenario(load_scenario("raid"), small_world(), 2, np.random.default_rng(0))


# ------------------------------------------------------------------ runs
def test_kill_parent_runs_on_village_v1_and_a_generated_world() -> None:
    scripted = get_baseline("scripted")
    scenario = load_scenario("kill-parent")
    for world in (load_world("village-v1"), generate_world(12, 10_000)):
        trace = run_scenario(scripted, scenario, world, villages=2, seed=1, max_ticks=60)
        victim = select_victim(world, "parent")
        deaths = trace.events["type"] == EventType.DEATH
        player = list(world.actor_names).index("player") + len(world.npcs)
        killed = set(zip(trace.events["village"][deaths], trace.events["target"][deaths],
                         trace.events["actor"][deaths], strict=True))
        assert {(0, victim, player), (1, victim, player)} <= killed
        assert trace.ticks == 60 and trace.B == 2
        assert (trace.death_tick[:, victim] >= scenario.steps[0].tick).all()


def test_the_square_killing_has_many_witnesses_and_the_night_killing_few() -> None:
    scripted = get_baseline("scripted")
    world = load_world("village-v1")
    square = run_scenario(scripted, load_scenario("kill-in-square"), world, villages=4, seed=2, max_ticks=20)
    victim = select_victim(world, "beloved")
    saw = (square.learned_from[:, :, victim] == -1) & (square.learned_tick[:, :, victim] == square.death_tick[:, [
        victim]])
    assert (square.death_tick[:, victim] <= 3).all()
    assert saw.sum(1).min() >= 6  # most of the crowd of 8 saw it
    night = run_scenario(scripted, load_scenario("kill-at-night"), world, villages=4, seed=2, max_ticks=110)
    assert (night.death_tick[:, victim] >= 100).all()
    saw_night = (night.learned_from[:, :, victim] == -1) & (night.learned_tick[:, :, victim] == night.death_tick[:, [
        victim]])
    # only sleepers right beside the killing wake to it (the household), far fewer than a crowd by day
    assert saw_night.sum() < saw.sum() / 2


def test_the_raid_scenario_brings_the_raiders() -> None:
    trace = run_scenario(get_baseline("scripted"), load_scenario("raid"), load_world("village-v1"), villages=2,
                         seed=3, max_ticks=50)
    raids = trace.events["type"] == EventType.RAID_START
    assert set(trace.events["village"][raids]) == {0, 1}
    assert (trace.events["tick"][raids] == 30).all()


# ------------------------------------------------------------------ the player's errands (talk, gift, attack, move)
def test_return_next_day_is_shipped_outside_the_default_suite() -> None:
    scenario = load_scenario("return-next-day")
    assert not scenario.suite
    assert "return-next-day" in shipped_scenarios() and "return-next-day" not in bundled_scenarios()
    assert [s.op for s in scenario.steps] == ["kill", "move", "talk", "gift", "attack"]
    assert scenario.return_tick == 174 and scenario.ticks == 174 + 36
    assert load_scenario(SCENARIO_DIR / "return-next-day.toml").id == "return-next-day"
    assert load_scenario("kill-parent").return_tick == -1


def test_a_target_rule_the_world_does_not_know_names_the_file_and_field() -> None:
    data = {"scenario": {"id": "x", "ticks": 20},
            "steps": [{"tick": 1, "op": "kill", "actor": "player", "victim": "parent"},
                      {"tick": 5, "op": "gift", "actor": "player", "target": "stranger"}]}
    scenario = scenario_from_dict(data, source="bad.toml")  # a string: a rule or an NPC name of some world
    with pytest.raises(ScenarioError, match=r"^bad\.toml: steps\[1\]\.target: victim 'stranger': expected a "
                                            r"victim rule") as info:
        plan_scenario(scenario, small_world(), 2, np.random.default_rng(0))
    assert "\n" not in str(info.value)
    data["steps"][1] = {"tick": 5, "op": "move", "actor": "player", "place": "smithy"}
    with pytest.raises(ScenarioError, match=r"steps\[1\]\.place: world 'small' has no location of kind 'smithy'"):
        plan_scenario(scenario_from_dict(data, source="bad.toml"), small_world(), 2, np.random.default_rng(0))


def test_errands_pick_targets_among_the_living_and_describe_them() -> None:
    world = small_world()
    scenario = scenario_from_dict({
        "scenario": {"id": "x", "ticks": 40},
        "steps": [{"tick": 2, "op": "kill", "actor": "player", "victim": "parent"},  # A
                  {"tick": 10, "op": "talk", "actor": "player", "target": "beloved"},  # A is dead by then: B
                  {"tick": 10, "op": "gift", "actor": "player", "target": "G"}]})
    plan = plan_scenario(scenario, world, 2, np.random.default_rng(0))
    assert plan.targets is not None
    assert [world.npcs[t].name for t in plan.targets[0]] == ["B", "G"]
    assert "talks to beloved (B)" in plan.describe() and "gives a gift to G (G)" in plan.describe()


def test_the_player_walks_up_talks_gives_and_strikes_in_order() -> None:
    world = small_world()
    scenario = scenario_from_dict({
        "scenario": {"id": "x", "ticks": 60},
        "steps": [{"tick": 1, "op": "move", "actor": "player", "place": "home"},
                  {"tick": 12, "op": "talk", "actor": "player", "target": "loner"},  # G
                  {"tick": 12, "op": "gift", "actor": "player", "target": "rival"},  # D
                  {"tick": 12, "op": "attack", "actor": "player", "target": "fighter"}]})  # B
    trace = run_scenario(get_baseline("scripted"), scenario, world, villages=2, seed=4)
    player = len(world.npcs)
    home = np.array([5.0, 5.0])
    assert (np.linalg.norm(trace.pos[11, :, player] - home, axis=-1) < 1.5).all()  # walked there (within reach)
    ev = trace.events
    for b in range(2):
        mine = (ev["village"] == b) & (ev["actor"] == player)
        acts = [(int(t), int(ty), int(tg)) for t, ty, tg in zip(ev["tick"][mine], ev["type"][mine], ev["target"][mine],
                                                               strict=True)]
        kinds = [(ty, tg) for _, ty, tg in acts]
        assert kinds[:3] == [(EventType.TALK, 6), (EventType.GIFT, 3), (EventType.ATTACK, 1)]
        assert all(t >= 12 for t, _, _ in acts)
        ticks = [t for t, _, _ in acts[:3]]
        assert ticks == sorted(ticks)
    assert trace.return_tick == 12


def test_return_next_day_runs_and_is_measured() -> None:
    world = generate_world(12, 10_000)
    trace = run_scenario(get_baseline("scripted"), load_scenario("return-next-day"), world, villages=2, seed=1)
    assert trace.ticks == 210 and trace.return_tick == 174
    counts = trace_stats(trace).result()["counts"]
    assert counts.get("remember_villages", 0) + counts.get("remember_player_dead", 0) == 2
