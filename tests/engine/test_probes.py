"""The policy probes in bench/ count exactly what the emergence metrics count, and reject bad flags in one line."""

import dataclasses
import json

import numpy as np
import pytest

from engine.constants import EventType
from engine.metrics import INTERVAL_RATES, MetricParams, summarize, timid_witnesses, trigger_deaths
from engine.scenarios import load_scenario, run_scenario
from engine.vec_env import resolve_world
from npc_brains import load_policy
from npc_brains.baselines import ScriptedPolicy
from npc_brains.evaluate import EvalSpec, evaluate
from worlds import load_world


def test_the_groups_add_up_to_the_mourning_metric(bench_script):
    bench = bench_script("mourning_gaps")
    world, scenario = load_world("village-v1"), load_scenario("kill-parent")
    out = bench.gaps(ScriptedPolicy(seed=0), world, [scenario], villages=4, seed=3)
    metrics = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=4, seed=3)])
    groups = out["groups"]
    assert out["eligible"] == sum(g["count"] for g in groups.values()) > 0
    assert groups["mourned"]["count"] / out["eligible"] == pytest.approx(metrics["mourning_rate"])
    assert out["eligible"] == metrics["counts"]["mourn_eligible"]
    short = sum(c for k, c in out["ticks"].items() if 0 < k < 6)
    assert groups["short spell"]["count"] == short
    for g in groups.values():
        if g["count"]:
            assert 0.0 <= g["p_mourn"] <= 1.0 and 0.0 <= g["free_share"] <= 1.0 and g["learn_delay"] >= 0


def test_every_miss_is_in_one_class_and_the_dead_are_the_ones_who_died(bench_script):
    """mourning_gaps puts each close relation who did not mourn in exactly one class; "died" is every such relation
    dead by its window's end, counted here from the trace."""
    from engine.metrics import mourning_ticks, performed

    bench = bench_script("mourning_gaps")
    world, scenario = load_world("village-v1"), load_scenario("raid")
    out = bench.gaps(ScriptedPolicy(seed=0), world, [scenario], villages=8, seed=3)
    missed = out["eligible"] - out["groups"]["mourned"]["count"]
    assert set(out["misses"]) == set(bench.MISS_CLASSES) and sum(out["misses"].values()) == missed > 0
    trace = run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=8, seed=3)
    p = MetricParams()
    acted, kind, target = performed(trace)
    died = 0
    for d in trigger_deaths(trace):
        for i, L, mourn in mourning_ticks(trace, p, d, acted, kind, target):
            died += mourn.sum() < p.mourn_min_ticks and not trace.alive[L + p.mourn_window + 1, d.village, i]
    assert out["misses"]["died"] == died


def test_the_probe_counts_what_the_fear_metrics_count(bench_script):
    bench = bench_script("flight_probe")
    world, scenario = load_world("village-v1"), load_scenario("kill-in-square")
    out = bench.probe(ScriptedPolicy(seed=0), world, [scenario], villages=6, seed=2)
    counts = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=6, seed=2)])["counts"]
    assert out["witnesses"] == counts["fear_eligible"] > 0
    assert out["safe"] == counts["fear_hit"]
    assert out["kept"] == counts["fear_kept_hit"]
    assert out["fled_living_killer"] == counts["fear_fled_hit"]
    assert out["chose_flee"] > 0  # the scripted rule flees known threats when timid
    assert out["chosen"] == counts["fear_chosen_hit"]
    # the default 7 ticks cover the metric's window: every chosen flight is a FLEE the probe saw, and every other
    # FLEE it saw is one of the three misses
    missed = out["fled_never_safe"] + out["fled_safe_not_kept"] + out["fled_kept_otherwise"]
    assert out["chose_flee"] == out["chosen"] + missed
    assert sum(out["back_by"].values()) == out["fled_never_safe"] + out["fled_safe_not_kept"]
    assert sum(row["count"] for row in out["instead"].values()) == out["witnesses"] - out["chose_flee"]
    # every flight from a living killer was possible; the bound can be above the flights, never below
    assert out["fled_living_killer"] <= out["could_get_away"] <= out["witnesses"]
    assert sum(out["first_activities"].values()) <= out["witnesses"]


