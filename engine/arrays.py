"""Fast reductions over the short entity axis of (B, N, E) arrays.

Numpy reduces a short contiguous last axis slowly (one inner loop per row); for a village's handful of
entities an elementwise operation across the columns is ~10x faster. Long axes use numpy's reduction.
"""

from __future__ import annotations

import numpy as np

_SHORT_AXIS = 64


def max_over_entities(a: np.ndarray) -> np.ndarray:
    """a.max(-1)."""
    if a.shape[-1] > _SHORT_AXIS:
        return a.max(-1)
    out = a[..., 0].copy()
    for e in range(1, a.shape[-1]):
        np.maximum(out, a[..., e], out=out)
    return out


def sum_over_entities(a: np.ndarray) -> np.ndarray:
    """a.sum(-1)."""
    if a.shape[-1] > _SHORT_AXIS:
        return a.sum(-1)
    out = a[..., 0].copy()
    for e in range(1, a.shape[-1]):
        out += a[..., e]
    return out


def any_over_entities(a: np.ndarray) -> np.ndarray:
    """a.any(-1)."""
    if a.shape[-1] > _SHORT_AXIS:
        return a.any(-1)
    out = a[..., 0].copy()
    for e in range(1, a.shape[-1]):
        out |= a[..., e]
    return out
