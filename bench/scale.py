"""Scaling: training NPC-steps/s with the in-process collector and with 1, 2, 4, ... Ray rollout workers.

    python bench/scale.py [--algo drmas] [--workers 1,2] [--envs-per-worker 64] [--updates 10] [--device auto]
                          [--ray local|auto|ADDRESS] [--world village-v1] [--json]

Every row runs the real trainer for --updates updates (Dr. MAS by default, double buffered; --algo qmix or
maddpg: rounds of one episode length, then the gradient steps, the replay filled by the workers); each worker
steps --envs-per-worker villages, so a run with K workers collects K times the rows of the in-process run per
update (the in-process row steps the same villages as one worker). Two figures per row: end to end (the trainer's
own clock, which starts once the workers are up) and steady state (the updates after the
first two, from metrics.jsonl). With --json the last line is {"rows": [...]}. Rows run one after the other on
one Ray, so on a shared machine the figures move with the load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_row(workers: int, args: argparse.Namespace) -> dict:
    from npc_brains.algorithms import make_trainer
    from npc_brains.config import OFF_POLICY_ALGOS, TrainConfig
    from npc_brains.distributed import RayOptions
    from npc_brains.metrics import read_metrics

    with tempfile.TemporaryDirectory() as tmp:
        base = dict(world=args.world, algo=args.algo, envs=args.envs_per_worker, device=args.device, run_dir=tmp,
                    checkpoint_every=10_000, seed=0)
        if args.algo not in OFF_POLICY_ALGOS:
            base.update(shaping_anneal=0)  # the shaping's action distributions travel with every batch
        probe = make_trainer(TrainConfig(steps=1, **base), tensorboard=False)
        rows_per_village = probe.rows_per_update // probe.B  # NPCs x ticks per update (round)
        villages = args.envs_per_worker * max(workers, 1)
        cfg = TrainConfig(steps=villages * rows_per_village * args.updates, **base)
        options = RayOptions(address=args.ray, workers=workers, envs_per_worker=args.envs_per_worker,
                             cpus_per_worker=args.cpus_per_worker) if workers \
            else None
        trainer = make_trainer(cfg, tensorboard=False, ray=options)
        result = trainer.train()  # its clock starts once the workers (or the child) are up
        rows = [r for r in read_metrics(Path(tmp) / "metrics.jsonl") if "update" in r and "event" not in r]
    first = rows[1] if len(rows) > 3 else rows[0]  # the first updates warm up (allocation, the first weights)
    steady = [r for r in rows if r["update"] > first["update"]]
    steady_rate = (steady[-1]["step"] - first["step"]) / max(steady[-1]["time_s"] - first["time_s"], 1e-9)
    return {"collector": trainer.collector_kind if workers else f"in-process ({trainer.collector_kind})",
            "workers": workers, "villages": trainer.B, "rows_per_update": trainer.rows_per_update,
            "updates": result.updates, "npc_steps_per_s": result.steps / result.seconds,
            "steady_npc_steps_per_s": steady_rate,
            "collect_s": sorted(r["collect_s"] for r in steady)[len(steady) // 2],
            "update_s": sorted(r["update_s"] for r in steady)[len(steady) // 2],
            "device": str(trainer.device)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="drmas", choices=["ippo", "mappo", "drmas", "qmix", "maddpg"],
                        help="the learner (default: drmas; qmix and maddpg fill their replay from the workers)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: 1,2)")
    parser.add_argument("--envs-per-worker", type=int, default=64, help="villages per worker (default: 64)")
    parser.add_argument("--updates", type=int, default=10,
                        help="updates per row (default: 10; the in-process row collects in a child process from 8)")
    parser.add_argument("--device", default="auto", help="the learner's device: auto | cpu | cuda (default: auto)")
    parser.add_argument("--world", default="village-v1", help="world id (default: village-v1)")
    parser.add_argument("--ray", default="local", help="local | auto | HOST:PORT (default: local)")
    parser.add_argument("--cpus-per-worker", type=float, default=1.0,
                        help="CPUs Ray reserves per worker (default: 1; fractions oversubscribe)")
    parser.add_argument("--no-in-process", action="store_true", help="skip the in-process row")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    try:
        counts = [int(k) for k in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers: expected comma-separated integers, got {args.workers!r}")
    if any(k < 1 for k in counts):
        parser.error("--workers: every count must be >= 1")

    from npc_brains.distributed import connect

    connect(args.ray)
    table = []
    for workers in ([] if args.no_in_process else [0]) + counts:
        row = run_row(workers, args)
        table.append(row)
        print(f"{row['collector']:<22} workers {workers:>2}  villages {row['villages']:>4}  "
              f"{row['npc_steps_per_s']:>9,.0f} NPC-steps/s end to end  {row['steady_npc_steps_per_s']:>9,.0f} "
              f"steady  (collect {row['collect_s']:.2f} s, update {row['update_s']:.2f} s per update)",
              file=sys.stderr, flush=True)
    print()
    print("| collector | workers | villages | rows/update | NPC-steps/s end to end | steady NPC-steps/s | "
          "collect s | update s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['collector']} | {r['workers']} | {r['villages']} | {r['rows_per_update']:,} | "
              f"{r['npc_steps_per_s']:,.0f} | {r['steady_npc_steps_per_s']:,.0f} | {r['collect_s']:.2f} | "
              f"{r['update_s']:.2f} |")
    if args.json:
        print(json.dumps({"rows": table}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