def test_the_revenge_probe_counts_what_the_revenge_metric_counts(bench_script):
    bench = bench_script("revenge_probe")
    world, scenario = load_world("village-v1"), load_scenario("kill-parent")
    out = bench.probe(ScriptedPolicy(seed=0), world, [scenario], villages=6, seed=2)
    counts = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=6, seed=2)])["counts"]
    groups = [out["timid"], out["bold"]]
    assert sum(sum(g.values()) for g in groups) == counts["revenge_eligible"] > 0
    assert sum(g["hit"] for g in groups) == counts["revenge_hit"]
    assert sum(out["first_activities_of_misses"].values()) <= counts["revenge_eligible"] - counts["revenge_hit"]
    # the scripted rule's aggressive kin strike the killer; every striker falls in one of the eight groups
    groups_of_strikers = {f"{c} {a} {t}" for c in ("close", "other") for a in ("aggressive", "calm")
                          for t in ("timid", "bold")}
    assert set(out["blows_on_killer"]) <= groups_of_strikers
    assert out["blows_on_killer"].get("close aggressive bold", 0) + out["blows_on_killer"].get(
        "close aggressive timid", 0) >= counts["revenge_hit"] > 0
    assert out["killer_lived"]["killed"] <= len(trigger_deaths(run_scenario(ScriptedPolicy(seed=0), scenario, world,
                                                                            villages=6, seed=2)))
    # the bound: whoever struck could have; nobody counts twice
    assert counts["revenge_hit"] <= sum(out["could_strike"].values()) <= counts["revenge_eligible"]


def test_the_revenge_probe_finds_the_avengers_fear_also_counts(bench_script):
    """The avengers who are also fear_chosen_rate's timid witnesses: no more than either metric counts, their blows
    within the revenge hits and their chosen flights within the fear metric's."""
    bench = bench_script("revenge_probe")
    world, scenario = resolve_world("generated:12:10001"), load_scenario("kill-in-square")
    out = bench.probe(ScriptedPolicy(seed=0), world, [scenario], villages=6, seed=2)
    counts = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=6, seed=2)])["counts"]
    shared = out["also_fear_witnesses"]
    assert 0 < sum(shared.values()) <= min(counts["revenge_eligible"], counts["fear_kept_eligible"])
    assert 0 < shared["struck, chose a flight"] + shared["struck, no chosen flight"] <= counts["revenge_hit"]
    assert 0 < shared["struck, chose a flight"] + shared["no blow, chose a flight"] <= counts["fear_chosen_hit"]


