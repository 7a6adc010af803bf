"""asyncio client of the bridge: many requests in flight on one DEALER socket, matched to replies by id.

Each request waits at most `timeout` seconds and is re-sent (same id, same bytes) up to `retries` times on
the same socket: libzmq reconnects to a restarted server by itself, and every attempt keeps the routing id
the server scopes its retried-create cache by, so a create re-sent after a timeout finds its session. A late
reply to an earlier attempt matches no pending id (or a finished one) and is dropped.

    async with AsyncBridgeClient("tcp://127.0.0.1:5555") as bridge:
        actions, _ = await bridge.act(obs, mask)
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import numpy as np
import zmq
import zmq.asyncio

from bridge import protocol as P
from bridge.client import BridgeTimeout, CurveKeys, _Ops, decode_arrays, result_of


class AsyncBridgeClient(_Ops):
    def __init__(self, endpoint: str, *, timeout: float = 2.0, retries: int = 3, curve: CurveKeys | None = None,
                 context: zmq.asyncio.Context | None = None, limits: P.Limits | None = None):
        self._configure(endpoint, timeout, retries, curve, limits, context, zmq.asyncio.Context)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.sock: zmq.asyncio.Socket | None = None
        self._reader: asyncio.Task[None] | None = None

    def _connect(self) -> None:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        if self.curve is not None:
            self.curve.apply(sock)
        if P.wants_ipv6(self.endpoint):
            sock.setsockopt(zmq.IPV6, 1)
        sock.connect(self.endpoint)
        self.sock = sock
        self._reader = asyncio.get_running_loop().create_task(self._read(sock))

    async def _read(self, sock: zmq.asyncio.Socket) -> None:
        while True:
            try:
                frames = await sock.recv_multipart()
            except (zmq.ZMQError, asyncio.CancelledError):
                return
            if len(frames) != 2 or frames[0] != b"":
                continue  # not [delimiter, body]: nothing we sent asked for this
            try:
                reply = P.unpack(frames[1], self.limits)
            except P.ProtocolError:
                continue
            future = self._pending.get(reply.get("id")) if isinstance(reply, dict) else None
            if future is not None and not future.done():
                future.set_result(reply)

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.sock is None:
            self._connect()
        request_id = f"{self._prefix}-{next(self._seq)}"
        body = P.pack(P.request(op, request_id, **fields))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            for _ in range(self.retries + 1):
                assert self.sock is not None
                try:
                    # the send is bounded too: a DEALER with no live peer (a failed CURVE handshake) waits in it
                    await asyncio.wait_for(self.sock.send_multipart([b"", body]), self.timeout)
                    reply = await asyncio.wait_for(asyncio.shield(future), self.timeout)
                    return result_of(reply, request_id)
                except asyncio.TimeoutError:
                    self.reconnects += 1  # unanswered in time: send again
            raise BridgeTimeout(f"no reply from {self.endpoint} after {self.retries + 1} attempts of "
                                f"{self.timeout} s", request_id)
        finally:
            self._pending.pop(request_id, None)
            if not future.done():
                future.cancel()

    # ---------------------------------------------------------------------------------------- ops
    async def ping(self) -> float:
        return float((await self.request("ping"))["time"])

    async def hello(self, client: str = "village-bridge-python-asyncio") -> dict[str, Any]:
        return await self.request("hello", client=client)

    async def act(self, obs: np.ndarray, mask: np.ndarray | None = None, *, deterministic: bool = False,
                  with_probs: bool = False, temperature: float | None = None,
                  personality_strength: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        fields = self._act_fields(obs, mask, deterministic, with_probs, temperature, personality_strength)
        result = decode_arrays(await self.request("act", **fields), "actions", "probs")
        return result["actions"], result.get("probs")

    async def session_create(self, *, world: str | None = None, npcs: list[dict[str, Any]] | None = None,
                             **options: Any) -> dict[str, Any]:
        return await self.request("session.create", world=world, npcs=npcs, **options)

    async def session_event(self, session: str, type: str, *, target: str | int, actor: str | int | None = None,
                            position: tuple[float, float] | None = None,
                            witnesses: list[str | int] | None = None) -> dict[str, Any]:
        return await self.request("session.event", session=session, type=type, actor=actor, target=target,
                                  position=list(position) if position is not None else None, witnesses=witnesses)

    async def session_step(self, session: str, *, pos: np.ndarray | None = None, health: np.ndarray | None = None,
                           alive: np.ndarray | None = None, present: np.ndarray | None = None) -> dict[str, Any]:
        return await self.request("session.step", **self._step_fields(session, pos, health, alive, present))

    async def session_state(self, session: str, npc: str | int | None = None) -> dict[str, Any]:
        return await self.request("session.state", session=session, npc=npc)

    async def session_close(self, session: str) -> dict[str, Any]:
        return await self.request("session.close", session=session)

    async def reload(self, policy: str | None = None) -> dict[str, Any]:
        return await self.request("reload", policy=policy)

    async def stats(self) -> dict[str, Any]:
        return await self.request("stats")

    # ---------------------------------------------------------------------------------------- life
    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None
        if self._own_ctx:
            self.ctx.term()

    async def __aenter__(self) -> AsyncBridgeClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
