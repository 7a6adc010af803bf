"""bench/mourning_gaps.py groups exactly the close relations `mourning_rate` counts."""

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
    assert sum(out["ticks"].values()) == out["eligible"]
    short = sum(c for k, c in out["ticks"].items() if 0 < k < 6)
    assert groups["short spell"]["count"] == short
    for g in groups.values():
        if g["count"]:
            assert 0.0 <= g["p_mourn"] <= 1.0 and 0.0 <= g["free_share"] <= 1.0 and g["learn_delay"] >= 0


def test_bad_flags_are_one_line_errors(bench_script, capsys):
    bench = bench_script("mourning_gaps")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--world", "no-such-world"])
    assert exit_info.value.code == 2
    assert "no-such-world" in capsys.readouterr().err