def test_the_paired_comparison_reports_what_village_eval_measures(bench_script, capsys):
    """paired_eval: A's and B's rates are `village eval`'s on the same runs; a policy against itself differs by
    exactly nothing in every resample."""
    bench = bench_script("paired_eval")
    flags = ["--worlds", "village-v1", "--scenarios", "kill-parent,kill-in-square", "--seeds", "4", "--quiet",
             "--json"]
    assert bench.main(["--a", "scripted", "--b", "random", *flags]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["by_size"]
    spec = EvalSpec([load_scenario("kill-parent"), load_scenario("kill-in-square")],
                    [("village-v1", load_world("village-v1"))], villages=4, seed=0)
    ref = evaluate([("scripted", load_policy("scripted", seed=0)), ("random", load_policy("random", seed=0))], spec)
    (size,) = out
    for rate in INTERVAL_RATES:
        assert out[size][rate]["a"] == ref["scripted"][rate]
        assert out[size][rate]["b"] == ref["random"][rate]
    assert out[size]["revenge_rate"]["diff_interval"][0] > 0  # the rules avenge; random actions seldom do
    assert bench.main(["--a", "scripted", "--b", "random", *flags]) == 0
    text = capsys.readouterr().out
    marked = json.loads(text.strip().splitlines()[-1])["beyond_chance"]
    assert f"revenge_rate at {size}" in marked["higher"]  # the line lists every marked rate, on its side
    assert len(marked["higher"]) + len(marked["lower"]) == text.count(" * |")
    assert "beyond chance: A higher in " in text
    assert bench.main(["--a", "scripted", "--b", "scripted", *flags]) == 0
    text = capsys.readouterr().out
    same = json.loads(text.strip().splitlines()[-1])
    assert all(r["diff_interval"] in ([0.0, 0.0], None) for r in same["by_size"][size].values())
    assert same["beyond_chance"] == {"lower": [], "higher": []} and "beyond chance: no rate differs" in text


def test_the_paired_comparison_plays_a_greedy_side_as_village_eval_deterministic(bench_script, capsys):
    """`--greedy a`: A's rates are `village eval --deterministic`'s, B's the sampled ones, on the same villages."""
    bench = bench_script("paired_eval")
    assert bench.main(["--a", "default", "--b", "default", "--greedy", "a", "--worlds", "village-v1",
                       "--scenarios", "kill-parent", "--seeds", "3", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["greedy"] == "a"
    ((_size, rates),) = out["by_size"].items()
    spec = EvalSpec([load_scenario("kill-parent")], [("village-v1", load_world("village-v1"))], villages=3, seed=0)
    greedy = evaluate([("default", load_policy("default", seed=0))], dataclasses.replace(spec, deterministic=True))
    sampled = evaluate([("default", load_policy("default", seed=0))], spec)
    assert any(greedy["default"][rate] != sampled["default"][rate] for rate in INTERVAL_RATES)  # they differ here
    for rate in INTERVAL_RATES:
        assert rates[rate]["a"] == greedy["default"][rate]
        assert rates[rate]["b"] == sampled["default"][rate]
    ((_size, snd_a),), ((_, snd_b),) = out["diversity"]["a"].items(), out["diversity"]["b"].items()
    for key in ("diversity", "diversity_played"):  # each side's SND as village eval measures it on those runs
        assert snd_a[key] == pytest.approx(greedy["default"][key])
        assert snd_b[key] == pytest.approx(sampled["default"][key])
    assert snd_b["diversity_played"] == pytest.approx(snd_b["diversity"])


def test_the_paired_comparison_samples_a_side_at_its_temperature_as_village_eval(bench_script, capsys):
    """`--temperature-a 0.3`: A's rates and SND are `village eval --temperature 0.3`'s on the same villages."""
    from npc_brains.runtime import set_temperature

    bench = bench_script("paired_eval")
    assert bench.main(["--a", "default", "--b", "default", "--temperature-a", "0.3", "--worlds", "village-v1",
                       "--scenarios", "kill-parent", "--seeds", "3", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["temperature_a"] == "0.3" and out["temperature_b"] is None
    ((_size, rates),) = out["by_size"].items()
    spec = EvalSpec([load_scenario("kill-parent")], [("village-v1", load_world("village-v1"))], villages=3, seed=0)
    sharp = load_policy("default", seed=0)
    set_temperature(sharp, 0.3)
    ref = evaluate([("default", sharp)], spec)["default"]
    for rate in INTERVAL_RATES:
        assert rates[rate]["a"] == ref[rate]
    ((_size, snd_a),), ((_, snd_b),) = out["diversity"]["a"].items(), out["diversity"]["b"].items()
    assert snd_a["diversity"] == pytest.approx(ref["diversity"]) and snd_a["diversity"] > snd_b["diversity"]


def test_the_paired_comparison_plays_a_side_at_its_personality_strength_as_village_eval(bench_script, capsys):
    """`--personality-strength-a 2`: A's rates and SND are `village eval --personality-strength 2`'s."""
    from npc_brains.personality import with_personality_strength

    bench = bench_script("paired_eval")
    assert bench.main(["--a", "default", "--b", "default", "--personality-strength-a", "2", "--greedy", "both",
                       "--worlds", "village-v1", "--scenarios", "kill-parent", "--seeds", "3", "--quiet",
                       "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["personality_strength_a"] == "2" and out["personality_strength_b"] is None
    ((_size, rates),) = out["by_size"].items()
    spec = EvalSpec([load_scenario("kill-parent")], [("village-v1", load_world("village-v1"))], villages=3, seed=0,
                    deterministic=True)
    strong = with_personality_strength(load_policy("default", seed=0), 2.0, seed=0)
    ref = evaluate([("default", strong)], spec)["default"]
    for rate in INTERVAL_RATES:
        assert rates[rate]["a"] == ref[rate]
    ((_size, snd_a),), ((_, snd_b),) = out["diversity"]["a"].items(), out["diversity"]["b"].items()
    assert snd_a["diversity"] == pytest.approx(ref["diversity"]) and snd_a["diversity"] > snd_b["diversity"]


def test_a_probe_plays_the_personality_strength_it_is_given(bench_script, capsys):
    """Every probe takes --personality-strength (the probes' shared flags): the diversity probe's SND rises with it."""
    bench = bench_script("diversity_probe")
    snd = []
    for flags in ([], ["--personality-strength", "2"]):
        assert bench.main(["--world", "village-v1", "--scenarios", "kill-parent", "--villages", "2", "--quiet",
                           "--json", *flags]) == 0
        snd.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["snd"])
    assert snd[1] > snd[0]


def test_policies_are_chosen_on_worlds_the_sweep_does_not_hold_out(bench_script):
    """paired_eval --worlds validation: the sweep's sizes, on generator seeds below the held-out range, so choosing
    a candidate there leaves the sweep's worlds unseen."""
    from npc_brains.evaluate import HELD_OUT_SEED_MIN, SWEEP_SIZES, SWEEP_WORLDS, VALIDATION_WORLDS

    bench = bench_script("paired_eval")
    _, (spec, same) = bench.load(bench.parse(["--a", "scripted", "--b", "random", "--worlds", "validation"]))
    assert same == spec  # both sides play the same villages
    assert [label for label, _ in spec.worlds] == list(VALIDATION_WORLDS)
    assert {len(world.npcs) for _, world in spec.worlds} == set(SWEEP_SIZES)
    assert not set(VALIDATION_WORLDS) & set(SWEEP_WORLDS)
    assert all(1 < int(label.split(":")[2]) < HELD_OUT_SEED_MIN for label in VALIDATION_WORLDS)  # 1: training's
    _, (wide, _) = bench.load(bench.parse(["--a", "scripted", "--b", "random", "--worlds", "validation:3"]))
    labels = [label for label, _ in wide.worlds]
    assert len(labels) == 3 * len(SWEEP_SIZES) and set(VALIDATION_WORLDS) < set(labels)
    assert max(int(label.split(":")[2]) for label in labels) < HELD_OUT_SEED_MIN


def test_the_what_if_plays_match_the_metrics_until_steered_and_steer_after(bench_script):
    """flight_value: the unsteered play is `village eval`'s run (its witnesses and flights are the fear metrics'
    counts); a steered play is the same run until the killing, then the witnesses do what they are made to."""
    from engine.constants import Action

    bench = bench_script("flight_value")
    world, scenario = load_world("village-v1"), load_scenario("kill-in-square")
    out = bench.probe(lambda: ScriptedPolicy(seed=0), world, [scenario], villages=6, seed=2)
    counts = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=6, seed=2)])["counts"]
    n = out["witnesses"]
    assert n == counts["fear_eligible"] > 0  # one killing per village in this scenario
    assert out["policy"]["fled"] * n == pytest.approx(counts["fear_fled_hit"])
    for play in bench.PLAYS:
        assert sum(out[play]["killed_when"].values()) == pytest.approx(out[play]["killed"] * n)
        assert out[play]["return_se"] >= 0
    for pair, diff in out["differences"].items():  # paired over the same witnesses: the means' difference
        a, b = pair.split(" - ")
        assert diff["mean"] == pytest.approx(out[a]["return"] - out[b]["return"], abs=1e-9)
        assert diff["se"] >= 0
    base, _ = bench.play(lambda: ScriptedPolicy(seed=0), world, scenario, 6, 2, None, {}, 6)
    p = MetricParams()
    witnesses = {b: (d.step, d.killer, [i for i, _ in timid_witnesses(base, p, d)])
                 for b, d in bench.first_deaths(base).items()}
    steered, steering = bench.play(lambda: ScriptedPolicy(seed=0), world, scenario, 6, 2, Action.ATTACK, witnesses, 1)
    step = min(step for step, _, _ in witnesses.values())
    assert (steered.pos[: step + 1] == base.pos[: step + 1]).all()  # the same run until the killing
    made = [(b, i) for b, (step, k, who) in witnesses.items() for i in who if base.alive[step + 1, b, k]]
    assert made and all(steered.activity[witnesses[b][0] + 2, b, i] == Action.ATTACK for b, i in made)
    assert any(base.activity[witnesses[b][0] + 2, b, i] != Action.ATTACK for b, i in made)  # not what they chose
    assert steering.rewards[step].any()


def test_the_what_if_probe_can_play_the_training_scenario(bench_script):
    """--training: the `mixed` scenario of training, one to three killings per village, recorded as a scenario."""
    bench = bench_script("flight_value")
    trace, steering = bench.play(lambda: ScriptedPolicy(seed=0), load_world("village-v1"), bench.TRAINING, 8, 0,
                                 None, {}, 6)
    deaths = bench.first_deaths(trace)
    assert trace.ticks == bench.TRAINING.ticks and len(deaths) == 8  # every training village sees a killing
    assert all(d.killer >= trace.N for d in deaths.values()) and steering.rewards.any()


@pytest.mark.parametrize("script, flags, named", [
    ("mourning_gaps", ["--world", "no-such-world"], "no-such-world"),
    ("flight_probe", ["--scenarios", "no-such-scenario"], "no-such-scenario"),
    ("flight_probe", ["--villages", "0"], "--villages"),
    ("flight_value", ["--steer", "0"], "--steer"),
    ("revenge_probe", ["--scenarios", "no-such-scenario"], "no-such-scenario"),
    ("paired_eval", ["--a", "scripted", "--seeds", "0"], "--seeds"),
    ("paired_eval", ["--a", "no-such-policy.pt"], "no-such-policy.pt"),
    ("paired_eval", ["--a", "scripted", "--worlds", "no-such-world"], "no-such-world"),
    ("paired_eval", ["--a", "scripted", "--greedy", "c"], "--greedy"),
    ("paired_eval", ["--a", "default", "--temperature-a", "0"], "--temperature-a: expected a number"),
    ("paired_eval", ["--a", "scripted", "--temperature-a", "0.5"], "--temperature-a: scripted has no learned"),
    ("paired_eval", ["--a", "default", "--temperature-b", "0.5", "--greedy", "both"], "--temperature-b: --greedy"),
    ("paired_eval", ["--a", "scripted", "--personality-strength-a", "2"],
     "--personality-strength-a: scripted has no learned personality"),
    ("paired_eval", ["--a", "default", "--personality-strength-b", "-1"], "--personality-strength-b: expected"),
    ("mourning_gaps", ["--personality-strength", "12"], "--personality-strength: expected a number from 0 to 10"),
    ("diversity_probe", ["--personality-traits", "empathy"], "--personality-traits: it sets which traits"),
    ("paired_eval", ["--a", "default", "--personality-traits-b", "empathy"], "--personality-traits-b: it sets"),
    ("diversity_probe", ["--personality-strength", "2", "--personality-traits", "wit"],
     "--personality-traits: expected 'all' or"),
    ("paired_eval", ["--a", "default", "--personality-strength-a", "2", "--personality-traits-a", "wit"],
     "--personality-traits-a: expected 'all' or"),
    ("flight_probe", ["--policy", "scripted", "--personality-strength", "2"], "scripted has no learned personality"),
    ("mourning_gaps", ["--greedy", "--villages", "0"], "--villages"),
    ("news_channels", ["--villages", "0"], "--villages"),
    ("chain_anatomy", ["--world", "no-such-world"], "no-such-world"),
    ("diversity_probe", ["--rows-from", "nobody"], "--rows-from"),
])
def test_bad_flags_are_one_line_errors(bench_script, capsys, script, flags, named):
    with pytest.raises(SystemExit) as exit_info:
        bench_script(script).main(flags)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_flight_value_pairs_the_witnesses_for_its_differences(bench_script):
    """The paired difference's error is that of the per-witness differences, not of the two means apart."""
    bench = bench_script("flight_value")
    d = bench.paired_difference([1.0, 2.0, 3.0], [0.0, 1.0, 4.0])  # differences 1, 1, -1
    assert d["mean"] == pytest.approx(1 / 3)
    assert d["se"] == pytest.approx(np.std([1, 1, -1], ddof=1) / np.sqrt(3))
    assert np.isnan(bench.standard_error(np.array([2.0])))


def test_the_news_channels_add_up_to_the_reach_at_48_steps(bench_script):
    bench = bench_script("news_channels")
    world, scenario = load_world("village-v1"), load_scenario("kill-parent")
    out = bench.channels(ScriptedPolicy(seed=0), world, [scenario], villages=4, seed=3)
    metrics = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=4, seed=3)])
    assert out["deaths"] > 0 and out["population"] > 0
    assert out["reach_48_per_death"] == pytest.approx(metrics["news_reach_48"])
    assert sum(out["channels"].values()) == pytest.approx(out["reach_48"])
    assert out["channels"]["witnessed"] > 0  # a killing at 11:00 in village-v1 has witnesses
    assert sum(out["doing"].values()) == pytest.approx(1.0, abs=0.01)
    assert 0.0 <= out["knowers_telling"] <= 1.0


