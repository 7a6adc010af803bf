"""Fixtures of the bridge tests: an in-process server on an ephemeral port and a client of it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bridge_helpers, for the test modules too
from bridge_helpers import WORLD, make_server  # noqa: E402

from bridge.client import BridgeClient  # noqa: E402
from bridge.server import BridgeServer  # noqa: E402


@pytest.fixture(scope="session")
def world_text() -> str:
    return WORLD.read_text(encoding="utf-8")


@pytest.fixture
def server() -> Iterator[BridgeServer]:
    srv = make_server()
    srv.run_in_thread()
    yield srv
    srv.stop()


@pytest.fixture
def client(server: BridgeServer) -> Iterator[BridgeClient]:
    with BridgeClient(server.endpoint, timeout=5.0, retries=1) as c:
        yield c
