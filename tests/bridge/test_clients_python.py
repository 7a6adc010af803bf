"""The Python clients: retries, the asyncio client, batching across clients, reload under load."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import zmq
from bridge_helpers import make_server

from bridge import protocol as P
from bridge.aio_client import AsyncBridgeClient
from bridge.client import BridgeClient, BridgeError, BridgeTimeout


def test_sync_client_times_out_after_bounded_retries():
    ctx = zmq.Context.instance()
    silent = ctx.socket(zmq.ROUTER)  # accepts connections, never answers
    silent.setsockopt(zmq.LINGER, 0)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    try:
        with BridgeClient(f"tcp://127.0.0.1:{port}", timeout=0.2, retries=2) as c:
            with pytest.raises(BridgeTimeout) as err:
                c.ping()
            assert err.value.code == "timeout" and "3 attempts" in err.value.message
            assert c.reconnects == 3
        received = 0
        while silent.poll(0):
            silent.recv_multipart()
            received += 1
        assert received == 3  # the same request, sent once per attempt
    finally:
        silent.close(0)


def test_retried_step_is_applied_once(client, world_text):
    """A repeated request (same id, same body) is answered from the replay cache, not stepped again."""
    sid = client.session_create(world=world_text)["session"]
    body = P.pack(P.request("session.step", "retry-1", session=sid))
    first = client.send_raw(body, "retry-1")
    again = client.send_raw(body, "retry-1")
    assert first == again and first["tick"] == 1
    assert client.session_step(sid)["tick"] == 2


def test_retried_event_is_queued_once(client, world_text):
    """A repeated event (same id, same body) gets its first reply again and is not queued a second time."""
    sid = client.session_create(world=world_text)["session"]
    body = P.pack(P.request("session.event", "retry-e", session=sid, type="death", actor="player", target="Alda"))
    first = client.send_raw(body, "retry-e")
    again = client.send_raw(body, "retry-e")
    assert first == again and first["queued"] == 1
    assert client.session_event(sid, "death", actor="player", target="Bren")["queued"] == 2


def test_asyncio_client_runs_many_requests_at_once(server, world_text):
    async def main() -> None:
        async with AsyncBridgeClient(server.endpoint, timeout=5.0) as c:
            info = await c.hello()
            obs = np.zeros((8, info["obs_dim"]), np.float32)
            results = await asyncio.gather(*(c.act(obs) for _ in range(20)), c.ping())
            assert all(a.shape == (8,) for a, _ in results[:-1])
            sid = (await c.session_create(world=world_text))["session"]
            await c.session_event(sid, "death", actor="player", target="Alda")
            step = await c.session_step(sid)
            assert step["events"][0]["type"] == "death"
            assert (await c.session_state(sid, npc="Alda"))["npcs"][0]["alive"] is False
            assert (await c.stats())["requests"]["act"] == 20
            assert (await c.reload("random"))["policy"] == "random"
            assert (await c.session_close(sid))["closed"] is True
            with pytest.raises(BridgeError) as err:
                await c.request("session.state", session=sid)
            assert err.value.code == "not_found"

    asyncio.run(main())


def test_asyncio_client_times_out():
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        silent = ctx.socket(zmq.ROUTER)
        port = silent.bind_to_random_port("tcp://127.0.0.1")
        try:
            async with AsyncBridgeClient(f"tcp://127.0.0.1:{port}", timeout=0.2, retries=1) as c:
                with pytest.raises(BridgeTimeout):
                    await c.ping()
                assert c.reconnects == 2
        finally:
            silent.close(0)
            ctx.term()

    import zmq.asyncio

    asyncio.run(main())


def test_requests_from_several_clients_share_a_forward(server):
    """Concurrent clients are batched: fewer forwards than requests, and every answer is right."""
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            with BridgeClient(server.endpoint, timeout=10.0) as c:
                barrier.wait()
                for _ in range(30):
                    mask = rng.random((4, server.n_actions)) < 0.5
                    mask[:, 0] = True
                    actions, _ = c.act(rng.random((4, server.obs_dim), dtype=np.float32), mask)
                    assert mask[np.arange(4), actions].all()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]
    stats = server.service._op_stats(None)
    assert stats["requests"]["act"] == 180
    assert stats["batches"]["count"] <= 180 and stats["batches"]["max_rows"] >= 4


def test_reload_under_load_fails_no_request(world_text):
    srv = make_server(batch_delay_us=500)
    srv.run_in_thread()
    stop = threading.Event()
    counts = {"ok": 0}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def hammer(seed: int) -> None:
        try:
            with BridgeClient(srv.endpoint, timeout=10.0, retries=0) as c:
                obs = np.random.default_rng(seed).random((16, srv.obs_dim), dtype=np.float32)
                sid = c.session_create(world=world_text)["session"] if seed == 0 else None
                while not stop.is_set():
                    actions, _ = c.act(obs)
                    assert actions.shape == (16,)
                    if sid is not None:
                        assert len(c.session_step(sid)["reactions"]) == 12
                    with lock:
                        counts["ok"] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        with BridgeClient(srv.endpoint, timeout=30.0, retries=0) as admin:
            before = counts["ok"]
            for spec in ("random", "scripted", "random", "scripted"):
                assert admin.reload(spec)["policy"] == spec
            assert counts["ok"] > before  # the load really ran during the reloads
            assert admin.stats()["reloads"] == 4
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        srv.stop()
    assert not errors, errors[0]
    assert srv.errors == {}
