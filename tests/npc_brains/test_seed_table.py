"""The seed table's statistics (npc_brains.reliability) against hand-computed cases, and a smoke run of
bench/seed_table.py."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from npc_brains import reliability as rel

ROOT = Path(__file__).resolve().parents[2]


def test_stability_score_by_hand():
    bumpy = [0.0, 2.0, 1.0, 3.0]
    steady = [0.0, 1.0, 2.0, 3.0]
    # bumpy: range 3; d = [2, -1, 2]: IQR = 2 - 0.5 = 1.5 -> DT = 1.5 / 6; worst difference -1 -> SR = 1 / 3;
    # drawdowns [0, 0, 1, 0]: the largest 1 -> LR = 1 / 3
    assert rel.run_risks(bumpy) == pytest.approx({"dt": 0.25, "sr": 1 / 3, "lr": 1 / 3})
    assert rel.run_risks(steady) == pytest.approx({"dt": 0.0, "sr": 0.0, "lr": 0.0})
    # across runs: IQR of two values is half their gap: [0, 0.5, 0.5, 0], mean 0.25, over the range 3
    assert rel.across_runs(np.array([bumpy, steady])) == pytest.approx(0.25 / 3)
    score = rel.stability_score(np.array([bumpy, steady]))
    expected = 1 - (0.125 + 1 / 6 + 1 / 6 + 1 / 12) / 4
    assert score["stability"] == pytest.approx(expected)  # 0.8646
    assert 0 <= score["stability"] <= 1


def test_stability_extremes_stay_in_the_unit_interval():
    assert rel.stability_score(np.array([[1.0, 1.0, 1.0]] * 3))["stability"] == 1.0
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = rel.stability_score(rng.normal(size=(5, 12)) * 10 - 50)  # negative returns stay defined
        assert 0 <= s["stability"] <= 1
    saw = np.array([[0.0, 10.0] * 6, [10.0, 0.0] * 6])
    assert rel.stability_score(saw)["stability"] < 0.5


def test_cvar_takes_the_tail():
    x = np.arange(40.0)
    assert rel.cvar_low(x, 0.05) == pytest.approx(0.5)  # the lowest 2 of 40
    assert rel.cvar_high(x, 0.05) == pytest.approx(38.5)


def test_iqm_probability_of_improvement_and_bootstrap():
    x = [0.1, 0.5, 0.7, 0.9, 0.2]
    assert rel.iqm([1.0, 2.0, 3.0, 4.0]) == pytest.approx(2.5)
    assert rel.probability_of_improvement([1.0, 2.0], [0.0, 2.0]) == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    lo, hi = rel.bootstrap_ci(x, rel.iqm, reps=500)
    assert lo <= rel.iqm(x) <= hi
    metrics = rel.rliable_metrics()
    if metrics is not None:  # the same definitions as rliable's
        y = [0.3, 0.4, 0.6, 0.8, 0.1]
        assert rel.iqm(x) == pytest.approx(metrics.aggregate_iqm(np.array(x)))
        assert rel.probability_of_improvement(x, y) == pytest.approx(
            metrics.probability_of_improvement(np.array(x)[:, None], np.array(y)[:, None]))


def test_steps_to_threshold_uses_a_trailing_mean():
    steps = [10, 20, 30, 40]
    assert rel.steps_to_threshold(steps, [0, 3, 0, 3], 2.0, smooth=1) == 20
    assert rel.steps_to_threshold(steps, [0, 3, 0, 3], 2.0, smooth=2) == math.inf
    assert rel.steps_to_threshold(steps, [0, 3, 3, 3], 2.0, smooth=2) == 30


@pytest.mark.slow
def test_seed_table_quick_smoke(tmp_path, capsys, monkeypatch):
    # the spawned workers import the script's functions by module name: they find it on the parent's sys.path
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("seed_table", ROOT / "bench" / "seed_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed_table"] = module
    spec.loader.exec_module(module)
    code = module.main(["--quick", "--algos", "maddpg,drmas", "--steps", "384", "--eval-episodes", "4",
                        "--jobs", "1", "--out", str(tmp_path)])
    assert code == 0
    table = (tmp_path / "table.md").read_text()
    assert "| MADDPG |" in table and "| Dr. MAS |" in table and "unsourced" in table
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert module.main(["--algos", "vdn"]) == 2
