"""The WebSocket door: the bridge for engines without ZeroMQ (Godot, browsers, web exports).

Binary frames carry the same msgpack envelope as the ZeroMQ door; text frames carry the same schema as JSON
(arrays' `data` as a list of numbers or a base64 string; replies list their numbers). The door runs an
asyncio loop (the `websockets` library, imported only when the door is asked for) in its own thread and
forwards every frame to the serving loop over an in-process ZeroMQ pipe, with the connection's number as a
routing frame; the serving loop hands replies back through `deliver()`. The door owns no op.

Guards, all before a frame reaches the service: a bearer token (an `Authorization: Bearer` header or a
`?token=` query for browsers, compared in constant time; required on any non-loopback bind), an Origin
allow-list for browsers, a connection limit, the message size limit (above limits.hard_message_bytes the
connection is closed with 1009), a per-connection token-bucket rate and a bound on unanswered requests.

Close codes: 1000 normal, 1001 the server is going away, 1007 a text frame that is not UTF-8, 1009 a frame
above the hard limit, 1011 an internal error. Refused handshakes get HTTP 401 (no or wrong token), 403
(origin not allowed) or 503 (too many connections).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import ipaddress
import json
import logging
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgpack
import numpy as np
import zmq

from bridge import protocol as P
from bridge.service import ConfigError, ServerConfig

log = logging.getLogger("bridge.ws")

BINARY, TEXT = b"b", b"j"
MAX_QUEUE = 16  # frames the library buffers per connection before it stops reading the socket


def parse_host_port(value: str) -> tuple[str, int]:
    """'HOST:PORT' or '[V6]:PORT' -> (host, port); raises ValueError with what was expected."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT like 127.0.0.1:8765, got {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _is_local(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_ws_config(cfg: ServerConfig) -> None:
    """The WebSocket door's settings, checked before anything binds; ConfigError names the flag."""
    assert cfg.ws_bind is not None
    try:
        host, _ = parse_host_port(cfg.ws_bind)
    except ValueError as exc:
        raise ConfigError(f"--ws: {exc}") from None
    if cfg.ws_token is not None and len(cfg.ws_token) < 16:
        raise ConfigError("--ws-token: expected at least 16 characters (a random secret, e.g. "
                          "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`)")
    if not _is_local(host) and cfg.ws_token is None and not cfg.insecure:
        raise ConfigError(f"refusing to serve WebSockets on {cfg.ws_bind}: it is reachable from other machines; "
                          "give --ws-token (clients send it as a bearer token), bind to 127.0.0.1, or pass "
                          "--insecure")
    if cfg.ws_rate < 0 or cfg.ws_burst < 1 or cfg.ws_inflight < 1 or cfg.ws_max_connections < 1:
        raise ConfigError("--ws-rate must be >= 0 and --ws-burst, --ws-inflight, --ws-max-connections >= 1")
    try:
        import websockets  # noqa: F401
    except ImportError:
        raise ConfigError("--ws needs the websockets package: pip install 'village-npc[ws]'") from None


# ---------------------------------------------------------------------------------------------- JSON frames


def _arrays_from_json(value: Any) -> Any:
    """Array maps with `data` as a list of numbers or base64 text -> the bytes msgpack carries."""
    if type(value) is dict:
        if len(value) == 3 and value.keys() == {"dtype", "shape", "data"} and value["dtype"] in P.ARRAY_DTYPES:
            data = value["data"]
            try:
                if type(data) is list:
                    data = np.asarray(data, dtype=np.dtype(value["dtype"]).newbyteorder("<")).tobytes()
                elif type(data) is str:
                    data = base64.b64decode(data, validate=True)
            except (ValueError, TypeError, OverflowError):
                pass  # left as it came: the op names the field that is wrong
            return {"dtype": value["dtype"], "shape": value["shape"], "data": data}
        return {k: _arrays_from_json(v) for k, v in value.items()}
    if type(value) is list:
        return [_arrays_from_json(v) for v in value]
    return value


def _json_from_reply(value: Any) -> Any:
    if type(value) is dict:
        if value.keys() == {"dtype", "shape", "data"} and type(value["data"]) is bytes:
            try:
                data = np.frombuffer(value["data"], np.dtype(value["dtype"]).newbyteorder("<")).tolist()
            except (TypeError, ValueError):
                data = base64.b64encode(value["data"]).decode("ascii")
            return {"dtype": value["dtype"], "shape": value["shape"], "data": data}
        return {k: _json_from_reply(v) for k, v in value.items()}
    if type(value) is list:
        return [_json_from_reply(v) for v in value]
    if type(value) is bytes:
        return base64.b64encode(value).decode("ascii")
    return value


