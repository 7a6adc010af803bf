"""Bridge latency and throughput against its floor, all in one run.

    python bench/bridge_latency.py [--policy scripted|random|default|PATH] [--rounds N] [--json]

Measures, side by side:
  1. a bare ZeroMQ + msgpack echo: a ROUTER in another process that decodes the request and answers a
     reply of the same shape as act's (the transport + codec floor), per batch size;
  2. a bare policy forward (policy.act on the same batch, in this process, with the BLAS threads the
     bridge serves with: ServerConfig.blas_threads);
  3. the bridge's `act` for 1, 16 and 64 NPCs (`village serve` in another process, the Python client),
     p50 and p99, and the ratio of p50 to the floor (echo p50 + forward p50);
  4. throughput: 8 client processes each sending act(64) back to back for a few seconds; NPC decisions/s.
First it measures the machine: 32-byte round trips to another process over a plain TCP socket and through
bare ZeroMQ (no codec), which show what waking a thread costs here. For reference it also measures the echo
server running the same policy forward before it answers
("echo+fwd"): the least any ZeroMQ server with this forward can do here. On a small machine it is well
above echo + forward, because a forward that runs after a wake-up in a server process is slower than the
same forward in a hot loop, and the ratio to it shows the bridge's own overhead.

Fairness: the three use the same policy and the same batch (zeros, all actions valid), each measurement
warms up first (a tenth of its requests, not counted), and the echo and the bridge are both separate
processes answered through the same kind of REQ socket. On a shared or small machine the figures move
with whatever else runs, so the three latency measurements are repeated in `--rounds` rounds, each round
measuring echo, forward and act of one size back to back (a ratio compares figures taken seconds apart),
and every figure reported is the median over the rounds (the ratio: the median of the rounds' ratios).
The output says so, with the load average before and after. With --spin-us N the bridge polls for the next
request for N microseconds before it sleeps, and so do both echo servers: the floor and the bridge then wait
for requests the same way (a floor that sleeps would flatter a bridge that spins).

With --json the last line is one JSON object:
  {"floor_us", "act": {"1"|"16"|"64": {"p50_us", "p99_us", "ratio_to_floor", "floor_us", ...}},
   "decisions_per_s_8_clients", "policy", "rounds", "loadavg_before", "loadavg_after",
   "machine": {"tcp_rtt_p50_us", "tcp_rtt_p99_us", "zmq_rtt_p50_us", "zmq_rtt_p99_us"}, ...}
`floor_us` at the top is the floor of act(16), the size the targets refer to.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import zmq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bridge_common import BLAS_THREADS, SLOTS, decisions_per_s, start_serve, timed, zmq_echo_server  # noqa: E402

from bridge import protocol as P  # noqa: E402
from bridge.blas import set_blas_threads  # noqa: E402
from bridge.client import BridgeClient  # noqa: E402
from bridge.policies import PolicyLoadError, layout, load_policy  # noqa: E402

SIZES = (1, 16, 64)


def _batch(n: int, obs_dim: int, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch every measurement uses: n rows of zeros, every action valid."""
    return np.zeros((n, obs_dim), np.float32), np.ones((n, n_actions), bool)


# ---------------------------------------------------------------------------------------------- echo


class EchoClient:
    """The echo server in another process and a REQ socket to it (as BridgeClient uses)."""

    def __init__(self, policy_spec: str | None = None, spin_us: int = 0):
        ctx = mp.get_context("spawn")
        q: mp.Queue = ctx.Queue()
        self.proc = ctx.Process(target=zmq_echo_server, args=(q, policy_spec, spin_us), daemon=True)
        self.proc.start()
        endpoint = q.get(timeout=60)
        self.zctx = zmq.Context()
        self.sock = self.zctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.rid = 0

    def measure(self, obs: np.ndarray, mask: np.ndarray, iters: int) -> tuple[float, float]:
        sock = self.sock

        def call() -> None:
            self.rid += 1
            sock.send(P.pack(P.request("act", self.rid, obs=obs, mask=mask)))
            reply = P.unpack(sock.recv())
            P.decode_array(reply["actions"], "actions")

        return timed(call, iters)

    def close(self) -> None:
        self.sock.send(P.pack({"op": "quit"}))
        self.sock.recv()
        self.sock.close(0)
        self.zctx.term()
        self.proc.join(10)


