"""The size of numpy's BLAS (OpenBLAS) thread pool in this process, without extra dependencies.

The bridge runs every policy forward from its one server thread, on small batches. OpenBLAS splits a
matrix product of more than a few hundred thousand multiply-adds (act(16) of the default policy already)
over its worker threads, and on a small or shared machine that costs more than it gives: the server
waits until a worker is scheduled, and an idle worker spins for a while after each product, taking a CPU
that the ZeroMQ I/O threads, the clients and the game need. `set_blas_threads(1)` keeps the forward on
the calling thread. Linux only (it finds the loaded library in /proc/self/maps); elsewhere, or with
another BLAS, it does nothing and says so by returning None.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np  # noqa: F401 - loads numpy's BLAS, the library this module looks for

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")


def _openblas() -> ctypes.CDLL | None:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted({line.split(None, 5)[-1] for line in maps.splitlines()
                    if "openblas" in line.lower() and line.split(None, 5)[-1].startswith("/")})
    for path in paths:
        try:
            return ctypes.CDLL(path)  # already loaded: the same handle
        except OSError:
            continue
    return None


def _function(lib: ctypes.CDLL, name: str):
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            fn = getattr(lib, f"{prefix}_{name}{suffix}", None)
            if fn is not None:
                return fn
    return None


def get_blas_threads() -> int | None:
    """OpenBLAS's thread count in this process, or None when numpy's BLAS is not a loaded OpenBLAS."""
    lib = _openblas()
    fn = _function(lib, "get_num_threads") if lib is not None else None
    return int(fn()) if fn is not None else None


def set_blas_threads(n: int) -> int | None:
    """Set OpenBLAS's thread count (n >= 1); returns the previous count, or None (nothing was changed)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    lib = _openblas()
    if lib is None:
        return None
    get, set_ = _function(lib, "get_num_threads"), _function(lib, "set_num_threads")
    if get is None or set_ is None:
        return None
    previous = int(get())
    if previous != n:
        set_(ctypes.c_int(n))
    return previous
