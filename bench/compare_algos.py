"""IPPO vs MAPPO vs Dr. MAS on one world, same budget, several seeds; plus a Dr. MAS ablation table.

    python bench/compare_algos.py [--quick] [--steps N] [--seeds 3] [--world village-v1] [--no-ablation]
                                  [--out bench/results/compare] [--set key=value ...] [--json]

For every run: final return (mean of the last 3 epochs), steps until the smoothed return curve first reaches
a threshold (sample efficiency relative to IPPO), and the stability metrics of npc_brains.stability over
the whole curve. Learning curves (mean +- std over seeds) are saved as PNG next to summary.json.
The threshold is 80% of the way from the mean first-epoch return to IPPO's mean final return (or to the
best algorithm's, when IPPO made no progress).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

ABLATIONS: dict[str, dict[str, Any]] = {
    "drmas": {},
    "-agent_adv_norm": {"adv_norm": "global"},
    "-film": {"film": False},
    "-contrastive": {"contrastive": 0.0},
    "-constraint": {"constraint": 0.0},
    "-shaping": {"shaping": False},
    "-sync_check": {"sync_check": False},
    "-double_buffer": {"double_buffer": False},
    "-rollback": {"rollback": False},
    "+replay_7_3": {"replay_old_frac": 0.3},
    "+policy_delay_2": {"policy_delay": 2},
}


def run_one(name: str, algo: str, seed: int, steps: int, out: Path, common: dict, extra: dict) -> dict:
    from npc_brains.config import config_from_dict
    from npc_brains.metrics import read_metrics
    from npc_brains.stability import dispersion, max_drawdown, oscillation, smoothed
    from npc_brains.trainer import Trainer

    run_dir = out / "runs" / f"{name}-s{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = config_from_dict({**common, **extra, "algo": algo, "seed": seed, "steps": steps, "run_dir": str(run_dir),
                            "checkpoint_every": 10_000})
    start = time.perf_counter()
    result = Trainer(cfg).train()
    wall = time.perf_counter() - start
    rows = read_metrics(run_dir / "metrics.jsonl")
    epochs = [r for r in rows if r.get("epoch") is not None and "event" not in r]
    steps_curve = np.array([r["step"] for r in epochs], float)
    curve = np.array([r["episode_return_mean"] for r in epochs], float)
    conflicts = [r["grad_conflict"] for r in rows if r.get("grad_conflict") is not None]
    events = [r for r in rows if "event" in r]
    tail = curve[-3:] if curve.size else np.array([np.nan])
    return {
        "name": name, "algo": algo, "seed": seed, "steps": steps_curve.tolist(), "curve": curve.tolist(),
        "first": float(curve[0]) if curve.size else math.nan,
        "final": float(tail.mean()),
        "oscillation_last5": oscillation(curve[-5:], max(0.1 * abs(curve[0]), 1e-6)) if curve.size >= 2 else math.nan,
        "oscillation_all": oscillation(curve, max(0.1 * abs(curve[0]), 1e-6)) if curve.size >= 2 else math.nan,
        "dispersion": dispersion(curve) if curve.size >= 3 else math.nan,
        "max_drawdown": max_drawdown(smoothed(curve)) if curve.size else math.nan,
        "grad_conflict": float(np.mean(conflicts)) if conflicts else math.nan,
        "rollbacks": sum(e.get("event") == "rollback" for e in events),
        "unstable_events": sum(e.get("event") == "unstable" for e in events),
        "wall_s": wall, "sps": result.steps / max(wall, 1e-9),
    }


def steps_to(run: dict, threshold: float) -> float:
    from npc_brains.stability import smoothed

    if not run["curve"]:
        return math.nan
    sm = smoothed(run["curve"])
    hit = np.flatnonzero(sm >= threshold)
    return float(run["steps"][hit[0]]) if hit.size else math.nan


def summarise(runs: list[dict], threshold: float, reference: str | None) -> dict[str, dict]:
    by: dict[str, list[dict]] = {}
    for r in runs:
        by.setdefault(r["name"], []).append(r)
    table: dict[str, dict] = {}
    for name, rs in by.items():
        finals = np.array([r["final"] for r in rs])
        hits = np.array([steps_to(r, threshold) for r in rs])
        table[name] = {
            "seeds": len(rs),
            "final_mean": float(np.nanmean(finals)), "final_std": float(np.nanstd(finals)),
            "steps_to_threshold_mean": float(np.nanmean(hits)) if np.isfinite(hits).any() else None,
            "reached_threshold": int(np.isfinite(hits).sum()),
            **{k: float(np.nanmean([r[k] for r in rs])) for k in ("oscillation_last5", "oscillation_all",
                                                                  "dispersion", "max_drawdown", "grad_conflict",
                                                                  "sps", "wall_s")},
            "seed_std_of_final": float(np.nanstd(finals)),
            "rollbacks": int(sum(r["rollbacks"] for r in rs)),
            "unstable_events": int(sum(r["unstable_events"] for r in rs)),
        }
    if reference in table and table[reference]["steps_to_threshold_mean"]:
        ref = table[reference]["steps_to_threshold_mean"]
        for row in table.values():
            s = row["steps_to_threshold_mean"]
            row["sample_efficiency_vs_" + reference] = (ref / s) if s else None
    return table


def plot(runs: list[dict], names: list[str], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from npc_brains.stability import smoothed

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in names:
        rs = [r for r in runs if r["name"] == name and r["curve"]]
        if not rs:
            continue
        grid = np.linspace(max(min(r["steps"][0] for r in rs), 1), min(r["steps"][-1] for r in rs), 100)
        ys = np.array([np.interp(grid, r["steps"], smoothed(r["curve"])) for r in rs])
        mean, std = ys.mean(0), ys.std(0)
        ax.plot(grid, mean, label=f"{name} (n={len(rs)})")
        ax.fill_between(grid, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("NPC-steps")
    ax.set_ylabel("mean per-NPC episode return (3-epoch smoothed)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def print_table(title: str, table: dict[str, dict], reference: str) -> None:
    eff = "sample_efficiency_vs_" + reference
    print(f"\n{title}")
    print(f"{'variant':<18} {'final mean+-std':>18} {'steps->thr':>11} {'eff':>5} {'osc(last5)':>10} "
          f"{'disp':>6} {'maxDD':>6} {'conflict':>8} {'rb':>3} {'unst':>4} {'steps/s':>8}")
    for name, r in table.items():
        print(f"{name:<18} {fmt(r['final_mean']):>9} +- {fmt(r['final_std']):<6} "
              f"{fmt(r['steps_to_threshold_mean'], 0):>11} {fmt(r.get(eff)):>5} {fmt(r['oscillation_last5'], 3):>10} "
              f"{fmt(r['dispersion']):>6} {fmt(r['max_drawdown']):>6} {fmt(r['grad_conflict'], 3):>8} "
              f"{r['rollbacks']:>3} {r['unstable_events']:>4} {fmt(r['sps'], 0):>8}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="village-v1")
    parser.add_argument("--steps", type=int, default=None, help="NPC-steps per run (default 2M, 150k with --quick)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--algos", default="ippo,mappo,drmas")
    parser.add_argument("--no-ablation", action="store_true", help="skip the Dr. MAS ablation runs")
    parser.add_argument("--ablations", default=None, help="comma-separated subset of: " + ",".join(ABLATIONS))
    parser.add_argument("--quick", action="store_true", help="a small budget to check the pipeline")
    parser.add_argument("--out", default="bench/results/compare")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="trainer option for every run")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    import tomllib

    steps = args.steps or (150_000 if args.quick else 2_000_000)
    common: dict[str, Any] = {"world": args.world, "device": args.device}
    for item in args.set:
        key, _, value = item.partition("=")
        common[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    ablations = [] if args.no_ablation else [
        a for a in (args.ablations.split(",") if args.ablations else ABLATIONS) if a != "drmas"]
    unknown = [a for a in ablations if a not in ABLATIONS]
    if unknown:
        parser.error(f"--ablations: unknown {unknown}; choose from {list(ABLATIONS)}")
    seeds = list(range(args.seeds))
    runs: list[dict] = []
    plan = [(a, a, {}) for a in algos] + [(name, "drmas", ABLATIONS[name]) for name in ablations]
    for i, (name, algo, extra) in enumerate(plan):
        for seed in seeds:
            run = run_one(name, algo, seed, steps, out, common, extra)
            runs.append(run)
            print(f"[{i + 1}/{len(plan)}] {name} seed {seed}: final {run['final']:.2f} "
                  f"({run['wall_s']:.0f}s, {run['sps']:,.0f} steps/s)", flush=True)
    firsts = [r["first"] for r in runs if math.isfinite(r["first"])]
    initial = float(np.mean(firsts)) if firsts else 0.0
    finals = {a: float(np.nanmean([r["final"] for r in runs if r["name"] == a])) for a in algos}
    target = finals.get("ippo", -math.inf)
    if not target > initial:
        target = max(finals.values(), default=initial)
    threshold = initial + 0.8 * (target - initial)
    reference = "ippo" if "ippo" in algos else algos[0]
    main_table = summarise([r for r in runs if r["name"] in algos], threshold, reference)
    ablation_table = summarise([r for r in runs if r["name"] == "drmas" or r["name"] in ablations], threshold,
                               "drmas") if ablations else {}
    print(f"\n{args.world}, {steps:,} NPC-steps per run, seeds {seeds}; threshold {threshold:.2f} "
          f"(initial {initial:.2f})")
    print_table("algorithms", main_table, reference)
    if ablation_table:
        print_table("Dr. MAS ablation (each component switched off alone, or an optional one on)", ablation_table,
                    "drmas")
    pngs = []
    if plot(runs, algos, out / "learning_curves.png", f"{args.world}: IPPO vs MAPPO vs Dr. MAS"):
        pngs.append(str(out / "learning_curves.png"))
    if ablation_table and plot(runs, ["drmas", *ablations], out / "ablation_curves.png",
                               f"{args.world}: Dr. MAS ablation"):
        pngs.append(str(out / "ablation_curves.png"))
    summary = {"world": args.world, "steps_per_run": steps, "seeds": len(seeds), "threshold": threshold,
               "initial_return": initial, "algorithms": main_table, "ablation": ablation_table, "plots": pngs,
               "options": common}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "runs.json").write_text(json.dumps(runs))
    print(f"\nplots: {', '.join(pngs) or 'none (matplotlib missing)'}; summary: {out / 'summary.json'}")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
