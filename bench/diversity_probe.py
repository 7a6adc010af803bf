"""Where does a policy's personality diversity (SND) come from? `diversity` split by the situation probed.

`village eval`'s `diversity` is the mean, over probe observations of free NPCs and over pairs of the world's
personalities swapped into them, of the total-variation distance between the two action distributions. This
probe records the same observations (the emergence suite's scenarios, `village eval`'s probe sampling) and feeds
them to the policy and to the scripted rules alike, so both are measured on one set of situations. Each
observation is put in the first situation it matches:

- `threat`: a known threat (a killer, a raider) is in a slot, alive as far as the NPC knows;
- `bereaved`: a close relation known to be dead is in a slot, or grief is left;
- `stirred`: fear or anger is left, no threat in a slot;
- `night`: none of the above, at night;
- `day`: none of the above, by day.

Per situation it prints the share of observations, each policy's mean TV (its SND there), and that situation's
share of the policy's overall SND; then the actions whose probability differs most between personalities
(the mean over observations of max minus min across personalities). It also prints the SND of the greedy choice
(`village eval`'s `diversity_played` under `--deterministic`: the share of (observation, pair) cases in which two
personalities' most likely actions differ) and how many of those differences are near ties: each personality's
probability of its own choice within `NEAR_TIE` of the other's choice, a difference a slight change of the
network would undo. `--greedy` plays the runs greedily (as `village eval --deterministic`) instead of sampling;
`--untrained` (with `--untrained-draws K`) probes the policy's untrained network (or a population of K of them,
`village eval --random-init-draws K`), whose greedy differences are near ties.

    python bench/diversity_probe.py --policy default --world generated:12:10000
    python bench/diversity_probe.py --policy runs/x/policy.pt --world generated:24:10000 --villages 32 --json
    python bench/diversity_probe.py --policy default --world generated:12:10000 --villages 8 --greedy

`--villages` and `--seed` as `village eval`'s `--seeds` and seed: the probe rows are the same ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]  # the repo, bench/

from _probe_common import (  # noqa: E402
    add_probe_args,
    add_untrained_arg,
    probe_policy,
    read_probe_args,
    tick_progress,
)

from engine.constants import ACTION_NAMES, GRIEF_LEFT  # noqa: E402
from engine.metrics import pairwise_tv  # noqa: E402
from engine.observe import SELF_FEATURES, SLOT_FEATURES  # noqa: E402
from engine.village import action_tables  # noqa: E402
from npc_brains.baselines import ScriptedRules  # noqa: E402

SITUATIONS = ("threat", "bereaved", "stirred", "night", "day")
CLOSE_AFFINITY = ScriptedRules().close_affinity  # a close relation as the rules read it from an observation
NEAR_TIE = 0.05  # a greedy choice that differs by less than this much probability on both sides is a near tie


def situations(obs: np.ndarray, slots: int) -> np.ndarray:
    """(P,) index into SITUATIONS of each observation row."""
    own = {n: obs[:, k] for k, n in enumerate(SELF_FEATURES)}
    s = obs[:, len(SELF_FEATURES):].reshape(len(obs), slots, len(SLOT_FEATURES))
    slot = {n: s[:, :, k] for k, n in enumerate(SLOT_FEATURES)}
    present, alive = slot["present"] > 0.5, slot["believed_alive"] > 0.5
    threat = (present & alive & (slot["known_threat"] > 0.5)).any(1)
    close = (slot["affinity"] >= CLOSE_AFFINITY) | (slot["kin"] > 0.5) | (slot["spouse"] > 0.5)
    bereaved = (present & (slot["known_dead"] > 0.5) & close).any(1) | (own["grief"] >= GRIEF_LEFT)
    stirred = (own["fear_max"] >= GRIEF_LEFT) | (own["anger_max"] >= GRIEF_LEFT)
    night = own["night"] > 0.5
    return np.select([threat, bereaved, stirred, night], [0, 1, 2, 3], default=4)


def greedy_choices(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (observation, personality pair) of probs (P, G, A): (their most likely actions differ, and the difference
    is a near tie: each one's probability of its own choice within NEAR_TIE of the other's choice)."""
    gi, hi = np.triu_indices(probs.shape[1], 1)
    best = probs.argmax(-1)
    a, b = best[:, gi], best[:, hi]

    def margin(side: np.ndarray, own: np.ndarray, other: np.ndarray) -> np.ndarray:
        return (np.take_along_axis(side, own[..., None], -1) - np.take_along_axis(side, other[..., None], -1))[..., 0]

    differ = a != b
    near = differ & (margin(probs[:, gi], a, b) < NEAR_TIE) & (margin(probs[:, hi], b, a) < NEAR_TIE)
    return differ, near


