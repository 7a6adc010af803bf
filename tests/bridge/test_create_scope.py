"""The retried-create cache is per client: two clients that send the same create (same id, same body: ids
numbered from 1, a restarted game) get a session each, while one client re-sending its own create gets the
session it created, on both doors and across the Python clients' retries."""

from __future__ import annotations

import time

import pytest
import zmq
from bridge_helpers import make_server

from bridge import protocol as P
from bridge.client import BridgeClient

CREATE_ID = 1  # what a client that numbers its requests from 1 sends first


def _create_body(world_text: str) -> bytes:
    return P.pack(P.request("session.create", CREATE_ID, world=world_text))


def _req_socket(endpoint: str, **options: int | bytes) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    for name, value in options.items():
        sock.setsockopt(getattr(zmq, name), value)
    sock.connect(endpoint)
    return sock


def _session_of(sock: zmq.Socket, body: bytes) -> str:
    sock.send(body)
    reply = P.unpack(sock.recv())
    assert reply["ok"], reply
    return reply["session"]


def test_two_zeromq_clients_with_the_same_first_create_get_two_sessions(server, world_text):
    body = _create_body(world_text)
    a, b = _req_socket(server.endpoint), _req_socket(server.endpoint)
    try:
        first_a = _session_of(a, body)
        first_b = _session_of(b, body)
        assert first_a != first_b  # not the other client's session (and its state)
        assert _session_of(a, body) == first_a  # a's retry: its own session again
        assert _session_of(b, body) == first_b
    finally:
        a.close(0)
        b.close(0)
    assert len(server.store) == 2


def slow_first_create(server, world_text) -> list:
    """After one warm-up create (the first of a process compiles things), the store's next create takes 1 s;
    returns the list of the creates the store is asked for from then on."""
    store, calls = server.store, []
    create = store.create
    with BridgeClient(server.endpoint, timeout=10.0) as warm:
        warm.session_create(world=world_text)

    def slow_create(fields):
        calls.append(fields)
        if len(calls) == 1:
            time.sleep(1.0)
        return create(fields)

    store.create = slow_create
    return calls


def test_the_python_client_retries_a_slow_create_into_one_session(server, world_text):
    """The create outlasts the client's timeout: the client re-sends it (same socket, same routing id); the
    late reply to the first attempt is dropped, the retries are answered from the cache, and the next
    request gets its own reply."""
    store, calls = server.store, slow_first_create(server, world_text)
    with BridgeClient(server.endpoint, timeout=0.3, retries=20) as c:
        sid = c.session_create(world=world_text)["session"]
        assert c.reconnects >= 2  # at least two attempts went unanswered in time
        assert len(calls) == 1 and len(store) == 2 and sid in store.sessions
        assert c.session_state(sid, npc="Alda")["npcs"][0]["alive"] is True  # its reply, not a stale create
        assert isinstance(c.ping(), float)
    with BridgeClient(server.endpoint, timeout=5.0) as d:  # another client's create is never served from c's
        assert d.session_create(world=world_text)["session"] != sid


def test_the_asyncio_client_retries_a_slow_create_into_one_session(server, world_text):
    import asyncio

    from bridge.aio_client import AsyncBridgeClient

    store, calls = server.store, slow_first_create(server, world_text)

    async def main() -> None:
        async with AsyncBridgeClient(server.endpoint, timeout=0.3, retries=20) as c:
            sid = (await c.session_create(world=world_text))["session"]
            assert c.reconnects >= 2
            assert len(calls) == 1 and len(store) == 2 and sid in store.sessions
            assert (await c.session_state(sid, npc="Alda"))["npcs"][0]["alive"] is True

    asyncio.run(main())


def _ws_rpc(ws, body: bytes) -> dict:
    ws.send(body)
    return P.unpack(ws.recv(timeout=10))


def test_two_websocket_connections_with_the_same_first_create_get_two_sessions(world_text):
    pytest.importorskip("websockets", reason="the WebSocket door needs the websockets package ([ws] extra)")
    from websockets.sync.client import connect

    srv = make_server(ws_bind="127.0.0.1:0")
    srv.run_in_thread()
    body = _create_body(world_text)
    try:
        with connect(srv.ws_endpoint) as a, connect(srv.ws_endpoint) as b:
            first_a = _ws_rpc(a, body)["session"]
            first_b = _ws_rpc(b, body)["session"]
            assert first_a != first_b
            assert _ws_rpc(a, body)["session"] == first_a  # a retry on the same connection
            assert _ws_rpc(b, body)["session"] == first_b
        with connect(srv.ws_endpoint) as c:  # a new connection (a restarted game) starts afresh
            assert _ws_rpc(c, body)["session"] not in (first_a, first_b)
        z = _req_socket(srv.endpoint)  # nor does the ZeroMQ door share the WebSocket clients' creates
        try:
            assert _session_of(z, body) not in (first_a, first_b)
        finally:
            z.close(0)
        assert len(srv.store) == 4
    finally:
        srv.stop()
