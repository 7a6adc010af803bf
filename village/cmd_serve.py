"""`village serve`: serve NPC brains to game engines over ZeroMQ and/or WebSocket, msgpack or JSON
(protocol: docs/protocol.md; engines: docs/engines.md)."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from village.cli import add_personality_arguments

    parser.add_argument("--policy", default="default",
                        help="scripted, random, default (the bundled trained policy) or a checkpoint path "
                             "(default: %(default)s)")
    parser.add_argument("--bind", default="tcp://127.0.0.1:5555",
                        help="ZeroMQ endpoint to bind; loopback unless CurveZMQ keys are given; 'none' serves "
                             "the WebSocket door alone (default: %(default)s; port 0 or * for an ephemeral port)")
    parser.add_argument("--ws", default=None, metavar="HOST:PORT",
                        help="also serve a WebSocket door here (Godot, browsers): msgpack in binary frames, JSON "
                             "in text frames; port 0 picks a free one; needs the [ws] extra (default: no "
                             "WebSocket door)")
    parser.add_argument("--ws-token", default=None,
                        help="bearer token WebSocket clients must send (Authorization header or ?token=); "
                             "required on a non-loopback --ws unless --insecure; at least 16 characters. The "
                             "VILLAGE_WS_TOKEN environment variable is read when this is not given (keeps it "
                             "out of process lists)")
    parser.add_argument("--ws-origin", action="append", default=None, metavar="ORIGIN",
                        help="allow browser pages from this Origin (e.g. https://game.example); repeat for "
                             "more. Given at least once, other browser origins get HTTP 403; clients sending no "
                             "Origin (engines, native code) are unaffected (default: any origin)")
    parser.add_argument("--ws-rate", type=float, default=2000.0,
                        help="requests per second one WebSocket connection may send (token bucket), above it "
                             "requests get rate_limited; 0 turns it off (default: %(default)s)")
    parser.add_argument("--ws-burst", type=int, default=200,
                        help="requests a WebSocket connection may send at once above --ws-rate (the bucket's "
                             "size; default: %(default)s)")
    parser.add_argument("--ws-inflight", type=int, default=64,
                        help="unanswered requests one WebSocket connection may have; more get limit_exceeded "
                             "(default: %(default)s)")
    parser.add_argument("--ws-max-connections", type=int, default=256,
                        help="open WebSocket connections at most; more get HTTP 503 (default: %(default)s)")
    parser.add_argument("--backend", choices=("numpy", "onnx"), default="numpy",
                        help="how the policy's forward runs: numpy (the loaded policy as it is) or onnx (the "
                             "trained actor exported to ONNX and run by onnxruntime, one thread; needs the "
                             "[onnx] extra and a trained policy, not scripted/random; default: %(default)s)")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="save sessions here and restore them at start (default: sessions live in memory)")
    parser.add_argument("--batch-delay-us", type=int, default=1000,
                        help="longest wait for other clients' requests to share a forward (default: %(default)s)")
    parser.add_argument("--max-batch", type=int, default=4096,
                        help="most NPC rows in one policy forward (default: %(default)s)")
    parser.add_argument("--session-ttl", type=float, default=900.0,
                        help="seconds after which an idle session expires (default: %(default)s)")
    parser.add_argument("--max-sessions", type=int, default=256, help="open sessions at most (default: %(default)s)")
    parser.add_argument("--max-message-bytes", type=int, default=8 * 1024 * 1024,
                        help="largest request frame answered; 4x this disconnects the peer (default: %(default)s)")
    parser.add_argument("--temperature", default="1", metavar="T",
                        help="sample the trained policy from softmax(logits / T) for requests and sessions that "
                             "name no temperature: below 1 NPCs follow their preferences more closely, above 1 "
                             "less (docs/protocol.md; default: %(default)s, as trained)")
    add_personality_arguments(parser, "requests and sessions that name no strength", default="1",
                              note="; a request or session may name its own; the traits hold for every strength "
                              "(docs/protocol.md)")
    parser.add_argument("--slots", type=int, default=4, help="observation slots K (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the baseline policies (default: %(default)s)")
    parser.add_argument("--curve-secret", type=Path, default=None,
                        help="the server's NAME.key_secret (from `village keys`): turns on CurveZMQ")
    parser.add_argument("--curve-allow", type=Path, default=None,
                        help="directory of the allowed clients' public NAME.key files")
    parser.add_argument("--insecure", action="store_true",
                        help="allow a non-loopback bind without CurveZMQ, or a non-loopback --ws without a token "
                             "(anyone who can reach the port may use it)")
    parser.add_argument("--policy-root", type=Path, default=None,
                        help="`reload` may load checkpoint paths under this directory only (default: the "
                             "current directory)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="numpy BLAS threads while serving; 0 leaves the library's setting. One thread is "
                             "fastest for the small batched forwards of a game (default: %(default)s)")
    parser.add_argument("--spin-us", type=int, default=0,
                        help="after answering, poll up to this many microseconds for the next request before "
                             "sleeping: lower latency for a client sending back to back, at the cost of a busy "
                             "CPU (default: %(default)s, never)")
    parser.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                        help="leave the start-up objects (torch, the policy) under the garbage collector: its "
                             "full collections then pause the server for tens of milliseconds (for comparison)")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                        help="JSON log level on stderr (default: %(default)s)")


def _check(args: argparse.Namespace) -> None:
    from village.cli import UserError

    if args.batch_delay_us < 0 or args.batch_delay_us > 100_000:
        raise UserError(f"--batch-delay-us: expected 0..100000 microseconds, got {args.batch_delay_us}")
    if args.max_batch < 1:
        raise UserError(f"--max-batch: expected at least 1 row, got {args.max_batch}")
    if args.session_ttl <= 0:
        raise UserError(f"--session-ttl: expected seconds > 0, got {args.session_ttl}")
    if args.max_sessions < 1:
        raise UserError(f"--max-sessions: expected at least 1, got {args.max_sessions}")
    if args.max_message_bytes < 1024:
        raise UserError(f"--max-message-bytes: expected at least 1024, got {args.max_message_bytes}")
    if args.slots < 1:
        raise UserError(f"--slots: expected at least 1, got {args.slots}")
    if not 0 <= args.spin_us <= 100_000:
        raise UserError(f"--spin-us: expected 0 (never) to 100000 microseconds, got {args.spin_us}")
    if args.blas_threads < 0:
        raise UserError(f"--blas-threads: expected 0 (leave as is) or a thread count >= 1, got {args.blas_threads}")
    if args.bind != "none" and "://" not in args.bind:
        raise UserError(f"--bind: expected a ZeroMQ endpoint like tcp://127.0.0.1:5555 or none, got {args.bind!r}")
    if args.bind == "none" and args.ws is None:
        raise UserError("--bind none: give --ws HOST:PORT, or there is no door to serve on")
    if args.ws_rate < 0:
        raise UserError(f"--ws-rate: expected requests per second >= 0 (0: unlimited), got {args.ws_rate:g}")
    for flag, value in (("--ws-burst", args.ws_burst), ("--ws-inflight", args.ws_inflight),
                        ("--ws-max-connections", args.ws_max_connections)):
        if value < 1:
            raise UserError(f"{flag}: expected at least 1, got {value}")
    from village.cli import temperature_flag

    args.temperature = temperature_flag(args.temperature)
    from npc_brains.personality import check_personality, check_traits

    try:
        args.personality_strength = check_personality(args.personality_strength, "--personality-strength")
        args.personality_traits = None if args.personality_traits is None else check_traits(
            args.personality_traits, "--personality-traits")
    except ValueError as exc:
        raise UserError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    _check(args)
    from bridge.logs import setup_json_logging
    from bridge.protocol import Limits
    from bridge.server import BridgeServer, ConfigError, ServerConfig
    from village.cli import UserError

    setup_json_logging(args.log_level)
    token = args.ws_token if args.ws_token is not None else (os.environ.get("VILLAGE_WS_TOKEN") or None)
    config = ServerConfig(
        bind=None if args.bind == "none" else args.bind, ws_bind=args.ws, ws_token=token,
        ws_origins=tuple(args.ws_origin) if args.ws_origin else None, ws_rate=args.ws_rate,
        ws_burst=args.ws_burst, ws_inflight=args.ws_inflight, ws_max_connections=args.ws_max_connections,
        backend=args.backend, policy=args.policy, slots=args.slots, seed=args.seed, state_dir=args.state_dir,
        batch_delay_us=args.batch_delay_us, max_batch_rows=args.max_batch, session_ttl_s=args.session_ttl,
        limits=Limits(max_message_bytes=args.max_message_bytes, max_sessions=args.max_sessions),
        curve_secret=args.curve_secret, curve_allow=args.curve_allow, insecure=args.insecure,
        policy_root=args.policy_root, blas_threads=args.blas_threads or None,
        gc_freeze=args.gc_freeze, spin_us=args.spin_us, temperature=args.temperature,
        personality_strength=args.personality_strength, personality_traits=args.personality_traits,
    )
    try:
        server = BridgeServer(config)
        server.start()
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:  # e.g. an unwritable --state-dir
        raise UserError(f"cannot start: {exc}") from None

    def stop(signum: int, _frame: Any) -> None:
        server.stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.serve_forever()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