def test_the_chain_anatomy_is_the_chain_metric_level_by_level(bench_script):
    bench = bench_script("chain_anatomy")
    world, scenario = load_world("village-v1"), load_scenario("repeated-killings")
    out = bench.anatomy(ScriptedPolicy(seed=0), world, [scenario], villages=4, seed=1)
    metrics = summarize([run_scenario(ScriptedPolicy(seed=0), scenario, world, villages=4, seed=1)])
    assert out["chain_length"] == pytest.approx(metrics["chain_length"])
    assert sum(out["deepest"].values()) == out["deaths"] > 0
    assert set(out["levels"]) == set(range(1, max(out["deepest"]) + 1))
    news = bench.anatomy(ScriptedPolicy(seed=0), world, [scenario], villages=4, seed=1, news=True)
    assert news["deaths"] == out["deaths"] and news["chain_length"] >= out["chain_length"]  # links only deepen
    vb = out["villager_blows"]
    assert vb.get("on one who had killed an actor", 0) <= vb.get("on one who had struck", 0) <= vb.get("blows", 0)


def test_the_first_feud_blow_is_found_in_every_village_where_villagers_struck_villagers(bench_script):
    """The untrained network's village strikes its own; every village run with a landed blow of a villager on a
    villager has its first striker recorded, and what the striker knew is counted among those first strikers."""
    from npc_brains import load_policy
    from npc_brains.evaluate import random_init_policy

    bench = bench_script("chain_anatomy")
    policy = random_init_policy(load_policy("default", seed=0), seed=0)
    world, scenario, villages = load_world("village-v1"), load_scenario("repeated-killings"), 4
    feuds = bench.FirstFeudBlows()
    trace = run_scenario(policy, scenario, world, villages=villages, seed=1, steer=feuds)
    ev = trace.events
    villager = (ev["actor"] >= 0) & (ev["actor"] < trace.N) & (ev["target"] < trace.N)
    villager_blow = (ev["type"] == EventType.ATTACK) & villager
    struck_villages = set(ev["village"][villager_blow].tolist())
    c = feuds.counts
    assert struck_villages and struck_villages <= feuds.started
    assert len(feuds.started) == c["first blows"] <= villages
    assert c["striker knew its culprit"] <= c["striker knew of a villager's death"] <= c["first blows"]
    assert c["target had killed that actor"] <= c["target had last struck an actor"] <= c["first blows"]
    assert c["striker saw that death"] <= c["striker knew the target's last victim was dead"] <= c["first blows"]


