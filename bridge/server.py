"""The bridge server: one serving loop, the ZeroMQ door (a ROUTER socket) and the WebSocket door around one
BridgeService (bridge/service.py, which owns the ops, sessions, batcher and policy).

One thread runs the loop, and it is the only caller of the service (no locks on the hot path). Each turn:
receive, drain every frame already waiting, hand each body to the service (which answers the quick ops at
once and batches `act` and `session.step`), flush the batch when the batcher says so, look after reloads
and expiry. The ROUTER socket is the loop's inbox for both doors: ZeroMQ clients reach it over TCP/IPC, and
the WebSocket door (bridge/ws.py, an asyncio thread) forwards each frame over an in-process ZeroMQ pipe,
with the connection's number as a routing frame; replies to WebSocket peers go back to that thread.

Robustness: frames above the soft size limit get a `too_large` reply without being decoded (ZMQ_MAXMSGSIZE,
a multiple of it, disconnects peers sending even more), msgpack decoding is size-limited, every decoded
request is validated against bridge/protocol.py, and every failure is an error reply with a code, after
which the loop carries on.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import zmq

from bridge import protocol as P
from bridge.blas import set_blas_threads
from bridge.service import BridgeService, ConfigError, GcPauses, LatencyLog, ServerConfig
from npc_brains.policy_api import Policy

__all__ = ["BridgeServer", "ConfigError", "GcPauses", "LatencyLog", "ServerConfig", "endpoint_is_local"]

log = logging.getLogger("bridge.server")

HOUSEKEEPING_S = 1.0
IDLE_POLL_MS = 50
WS_IDENTITY = b"ws-door"  # the WebSocket door's routing id on the loop's ROUTER (libzmq's own ids start with 0)

# plain ints: pyzmq's enum flags cost a few microseconds of Python per use on the hot path
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NB = int(zmq.SNDMORE) | _NOBLOCK
_RCVMORE = int(zmq.RCVMORE)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


def spin_until_readable(sock: zmq.Socket, seconds: float) -> None:
    """Poll `sock` for up to `seconds` (a client that just got its reply usually sends the next request within
    a round trip): the loop stays on the CPU with its caches warm instead of being woken. `--spin-us`."""
    clock = time.perf_counter
    deadline = clock() + seconds
    while clock() < deadline:
        if sock.getsockopt(_EVENTS) & _POLLIN:
            return


def endpoint_is_local(endpoint: str) -> bool:
    """True for loopback TCP, ipc:// and inproc://; False for anything reachable from other machines."""
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        return False
    host = urlsplit(f"tcp://{rest}").hostname or ""
    return host_is_local(host)


