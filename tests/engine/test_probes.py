"""The policy probes in bench/ count exactly what the emergence metrics count, and reject bad flags in one line."""

import pytest

from engine.metrics import summarize
from engine.scenarios import load_scenario, run_scenario
from npc_brains.baselines import ScriptedPolicy
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
    # every flight from a living killer was possible; the bound can be above the flights, never below
    assert out["fled_living_killer"] <= out["could_get_away"] <= out["witnesses"]
    assert sum(out["first_activities"].values()) <= out["witnesses"]


@pytest.mark.parametrize("script, flags, named", [
    ("mourning_gaps", ["--world", "no-such-world"], "no-such-world"),
    ("flight_probe", ["--scenarios", "no-such-scenario"], "no-such-scenario"),
    ("flight_probe", ["--villages", "0"], "--villages"),
])
def test_bad_flags_are_one_line_errors(bench_script, capsys, script, flags, named):
    with pytest.raises(SystemExit) as exit_info:
        bench_script(script).main(flags)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