# ---------------------------------------------------------------------------------------------- machine


def _tcp_echo_server(port_queue: mp.Queue) -> None:
    """A plain blocking TCP echo (no ZeroMQ, no codec): the kernel's loopback round trip."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_queue.put(srv.getsockname()[1])
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(64):
        conn.sendall(data)


def _zmq_echo_server(endpoint_queue: mp.Queue) -> None:
    """A bare ROUTER that sends every message back as it came (no codec)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    endpoint_queue.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    while True:
        frames = sock.recv_multipart()
        sock.send_multipart(frames)
        if frames[-1] == b"quit":
            break
    sock.close(0)
    ctx.term()


def measure_machine(iters: int) -> dict[str, float]:
    """Round trips of 32 bytes to another process: over a plain TCP socket (one wake-up each way) and
    through ZeroMQ REQ -> ROUTER (four thread hand-offs: each side's I/O thread and application thread).
    Where waking an idle CPU is slow (virtual machines), the second is several times the first, and every
    ZeroMQ server here, the echo floor included, pays it."""
    ctx = mp.get_context("spawn")
    out: dict[str, float] = {}
    q: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_tcp_echo_server, args=(q,), daemon=True)
    proc.start()
    with socket.create_connection(("127.0.0.1", q.get(timeout=60))) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = b"x" * 32

        def tcp_call() -> None:
            conn.sendall(body)
            conn.recv(64)

        out["tcp_rtt_p50_us"], out["tcp_rtt_p99_us"] = timed(tcp_call, iters)
    proc.join(10)
    q = ctx.Queue()
    proc = ctx.Process(target=_zmq_echo_server, args=(q,), daemon=True)
    proc.start()
    zctx = zmq.Context()
    sock = zctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(q.get(timeout=60))

    def zmq_call() -> None:
        sock.send(b"x" * 32)
        sock.recv()

    out["zmq_rtt_p50_us"], out["zmq_rtt_p99_us"] = timed(zmq_call, iters)
    sock.send(b"quit")
    sock.recv()
    sock.close(0)
    zctx.term()
    proc.join(10)
    return {k: round(v, 1) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------- forward


def measure_forward(policy, obs: np.ndarray, mask: np.ndarray, iters: int) -> tuple[float, float]:
    return timed(lambda: policy.act(obs, mask), iters)


# ---------------------------------------------------------------------------------------------- bridge


def measure_bridge(client: BridgeClient, obs: np.ndarray, mask: np.ndarray, iters: int) -> tuple[float, float]:
    return timed(lambda: client.act(obs, mask), iters)


def measure_latency(policy, spec: str, endpoint: str, obs_dim: int, n_actions: int, iters: int, rounds: int,
                    spin_us: int = 0) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """{"echo"|"forward"|"act"|"echo_forward": {n: [(p50, p99) per round]}}; each round measures all of
    one size back to back, so a round's ratio compares figures taken seconds apart."""
    out: dict[str, dict[int, list[tuple[float, float]]]] = {k: {n: [] for n in SIZES}
                                                            for k in ("echo", "forward", "act", "echo_forward")}
    echo = EchoClient(spin_us=spin_us)  # the floor polls like the bridge does
    echo_forward = EchoClient(spec, spin_us=spin_us)
    try:
        with BridgeClient(endpoint, timeout=10.0, retries=0) as client:
            for _ in range(rounds):
                for n in SIZES:
                    obs, mask = _batch(n, obs_dim, n_actions)
                    out["echo"][n].append(echo.measure(obs, mask, iters))
                    out["forward"][n].append(measure_forward(policy, obs, mask, iters))
                    out["act"][n].append(measure_bridge(client, obs, mask, iters))
                    out["echo_forward"][n].append(echo_forward.measure(obs, mask, iters))
    finally:
        echo.close()
        echo_forward.close()
    return out


def _median(values: list[float]) -> float:
    return float(np.median(values))


def _load_client(endpoint: str, rows: int, obs_dim: int, n_actions: int, seconds: float, start_at: float,
                 results: mp.Queue) -> None:
    obs = np.random.default_rng(0).random((rows, obs_dim), dtype=np.float32)
    mask = np.ones((rows, n_actions), bool)
    with BridgeClient(endpoint, timeout=10.0, retries=0) as client:
        client.ping()
        while time.time() < start_at:
            time.sleep(0.001)
        done = 0
        end = time.time() + seconds
        while time.time() < end:
            client.act(obs, mask)
            done += rows
        results.put(done)


def measure_throughput(endpoint: str, obs_dim: int, n_actions: int, clients: int, rows: int, seconds: float
                       ) -> float:
    """NPC decisions/s through the Python client: `clients` processes, each sending act(`rows`) back to back."""
    return decisions_per_s(_load_client, (endpoint, rows, obs_dim, n_actions), clients, seconds, start_delay_s=3.0)


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=None,
                        help="policy to serve (default: 'default' when a trained policy loads, else scripted)")
    parser.add_argument("--iters", type=int, default=2000, help="requests per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="latency rounds; figures are medians over them (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=4.0, help="throughput run length (default: %(default)s)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rows", type=int, default=64, help="NPCs per request in the throughput run")
    parser.add_argument("--spin-us", type=int, default=0,
                        help="serve with `village serve --spin-us N`; the echo servers poll as long, so the floor "
                             "and the bridge wait for requests the same way")
    parser.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                        help="serve with `village serve --no-gc-freeze` (to compare the collector's pauses)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)

    obs_names, action_names = layout(SLOTS)
    obs_dim, n_actions = len(obs_names), len(action_names)
    spec = args.policy
    if spec is None:
        try:
            load_policy("default", slots=SLOTS)
            spec = "default"
        except PolicyLoadError as exc:
            print(f"note: no trained policy ({exc}); measuring with the scripted baseline")
            spec = "scripted"
    policy = load_policy(spec, slots=SLOTS)
    policy_name = str(getattr(policy, "name", spec))
    blas = set_blas_threads(BLAS_THREADS) if BLAS_THREADS is not None else None
    blas_note = f"BLAS threads {BLAS_THREADS} (as the bridge serves)" if blas is not None else "BLAS threads as found"
    if args.rounds < 1 or args.iters < 10:
        parser.error("--rounds must be >= 1 and --iters >= 10")
    print(f"policy: {policy_name} ({spec}); obs_dim {obs_dim}, n_actions {n_actions}; {os.cpu_count()} CPUs; "
          f"{blas_note}")
    load_before = [round(x, 2) for x in os.getloadavg()]
    # this measuring process has torch and a policy loaded too: keep its own full collections out of the
    # round trips it times (the same for the echo and the bridge)
    gc.collect()
    gc.freeze()

    machine = measure_machine(args.iters)
    freeze = () if args.gc_freeze else ("--no-gc-freeze",)
    proc, listening = start_serve(spec, "--spin-us", str(args.spin_us), *freeze)
    endpoint = listening["zmq"]
    try:
        lat = measure_latency(policy, spec, endpoint, obs_dim, n_actions, args.iters, args.rounds, args.spin_us)
        throughput = measure_throughput(endpoint, obs_dim, n_actions, args.clients, args.rows, args.seconds)
        with BridgeClient(endpoint, timeout=10.0) as client:
            server_stats = client.stats()
            batches, server_gc = server_stats["batches"], server_stats.get("gc")
    finally:
        proc.terminate()
        proc.wait(10)
    load_after = [round(x, 2) for x in os.getloadavg()]

    print(f"median of {args.rounds} rounds of {args.iters} requests each (load average 1/5/15 min: before "
          f"{load_before}, after {load_after}; on a shared machine these move with its other work)")
    print(f"this machine, 32-byte round trips to another process: plain TCP p50 {machine['tcp_rtt_p50_us']:.1f} "
          f"p99 {machine['tcp_rtt_p99_us']:.1f} us; bare ZeroMQ REQ -> ROUTER p50 {machine['zmq_rtt_p50_us']:.1f} "
          f"p99 {machine['zmq_rtt_p99_us']:.1f} us (four thread hand-offs, each a wake-up)")
    print(f"{'NPCs':>5} {'echo p50':>9} {'echo p99':>9} {'fwd p50':>8} {'floor':>8} {'act p50':>8} {'act p99':>8} "
          f"{'ratio':>6} {'per round':>15} {'echo+fwd p50':>13} {'p99':>7} {'ratio':>6}   (microseconds)")
    act = {}
    for n in SIZES:
        echo50 = _median([r[0] for r in lat["echo"][n]])
        echo99 = _median([r[1] for r in lat["echo"][n]])
        fwd50 = _median([r[0] for r in lat["forward"][n]])
        p50 = _median([r[0] for r in lat["act"][n]])
        p99 = _median([r[1] for r in lat["act"][n]])
        rounds = zip(lat["act"][n], lat["echo"][n], lat["forward"][n], strict=True)
        ratios = [a[0] / (e[0] + f[0]) for a, e, f in rounds]
        ratio = _median(ratios)
        floor = echo50 + fwd50
        ef50 = _median([r[0] for r in lat["echo_forward"][n]])
        ef99 = _median([r[1] for r in lat["echo_forward"][n]])
        ef_ratio = _median([a[0] / ef[0] for a, ef in zip(lat["act"][n], lat["echo_forward"][n], strict=True)])
        act[str(n)] = {"p50_us": round(p50, 1), "p99_us": round(p99, 1), "ratio_to_floor": round(ratio, 3),
                       "floor_us": round(floor, 1), "echo_p50_us": round(echo50, 1), "echo_p99_us": round(echo99, 1),
                       "forward_p50_us": round(fwd50, 1), "echo_forward_p50_us": round(ef50, 1),
                       "echo_forward_p99_us": round(ef99, 1),
                       "ratio_to_echo_forward": round(ef_ratio, 3),
                       "ratio_per_round": [round(r, 3) for r in ratios],
                       "p50_us_per_round": [round(r[0], 1) for r in lat["act"][n]],
                       "p99_us_per_round": [round(r[1], 1) for r in lat["act"][n]]}
        print(f"{n:>5} {echo50:>9.1f} {echo99:>9.1f} {fwd50:>8.1f} {floor:>8.1f} {p50:>8.1f} {p99:>8.1f} "
              f"{ratio:>6.2f} {' '.join(f'{r:.2f}' for r in ratios):>15} {ef50:>13.1f} {ef99:>7.1f} {ef_ratio:>6.2f}")
    print(f"throughput: {throughput:,.0f} NPC decisions/s with {args.clients} clients x act({args.rows}) "
          f"(server batches: {batches['requests_mean']} requests, {batches['rows_mean']} rows on average)")
    if server_gc:
        pauses = ", ".join(f"{g} {server_gc[g]['collections']} x max {server_gc[g]['max_us']:.0f} us"
                           for g in ("gen0", "gen1", "gen2"))
        print(f"server garbage collector ({'frozen' if args.gc_freeze else 'not frozen'}: "
              f"{server_gc['frozen']} objects): {pauses}")
    if args.json:
        print(json.dumps({
            "floor_us": act["16"]["floor_us"], "act": act, "decisions_per_s_8_clients": round(throughput),
            "policy": policy_name, "clients": args.clients, "rows_per_request": args.rows,
            "batch_requests_mean": batches["requests_mean"], "cpus": os.cpu_count(), "rounds": args.rounds,
            "iters": args.iters, "statistic": "median over rounds",
            "blas_threads": BLAS_THREADS if blas is not None else None, "loadavg_before": load_before,
            "loadavg_after": load_after, "gc_freeze": args.gc_freeze, "spin_us": args.spin_us, "server_gc": server_gc,
            "machine": machine,
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