def host_is_local(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', an interface name or a host name


class BridgeServer:
    """`start()` binds the doors and restores sessions; `serve_forever()` runs the loop until `stop()`."""

    def __init__(self, config: ServerConfig, policy: Policy | None = None, *,
                 loader: Callable[[str], Policy] | None = None):
        if config.bind is None and config.ws_bind is None:
            raise ConfigError("no door to serve on: give a ZeroMQ --bind, a --ws HOST:PORT, or both")
        self.config = config
        self.limits = config.limits
        self.service = BridgeService(config, policy, loader=loader, transmit=self._transmit)
        self.service.describe_peer = self._describe_peer
        self.endpoint: str | None = None  # the ZeroMQ door's endpoint (None without one)
        self.ws_endpoint: str | None = None  # ws://HOST:PORT of the WebSocket door (None without one)
        self.ws: Any = None  # the WebSocketDoor
        self.ctx: zmq.Context | None = None
        self.sock: zmq.Socket | None = None
        self._auth: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_housekeeping = time.monotonic()

    # the service's state, where tests and embedders look for it
    @property
    def store(self) -> Any:
        return self.service.store

    @property
    def policy(self) -> Policy:
        return self.service.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self.service.policy = policy

    @property
    def policy_name(self) -> str:
        return self.service.policy_name

    @property
    def requests(self) -> dict[str, int]:
        return self.service.requests

    @property
    def errors(self) -> dict[str, int]:
        return self.service.errors

    @property
    def obs_dim(self) -> int:
        return self.service.obs_dim

    @property
    def n_actions(self) -> int:
        return self.service.n_actions

    @property
    def gc_pauses(self) -> GcPauses:
        return self.service.gc_pauses

    # ------------------------------------------------------------------------------------------ life
    def start(self) -> str | None:
        """Bind the doors (refusing unprotected non-loopback binds), restore saved sessions; returns the ZeroMQ
        endpoint (or the WebSocket one when there is no ZeroMQ door)."""
        cfg = self.config
        if cfg.ws_bind is not None:
            from bridge.ws import check_ws_config

            check_ws_config(cfg)
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.limits.hard_message_bytes)
        try:
            if cfg.bind is not None:
                self._bind_zmq(sock)
            if cfg.ws_bind is not None:
                inbox = f"inproc://bridge-ws-{id(self)}"
                sock.bind(inbox)
                from bridge.ws import WebSocketDoor

                self.ws = WebSocketDoor(cfg, self.ctx, inbox, WS_IDENTITY)
                self.ws_endpoint = self.ws.start()
                self.service.door_stats["ws"] = self.ws.stats
        except ConfigError:
            self._close_ctx(sock)
            raise
        self.sock = sock
        restored = self.service.restore()
        log.info("listening", extra={"endpoint": self.endpoint or self.ws_endpoint, "zmq": self.endpoint,
                                     "ws": self.ws_endpoint, "policy": self.policy_name,
                                     "curve": cfg.curve_secret is not None, "sessions_restored": restored,
                                     "protocol": P.PROTOCOL_VERSION, "batch_delay_us": cfg.batch_delay_us,
                                     "backend": cfg.backend, "temperature": cfg.temperature,
                                     "personality_strength": cfg.personality_strength})
        return self.endpoint or self.ws_endpoint

    def _bind_zmq(self, sock: zmq.Socket) -> None:
        cfg = self.config
        assert cfg.bind is not None
        bind = cfg.bind
        if bind.startswith("tcp://") and bind.endswith(":0"):
            bind = bind[:-2] + ":*"
        local = endpoint_is_local(bind)
        if not local and not cfg.insecure and (cfg.curve_secret is None or cfg.curve_allow is None):
            raise ConfigError(f"refusing to bind {cfg.bind}: it is reachable from other machines; give "
                              "--curve-secret and --curve-allow (CurveZMQ with a client allow-list), bind "
                              "to 127.0.0.1, or pass --insecure")
        if cfg.curve_allow is not None and cfg.curve_secret is None:
            raise ConfigError("--curve-allow needs --curve-secret (the server's key pair)")
        from bridge.keys import KeyFileError, load_allow_list, load_keypair

        if cfg.curve_secret is not None:
            try:
                public, secret = load_keypair(cfg.curve_secret)
            except KeyFileError as exc:
                raise ConfigError(str(exc)) from None
            if cfg.curve_allow is not None:
                try:
                    allow, skipped = load_allow_list(cfg.curve_allow)
                except KeyFileError as exc:
                    raise ConfigError(str(exc)) from None
                for problem in skipped:
                    log.warning("curve_key_skipped", extra={"problem": problem})
                from zmq.auth.thread import ThreadAuthenticator

                self._auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("bridge.auth"))
                self._auth.start()
                self._auth.configure_curve_callback(domain="*", credentials_provider=allow)
            sock.curve_secretkey = secret
            sock.curve_publickey = public
            sock.curve_server = True
        if P.wants_ipv6(bind):
            sock.setsockopt(zmq.IPV6, 1)
        try:
            sock.bind(bind)
        except zmq.ZMQError as exc:
            raise ConfigError(f"cannot bind {cfg.bind}: {exc}") from None
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def _close_ctx(self, sock: zmq.Socket | None = None) -> None:
        if self.ws is not None:
            self.ws.stop()
            self.ws = None
        if sock is not None:
            sock.close(0)
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None

    def serve_forever(self) -> None:
        """Run until `stop()`; closes the doors on the way out.

        The loop blocks in recv (with a receive timeout) rather than in a poller: one wake-up per request
        and no poller bookkeeping on the hot path."""
        assert self.sock is not None, "call start() first"
        sock, service = self.sock, self.service
        batcher = service.batcher
        timeout_ms = -2
        blas_before = None
        if self.config.blas_threads is not None:  # small forwards from one thread: no BLAS worker hand-offs
            blas_before = set_blas_threads(self.config.blas_threads)
        if self.config.gc_freeze:  # see GcPauses: full collections would otherwise walk torch and the policy
            gc.collect()
            gc.freeze()
        service.gc_pauses.install()
        spin_s, busy = self.config.spin_us / 1e6, False
        try:
            while not self._stop.is_set():
                if batcher:
                    if batcher.should_flush():
                        service.flush()
                        continue
                    # receive timeouts are whole milliseconds: a batch waits at most the delay rounded up
                    wait_ms = max(1, math.ceil((batcher.deadline - time.perf_counter()) * 1000))
                else:
                    wait_ms = 2 if service.reloading else IDLE_POLL_MS
                if wait_ms != timeout_ms:
                    sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                    timeout_ms = wait_ms
                if spin_s and busy and not batcher:
                    spin_until_readable(sock, spin_s)
                try:
                    frames = self._recv(0)
                except zmq.Again:
                    frames = None
                busy = frames is not None
                if busy:
                    self._handle(frames, time.perf_counter_ns())
                    self._drain()
                if service.reloading:
                    service.poll_reload()
                now = time.monotonic()
                if now - self._last_housekeeping >= HOUSEKEEPING_S:
                    self._last_housekeeping = now
                    service.housekeeping(now)
            if batcher:
                service.flush()
        finally:
            if blas_before is not None:
                set_blas_threads(blas_before)
            service.gc_pauses.remove()
            self.sock.close(0)
            self.sock = None
            self._close_ctx()
            log.info("stopped", extra={"sessions": len(service.store)})

    def run_in_thread(self) -> str | None:
        """start() and serve in a daemon thread (tests, embedding); returns the endpoint."""
        endpoint = self.start()
        self._thread = threading.Thread(target=self.serve_forever, name="bridge-server", daemon=True)
        self._thread.start()
        return endpoint

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to finish (thread-safe); waits for the thread started by run_in_thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # ------------------------------------------------------------------------------------------ frames
    def _recv(self, flags: int) -> list[bytes]:
        """One multipart message (recv_multipart without pyzmq's per-call enum arithmetic)."""
        sock = self.sock
        frames = [sock.recv(flags)]
        while sock.getsockopt(_RCVMORE):
            frames.append(sock.recv(flags))
        return frames

    def _drain(self) -> None:
        sock = self.sock
        for _ in range(1000):  # then let the loop flush and look after the rest
            if not sock.getsockopt(_EVENTS) & _POLLIN:  # cheaper than a recv that raises Again
                return
            try:
                frames = self._recv(_NOBLOCK)
            except zmq.Again:
                return
            self._handle(frames, time.perf_counter_ns())

    def _transmit(self, envelope: list[bytes], payload: bytes) -> None:
        """The service's `transmit`: the peer is the routing envelope the request came with."""
        if envelope and envelope[0] == WS_IDENTITY and self.ws is not None:
            self.ws.deliver(envelope, payload)
            return
        send = self.sock.send
        try:
            for frame in envelope:
                send(frame, _SNDMORE_NB)
            send(payload, _NOBLOCK)
        except zmq.ZMQError as exc:  # the peer's queue is full or it is gone: its loss, not ours
            log.warning("reply_dropped", extra={"reason": str(exc)})

    @staticmethod
    def _describe_peer(envelope: list[bytes]) -> str | None:
        if not envelope:
            return None
        if envelope[0] == WS_IDENTITY and len(envelope) > 1:
            return f"ws:{int.from_bytes(envelope[1], 'little')}"
        return envelope[0].hex()

    def _handle(self, frames: list[bytes], t0: int) -> None:
        """Hand one request to the service: the envelope is the peer (the reply goes back with it), and the
        client key names who sent it (batching; the scope of the retried-create cache): the routing id for a
        direct ZeroMQ peer, the connection for a WebSocket one, the whole envelope behind a proxy."""
        n = len(frames)
        if n == 3 and not frames[1]:  # [routing id, delimiter, body]: what REQ and DEALER clients send
            self.service.handle(frames[:2], frames[0], frames[2], t0)
            return
        if n == 4 and not frames[2] and len(frames[1]) == 4:
            # [routing id, request id, delimiter, body]: a REQ socket with ZMQ_REQ_CORRELATE (libzmq's request
            # ids are 4 bytes and change with every request: the client is the routing id alone)
            self.service.handle(frames[:3], frames[0], frames[3], t0)
            return
        delimiter = next((k for k in range(1, len(frames)) if not frames[k]), None)
        if delimiter is None:
            self.service.error(frames[:1], None, "bad_envelope", "expected [empty delimiter, body] after the "
                               "routing id: use a REQ socket, or a DEALER that sends an empty frame before the "
                               "body", "?", t0)
            return
        envelope, bodies = frames[:delimiter + 1], frames[delimiter + 1:]
        if len(bodies) != 1:
            self.service.error(envelope, None, "bad_envelope", f"expected exactly one body frame after the "
                               f"delimiter, got {len(bodies)}", "?", t0)
            return
        if envelope[0] == WS_IDENTITY:  # [door, connection, frame kind, delimiter]: one client per connection
            client = envelope[0] + envelope[1]
        else:
            client = b"\x01".join(envelope)
        self.service.handle(envelope, client, bodies[0], t0)
