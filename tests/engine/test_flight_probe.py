"""bench/flight_probe.py counts exactly the timid witnesses and the flights the fear metrics count."""

import pytest

from engine.metrics import summarize
from engine.scenarios import load_scenario, run_scenario
from npc_brains.baselines import ScriptedPolicy
from worlds import load_world


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
    assert sum(out["first_activities"].values()) <= out["witnesses"]


def test_bad_flags_are_one_line_errors(bench_script, capsys):
    bench = bench_script("flight_probe")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--scenarios", "no-such-scenario"])
    assert exit_info.value.code == 2
    assert "no-such-scenario" in capsys.readouterr().err
