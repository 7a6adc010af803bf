"""The seed's comparison table, measured: IPPO, MAPPO, QMIX, MADDPG and Dr. MAS on the raid-defence task.

    python bench/seed_table.py                    # 5 seeds x 2M NPC-steps per run (a GPU machine's job)
    python bench/seed_table.py --steps 40000      # what a CPU affords; say the step count with the figures
    python bench/seed_table.py --quick            # CPU smoke: 2 seeds, tiny budgets, numbers mean nothing

Every run trains what `village train --world raid-defence-v1 --algo A --seed S --steps N --threads 1` trains
(the same npc_brains.algorithms.make_trainer, in --jobs worker processes).
Then, per run:
    win rate    of the greedy policy on --eval-episodes held-out episodes (seeds no run trained on)
    curve       its training curve (episode_return_mean from metrics.jsonl) on a common grid of steps
Per algorithm (docs/training.md "The seed table" has the exact definitions):
    win rate    IQM over seeds, percentile-bootstrap 95% interval
    efficiency  median steps of MADDPG to reach the threshold return / the algorithm's median steps, where the
                threshold is half-way from random play's return to MADDPG's final return (so MADDPG = 1.0x)
    stability   Chan et al. 2020 (npc_brains.reliability.stability_score) in [0, 1], bootstrap interval over runs
    P(improve)  probability that Dr. MAS's win rate beats the algorithm's (rliable's definition)
Reference policies on the same held-out episodes: uniform random play, the scripted rule
(npc_brains.baselines) and an attack rule (attack a raider whenever the mask allows it, else stay).
Writes table.md, summary.json and curves.png to --out; the seed's own figures stand beside ours, unsourced.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from npc_brains import reliability as rel  # noqa: E402

ALGOS = ("ippo", "mappo", "qmix", "maddpg", "drmas")
NAMES = {"ippo": "IPPO", "mappo": "MAPPO", "qmix": "QMIX", "maddpg": "MADDPG", "drmas": "Dr. MAS"}
# the seed's section 6 (SMACv2, 8 heterogeneous agents, 2M steps): win %, sample efficiency x MADDPG, stability.
# It gives no source; IPPO is not in it.
SEED_FIGURES = {"maddpg": (62.3, 1.0, 0.48), "mappo": (68.7, 1.2, 0.52), "qmix": (71.2, 1.5, 0.56),
                "drmas": (83.5, 2.8, 0.82)}
GRID_POINTS = 20
EVAL_SEED = 1_000_000  # held-out episodes: seeds far from any run's training seeds


# ---------------------------------------------------------------------------------------------- evaluation
def attack_rule(action_names: list[str]):
    """Attack whenever the mask allows an attack (the first allowed target), else stay (idle)."""
    attack = np.array([n.startswith("attack") for n in action_names])
    idle = action_names.index("idle")

    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        can = mask & attack
        return np.where(can.any(1), can.argmax(1), idle)

    return act


def evaluate(choose, world: str, episodes: int, seed: int) -> tuple[float, float]:
    """(win rate, mean per-NPC return) of `choose(obs, mask) -> actions` on `episodes` held-out episodes, all
    played at once (one village each)."""
    from npc_brains.config import TrainConfig
    from npc_brains.envs import make_flat_env

    env = make_flat_env(TrainConfig(world=world), num_envs=episodes, seed=seed)
    obs, info = env.reset(seed)
    while True:
        obs, _, _, _, info = env.step(choose(obs, info["action_mask"]))
        if "episode_wins" in info:  # every village ends at the same tick
            return float(np.mean(info["episode_wins"])), float(info["episode_return_mean"])


def policy_chooser(path: Path):
    from npc_brains import load_policy

    policy = load_policy(path)
    return lambda obs, mask: policy.act(obs, mask, deterministic=True).actions


def references(world: str, episodes: int, seed: int) -> dict[str, dict[str, float]]:
    from npc_brains.baselines import get_baseline
    from npc_brains.config import TrainConfig
    from npc_brains.envs import make_flat_env

    names = make_flat_env(TrainConfig(world=world), num_envs=1, seed=0).action_names
    out = {}
    for name, choose in (("random", get_baseline("random", seed=seed)),
                         ("scripted", get_baseline("scripted", seed=seed)), ("attack rule", None)):
        fn = attack_rule(names) if choose is None else (lambda o, m, p=choose: p.act(o, m).actions)
        win, ret = evaluate(fn, world, episodes, seed)
        out[name] = {"win_rate": win, "return": ret}
    return out


# ---------------------------------------------------------------------------------------------- training
def run_config(algo: str, seed: int, args: argparse.Namespace, run_dir: Path) -> Any:
    """What `village train --world W --algo A --seed S --steps N --threads 1 ...` would train."""
    from npc_brains.config import config_from_dict

    # collector "thread": the same batches as a collector process (tested bit-identical), without a child
    # process per run that a loaded machine may not start in time
    flags: dict[str, Any] = {"world": args.world, "algo": algo, "seed": seed, "steps": args.steps,
                             "run_dir": str(run_dir), "device": args.device, "threads": 1,
                             "checkpoint_every": 1_000_000, "collector": "thread"}
    if algo in ("qmix", "maddpg") and args.batch_episodes:
        flags["batch_episodes"] = args.batch_episodes
    for item in args.train_args:  # key=value pairs in TOML syntax
        key, _, text = item.partition("=")
        from npc_brains.config import toml_module

        flags[key.lstrip("-").replace("-", "_")] = toml_module().loads(f"v = {text}")["v"]
    return config_from_dict(flags, source="seed_table")


def train_run(algo: str, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train one run (in a worker process) and evaluate its greedy policy on held-out episodes."""
    import shutil

    from npc_brains.algorithms import make_trainer

    run_dir = out / "runs" / f"{algo}-s{seed}"
    done = run_dir / "result.json"
    if args.reuse and done.is_file():
        result = json.loads(done.read_text())
        if result.get("steps") == args.steps and result.get("eval_episodes") == args.eval_episodes:
            return result
    start = time.perf_counter()
    finished = args.reuse and (run_dir / "policy.pt").is_file() and _last_step(run_dir) >= args.steps
    if not finished:
        shutil.rmtree(run_dir, ignore_errors=True)
        make_trainer(run_config(algo, seed, args, run_dir), tensorboard=False).train()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [(r["step"], r["episode_return_mean"]) for r in rows
             if "event" not in r and r.get("episode_return_mean") is not None]
    train_s = time.perf_counter() - start
    win, ret = evaluate(policy_chooser(run_dir / "policy.pt"), args.world, args.eval_episodes, EVAL_SEED + seed)
    (run_dir / "checkpoints" / "last.pt").unlink(missing_ok=True)  # the replay makes these large
    result = {"algo": algo, "seed": seed, "win_rate": win, "return": ret, "curve": curve, "train_s": train_s,
              "steps": args.steps, "eval_episodes": args.eval_episodes, "reused": bool(finished)}
    done.write_text(json.dumps(result))
    return result


