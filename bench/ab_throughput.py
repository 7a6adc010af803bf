"""Training throughput of two checkouts, measured alternately, for changes smaller than this VM's drift.

    python bench/ab_throughput.py OTHER_CHECKOUT [--pairs 3] [--updates 8] [--json]

Runs `train_loop` of bench/train_throughput.py (each run in its own process, in its checkout's directory, with
that checkout's code) for this checkout and OTHER_CHECKOUT in turn, ABBA order, and prints every run and the
medians. A shared machine's speed moves by up to 2x within minutes, so only runs made in the same minutes
compare. Make the other checkout with e.g. `git worktree add /tmp/base HEAD~3`.
With --json the last line is {"this": {...}, "other": {...}} with each side's median NPC-steps/s and runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
RUN = ("import json, sys; sys.path.insert(0, 'bench'); sys.path.insert(0, '.');"
       "from train_throughput import train_loop;"
       "sps, info = train_loop('cpu', int(sys.argv[1])); info['npc_steps_per_s'] = round(sps);"
       "print(json.dumps(info))")


def one_run(checkout: Path, updates: int) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, str(updates)], cwd=checkout, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ab_throughput: the run in {checkout} failed:\n{out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the checkout to compare with (its bench/train_throughput.py)")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each checkout (default 3)")
    parser.add_argument("--updates", type=int, default=8, help="updates per run (default 8)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    if not (args.other / "bench" / "train_throughput.py").is_file():
        parser.error(f"other: {args.other} has no bench/train_throughput.py")
    if args.pairs < 1 or args.updates < 3:
        parser.error("--pairs must be >= 1 and --updates >= 3")
    sides = {"this": HERE, "other": args.other.resolve()}
    runs: dict[str, list[dict]] = {"this": [], "other": []}
    for i in range(args.pairs):
        for side in (("this", "other") if i % 2 == 0 else ("other", "this")):
            info = one_run(sides[side], args.updates)
            runs[side].append(info)
            print(f"{side:5s} {info['npc_steps_per_s']:>7,} NPC-steps/s  collect {info['collect_s']} s  "
                  f"update {info['update_s']} s  busy {info['cpu_busy']}", flush=True)
    summary = {side: {"checkout": str(sides[side]),
                      "npc_steps_per_s": statistics.median(r["npc_steps_per_s"] for r in rs),
                      "runs": [r["npc_steps_per_s"] for r in rs]} for side, rs in runs.items()}
    for side, row in summary.items():
        print(f"{side}: median {row['npc_steps_per_s']:,.0f} NPC-steps/s ({row['checkout']})")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
