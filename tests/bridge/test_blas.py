"""bridge/blas.py: numpy's OpenBLAS thread count, set while the server serves and restored after."""

from __future__ import annotations

import time

import pytest
from bridge_helpers import make_server

from bridge.blas import get_blas_threads, set_blas_threads

pytestmark = pytest.mark.skipif(get_blas_threads() is None, reason="numpy's BLAS is not a loaded OpenBLAS")


def test_set_returns_the_previous_count_and_get_reads_it():
    before = get_blas_threads()
    try:
        assert set_blas_threads(1) == before
        assert get_blas_threads() == 1
        assert set_blas_threads(2) == 1
        assert get_blas_threads() == 2
    finally:
        set_blas_threads(before)
    with pytest.raises(ValueError):
        set_blas_threads(0)


def test_server_serves_with_one_blas_thread_and_restores_the_count():
    before = get_blas_threads()
    set_blas_threads(2)
    try:
        srv = make_server()
        srv.run_in_thread()
        deadline = time.monotonic() + 5
        while get_blas_threads() != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert get_blas_threads() == 1
        srv.stop()
        assert get_blas_threads() == 2
        srv = make_server(blas_threads=None)  # leave it alone
        srv.run_in_thread()
        time.sleep(0.1)
        assert get_blas_threads() == 2
        srv.stop()
    finally:
        set_blas_threads(before)