def probe(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int, on_tick: Any,
          rows_from: str = "policy", deterministic: bool = False) -> dict[str, Any]:
    """The probe rows of every scenario (as `village eval` samples them from `rows_from`'s runs: "policy" or
    "scripted"; played greedily with `deterministic`) and their split by situation."""
    from engine.scenarios import run_scenario
    from npc_brains.baselines import ScriptedPolicy
    from npc_brains.evaluate import UntrainedPopulation, persona_probs, played_distribution, policy_slots, policy_tuning

    slots = policy_slots(policy)
    scripted = ScriptedPolicy(slots=slots)
    kinds, _ = action_tables(slots)
    rows: dict[str, list[np.ndarray]] = {"situation": [], "policy": [], "scripted": [], "spread": [], "differ": [],
                                         "near": [], "greedy": []}
    for si, scenario in enumerate(scenarios):
        player = scripted if rows_from == "scripted" else policy
        trace = run_scenario(player, scenario, spec, villages=villages, seed=seed + 1009 * si, slots=slots,
                             tuning=policy_tuning(policy), on_tick=on_tick, deterministic=deterministic)
        if len(trace.probe_obs) == 0 or len(trace.personas) < 2:
            continue
        # personalities are compared within one network: a population's figures are its draws' means, as in
        # village eval (npc_brains.evaluate.probe_diversities)
        nets = policy.draws if isinstance(policy, UntrainedPopulation) else [policy]
        per_net = [persona_probs(net, trace) for net in nets]
        if any(mine is None for mine in per_net):  # SND is defined on action distributions
            raise SystemExit(f"{getattr(policy, 'name', 'the policy')} gives no action probabilities to probe")
        rows["situation"].append(situations(trace.probe_obs, slots))
        # per observation: its share of the SND
        rows["policy"].append(np.mean([pairwise_tv(mine).mean(1) for mine in per_net], 0))
        rows["greedy"].append(np.mean([pairwise_tv(played_distribution(mine, deterministic=True)).mean(1)
                                       for mine in per_net], 0))
        for mine in per_net:
            differ, near = greedy_choices(mine)
            rows["differ"].append(differ.ravel())
            rows["near"].append(near.ravel())
        rows["scripted"].append(pairwise_tv(persona_probs(scripted, trace)).mean(1))
        # per action kind: summed over slots, then the spread across personalities
        spreads = []
        for mine in per_net:
            by_kind = np.stack([mine[:, :, kinds == k].sum(-1) for k in range(int(kinds.max()) + 1)], -1)
            spreads.append(by_kind.max(1) - by_kind.min(1))
        rows["spread"].append(np.mean(spreads, 0))
    if not rows["situation"]:
        raise SystemExit("no probe observations: the scenarios recorded no free NPC")
    sit, tv_p, tv_s = (np.concatenate(rows[k]) for k in ("situation", "policy", "scripted"))
    spread = np.concatenate(rows["spread"])
    differ, near = np.concatenate(rows["differ"]), np.concatenate(rows["near"])
    out: dict[str, Any] = {"observations": len(sit), "snd": float(tv_p.mean()), "scripted_snd": float(tv_s.mean()),
                           "greedy_snd": float(np.concatenate(rows["greedy"]).mean()),
                           "near_tie_share": float(near.sum() / differ.sum()) if differ.any() else None,
                           "situations": {}}
    for k, name in enumerate(SITUATIONS):
        here = sit == k
        n = int(here.sum())
        out["situations"][name] = {
            "share": n / len(sit),
            "snd": float(tv_p[here].mean()) if n else None,
            "scripted_snd": float(tv_s[here].mean()) if n else None,
            "share_of_snd": float(tv_p[here].sum() / max(tv_p.sum(), 1e-12)),
            "share_of_scripted_snd": float(tv_s[here].sum() / max(tv_s.sum(), 1e-12)),
            "spread": {str(a): float(spread[here, a].mean()) for a in range(spread.shape[1])} if n else {},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios="all", seed=0)
    parser.add_argument("--rows-from", choices=("policy", "scripted"), default="policy",
                        help="whose runs give the probe observations (village eval: each policy its own; "
                             "default: %(default)s)")
    add_untrained_arg(parser)
    args = parser.parse_args(argv)
    spec, scenarios, policy = read_probe_args(parser, args)
    policy, who = probe_policy(parser, args, policy)
    with tick_progress(scenarios, args.quiet) as on_tick:
        out = probe(policy, spec, scenarios, args.villages, args.seed, on_tick, args.rows_from, args.greedy)
    ratio = out["snd"] / out["scripted_snd"] if out["scripted_snd"] else float("nan")
    print(f"{who} on {args.world}: SND {out['snd']:.3f}, scripted rules {out['scripted_snd']:.3f} on the same "
          f"{out['observations']} observations from the {args.rows_from} runs (ratio {ratio:.2f})")
    near = "n/a" if out["near_tie_share"] is None else f"{out['near_tie_share']:.3f}"
    print(f"greedy choice: SND {out['greedy_snd']:.3f} (village eval --deterministic's diversity_played), of which "
          f"near ties (within {NEAR_TIE} on both sides) {near}")
    print(f"{'situation':9s} {'share':>6s} {'SND':>6s} {'rules':>6s} {'of SND':>7s} {'of rules':>8s}  "
          "most personal actions")
    for name, s in out["situations"].items():
        if s["snd"] is None:
            print(f"{name:9s} {0:6.3f}")
            continue
        top = sorted(s["spread"].items(), key=lambda kv: -kv[1])[:3]
        print(f"{name:9s} {s['share']:6.3f} {s['snd']:6.3f} {s['scripted_snd']:6.3f} {s['share_of_snd']:7.3f} "
              f"{s['share_of_scripted_snd']:8.3f}  " + ", ".join(f"{ACTION_NAMES[int(a)]} {v:.2f}" for a, v in top))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