def json_to_body(text: str, limits: P.Limits) -> bytes:
    """A JSON text frame -> the msgpack body the service decodes; ProtocolError for what is not JSON."""
    if len(text) > limits.max_message_bytes:
        raise P.ProtocolError("too_large", f"frame of {len(text)} characters exceeds max_message_bytes "
                              f"{limits.max_message_bytes}")
    try:
        message = json.loads(text)
        return P.pack(_arrays_from_json(message))
    except (ValueError, RecursionError, OverflowError, TypeError) as exc:
        raise P.ProtocolError("decode_error", f"not one JSON value within the limits: {type(exc).__name__}: "
                              f"{str(exc)[:200]}") from None


def body_to_json(payload: bytes) -> str:
    return json.dumps(_json_from_reply(msgpack.unpackb(payload, raw=False)), separators=(",", ":"),
                      allow_nan=False)


# ---------------------------------------------------------------------------------------------- the door


class _Conn:
    __slots__ = ("ws", "number", "key", "inflight", "tokens", "stamp", "out")

    def __init__(self, ws: Any, number: int, burst: int):
        self.ws = ws
        self.number = number
        self.key = number.to_bytes(8, "little")
        self.inflight = 0
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.out: asyncio.Queue[str | bytes | None] = asyncio.Queue()