def test_the_flight_probe_counts_the_timid_witnesses_revenge_also_counts(bench_script):
    """A timid witness who is an aggressive close relation of the victim is one of revenge_rate's avengers too;
    in a village of such villagers the probe finds them, in a village of calm ones none."""
    bench = bench_script("flight_probe")
    scenario = load_scenario("kill-parent")
    found = {}
    for aggression in (0.0, 0.9):
        base = load_world("village-v1")
        npcs = tuple(dataclasses.replace(n, traits=dataclasses.replace(n.traits, bravery=0.2, aggression=aggression))
                     for n in base.npcs)
        world = dataclasses.replace(base, npcs=npcs)
        out = bench.probe(ScriptedPolicy(seed=0), world, [scenario], villages=6, seed=2)
        assert out["witnesses"] > 0
        found[aggression] = out["avengers_too"]
        assert out["avengers_too_chosen"] <= min(out["avengers_too"], out["chosen"])
    assert found[0.0] == 0 < found[0.9]


def test_the_diversity_probe_splits_the_snd_village_eval_reports(bench_script):
    """Overall, the probe's SND is `village eval`'s for the same run; the situations split it without remainder."""
    from npc_brains import load_policy
    from npc_brains.evaluate import policy_slots, policy_tuning, probe_diversity

    bench = bench_script("diversity_probe")
    policy, world, scenario = load_policy("default", seed=0), load_world("village-v1"), load_scenario("kill-parent")
    out = bench.probe(policy, world, [scenario], villages=3, seed=4, on_tick=None)
    policy = load_policy("default", seed=0)  # the same draws again
    trace = run_scenario(policy, scenario, world, villages=3, seed=4, slots=policy_slots(policy),
                         tuning=policy_tuning(policy))
    snd, n = probe_diversity(policy, trace)
    assert out["observations"] == n > 0
    assert out["snd"] == pytest.approx(snd)
    parts = out["situations"].values()
    assert sum(s["share"] for s in parts) == pytest.approx(1.0)
    assert sum(s["share_of_snd"] for s in parts) == pytest.approx(1.0)
    assert sum(s["share"] * s["snd"] for s in parts if s["snd"] is not None) == pytest.approx(snd)
    # the scripted rules' SND on these rows: what `village eval` would report had the rules played them
    assert out["scripted_snd"] == pytest.approx(probe_diversity(ScriptedPolicy(seed=0), trace)[0])


