"""Decisions per second through the ZeroMQ door, A/B: the same clients against servers run from one or more
source trees, measured in alternation in one run.

    python bench/bridge_throughput.py [--root DIR ...] [--clients 8] [--rows 64] [--seconds 3] [--rounds 3]

Each `--root` is a checkout whose `village serve` is started (PYTHONPATH=that tree): give the tree before a
change and the one after it to compare them on the same machine, under the same load. Without `--root`,
this checkout alone. Every round runs each server once: `--clients` client processes (this tree's bench
clients, a REQ socket each) send act(`--rows`) back to back for `--seconds`; a server's figure is the median
over rounds, beside the server's CPU time per 1000 decisions (from /proc: what the server itself costs,
whatever share of the CPUs it got). Load averages are printed beside each figure: the clients share the CPUs
with the server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _bridge_common import start_serve, throughput  # noqa: E402

from bridge.policies import layout  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its threads (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", type=Path, help="a source tree to serve from (repeat for A/B; "
                        "default: this checkout)")
    parser.add_argument("--policy", default="default", help="the policy every server serves")
    parser.add_argument("--clients", type=int, default=8, help="client processes per measurement")
    parser.add_argument("--rows", type=int, default=64, help="NPCs per act request")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; a server's figure is the median")
    parser.add_argument("--backend", action="append", choices=("numpy", "onnx"), help="the policy backend of "
                        "`village serve` (repeat: one server per tree and backend; default: numpy)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    roots = [r.resolve() for r in (args.root or [ROOT])]
    for r in roots:
        if not (r / "village").is_dir():
            parser.error(f"--root {r}: not a checkout of this project (no village/ package)")
    if args.clients < 1 or args.rows < 1 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--clients, --rows, --rounds must be >= 1 and --seconds > 0")
    obs_names, action_names = layout(4)
    names = [f"{r} --backend {b}" for r in roots for b in (args.backend or ["numpy"])]
    servers = [(proc, listening["zmq"]) for proc, listening in
               (start_serve(args.policy, "--backend", b, root=r) for r in roots for b in (args.backend or ["numpy"]))]
    rates: dict[str, list[float]] = {n: [] for n in names}
    loads: dict[str, list[float]] = {n: [] for n in names}
    server_us: dict[str, list[float]] = {n: [] for n in names}  # server CPU per 1000 decisions
    try:
        for k in range(args.rounds):
            order = list(zip(names, servers, strict=True))
            if k % 2:
                order.reverse()  # neither tree always runs first
            for root, (proc, endpoint) in order:
                cpu0 = cpu_seconds(proc.pid)  # the clients' start-up (4 s) counts no server work
                rate = throughput("zmq", endpoint, len(obs_names), len(action_names), args.clients, args.rows,
                                  args.seconds)
                cpu = cpu_seconds(proc.pid) - cpu0
                load = os.getloadavg()[0]
                per_k = cpu / max(rate * args.seconds, 1) * 1e9  # microseconds per 1000 decisions
                rates[root].append(rate)
                loads[root].append(load)
                server_us[root].append(per_k)
                print(f"round {k + 1}  {root}: {rate:,.0f} decisions/s, server CPU {per_k:,.0f} us per 1000 "
                      f"decisions  (load {load:.2f})", flush=True)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(10)
    print(f"{args.clients} clients x act({args.rows}), {args.seconds:g} s, {args.rounds} rounds, medians; "
          f"{os.cpu_count()} CPUs")
    report: dict[str, Any] = {}
    for root in names:
        med, cpu = float(np.median(rates[root])), float(np.median(server_us[root]))
        report[root] = {"decisions_per_s": round(med), "rounds": [round(x) for x in rates[root]],
                        "server_cpu_us_per_1000": round(cpu), "load1": [round(x, 2) for x in loads[root]]}
        print(f"{root}: {med:,.0f} decisions/s, server CPU {cpu:,.0f} us per 1000 decisions (rounds "
              f"{', '.join(f'{x:,.0f}' for x in rates[root])}; load {', '.join(f'{x:.2f}' for x in loads[root])})")
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
