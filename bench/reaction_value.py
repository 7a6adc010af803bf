"""What is a reaction worth to the NPC, under a given policy? A one-shot deviation test.

For each eligible NPC, the first time it is free in the reaction's situation, force the reaction once (then let
the policy carry on) and compare its return from then on with the same runs left alone (same seeds, same
villages). The difference is roughly the advantage PPO sees when it samples the reaction: if it is negative, the
policy cannot learn the reaction from that state, whatever the exploration.

By default one NPC per village is forced (the first to be eligible), so the figure is one villager's deviation
with the rest of the village behaving as the policy does; `--force all` forces every eligible NPC of a village,
which also measures what the village loses when all of them do it at once (for FLEE: a smaller crowd against
the killer, who then lives to kill more of them).

    python bench/reaction_value.py --policy runs/x/policy.pt --json
    python bench/reaction_value.py --policy default --situations flee --tuning hunt_nearest=true

`--tuning FIELD=VALUE` (repeatable) changes the world on top of the one the policy learned in, to screen a lever
before training with it: a reaction whose forced value turns positive in the changed world is one PPO can find
there (the continuation is still the given policy's, so the figure is a first look, not the trained outcome).

Situations:
- revenge: an aggressive (>= 0.6) NPC that knows the player killed someone it cares about (anger at the player
  > 0.3), the player alive; the forced action is ATTACK on the player;
- flee: a timid (bravery <= 0.4) NPC that knows the player is a threat, fears it (> 0.2) and is within sight of
  it; the forced action is FLEE from the player;
- mourn: an NPC grieving (> 0.3) a dead NPC it knows of, kin or liked (affinity >= 0.5); the forced action is
  MOURN at that body;
- work: a calm NPC by day (no grief, anger or fear) with diligence >= 0.5; the forced action is WORK.

The return is split into the reward's terms (anger, fear, grief, needs, health costs; alive time) so a negative
value can be traced to its cause. Runs the `mixed` training scenario on generated worlds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.constants import Action, Personality  # noqa: E402
from engine.sim import VillageSim, flat_action  # noqa: E402
from npc_brains.evaluate import policy_slots  # noqa: E402
from npc_brains.tuning import policy_tuning  # noqa: E402
from worlds.generate import generate_world  # noqa: E402

TERMS = ("anger_cost", "fear_cost", "grief_cost", "needs_cost", "alive_ticks")


def _eligible(sim: VillageSim, situation: str) -> np.ndarray:
    s, N = sim.state, sim.N
    player = sim.player
    free = s.alive[:, :N] & ~s.busy & s.alive[:, player][:, None]
    p = Personality.of(sim.w.traits)
    if situation == "revenge":
        knows = (s.known_culprit[:, :, :N] == player).any(-1)
        return free & knows & (p.aggression >= 0.6) & (s.anger[:, :, player] > 0.3)
    if situation == "mourn":
        return free & (s.grief > 0.3)
    if situation == "work":
        calm = (s.grief < 0.05) & (s.anger.sum(-1) < 0.05) & (s.fear.sum(-1) < 0.05)
        day = (s.tick % 144 >= 42) & (s.tick % 144 < 108)  # 07:00 to 18:00
        return free & calm & day[:, None] & (p.diligence >= 0.5)
    d = np.linalg.norm(s.pos[:, :N] - s.pos[:, player][:, None], axis=-1)
    return (free & (p.bravery <= 0.4) & s.knows_threat[:, :, player] & (s.fear[:, :, player] > 0.2)
            & (d < sim.w.sight_radius[:, None]))


def run(policy, situation: str, world_seed: int, villages: int, seed: int, deviate: bool,
        every_eligible: bool = False) -> dict:
    # the world the policy learned in: its engine overrides (hunt_nearest, rampages...) are part of the situation
    sim = VillageSim(generate_world(12, world_seed), villages, seed=seed, scenario="mixed", slots=policy_slots(policy),
                     tuning=policy_tuning(policy))
    B, N, K = sim.B, sim.N, sim.K
    player = sim.player
    kind = {"revenge": Action.ATTACK, "flee": Action.FLEE, "mourn": Action.MOURN, "work": Action.WORK}[situation]
    tracked = np.zeros((B, N), bool)
    ret = 0.0
    terms = np.zeros(len(TERMS))
    for _ in range(sim.max_ticks):
        acts = policy.act(sim.obs.reshape(B * N, -1), sim.mask.reshape(B * N, -1)).actions.reshape(B, N)
        for b, i in zip(*np.nonzero(_eligible(sim, situation) & ~tracked), strict=True):
            if not every_eligible and tracked[b].any():
                continue  # one NPC per village: this village's was forced already
            if situation == "work":
                a = flat_action(kind, 0, K)
            else:
                target = player if situation in ("revenge", "flee") else -1
                if situation == "mourn":  # the dead NPC it knows of and cares about most
                    st = sim.state
                    liking = st.affinity[b, i, :N]
                    dead = ~st.alive[b, :N] & st.knows_death[b, i, :N] & ((liking >= 0.5) | sim.w.kin[b, i])
                    if not dead.any():
                        continue
                    target = int(np.flatnonzero(dead)[np.argmax(liking[dead])])
                slots = np.flatnonzero(sim.observer.slot_entity[b, i] == target)
                if not len(slots):
                    continue
                a = flat_action(kind, int(slots[0]), K)
            if sim.mask[b, i, a]:
                tracked[b, i] = True
                if deviate:
                    acts[b, i] = a
        sim.step(acts)
        s, tr = sim.state, sim.w.traits
        live = tracked & s.alive[:, :N]
        ret += float(sim.last_reward[tracked].sum())
        t = sim.t
        needs = t.w_hunger * s.hunger + t.w_energy * (1 - s.energy) + t.w_social * tr[..., 3] * (1 - s.social)
        terms += t.reward_scale * np.array([
            (np.minimum(s.anger.sum(-1), t.anger_sum_cap) * (0.5 + tr[..., 1]))[live].sum(),
            (np.minimum(s.fear.sum(-1), t.fear_sum_cap) * (1.5 - tr[..., 0]))[live].sum(),
            (s.grief * (0.5 + tr[..., 2]))[live].sum(),
            needs[live].sum(),
            live.sum() / t.reward_scale,
        ])
    n = max(int(tracked.sum()), 1)
    return {"npcs": int(tracked.sum()), "return": ret / n, "deaths": int((tracked & ~sim.state.alive[:, :N]).sum()),
            **{k: float(v) / n for k, v in zip(TERMS, terms, strict=True)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="default", help="policy file or 'default'")
    parser.add_argument("--worlds", default="1,2", help="comma-separated generator seeds of 12-NPC worlds")
    parser.add_argument("--villages", type=int, default=256)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--situations", default="revenge,flee,mourn,work",
                        help="comma-separated: revenge, flee, mourn, work (default: %(default)s)")
    parser.add_argument("--force", choices=("one", "all"), default="one",
                        help="force one eligible NPC per village, or every one (default: %(default)s)")
    parser.add_argument("--tuning", action="append", default=[], metavar="FIELD=VALUE",
                        help="engine field changed on top of the policy's own world (repeatable)")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    args = parser.parse_args(argv)
    from npc_brains import load_policy
    from village.cli import UserError
    from village.cmd_eval import _override_tuning

    policy = load_policy(args.policy)
    if args.tuning:
        try:
            _override_tuning([(args.policy, policy)], args.tuning)
        except UserError as exc:
            parser.error(str(exc))
    out: dict = {}
    every = args.force == "all"
    for situation in args.situations.split(","):
        rows = []
        for ws in (int(w) for w in args.worlds.split(",")):
            base = run(policy, situation, ws, args.villages, args.seed, deviate=False, every_eligible=every)
            forced = run(policy, situation, ws, args.villages, args.seed, deviate=True, every_eligible=every)
            rows.append({"world": ws, "policy": base, "forced_once": forced,
                         "value": forced["return"] - base["return"]})
            print(f"{situation:7s} world {ws}: {base['npcs']} NPCs, return {base['return']:.2f} -> forced once "
                  f"{forced['return']:.2f} (value {forced['return'] - base['return']:+.2f}); "
                  + ", ".join(f"{k} {base[k]:.2f}->{forced[k]:.2f}" for k in TERMS)
                  + f"; deaths {base['deaths']}->{forced['deaths']}")
        out[situation] = {"value_mean": float(np.mean([r["value"] for r in rows])), "worlds": rows}
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