def test_the_diversity_probe_counts_the_greedy_choices_and_their_near_ties(bench_script):
    """Played greedily, the probe's greedy SND is `village eval --deterministic`'s `diversity_played`."""
    from npc_brains.evaluate import policy_slots, policy_tuning, probe_diversities

    bench = bench_script("diversity_probe")
    probs = np.array([[[0.50, 0.48, 0.02], [0.48, 0.50, 0.02], [0.9, 0.05, 0.05]]])  # pairs (0,1) (0,2) (1,2)
    differ, near = bench.greedy_choices(probs)
    assert differ.tolist() == [[True, False, True]]  # persona 1 prefers action 1, the others action 0
    assert near.tolist() == [[True, False, False]]  # 0 and 1 differ by 0.02 each way; 2 holds its choice by 0.85
    policy, world, scenario = load_policy("default", seed=0), load_world("village-v1"), load_scenario("kill-parent")
    out = bench.probe(policy, world, [scenario], villages=3, seed=4, on_tick=None, deterministic=True)
    trace = run_scenario(policy, scenario, world, villages=3, seed=4, slots=policy_slots(policy),
                         tuning=policy_tuning(policy), deterministic=True)
    _snd, played, n = probe_diversities(policy, trace, deterministic=True)
    assert out["observations"] == n > 0 and out["greedy_snd"] == pytest.approx(played)
    assert 0.0 <= out["near_tie_share"] <= 1.0