def _last_step(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [json.loads(line).get("step", 0) for line in path.read_text().splitlines() if line.strip()]
    return max(steps, default=0)


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)


def on_grid(curve: list[tuple[float, float]], grid: np.ndarray) -> np.ndarray:
    if not curve:
        return np.full(grid.shape, np.nan)
    steps, values = np.array(curve, np.float64).T
    return np.interp(grid, steps, values)


# ---------------------------------------------------------------------------------------------- aggregation
def aggregate(runs: list[dict[str, Any]], algos: list[str], steps: int, random_return: float,
              reps: int = 2000) -> dict[str, Any]:
    grid = np.linspace(steps / GRID_POINTS, steps, GRID_POINTS)
    metrics = rel.rliable_metrics()
    iqm = metrics.aggregate_iqm if metrics is not None else rel.iqm
    poi = ((lambda x, y: float(metrics.probability_of_improvement(np.asarray(x)[:, None], np.asarray(y)[:, None])))
           if metrics is not None else rel.probability_of_improvement)
    per: dict[str, Any] = {}
    for algo in algos:
        mine = sorted((r for r in runs if r["algo"] == algo), key=lambda r: r["seed"])
        if not mine:
            continue
        curves = np.stack([on_grid(r["curve"], grid) for r in mine])
        wins = np.array([r["win_rate"] for r in mine])
        finals = curves[:, -3:].mean(1)
        score = rel.stability_score(curves)
        per[algo] = {"seeds": [r["seed"] for r in mine], "win_rates": wins.tolist(),
                     "returns": [r["return"] for r in mine], "win_iqm": float(iqm(wins)),
                     "win_ci": rel.bootstrap_ci(wins, lambda x: float(iqm(x)), reps),
                     "return_iqm": float(iqm(np.array([r["return"] for r in mine]))),
                     "final_train_return_iqm": float(iqm(finals)), "curves": curves.tolist(),
                     "stability": score,
                     "stability_ci": rel.bootstrap_ci(np.arange(len(mine)),
                                                      lambda i, c=curves: rel.stability_score(c[i])["stability"],
                                                      reps // 4)}
    anchor = per.get("maddpg")
    threshold = None
    if anchor is not None:
        threshold = random_return + 0.5 * (anchor["final_train_return_iqm"] - random_return)
        ref = np.median([rel.steps_to_threshold(grid, c, threshold) for c in anchor["curves"]])
        for entry in per.values():
            reach = [rel.steps_to_threshold(grid, c, threshold) for c in entry["curves"]]
            mid = float(np.median(reach))
            entry["steps_to_threshold"] = reach
            entry["efficiency"] = (float(ref / mid) if math.isfinite(mid) and math.isfinite(ref) else None)
    if "drmas" in per:
        for algo, entry in per.items():
            if algo != "drmas":
                entry["p_drmas_better"] = poi(per["drmas"]["win_rates"], entry["win_rates"])
    return {"grid": grid.tolist(), "threshold": threshold, "algos": per,
            "stats": "rliable.metrics" if metrics is not None else "npc_brains.reliability"}


def markdown(summary: dict[str, Any], refs: dict[str, dict[str, float]], command: str) -> str:
    lines = [f"`{command}`", "",
             f"{summary['runs_per_algo']} seeds x {summary['steps']:,} NPC-steps per run on {summary['world']}; "
             f"greedy win rate on {summary['eval_episodes']} held-out episodes per seed; threshold return "
             f"{summary['threshold']:.3f} (half-way from random play to MADDPG's final training return); "
             f"aggregates by {summary['stats']}; {summary['wall_s']:.0f} s wall-clock." if summary["threshold"]
             is not None else f"{summary['steps']:,} NPC-steps per run; no MADDPG runs, so no efficiency.", "",
             "| algorithm | win rate, IQM [95% CI] | held-out return (IQM) | sample efficiency (x MADDPG) | "
             "stability [95% CI] | P(Dr. MAS better) | seed, unsourced: win / efficiency / stability |",
             "|---|---|---|---|---|---|---|"]
    for algo, e in summary["algos"].items():
        lo, hi = e["win_ci"]
        slo, shi = e["stability_ci"]
        eff = "not reached" if e.get("efficiency") is None else f"{e['efficiency']:.2f}x"
        p = "" if "p_drmas_better" not in e else f"{e['p_drmas_better']:.2f}"
        seed = SEED_FIGURES.get(algo)
        seed_text = "(not in the seed)" if seed is None else f"{seed[0]:.1f}% / {seed[1]:.1f}x / {seed[2]:.2f}"
        lines.append(f"| {NAMES[algo]} | {100 * e['win_iqm']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] | "
                     f"{e['return_iqm']:.2f} | {eff} | {e['stability']['stability']:.2f} [{slo:.2f}, {shi:.2f}] | "
                     f"{p} | {seed_text} |")
    lines += ["", "Reference policies on the same held-out episodes: " + ", ".join(
        f"{name} {100 * v['win_rate']:.1f}% wins (return {v['return']:.2f})" for name, v in refs.items()) + "."]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.array(summary["grid"])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for algo, e in summary["algos"].items():
        c = np.array(e["curves"])
        mid = np.median(c, 0)
        lo, hi = np.percentile(c, [25, 75], axis=0)
        ax.plot(grid, mid, label=NAMES[algo])
        ax.fill_between(grid, lo, hi, alpha=0.2)
    if summary["threshold"] is not None:
        ax.axhline(summary["threshold"], color="grey", lw=0.8, ls="--", label="threshold")
    ax.set_xlabel("NPC-steps")
    ax.set_ylabel("training episode return (per NPC)")
    ax.set_title(f"{summary['world']}: median and interquartile band over {summary['runs_per_algo']} seeds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--algos", default=",".join(ALGOS), help="comma-separated algorithms to run")
    parser.add_argument("--seeds", type=int, default=5, help="seeds (runs) per algorithm (the table wants >= 5)")
    parser.add_argument("--steps", type=int, default=2_000_000, help="NPC-steps per run")
    parser.add_argument("--eval-episodes", type=int, default=100, help="held-out episodes per run for its win rate")
    parser.add_argument("--world", default="raid-defence-v1", help="a world with a win condition (engine.tasks)")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                        help="runs trained at once (each uses one torch thread)")
    parser.add_argument("--device", default="cpu", help="device of every run (cpu, cuda, auto)")
    parser.add_argument("--batch-episodes", type=int, default=0,
                        help="qmix/maddpg episodes per gradient step (0 = their default, 32)")
    parser.add_argument("--out", default="runs/seed_table", help="directory for runs/, table.md, summary.json, "
                                                                 "curves.png")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the runs in --out that already finished with the same --steps (their metrics "
                             "and policy.pt) and train only the missing ones")
    parser.add_argument("--quick", action="store_true", help="CPU smoke run: 2 seeds, 1,536 steps, 10 episodes")
    parser.add_argument("--train-args", default="", help="extra training options for every run, quoted, as "
                                                         "KEY=VALUE pairs (TOML values): 'lr=1e-3 hidden=64'")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.eval_episodes = 2, 1536, 10
        args.batch_episodes = args.batch_episodes or 2
    args.train_args = args.train_args.split()
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    bad = [a for a in algos if a not in ALGOS]
    if bad or args.seeds < 1 or args.steps < 1 or args.eval_episodes < 1:
        print(f"seed_table: expected --algos from {', '.join(ALGOS)}, --seeds/--steps/--eval-episodes >= 1 "
              f"(got {bad or ''} {args.seeds} {args.steps} {args.eval_episodes})", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python bench/seed_table.py " + " ".join(argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    from tqdm import tqdm

    jobs = [(a, s) for s in range(args.seeds) for a in algos]
    runs: list[dict[str, Any]] = []
    failed: list[str] = []
    # worker processes (spawned: nothing of this process's state is shared) each import torch once
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=context, initializer=_worker_init) as pool, \
            tqdm(total=len(jobs), unit="run", desc="seed table") as bar:
        futures = {pool.submit(train_run, a, s, args, out): (a, s) for a, s in jobs}
        for fut in as_completed(futures):
            algo, seed = futures[fut]
            try:
                runs.append(fut.result())
            except Exception as exc:  # noqa: BLE001 (one failed run is reported, the others still count)
                failed.append(f"{algo} seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                print(f"seed_table: {failed[-1]}", file=sys.stderr)
            else:
                bar.set_postfix_str(f"{algo} s{seed}: win {runs[-1]['win_rate']:.2f}")
            bar.update(1)
    refs = references(args.world, args.eval_episodes, EVAL_SEED)
    summary = aggregate(runs, algos, args.steps, refs["random"]["return"])
    summary.update(world=args.world, steps=args.steps, runs_per_algo=args.seeds, eval_episodes=args.eval_episodes,
                   wall_s=time.perf_counter() - start, references=refs, command=command,
                   train_seconds={f"{r['algo']}-s{r['seed']}": r["train_s"] for r in runs})
    summary["failed"] = failed
    table = markdown(summary, refs, command)
    if failed:
        table += "\nFailed runs (left out): " + "; ".join(failed) + "\n"
    (out / "table.md").write_text(table)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "curves.png")
    print(table)
    print(f"seed_table: wrote {out / 'table.md'}, {out / 'summary.json'}, {out / 'curves.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
