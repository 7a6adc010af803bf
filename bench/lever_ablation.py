"""Ablation of the emergence levers: one training run per lever switched off, each evaluated like the bundled policy.

Every lever of docs/emergence.md ("Levers, and why") is an engine `Tuning` field or a training option, so
switching one off is a `village train` flag. This script trains the bundled policy's command once per lever with
that lever off (same budget, same seed), evaluates each with `village eval` on the held-out generated worlds, and
prints one table beside the reference (all levers on: pass `--reference runs/x/policy.pt` to reuse a run, else it
is trained too).

    python bench/lever_ablation.py --out runs/ablation --json            # all levers, 8M NPC-steps each
    python bench/lever_ablation.py --levers grievance,alive --steps 2000000

Runs are resumable: a lever whose `policy.pt` already exists under --out is not trained again. On the 2-CPU
development machine one 8M-step run takes about 8 minutes, so the whole table takes a bit over an hour.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORLDS = "village-v1,generated:12:1,generated:12:2,generated:12:3,generated:12:4"


def bundled_flags() -> list[str]:
    """The bundled policy's engine overrides (docs/training.md) as `--tuning` flags, and its batch and update
    shape (`--envs`, `--rollout`, `--epochs`, `--minibatches`, `--constraint-rows`) and entity head width
    (`--slot-hidden`), read from the policy file, which stores them: every run starts from them, and a lever's
    flags come after (the last value wins)."""
    from npc_brains import bundled_policy
    from npc_brains.checkpoint import load_checkpoint
    from npc_brains.networks import NetSpec

    default_path = bundled_policy("default")

    if not default_path.is_file():
        return []
    policy = load_checkpoint(default_path)
    config = policy["config"]
    tuning = config.get("tuning") or {}
    flags = [flag for name, value in tuning.items()
             for flag in ("--tuning", f"{name}={str(value).lower() if isinstance(value, bool) else value}")]
    for name in ("envs", "rollout", "epochs", "minibatches"):
        if config.get(name):
            flags += [f"--{name}", str(config[name])]
    # a policy file from before constraint_rows existed evaluated the teacher's KL on every row, and one from
    # before slot_hidden has the entity head's older width (its net spec says which)
    return [*flags, "--constraint-rows", str(config.get("constraint_rows") or 1.0),
            "--slot-hidden", str(NetSpec.from_dict(policy["net"]).slot_hidden)]


# lever -> (what it is, the `village train` flags that switch it off)
LEVERS: dict[str, tuple[str, list[str]]] = {
    "alive": ("being alive is worth something (w_alive 3, death_penalty 10)",
              ["--tuning", "w_alive=0.0", "--tuning", "death_penalty=0.0"]),
    "curriculum": ("mixed scenario: 1-3 killings, rampages", ["--scenario", "random_kill"]),
    "jitter": ("trait jitter per episode (--trait-noise 0.2)", ["--trait-noise", "0"]),
    "near_fear": ("fear sustained only by a near threat, fast relief once safe",
                  ["--tuning", "fear_near=1.0", "--tuning", "fear_safe_half_life=12.0"]),
    "anger_courage": ("anger damps fear, a blow halves fear, justice relief, attackers run",
                      ["--tuning", "anger_fear_damping=0.0", "--tuning", "blow_fear_relief=0.0",
                       "--tuning", "justice_relief=0.0", "--tuning", "charge_speed=1.6"]),
    "grievance": ("ATTACK needs a grievance", ["--tuning", "attack_needs_grievance=false"]),
    "entity_head": ("entity (slot-wise) policy head", ["--no-slot-head"]),
    "work_leisure": ("work worth 2 x diligence, free time 1 x (1 - diligence)",
                     ["--tuning", "w_work=1.0", "--tuning", "w_leisure=0.0"]),
    "grief_work": ("four-tick mourning easing a fixed amount of grief per tick (was six ticks easing 20% of it)",
                   ["--tuning", "mourn_ticks=6", "--tuning", "mourn_relief_linear=false",
                    "--tuning", "mourn_relief=0.2"]),
    "rampage_share": ("rampages in 40% of the training villages (was 25%)", ["--tuning", "curriculum_rampage=0.25"]),
}
METRICS = ("mourning_rate", "revenge_rate", "revenge_accuracy", "fear_rate", "diversity")


def train(run_dir: Path, flags: list[str], steps: int, seed: int, threads: int) -> float:
    """Train into run_dir unless it already holds a finished policy; returns the wall time (0 if reused)."""
    if (run_dir / "policy.pt").is_file():
        return 0.0
    cmd = [sys.executable, "-m", "village", "train", "--world", WORLDS, "--algo", "drmas", "--steps", str(steps),
           "--seed", str(seed), "--threads", str(threads), "--run-dir", str(run_dir), "--no-progress",
           "--overwrite", *bundled_flags(), *flags]
    print("$ " + " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    return time.perf_counter() - t0


def evaluate(policy: Path, seeds: int) -> dict:
    """Held-out figures of `village eval` (plus the untrained network's, for the one-third rule)."""
    cmd = [sys.executable, "-m", "village", "eval", "--policy", str(policy), "--seeds", str(seeds),
           "--compare", "random_init", "--json", "--quiet"]
    out = subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    name = next(k for k in result if k != "random_init")
    return {"trained": result[name]["held_out"], "random_init": result["random_init"]["held_out"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levers", default=",".join(LEVERS),
                        help=f"comma-separated levers to switch off, among: {', '.join(LEVERS)} (default: all)")
    parser.add_argument("--steps", type=int, default=8_000_000, help="NPC-steps per run (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=8, help="eval villages per scenario and world (default: 8)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="policy trained with every lever on (default: train one under --out/reference)")
    parser.add_argument("--out", type=Path, default=Path("runs/ablation"))
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    args = parser.parse_args(argv)
    levers = [x.strip() for x in args.levers.split(",") if x.strip()]
    unknown = [x for x in levers if x not in LEVERS]
    if unknown:
        parser.error(f"--levers: unknown {', '.join(unknown)}; expected some of {', '.join(LEVERS)}")
    args.out.mkdir(parents=True, exist_ok=True)

    rows: dict[str, dict] = {}
    reference = args.reference
    if reference is None:
        train(args.out / "reference", [], args.steps, args.seed, args.threads)
        reference = args.out / "reference" / "policy.pt"
    rows["reference"] = {"what": "every lever on", **evaluate(reference, args.seeds)}
    for lever in levers:
        what, flags = LEVERS[lever]
        seconds = train(args.out / lever, flags, args.steps, args.seed, args.threads)
        rows[lever] = {"what": what, "flags": " ".join(flags), "train_s": round(seconds, 1),
                       **evaluate(args.out / lever / "policy.pt", args.seeds)}
        (args.out / "ablation.json").write_text(json.dumps(rows, indent=1))

    print(f"\nLever ablation: each run {args.steps:,} NPC-steps, seed {args.seed}; held-out generated worlds, "
          f"{args.seeds} villages per scenario and world\n")
    print("| lever switched off | " + " | ".join(METRICS) + " | random_init mourning |")
    print("|---|" + "---:|" * (len(METRICS) + 1))
    for lever, row in rows.items():
        cells = [row["trained"].get(m) for m in METRICS] + [row["random_init"].get("mourning_rate")]
        text = " | ".join("n/a" if v is None else f"{v:.3f}" for v in cells)
        print(f"| {lever} ({row['what']}) | {text} |")
    if args.json:
        print(json.dumps({k: {m: v["trained"].get(m) for m in METRICS} for k, v in rows.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
