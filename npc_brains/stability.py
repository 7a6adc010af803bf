"""Stability monitor: per-epoch health metrics and the rollback trigger (numpy only).

An epoch is one stretch of training in which at least one episode finished; its return is the mean
per-NPC episode return of the episodes that finished in it. Definitions (docs/training.md):

- oscillation  = std(r) / max(|mean(r)|, floor) over the last `window` epoch returns r (healthy < 0.3);
  floor = 0.1 * |first epoch return| keeps the ratio meaningful when returns cross zero.
- cooperation  = (joint - sum_indiv) / |sum_indiv| (healthy > 0.15), joint and sum_indiv measured by the
  trainer's cooperation probe (each NPC's return when everyone plays the policy vs. when only it does).
- conflict     = ||sum_i g_i|| / sum_i ||g_i|| of per-agent policy gradients (healthy >= 0.25; 1 = aligned).
- dispersion   = inter-quartile range of the first differences of the return curve (Chan et al. 2020,
  "dispersion across time" on the detrended curve); defined for negative returns.
- drawdown     = running peak - current value of the (3-epoch smoothed) return curve (Chan et al.'s
  drawdown, in return units, >= 0); `relative_drawdown` divides it by the progress made so far
  (at least 0.1 * |first epoch return|). A drawdown counts as bad when relative_drawdown > 0.5, the
  drawdown exceeds three standard deviations of its own sampling noise (from the epochs' standard errors),
  and the curve had made progress (peak - first value) larger than that noise: an early dip below the
  starting level is not a collapse, and there is nothing better to roll back to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SMOOTH = 3  # epochs in the moving average used for drawdown


def oscillation(returns: np.ndarray | list[float], floor: float = 1e-8) -> float:
    r = np.asarray(returns, np.float64)
    if r.size < 2:
        return float("nan")
    return float(r.std() / max(abs(r.mean()), floor))


def cooperation_efficiency(joint: float, individual_sum: float) -> float:
    if individual_sum == 0:
        return float("nan")
    return float((joint - individual_sum) / abs(individual_sum))


def dispersion(curve: np.ndarray | list[float]) -> float:
    """IQR of the first differences of a return curve (detrended dispersion across time)."""
    c = np.asarray(curve, np.float64)
    if c.size < 3:
        return float("nan")
    d = np.diff(c)
    q75, q25 = np.percentile(d, [75, 25])
    return float(q75 - q25)


def drawdown(curve: np.ndarray | list[float]) -> float:
    """Current drawdown: running peak minus the last value (0 at a new peak)."""
    c = np.asarray(curve, np.float64)
    if c.size == 0:
        return float("nan")
    return float(c.max() - c[-1])


def max_drawdown(curve: np.ndarray | list[float]) -> float:
    """Largest peak-to-trough fall of the curve."""
    c = np.asarray(curve, np.float64)
    if c.size == 0:
        return float("nan")
    return float((np.maximum.accumulate(c) - c).max())


def relative_drawdown(curve: np.ndarray | list[float], floor: float) -> float:
    """drawdown / max(peak - first value, floor): the fraction of the progress made so far that was lost."""
    c = np.asarray(curve, np.float64)
    if c.size == 0:
        return float("nan")
    return float(drawdown(c) / max(c.max() - c[0], floor))


def smoothed(curve: np.ndarray | list[float], k: int = SMOOTH) -> np.ndarray:
    """Trailing moving average (the first values average what exists so far)."""
    c = np.asarray(curve, np.float64)
    if c.size == 0:
        return c
    csum = np.cumsum(np.insert(c, 0, 0.0))
    idx = np.arange(1, c.size + 1)
    lo = np.maximum(idx - k, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


@dataclass
class Thresholds:
    oscillation_max: float = 0.3
    cooperation_min: float = 0.15
    conflict_min: float = 0.25
    drawdown_max: float = 0.5
    window: int = 5
    warmup: int = 3
    bad_epochs: int = 3
    rollback_on: tuple[str, ...] = ("oscillation", "drawdown")


@dataclass
class EpochReport:
    epoch: int
    metrics: dict[str, float]
    violations: list[str]  # every criterion out of its healthy range (logged)
    bad: bool  # a criterion in `rollback_on` was violated
    good: bool  # judged, and nothing in `rollback_on` violated: a rollback target
    rollback: bool  # `bad_epochs` bad epochs in a row


@dataclass
class StabilityMonitor:
    """Feed one `end_epoch(...)` per epoch; it says when to roll back."""

    thresholds: Thresholds = field(default_factory=Thresholds)
    curve: list[float] = field(default_factory=list)
    stderr: list[float] = field(default_factory=list)
    window_start: int = 0  # index in `curve` where the current segment (since the last rollback) starts
    bad_streak: int = 0
    epoch: int = 0
    rollbacks: int = 0

    def end_epoch(self, epoch_return: float, conflict: float | None = None,
                  cooperation: float | None = None, stderr: float = 0.0) -> EpochReport:
        """`stderr`: standard error of the epoch return (sampling noise); a drawdown smaller than three
        noise standard deviations of the smoothed curve is not counted as one."""
        th = self.thresholds
        self.curve.append(float(epoch_return))
        self.stderr.append(float(stderr))
        self.epoch += 1
        first = self.curve[0]
        floor = max(0.1 * abs(first), 1e-6)
        segment = self.curve[self.window_start:]  # history restarts after a rollback
        recent = segment[-th.window:]
        smooth = smoothed(segment)
        m: dict[str, float] = {
            "oscillation": oscillation(recent, floor) if len(recent) >= th.window else float("nan"),
            "dispersion": dispersion(segment[-max(th.window, 3):]),
            "drawdown": drawdown(smooth),
            "max_drawdown": max_drawdown(smooth),
            "relative_drawdown": relative_drawdown(smooth, floor),
        }
        if conflict is not None:
            m["conflict"] = float(conflict)
        if cooperation is not None:
            m["cooperation"] = float(cooperation)
        violations = []
        if m["oscillation"] > th.oscillation_max:
            violations.append("oscillation")
        recent_se = np.asarray(self.stderr[self.window_start:][-SMOOTH:], np.float64)
        noise = float(np.sqrt(2.0 * (recent_se ** 2).sum()) / max(recent_se.size, 1))  # of peak - current
        m["drawdown_noise"] = noise
        # a fall only counts when there was real progress to lose (a dip below the random-policy level at
        # the start of training is not a collapse) and when it is larger than its own sampling noise
        progress = float(smooth.max() - smooth[0]) if smooth.size else 0.0
        if (len(segment) >= SMOOTH and m["relative_drawdown"] > th.drawdown_max
                and m["drawdown"] > 3.0 * noise and progress > 3.0 * noise):
            violations.append("drawdown")
        if conflict is not None and conflict < th.conflict_min:
            violations.append("conflict")
        if cooperation is not None and cooperation < th.cooperation_min:
            violations.append("cooperation")
        judged = len(segment) > th.warmup
        bad = judged and any(v in th.rollback_on for v in violations)
        good = judged and not bad
        self.bad_streak = self.bad_streak + 1 if bad else 0
        rollback = self.bad_streak >= th.bad_epochs
        if rollback:
            self.bad_streak = 0
            self.rollbacks += 1
            self.window_start = len(self.curve)
        return EpochReport(self.epoch, m, violations, bad, good, rollback)

    def state_dict(self) -> dict:
        return {"curve": list(self.curve), "stderr": list(self.stderr), "window_start": self.window_start,
                "bad_streak": self.bad_streak,
                "epoch": self.epoch, "rollbacks": self.rollbacks}

    def load_state_dict(self, d: dict) -> None:
        self.curve = [float(x) for x in d["curve"]]
        self.stderr = [float(x) for x in d.get("stderr", [0.0] * len(self.curve))]
        self.window_start = int(d["window_start"])
        self.bad_streak = int(d["bad_streak"])
        self.epoch = int(d["epoch"])
        self.rollbacks = int(d["rollbacks"])
