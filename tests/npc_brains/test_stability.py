"""Stability metrics and the rollback trigger on small hand-made return curves."""

import math

import pytest

from npc_brains import stability as st


def test_oscillation_and_negative_returns():
    assert st.oscillation([1.0, 3.0]) == pytest.approx(0.5)
    assert st.oscillation([-10.0, -12.0]) == pytest.approx(1 / 11)
    assert st.oscillation([1.0, -1.0], floor=0.5) == pytest.approx(2.0)


def test_cooperation_efficiency():
    assert st.cooperation_efficiency(12.0, 10.0) == pytest.approx(0.2)
    # negative returns: joint -8 is better than the sum of individuals -10
    assert st.cooperation_efficiency(-8.0, -10.0) == pytest.approx(0.2)
    assert math.isnan(st.cooperation_efficiency(1.0, 0.0))


def test_dispersion_and_drawdown_by_hand():
    curve = [-10.0, -8.0, -9.0, -5.0, -7.0]
    # differences 2, -1, 4, -2 -> quartiles (numpy linear) 75%: 2.5, 25%: -1.25
    assert st.dispersion(curve) == pytest.approx(3.75)
    assert st.drawdown(curve) == pytest.approx(2.0)  # peak -5, now -7
    assert st.max_drawdown([-1.0, -4.0, -2.0, -6.0, 0.0]) == pytest.approx(5.0)
    # progress from -10 to the peak -5 is 5; 2 of it is lost
    assert st.relative_drawdown(curve, floor=1.0) == pytest.approx(0.4)


def test_smoothed_is_trailing_mean():
    assert st.smoothed([3.0, 6.0, 9.0, 12.0], 3).tolist() == pytest.approx([3.0, 4.5, 6.0, 9.0])


def _monitor(**kw):
    return st.StabilityMonitor(st.Thresholds(window=3, warmup=2, bad_epochs=3, **kw))


def test_rollback_after_three_bad_epochs_in_a_row():
    mon = _monitor()
    reports = [mon.end_epoch(r) for r in [-10.0, -10.2, -9.9, -10.1]]
    assert not any(r.bad for r in reports) and reports[-1].good
    # wild oscillation around -10: std/|mean| > 0.3
    bad = [mon.end_epoch(r) for r in [-2.0, -18.0, -2.0]]
    assert [r.bad for r in bad] == [True, True, True]
    assert [r.rollback for r in bad] == [False, False, True]
    assert mon.rollbacks == 1 and mon.bad_streak == 0


def test_a_good_epoch_resets_the_streak():
    mon = _monitor(rollback_on=("conflict",))
    for r in [-10.0, -10.0, -10.0]:
        mon.end_epoch(r, conflict=0.9)
    a = mon.end_epoch(-10.0, conflict=0.1)
    b = mon.end_epoch(-10.0, conflict=0.1)
    c = mon.end_epoch(-10.0, conflict=0.9)
    d = mon.end_epoch(-10.0, conflict=0.1)
    assert (a.bad, b.bad, c.bad, d.bad) == (True, True, False, True)
    assert not any(x.rollback for x in (a, b, c, d))


def test_warmup_epochs_are_not_judged():
    mon = _monitor(rollback_on=("conflict",))
    reports = [mon.end_epoch(-1.0, conflict=0.0) for _ in range(2)]
    assert not any(r.bad or r.good for r in reports)
    assert "conflict" in reports[0].violations


def test_drawdown_within_noise_is_not_bad():
    mon = _monitor(rollback_on=("drawdown",))
    for r in [-20.0, -15.0, -10.0]:
        mon.end_epoch(r, stderr=0.1)
    noisy = mon.end_epoch(-16.0, stderr=10.0)  # a big fall, but inside the sampling noise
    assert "drawdown" not in noisy.violations
    mon2 = _monitor(rollback_on=("drawdown",))
    for r in [-20.0, -15.0, -10.0]:
        mon2.end_epoch(r, stderr=0.1)
    real = mon2.end_epoch(-30.0, stderr=0.1)
    assert "drawdown" in real.violations and real.bad


def test_an_early_dip_without_progress_is_not_a_drawdown():
    mon = _monitor(rollback_on=("drawdown",))
    reports = [mon.end_epoch(r, stderr=0.2) for r in [-25.0, -28.0, -30.0, -31.0, -31.0, -30.0]]
    assert not any("drawdown" in r.violations for r in reports)
    assert reports[-1].metrics["drawdown"] > 3.0


def test_cooperation_criterion():
    mon = _monitor(rollback_on=("cooperation",))
    for _ in range(3):
        mon.end_epoch(-1.0, cooperation=0.5)
    assert mon.end_epoch(-1.0, cooperation=0.05).bad


def test_state_dict_round_trip():
    mon = _monitor()
    for r in [-3.0, -2.0, -1.0]:
        mon.end_epoch(r, stderr=0.5)
    other = _monitor()
    other.load_state_dict(mon.state_dict())
    assert other.state_dict() == mon.state_dict()