def test_the_diversity_probe_names_the_situation_of_a_row(bench_script):
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    bench = bench_script("diversity_probe")
    slots = 2
    obs = np.zeros((4, len(SELF_FEATURES) + slots * len(SLOT_FEATURES)), np.float32)

    def slot(row, k, name, value):
        obs[row, len(SELF_FEATURES) + k * len(SLOT_FEATURES) + SLOT_FEATURES.index(name)] = value

    for name in ("present", "believed_alive", "known_threat"):
        slot(0, 1, name, 1.0)  # a living threat in the second slot
    for name, value in (("present", 1.0), ("known_dead", 1.0), ("kin", 1.0)):
        slot(1, 0, name, value)  # dead kin
    obs[2, SELF_FEATURES.index("night")] = 1.0
    assert [bench.SITUATIONS[k] for k in bench.situations(obs, slots)] == ["threat", "bereaved", "night", "day"]


def test_the_world_spread_counts_what_eval_counts_and_fits_the_make_up(bench_script, capsys):
    """world_spread: a world's rates are `village eval`'s on that world; its avengers are revenge_rate's eligible;
    the fit recovers a make-up effect with no size effect when that is how the worlds were made."""
    import argparse

    bench = bench_script("world_spread")
    label, scenario = "generated:12:5000", load_scenario("kill-parent")
    world = bench.play_world(ScriptedPolicy(seed=0), [scenario], label, argparse.Namespace(villages=3, seed=0),
                             lambda: None)
    spec = EvalSpec([scenario], [(label, resolve_world(label))], villages=3, seed=0)
    ref = evaluate([("scripted", ScriptedPolicy(seed=0))], spec)["scripted"]
    result = world["stats"].result()
    assert result["revenge_rate"] == ref["revenge_rate"] and result["mourning_rate"] == ref["mourning_rate"]
    assert world["eligible"] == ref["counts"]["revenge_eligible"] > 0
    assert 0 <= world["timid"] <= world["eligible"]
    assert world["timid_hit"] + world["bold_hit"] == ref["counts"]["revenge_hit"]

    rng = np.random.default_rng(0)
    made = [{"size": n, "eligible": 20, "timid": t, "rates": {"revenge_rate": 0.8 - 0.5 * t / 20}}
            for n in (12, 24, 48, 96) for t in (0, 4, 10, 16)]
    fit = bench.size_or_make_up(made, rng)
    assert fit["worlds"] == 16
    assert fit["per unit of timid share"]["value"] == pytest.approx(-0.5)
    assert fit["per doubling of the size"]["value"] == pytest.approx(0.0, abs=1e-9)
    assert bench.main(["--policy", "scripted", "--sizes", "12", "--per-size", "2", "--villages", "1",
                       "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [w["label"] for w in out["worlds"]] == ["generated:12:5000", "generated:12:5001"]
    assert out["by_size"]["12"]["revenge_rate"]["worlds"] <= 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--per-size", "1"], "--per-size must be at least 2"),
    (["--sizes", "12,x"], "--sizes: expected comma-separated integers"),
    (["--policy", "nope.pt"], "nope.pt"),
    (["--untrained-draws", "3"], "--untrained-draws: it sets how many untrained networks --untrained plays"),
    (["--untrained", "--untrained-draws", "0"], "--untrained-draws: expected an integer >= 1, got 0"),
    (["--policy", "scripted", "--untrained"], "scripted has no network to re-initialise"),
])
def test_the_world_spread_rejects_bad_flags_in_one_line(bench_script, capsys, argv, message):
    bench = bench_script("world_spread")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--quiet", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and message in err[-1]