class WebSocketDoor:
    """`start()` binds in a thread of its own and returns ws://HOST:PORT; `deliver()` is the serving loop's."""

    def __init__(self, config: ServerConfig, ctx: zmq.Context, inbox: str, identity: bytes):
        self.config = config
        self.limits = config.limits
        self.ctx = ctx
        self.inbox = inbox
        self.identity = identity
        self.loop: asyncio.AbstractEventLoop | None = None
        self.conns: dict[bytes, _Conn] = {}
        self.counts = {"connections": 0, "refused_token": 0, "refused_origin": 0, "refused_full": 0,
                       "rate_limited": 0, "inflight_limited": 0, "text_frames": 0, "binary_frames": 0}
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._server: Any = None
        self._push: zmq.Socket | None = None
        self._stopping: asyncio.Event | None = None
        self.endpoint: str | None = None
        self._seq = 0
        self._token = config.ws_token.encode() if config.ws_token else None

    def stats(self) -> dict[str, Any]:
        return {"open": len(self.conns), **self.counts}

    # ------------------------------------------------------------------------------------------ life
    def start(self, timeout: float = 30.0) -> str:
        self._thread = threading.Thread(target=self._run, name="bridge-ws", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ConfigError(f"--ws {self.config.ws_bind}: the WebSocket door did not start within {timeout} s")
        if self._error is not None:
            raise ConfigError(f"cannot serve WebSockets on {self.config.ws_bind}: {self._error}")
        assert self.endpoint is not None
        return self.endpoint

    def stop(self, timeout: float = 5.0) -> None:
        loop = self.loop
        if loop is not None and self._stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop has already finished
                loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start() when it happens before the bind
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                log.exception("ws_door_failed")

    async def _main(self) -> None:
        from websockets.asyncio.server import serve

        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        push = self.ctx.socket(zmq.DEALER)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.IDENTITY, self.identity)
        push.setsockopt(zmq.SNDHWM, 100_000)
        push.connect(self.inbox)
        self._push = push
        host, port = parse_host_port(self.config.ws_bind or "")
        origins: list[str | None] | None = None
        if self.config.ws_origins is not None:  # non-browser clients send no Origin: they stay welcome
            origins = [*self.config.ws_origins, None]
        try:
            async with serve(self._serve_connection, host, port, max_size=self.limits.hard_message_bytes,
                             max_queue=MAX_QUEUE, compression=None, origins=origins,
                             process_request=self._check_request, ping_interval=20, ping_timeout=20,
                             close_timeout=2, server_header="village-bridge") as server:
                self._server = server
                sock = next(iter(server.sockets))
                bound_host, bound_port = sock.getsockname()[:2]
                shown = f"[{bound_host}]" if ":" in bound_host else bound_host
                self.endpoint = f"ws://{shown}:{bound_port}"
                self._ready.set()
                await self._stopping.wait()
                server.close()  # every connection gets 1001 (going away)
                await server.wait_closed()
        finally:
            push.close(0)

    # ------------------------------------------------------------------------------------------ handshake
    def _check_request(self, connection: Any, request: Any) -> Any:
        from http import HTTPStatus

        if self._token is not None:
            given = ""
            auth = request.headers.get("Authorization", "")
            if auth[:7].lower() == "bearer ":
                given = auth[7:].strip()
            else:
                given = (parse_qs(urlsplit(request.path).query).get("token") or [""])[0]
            if not hmac.compare_digest(given.encode(), self._token):
                self.counts["refused_token"] += 1
                return connection.respond(HTTPStatus.UNAUTHORIZED, "a bearer token is required: send "
                                          "'Authorization: Bearer TOKEN' or connect to ...?token=TOKEN\n")
        if len(self.conns) >= self.config.ws_max_connections:
            self.counts["refused_full"] += 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections; retry later\n")
        origin = request.headers.get("Origin")
        if self.config.ws_origins is not None and origin is not None and origin not in self.config.ws_origins:
            self.counts["refused_origin"] += 1  # the library answers 403 itself; counted here
        return None

    # ------------------------------------------------------------------------------------------ frames
    async def _serve_connection(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self._seq += 1
        conn = _Conn(ws, self._seq, self.config.ws_burst)
        self.conns[conn.key] = conn
        self.counts["connections"] += 1
        writer = asyncio.ensure_future(self._write(conn))
        rate, burst = self.config.ws_rate, float(self.config.ws_burst)
        try:
            async for frame in ws:
                if type(frame) is str:
                    self.counts["text_frames"] += 1
                    kind = TEXT
                    try:
                        body = json_to_body(frame, self.limits)
                    except P.ProtocolError as exc:
                        self._refuse(conn, kind, None, exc.code, exc.message)
                        continue
                else:
                    self.counts["binary_frames"] += 1
                    kind, body = BINARY, frame
                if rate:
                    now = time.monotonic()
                    conn.tokens = min(burst, conn.tokens + (now - conn.stamp) * rate)
                    conn.stamp = now
                    if conn.tokens < 1.0:
                        self.counts["rate_limited"] += 1
                        self._refuse(conn, kind, body, "rate_limited", f"more than {rate:g} requests per second "
                                     f"(bursts of {burst:g}) on this connection; slow down")
                        continue
                    conn.tokens -= 1.0
                if conn.inflight >= self.config.ws_inflight:
                    self.counts["inflight_limited"] += 1
                    self._refuse(conn, kind, body, "limit_exceeded", f"{conn.inflight} requests of this "
                                 "connection are still unanswered (ws_inflight); wait for replies")
                    continue
                conn.inflight += 1
                try:
                    self._push.send_multipart([conn.key, kind, b"", body], zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    conn.inflight -= 1
                    self._refuse(conn, kind, body, "busy", "the server's queue is full; retry")
        except ConnectionClosed:
            pass
        finally:
            self.conns.pop(conn.key, None)
            conn.out.put_nowait(None)
            await writer

    async def _write(self, conn: _Conn) -> None:
        from websockets.exceptions import ConnectionClosed

        while True:
            data = await conn.out.get()
            if data is None:
                return
            try:
                await conn.ws.send(data)
            except ConnectionClosed:
                return

    def _refuse(self, conn: _Conn, kind: bytes, body: bytes | None, code: str, message: str) -> None:
        """An error reply from the door itself, with the request's id when the body has a valid one."""
        rid = None
        if body is not None:
            try:
                m = P.unpack(body, self.limits)
                if type(m) is dict and P.valid_id(m.get("id"), self.limits):
                    rid = m["id"]
            except P.ProtocolError:
                pass
        payload = P.pack(P.error_reply(rid, code, message))
        conn.out.put_nowait(body_to_json(payload) if kind == TEXT else payload)

    # ------------------------------------------------------------------------------------------ replies
    def deliver(self, envelope: list[bytes], payload: bytes) -> None:
        """From the serving loop's thread: send `payload` to the connection the envelope names."""
        loop = self.loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the door's loop has closed (shutting down)
            loop.call_soon_threadsafe(self._deliver, envelope[1], envelope[2], payload)

    def _deliver(self, key: bytes, kind: bytes, payload: bytes) -> None:
        conn = self.conns.get(key)
        if conn is None:  # it hung up before its answer came
            return
        conn.inflight -= 1
        conn.out.put_nowait(body_to_json(payload) if kind == TEXT else payload)
