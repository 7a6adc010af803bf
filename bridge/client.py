"""Python clients of the bridge: `BridgeClient` (sync, Lazy Pirate) and helpers shared with the asyncio one.

`BridgeClient` uses a REQ socket. Each request waits at most `timeout` seconds; on silence the same request
(same id, same bytes) is sent again on the same socket, up to `retries` times (zguide's Lazy Pirate, with
ZMQ_REQ_RELAXED instead of a new socket: libzmq reconnects to a restarted server by itself, and the retries
keep the routing id the server knows this client by). The server answers a repeated `session.step`/
`session.event`/`session.create` from its replay cache, so a retry never applies a step twice; creates are
remembered per client (per routing id), so another client's identical create gets a session of its own.

    with BridgeClient("tcp://127.0.0.1:5555") as bridge:
        info = bridge.hello()
        actions, _ = bridge.act(obs, mask)
        sid = bridge.session_create(world=toml_text)["session"]
        bridge.session_event(sid, "death", actor="player", target="Alda")
        reactions = bridge.session_step(sid)["reactions"]
"""

from __future__ import annotations

import itertools
import os
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from bridge import protocol as P


class BridgeError(Exception):
    """The server answered with an error (`code`, `message`), or did not answer (code "timeout")."""

    def __init__(self, code: str, message: str, request_id: Any = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


class BridgeTimeout(BridgeError):
    def __init__(self, message: str, request_id: Any = None):
        super().__init__("timeout", message, request_id)


@dataclass(frozen=True)
class CurveKeys:
    """CurveZMQ keys of a client: the server's public key and the client's own pair (Z85 bytes)."""

    server_public: bytes
    public: bytes
    secret: bytes

    @classmethod
    def from_files(cls, server_public: str | os.PathLike[str], client_secret: str | os.PathLike[str]) -> CurveKeys:
        from bridge.keys import load_keypair, load_public

        public, secret = load_keypair(client_secret)
        return cls(load_public(server_public), public, secret)

    def apply(self, sock: zmq.Socket) -> None:
        sock.curve_serverkey = self.server_public
        sock.curve_publickey = self.public
        sock.curve_secretkey = self.secret


def result_of(reply: Any, request_id: Any) -> dict[str, Any]:
    """The result fields of a decoded reply, or BridgeError."""
    if not isinstance(reply, dict) or "ok" not in reply:
        raise BridgeError("bad_reply", f"expected a reply map with 'ok', got {P.describe(reply)}", request_id)
    if not reply["ok"]:
        err = reply.get("error") or {}
        raise BridgeError(str(err.get("code", "unknown")), str(err.get("message", "")), reply.get("id"))
    return {k: v for k, v in reply.items() if k not in ("v", "id", "ok")}


def decode_arrays(result: dict[str, Any], *names: str) -> dict[str, Any]:
    for name in names:
        if name in result and isinstance(result[name], dict):
            result[name] = P.decode_array(result[name], name)
    return result


class _Ops:
    """The typed op helpers, over `request(op, **fields)` (shared by the sync and asyncio clients)."""

    def request(self, op: str, **fields: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _configure(self, endpoint: str, timeout: float, retries: int, curve: CurveKeys | None,
                   limits: P.Limits | None, context: Any, make_context: Any) -> None:
        """Connection settings shared by the sync and asyncio clients."""
        self._settings(endpoint, timeout, retries, limits)
        self.curve = curve
        self._own_ctx = context is None
        self.ctx = context or make_context()

    def _settings(self, endpoint: str, timeout: float, retries: int, limits: P.Limits | None) -> None:
        """What every client of every door has: endpoint, retry policy, limits, request ids unique to it."""
        if timeout <= 0 or retries < 0:
            raise ValueError("timeout must be > 0 and retries >= 0")
        self.endpoint = endpoint
        self.timeout = timeout
        self.retries = retries
        self.limits = limits or P.Limits()
        self._prefix = secrets.token_hex(4)
        self._seq = itertools.count(1)
        self.reconnects = 0

    @staticmethod
    def _act_fields(obs: np.ndarray, mask: np.ndarray | None, deterministic: bool, with_probs: bool,
                    temperature: float | None = None, personality_strength: float | None = None
                    ) -> dict[str, Any]:
        fields: dict[str, Any] = {"obs": np.ascontiguousarray(obs, np.float32)}
        if mask is not None:
            fields["mask"] = np.ascontiguousarray(mask, bool)
        if deterministic:
            fields["deterministic"] = True
        if with_probs:
            fields["with_probs"] = True
        if temperature is not None:
            fields["temperature"] = float(temperature)
        if personality_strength is not None:
            fields["personality_strength"] = float(personality_strength)
        return fields

    @staticmethod
    def _step_fields(session: str, pos: np.ndarray | None, health: np.ndarray | None, alive: np.ndarray | None,
                     present: np.ndarray | None) -> dict[str, Any]:
        fields: dict[str, Any] = {"session": session}
        for name, value, dtype in (("pos", pos, np.float32), ("health", health, np.float32),
                                   ("alive", alive, bool), ("present", present, bool)):
            if value is not None:
                fields[name] = np.ascontiguousarray(value, dtype)
        return fields


class BridgeClient(_Ops):
    """Synchronous client: one request at a time, timeout + bounded retries + reconnect (Lazy Pirate)."""

    def __init__(self, endpoint: str, *, timeout: float = 2.0, retries: int = 3, curve: CurveKeys | None = None,
                 context: zmq.Context | None = None, limits: P.Limits | None = None):
        self._configure(endpoint, timeout, retries, curve, limits, context, zmq.Context)
        self.sock: zmq.Socket | None = None
        self._connect()

    def _connect(self) -> None:
        sock = self.ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        # a retry is re-sent on this socket (relaxed: no reply is needed first), so every attempt comes from the
        # same connection and routing id, the scope of the server's retried-create cache; each send carries a
        # request id frame (correlate), so a late reply to an earlier attempt is dropped, never taken for
        # the reply to the next request
        sock.setsockopt(zmq.REQ_RELAXED, 1)
        sock.setsockopt(zmq.REQ_CORRELATE, 1)
        timeout_ms = max(1, int(self.timeout * 1000))
        sock.setsockopt(zmq.RCVTIMEO, timeout_ms)  # a blocking recv that gives up
        sock.setsockopt(zmq.SNDTIMEO, timeout_ms)  # and a send (a REQ socket with no live peer blocks in send)
        if self.curve is not None:
            self.curve.apply(sock)
        if P.wants_ipv6(self.endpoint):
            sock.setsockopt(zmq.IPV6, 1)
        sock.connect(self.endpoint)
        self.sock = sock

    def next_id(self) -> str:
        return f"{self._prefix}-{next(self._seq)}"

    def send_raw(self, body: bytes, request_id: Any = None) -> dict[str, Any]:
        """Send one body (already packed) with the retry policy; returns the decoded reply map."""
        for _ in range(self.retries + 1):
            assert self.sock is not None
            try:
                self.sock.send(body)
                frame = self.sock.recv()
            except zmq.Again:
                self.reconnects += 1  # no answer: send again (libzmq reconnects underneath when it must)
                continue
            reply = P.unpack(frame, self.limits)
            if isinstance(reply, dict) and request_id is not None and reply.get("id") not in (request_id, None):
                raise BridgeError("bad_reply", f"reply for id {reply.get('id')!r}, expected {request_id!r}",
                                  request_id)
            return reply
        raise BridgeTimeout(f"no reply from {self.endpoint} after {self.retries + 1} attempts of {self.timeout} s",
                            request_id)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send `op` with `fields` (numpy arrays are encoded); returns the result fields or raises BridgeError."""
        request_id = self.next_id()
        body = P.pack(P.request(op, request_id, **fields))
        return result_of(self.send_raw(body, request_id), request_id)

    # ---------------------------------------------------------------------------------------- ops
    def ping(self) -> float:
        return float(self.request("ping")["time"])

    def hello(self, client: str = "village-bridge-python") -> dict[str, Any]:
        return self.request("hello", client=client)

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None, *, deterministic: bool = False,
            with_probs: bool = False, temperature: float | None = None,
            personality_strength: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(actions (R,) int32, probs (R, A) float32 or None); `temperature`: sample from softmax(logits / T)
        instead of the server's temperature; `personality_strength`: play each NPC's learned personality that
        many times as strongly instead of the server's strength."""
        result = decode_arrays(self.request("act", **self._act_fields(obs, mask, deterministic, with_probs,
                                                                      temperature, personality_strength)),
                               "actions", "probs")
        return result["actions"], result.get("probs")

    def session_create(self, *, world: str | None = None, npcs: list[dict[str, Any]] | None = None,
                       **options: Any) -> dict[str, Any]:
        return self.request("session.create", world=world, npcs=npcs, **options)

    def session_event(self, session: str, type: str, *, target: str | int, actor: str | int | None = None,
                      position: tuple[float, float] | None = None, witnesses: list[str | int] | None = None
                      ) -> dict[str, Any]:
        return self.request("session.event", session=session, type=type, actor=actor, target=target,
                            position=list(position) if position is not None else None, witnesses=witnesses)

    def session_step(self, session: str, *, pos: np.ndarray | None = None, health: np.ndarray | None = None,
                     alive: np.ndarray | None = None, present: np.ndarray | None = None) -> dict[str, Any]:
        return self.request("session.step", **self._step_fields(session, pos, health, alive, present))

    def session_state(self, session: str, npc: str | int | None = None) -> dict[str, Any]:
        return self.request("session.state", session=session, npc=npc)

    def session_close(self, session: str) -> dict[str, Any]:
        return self.request("session.close", session=session)

    def reload(self, policy: str | None = None) -> dict[str, Any]:
        return self.request("reload", policy=policy)

    def stats(self) -> dict[str, Any]:
        return self.request("stats")

    # ---------------------------------------------------------------------------------------- life
    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None
        if self._own_ctx:
            self.ctx.term()

    def __enter__(self) -> BridgeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
