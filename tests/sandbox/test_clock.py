"""The fixed-timestep clock: simulation speed does not depend on the frame rate."""

from __future__ import annotations

import pytest

from sandbox.clock import MAX_TICKS_PER_FRAME, FixedStepClock


def run_for(clock: FixedStepClock, seconds: float, fps: float) -> int:
    frames = round(seconds * fps)
    return sum(clock.advance(1.0 / fps) for _ in range(frames))


@pytest.mark.parametrize("speed", [1, 4, 16])
def test_ticks_per_second_do_not_depend_on_frame_rate(speed):
    counts = {fps: run_for(FixedStepClock(speed=speed), 10.0, fps) for fps in (24, 60, 144)}
    expected = 10.0 * speed * FixedStepClock().ticks_per_second
    for fps, count in counts.items():
        assert abs(count - expected) <= 1, (fps, count, expected)


def test_paused_runs_nothing_and_single_step_runs_one():
    clock = FixedStepClock(speed=0)
    assert run_for(clock, 5.0, 60) == 0
    clock.request_step()
    assert clock.advance(0.016) == 1
    assert clock.advance(0.016) == 0
    assert clock.paused


def test_long_frame_is_capped():
    clock = FixedStepClock(speed=16)
    assert clock.advance(30.0) <= MAX_TICKS_PER_FRAME
    assert 0.0 <= clock.alpha < 1.0


def test_alpha_is_the_fraction_to_the_next_tick():
    clock = FixedStepClock(speed=1)
    clock.advance(clock.tick_seconds * 0.5)
    assert clock.alpha == pytest.approx(0.5)


def test_bad_speed_is_refused():
    with pytest.raises(ValueError, match="speed"):
        FixedStepClock(speed=3)
