"""The fixed-timestep clock: wall time in, a whole number of simulation ticks out.

The simulation advances only in fixed ticks from an accumulator, so its speed never depends on the
frame rate; a slow frame is capped (the sandbox slows down instead of spiralling), and rendering
interpolates between the last two ticks with `alpha`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SPEEDS: tuple[int, ...] = (0, 1, 4, 16)  # 0 = paused
TICKS_PER_SECOND = 2.0  # at 1x: a game day (144 ticks) lasts 72 s
MAX_FRAME_SECONDS = 0.25  # longer frames (a hiccup, a breakpoint) count as this long
MAX_TICKS_PER_FRAME = 8


@dataclass
class FixedStepClock:
    """`advance(dt)` -> ticks to run now. Speed 0 pauses; `request_step()` queues one tick while paused."""

    speed: int = 1
    ticks_per_second: float = TICKS_PER_SECOND
    max_ticks_per_frame: int = MAX_TICKS_PER_FRAME
    accumulator: float = 0.0
    _single_steps: int = field(default=0, repr=False)
    dropped_ticks: int = 0  # ticks lost to the per-frame cap (the sandbox ran slower than asked)

    def __post_init__(self) -> None:
        self.set_speed(self.speed)

    @property
    def tick_seconds(self) -> float:
        return 1.0 / self.ticks_per_second

    @property
    def paused(self) -> bool:
        return self.speed == 0

    def set_speed(self, speed: int) -> None:
        if speed not in SPEEDS:
            raise ValueError(f"speed must be one of {SPEEDS}, got {speed!r}")
        self.speed = speed
        if speed == 0:
            self.accumulator = 0.0

    def request_step(self) -> None:
        """One tick at the next `advance`, then stay paused."""
        self.set_speed(0)
        self._single_steps += 1

    def advance(self, dt: float) -> int:
        """Add `dt` wall seconds at the current speed and return how many whole ticks are due."""
        if self._single_steps:
            n, self._single_steps = self._single_steps, 0
            return min(n, self.max_ticks_per_frame)
        if self.speed == 0:
            return 0
        self.accumulator += min(max(dt, 0.0), MAX_FRAME_SECONDS) * self.speed
        due = int(self.accumulator // self.tick_seconds)
        if due > self.max_ticks_per_frame:
            self.dropped_ticks += due - self.max_ticks_per_frame
            due = self.max_ticks_per_frame
            self.accumulator = 0.0
        else:
            self.accumulator -= due * self.tick_seconds
        return due

    @property
    def alpha(self) -> float:
        """How far the wall clock is between the last tick and the next (for drawing), in [0, 1)."""
        if self.speed == 0:
            return 1.0
        return min(self.accumulator / self.tick_seconds, 1.0)