def test_the_probes_play_a_population_of_untrained_networks(bench_script):
    """--untrained-draws K: the probe plays `village eval --random-init-draws K`'s population, in the policy's world."""
    import argparse

    from npc_brains.evaluate import UntrainedPopulation

    bench = bench_script("world_spread")
    args = bench.parse(["--policy", "default", "--untrained", "--untrained-draws", "3", "--seed", "2"])
    policy, _ = bench.load(args)
    assert isinstance(policy, UntrainedPopulation) and len(policy.draws) == 3
    assert bench.probe_name(args) == "default (untrained, 3 draws)"
    label, scenario = "generated:12:5000", load_scenario("kill-parent")
    world = bench.play_world(policy, [scenario], label, argparse.Namespace(villages=2, seed=2), lambda: None)
    spec = EvalSpec([scenario], [(label, resolve_world(label))], villages=2, seed=2)
    from npc_brains.evaluate import random_init_policy

    ref = evaluate([("random_init", random_init_policy(load_policy("default", seed=2), seed=2, draws=3))], spec)
    assert world["stats"].result()["mourning_rate"] == ref["random_init"]["mourning_rate"]
    one = bench.parse(["--policy", "default", "--untrained"])
    assert not isinstance(bench.load(one)[0], UntrainedPopulation) and bench.probe_name(one) == "default (untrained)"


@pytest.mark.parametrize(("script", "count", "metric"), [
    ("mourning_gaps", lambda out: (out["groups"]["mourned"]["count"], out["eligible"]),
     lambda c: (c["mourn_hit"], c["mourn_eligible"])),
    ("flight_probe", lambda out: (out["chosen"], out["witnesses"]),
     lambda c: (c["fear_chosen_hit"], c["fear_eligible"])),
    ("revenge_probe", lambda out: (out["timid"]["hit"] + out["bold"]["hit"],
                                   sum(out["timid"].values()) + sum(out["bold"].values())),
     lambda c: (c["revenge_hit"], c["revenge_eligible"])),
])
def test_greedy_probes_count_what_village_eval_deterministic_counts(bench_script, capsys, script, count, metric):
    """--greedy: a probe plays the runs as `village eval --deterministic` does, and counts what its metric counts."""
    bench = bench_script(script)
    world, scenario = load_world("village-v1"), load_scenario("kill-parent")
    from npc_brains.evaluate import policy_slots, policy_tuning

    def counts(seed: int, deterministic: bool) -> dict:
        policy = load_policy("default", seed=seed)  # seeded afresh, as the probe loads it
        trace = run_scenario(policy, scenario, world, villages=3, seed=seed, slots=policy_slots(policy),
                             tuning=policy_tuning(policy), deterministic=deterministic)
        return summarize([trace])["counts"]

    # villages on which the two plays count differently, so that a probe that ignored --greedy would fail here
    seed = next((s for s in range(5, 16) if metric(counts(s, True)) != metric(counts(s, False))), None)
    assert seed is not None, "greedy and sampled play count alike on every seed tried"
    flags = ["--policy", "default", "--world", "village-v1", "--scenarios", "kill-parent", "--villages", "3",
             "--seed", str(seed), "--quiet", "--json"]
    assert bench.main([*flags, "--greedy"]) == 0
    greedy = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert count(greedy) == metric(counts(seed, True))
    assert bench.main(flags) == 0  # without the flag the same probe samples, as before
    assert count(json.loads(capsys.readouterr().out.strip().splitlines()[-1])) == metric(counts(seed, False))


def test_the_diversity_probe_measures_the_untrained_population_village_eval_compares_with(bench_script, capsys):
    """--untrained --untrained-draws K --greedy: the SND as played of `village eval --random-init-draws K
    --deterministic`'s random_init, and all of its differences are near ties."""
    from npc_brains.evaluate import random_init_policy

    bench = bench_script("diversity_probe")
    assert bench.main(["--policy", "default", "--world", "generated:12:5000", "--scenarios", "kill-parent",
                       "--villages", "2", "--seed", "3", "--greedy", "--untrained", "--untrained-draws", "3",
                       "--quiet", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    out = json.loads(lines[-1])
    assert lines[0].startswith("default (untrained, 3 draws) on generated:12:5000")
    label, scenario = "generated:12:5000", load_scenario("kill-parent")
    spec = EvalSpec([scenario], [(label, resolve_world(label))], villages=2, seed=3, deterministic=True)
    ref = evaluate([("random_init", random_init_policy(load_policy("default", seed=3), seed=3, draws=3))], spec)
    assert out["greedy_snd"] == pytest.approx(ref["random_init"]["diversity_played"])
    assert out["snd"] == pytest.approx(ref["random_init"]["diversity"])
    assert out["near_tie_share"] == pytest.approx(1.0)
