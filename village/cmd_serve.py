"""`village serve`: serve NPC brains to game engines over ZeroMQ + msgpack (protocol: docs/protocol.md)."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="default",
                        help="scripted, random, default (the bundled trained policy) or a checkpoint path "
                             "(default: %(default)s)")
    parser.add_argument("--bind", default="tcp://127.0.0.1:5555",
                        help="ZeroMQ endpoint to bind; loopback unless CurveZMQ keys are given "
                             "(default: %(default)s; use port 0 or * for an ephemeral port)")
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
    parser.add_argument("--slots", type=int, default=4, help="observation slots K (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the baseline policies (default: %(default)s)")
    parser.add_argument("--curve-secret", type=Path, default=None,
                        help="the server's NAME.key_secret (from `village keys`): turns on CurveZMQ")
    parser.add_argument("--curve-allow", type=Path, default=None,
                        help="directory of the allowed clients' public NAME.key files")
    parser.add_argument("--insecure", action="store_true",
                        help="allow a non-loopback bind without CurveZMQ (anyone who can reach the port may use it)")
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
    if "://" not in args.bind:
        raise UserError(f"--bind: expected a ZeroMQ endpoint like tcp://127.0.0.1:5555, got {args.bind!r}")


def run(args: argparse.Namespace) -> int:
    _check(args)
    from bridge.logs import setup_json_logging
    from bridge.protocol import Limits
    from bridge.server import BridgeServer, ConfigError, ServerConfig
    from village.cli import UserError

    setup_json_logging(args.log_level)
    config = ServerConfig(
        bind=args.bind, policy=args.policy, slots=args.slots, seed=args.seed, state_dir=args.state_dir,
        batch_delay_us=args.batch_delay_us, max_batch_rows=args.max_batch, session_ttl_s=args.session_ttl,
        limits=Limits(max_message_bytes=args.max_message_bytes, max_sessions=args.max_sessions),
        curve_secret=args.curve_secret, curve_allow=args.curve_allow, insecure=args.insecure,
        policy_root=args.policy_root, blas_threads=args.blas_threads or None,
        gc_freeze=args.gc_freeze, spin_us=args.spin_us,
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
