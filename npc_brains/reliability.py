"""Statistics of a seed table (bench/seed_table.py): Chan et al. 2020 stability, IQM, bootstrap intervals,
probability of improvement, steps to a threshold. Pure numpy; the formulas are in docs/training.md.

Stability of an algorithm from its runs' learning curves r_1..r_n (one curve per seed, on one grid of steps):
    per run, with R = max(r) - min(r) (a flat curve has no risk):
        DT = IQR(d) / (2 R)               dispersion across time, d_t = r_t - r_{t-1} (|d| <= R, so IQR <= 2R)
        SR = max(0, -CVaR_a(d)) / R       short-term risk: mean of the worst ceil(a (n-1)) step differences
        LR = CVaR_a(D) / R                long-term risk: mean of the largest ceil(a n) drawdowns
                                          D_t = max_{s <= t} r_s - r_t
    across runs, with R_all the range of every run's curve together:
        DR = mean over the grid of IQR across runs / R_all
    stability = 1 - (mean DT + mean SR + mean LR + DR) / 4, every term in [0, 1], so the score is in [0, 1].
IQR is numpy's linear-interpolation percentile 75 - 25; a = 0.05.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

CVAR_ALPHA = 0.05


def _iqr(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    q75, q25 = np.percentile(x, [75, 25], axis=axis)
    return q75 - q25


def cvar_low(x: np.ndarray, alpha: float = CVAR_ALPHA) -> float:
    """Mean of the lowest ceil(alpha * n) values (at least one)."""
    x = np.sort(np.asarray(x, np.float64))
    k = max(1, math.ceil(alpha * x.size))
    return float(x[:k].mean())


def cvar_high(x: np.ndarray, alpha: float = CVAR_ALPHA) -> float:
    """Mean of the highest ceil(alpha * n) values (at least one)."""
    return -cvar_low(-np.asarray(x, np.float64), alpha)


def run_risks(curve: Sequence[float], alpha: float = CVAR_ALPHA) -> dict[str, float]:
    """DT, SR and LR of one learning curve (each in [0, 1]; all 0 for a flat or one-point curve)."""
    r = np.asarray(curve, np.float64)
    span = float(r.max() - r.min()) if r.size else 0.0
    if r.size < 2 or span <= 0:
        return {"dt": 0.0, "sr": 0.0, "lr": 0.0}
    d = np.diff(r)
    drawdown = np.maximum.accumulate(r) - r
    return {"dt": float(min(1.0, _iqr(d) / (2 * span))),
            "sr": float(min(1.0, max(0.0, -cvar_low(d, alpha)) / span)),
            "lr": float(min(1.0, cvar_high(drawdown, alpha) / span))}


def across_runs(curves: np.ndarray) -> float:
    """DR of an (runs, points) array of curves on one grid, in [0, 1]."""
    c = np.asarray(curves, np.float64)
    span = float(c.max() - c.min()) if c.size else 0.0
    if c.shape[0] < 2 or span <= 0:
        return 0.0
    return float(min(1.0, _iqr(c, axis=0).mean() / span))


def stability_score(curves: np.ndarray, alpha: float = CVAR_ALPHA) -> dict[str, float]:
    """The algorithm's stability in [0, 1] and its four terms (see the module docstring)."""
    c = np.asarray(curves, np.float64)
    risks = [run_risks(row, alpha) for row in c]
    terms = {k: float(np.mean([r[k] for r in risks])) for k in ("dt", "sr", "lr")}
    terms["dr"] = across_runs(c)
    terms["stability"] = float(1.0 - (terms["dt"] + terms["sr"] + terms["lr"] + terms["dr"]) / 4)
    return terms


def iqm(x: Sequence[float]) -> float:
    """Interquartile mean (rliable's: the mean of the middle 50%, as scipy.stats.trim_mean(x, 0.25) cuts it)."""
    data = np.sort(np.asarray(x, np.float64).ravel())
    cut = int(0.25 * data.size)
    return float(data[cut:data.size - cut].mean())


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) + P(X = Y) / 2 over every pair of runs (rliable's, for one task)."""
    a, b = np.asarray(x, np.float64)[:, None], np.asarray(y, np.float64)[None, :]
    return float(((a > b) + 0.5 * (a == b)).mean())


def bootstrap_ci(x: Sequence[float], statistic: Callable[[np.ndarray], float], reps: int = 2000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of `statistic` over runs resampled with replacement (rliable's stratified
    bootstrap, which for one task is this)."""
    data = np.asarray(x)
    rng = np.random.default_rng(seed)
    stats = [statistic(data[rng.integers(0, len(data), len(data))]) for _ in range(reps)]
    lo, hi = np.percentile(stats, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def steps_to_threshold(steps: Sequence[float], curve: Sequence[float], threshold: float, smooth: int = 3) -> float:
    """First step at which the trailing mean of `smooth` curve points reaches `threshold` (inf if never)."""
    r = np.asarray(curve, np.float64)
    s = np.asarray(steps, np.float64)
    for i in range(r.size):
        if r[max(0, i - smooth + 1): i + 1].mean() >= threshold:
            return float(s[i])
    return math.inf


def rliable_metrics():
    """rliable.metrics when it imports (its `library` module needs `arch`, which may not), else None."""
    try:
        from rliable import metrics
    except Exception:  # noqa: BLE001 (an optional package that fails at import for reasons of its own)
        return None
    return metrics


__all__ = ["across_runs", "bootstrap_ci", "cvar_high", "cvar_low", "iqm", "probability_of_improvement",
           "rliable_metrics", "run_risks", "stability_score", "steps_to_threshold"]
