"""The tick's behaviour, pinned bit for bit: digests of every state field over 150 ticks, per world and scenario.

tests/engine/data/state_hashes.json holds, for each case below, a SHA-256 of every `VillageState` field, the
observations, masks, rewards, deaths, reaction labels, observation slots, event log, message log and RNG state,
accumulated over every tick of the run. A change to the engine that is meant to keep behaviour must keep these.
Actions are random valid ones drawn from the mask by a separate seeded RNG, so the whole action space is exercised.

The training curriculum's schedule (`kill_tick`, `kill_victim`, `rampage`, `raid_tick`) is left out of the
digests because where it is kept is not behaviour; what it does (who is killed when and by whom, the killer's
hunts, the raid) is in the other fields and the event log.

Regenerate (only when behaviour is meant to change): `python tests/engine/test_state_hashes.py --write`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __package__ in (None, ""):  # run as a script (--write) from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.constants import Tuning  # noqa: E402
from engine.policy_api import PolicyOutput  # noqa: E402
from engine.scenarios import load_scenario, run_scenario  # noqa: E402
from engine.sim import VillageSim  # noqa: E402
from engine.state import VillageState  # noqa: E402
from engine.vec_env import VillageVecEnv  # noqa: E402
from worlds import WorldSpec, generate_world, load_world  # noqa: E402

REFERENCE = Path(__file__).resolve().parent / "data" / "state_hashes.json"
TICKS = 150
SCHEDULE_FIELDS = frozenset({"kill_tick", "kill_victim", "rampage", "raid_tick"})
SIM_OUTPUTS = ("obs", "mask", "last_reward", "died", "reaction")
# every branch of the tick that a Tuning switch turns on
LEVERS = Tuning(curriculum_raid=0.5, curriculum_rampage=0.6, w_relief=0.5, w_dread=0.3, mourn_relief_linear=True,
                work_at_night=False, attack_needs_grievance=False)


class Digest:
    """One running SHA-256 per named stream."""

    def __init__(self) -> None:
        self.streams: dict[str, Any] = {}

    def add(self, name: str, value: Any) -> None:
        h = self.streams.setdefault(name, hashlib.sha256())
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(repr(value).encode())

    def result(self) -> dict[str, str]:
        return {name: h.hexdigest() for name, h in sorted(self.streams.items())}


def state_fields() -> list[str]:
    return [f.name for f in fields(VillageState) if f.name not in SCHEDULE_FIELDS]


def digest_sim(d: Digest, sim: VillageSim) -> None:
    """Feed one tick of a sim: every state field, its outputs, the logs so far and the RNG."""
    for name in state_fields():
        d.add(f"state.{name}", getattr(sim.state, name))
    for name in SIM_OUTPUTS:
        d.add(f"sim.{name}", getattr(sim, name))
    d.add("sim.slot_entity", sim.observer.slot_entity)
    d.add("log.events", [e.as_dict() | {"intensity": e.intensity, "x": e.x, "y": e.y} for e in sim.log.events])
    d.add("log.messages", sim.log.messages)
    d.add("rng", sim.rng.bit_generator.state)


def random_actions(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    return (rng.random(mask.shape) * mask).argmax(-1)


def world(name: str) -> WorldSpec:
    if name == "village-v1":
        return load_world("village-v1")
    n = int(name.split(":")[1])
    return generate_world(n, 5)


# ------------------------------------------------------------------ cases
def sim_case(world_name: str, villages: int, seed: int, scenario: str, *, tuning: Tuning | None = None,
             trait_noise: float = 0.0) -> Callable[[], dict[str, str]]:
    def run() -> dict[str, str]:
        sim = VillageSim(world(world_name), villages, seed, scenario=scenario, record=True, tuning=tuning,
                         trait_noise=trait_noise, max_ticks=TICKS)
        rng = np.random.default_rng([seed, 99])
        d = Digest()
        digest_sim(d, sim)
        for _ in range(TICKS):
            sim.step(random_actions(rng, sim.mask))
            digest_sim(d, sim)
        return d.result()
    return run


def vec_case(world_name: str, villages: int, seed: int, scenario: str, *,
             tuning: Tuning | None = None, trait_noise: float = 0.0) -> Callable[[], dict[str, str]]:
    """The training env: episodes of 60 ticks, so villages reset part-way (two auto-resets in 150 ticks)."""
    def run() -> dict[str, str]:
        env = VillageVecEnv(world(world_name), villages, seed, max_ticks=60, scenario=scenario, tuning=tuning,
                            trait_noise=trait_noise)
        obs, info = env.reset()
        rng = np.random.default_rng([seed, 98])
        d = Digest()
        for _ in range(TICKS):
            obs, reward, terminated, truncated, info = env.step(random_actions(rng, info["action_mask"]))
            digest_sim(d, env.sim)
            for key in ("state", "traits", "alive"):
                d.add(f"info.{key}", info[key])
            for key in ("final_obs", "final_state", "episode_returns"):
                if key in info:
                    d.add(f"info.{key}", info[key])
            d.add("env.reward", reward)
            d.add("env.done", np.stack([terminated, truncated]))
        return d.result()
    return run


@dataclass
class SeededRandomPolicy:
    """Random valid actions from its own seeded RNG (the eval suite's `random` baseline, made reproducible)."""

    seed: int
    name: str = "seeded-random"

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng([self.seed, 97])

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        return PolicyOutput(random_actions(self.rng, mask).astype(np.int64))


def scenario_case(scenario_id: str, world_name: str, seed: int) -> Callable[[], dict[str, str]]:
    """One scenario of the eval suite as `village eval` runs it (run_scenario), digesting the recorded trace."""
    def run() -> dict[str, str]:
        trace = run_scenario(SeededRandomPolicy(seed), load_scenario(scenario_id), world(world_name), villages=4,
                             seed=seed)
        d = Digest()
        for f in fields(trace):
            value = getattr(trace, f.name)
            if isinstance(value, dict):
                for key in sorted(value):
                    d.add(f"trace.{f.name}.{key}", value[key])
            else:
                d.add(f"trace.{f.name}", value)
        return d.result()
    return run


BRIDGE_WORLD_NPCS = [
    {"name": n, "traits": {"bravery": b, "aggression": a, "empathy": e}, "x": x, "y": y}
    for n, b, a, e, x, y in [
        ("Alda", 0.3, 0.2, 0.9, 10.0, 10.0), ("Bren", 0.8, 0.9, 0.4, 11.0, 10.0), ("Cai", 0.2, 0.3, 0.6, 12.0, 11.0),
        ("Dora", 0.5, 0.5, 0.5, 20.0, 20.0), ("Edda", 0.9, 0.7, 0.3, 25.0, 8.0), ("Finn", 0.4, 0.1, 0.8, 5.0, 25.0),
    ]
]
BRIDGE_RELATIONS = [
    {"a": "Alda", "b": "Bren", "kind": "spouse", "affinity": 0.9},
    {"a": "Alda", "b": "Cai", "kind": "kin", "affinity": 0.8},
    {"a": "Bren", "b": "Dora", "kind": "friend", "affinity": 0.6},
    {"a": "Edda", "b": "Alda", "kind": "rival", "affinity": -0.7},
    {"a": "Finn", "b": "Cai", "kind": "friend", "affinity": 0.5},
]


def bridge_case(seed: int) -> Callable[[], dict[str, str]]:
    """A bridge session (bridge/sessions.py) fed by a scripted game: bodies walk, events are pushed."""
    def run() -> dict[str, str]:
        from bridge.protocol import Limits, encode_array
        from bridge.sessions import SessionStore

        store = SessionStore(Limits(), slots=4, ttl_s=600.0)
        session = store.create({"npcs": BRIDGE_WORLD_NPCS, "relationships": BRIDGE_RELATIONS,
                                "actors": [{"name": "player", "kind": "player", "x": 15.0, "y": 15.0}],
                                "seed": seed})
        sim = session.sim
        game = np.random.default_rng([seed, 96])
        policy = SeededRandomPolicy(seed)
        pos = sim.state.pos[0].copy()
        alive = np.ones(session.E, bool)
        pushed = {
            3: [{"type": "gift", "actor": "player", "target": "Dora"}],
            5: [{"type": "talk", "actor": "Finn", "target": "Dora"}],
            8: [{"type": "attack", "actor": "player", "target": "Edda", "witnesses": ["Finn"]}],
            12: [{"type": "death", "actor": "player", "target": "Alda", "witnesses": ["Bren", "Edda"],
                  "position": [11.0, 11.0]}],
            20: [{"type": "talk", "actor": "Bren", "target": "Finn"}],
            30: [{"type": "attack", "actor": "Bren", "target": "player"}],
            45: [{"type": "death", "actor": "player", "target": "Cai"}],
            70: [{"type": "talk", "actor": "player", "target": "Dora"}],
        }
        d = Digest()
        for tick in range(TICKS):
            for event in pushed.get(tick, []):
                session.queue_event(event)
            pos = np.clip(pos + game.normal(0.0, 0.6, pos.shape), 0.0, 29.0).astype(np.float32)
            fields_in = {"pos": encode_array(pos)}
            if tick == 90:  # Dora dies in the game without a death event (cause unknown)
                alive[session.index["Dora"]] = False
                fields_in["alive"] = encode_array(alive)
            if tick == 60:
                health = np.where(alive, 0.7, 0.0).astype(np.float32)
                fields_in["health"] = encode_array(health)
            obs, mask = session.prepare(fields_in)
            session.finish(policy.act(obs, mask).actions)
            alive &= sim.state.alive[0]
            digest_sim(d, sim)
        return d.result()
    return run


CASES: dict[str, Callable[[], dict[str, str]]] = {
    "village-v1/none/s0": sim_case("village-v1", 3, 0, "none"),
    "village-v1/world/s0": sim_case("village-v1", 2, 0, "world"),
    "village-v1/world/s3": sim_case("village-v1", 2, 3, "world"),
    "village-v1/random_kill/s1": sim_case("village-v1", 4, 1, "random_kill"),
    "village-v1/mixed/s0": sim_case("village-v1", 8, 0, "mixed"),
    "village-v1/mixed/s2": sim_case("village-v1", 8, 2, "mixed"),
    "village-v1/mixed-levers/s0": sim_case("village-v1", 8, 0, "mixed", tuning=LEVERS, trait_noise=0.1),
    "village-v1/vec-mixed/s4": vec_case("village-v1", 6, 4, "mixed", trait_noise=0.15),
    "village-v1/vec-mixed-levers/s5": vec_case("village-v1", 6, 5, "mixed", tuning=LEVERS),
    "generated:12/mixed/s0": sim_case("generated:12", 6, 0, "mixed"),
    "generated:12/none/s1": sim_case("generated:12", 2, 1, "none"),
    "generated:48/mixed/s0": sim_case("generated:48", 3, 0, "mixed"),
    "generated:48/random_kill/s1": sim_case("generated:48", 2, 1, "random_kill", tuning=LEVERS),
    "generated:200/mixed/s0": sim_case("generated:200", 2, 0, "mixed"),
    "generated:200/none/s1": sim_case("generated:200", 1, 1, "none"),
    **{f"eval/{sid}/village-v1/s0": scenario_case(sid, "village-v1", 0) for sid in (
        "kill-at-night", "kill-fighter", "kill-in-square", "kill-loner", "kill-parent", "kill-rival", "raid",
        "repeated-killings")},
    "eval/kill-in-square/generated:48/s1": scenario_case("kill-in-square", "generated:48", 1),
    "eval/raid/generated:12/s1": scenario_case("raid", "generated:12", 1),
    "bridge/session/s0": bridge_case(0),
    "bridge/session/s7": bridge_case(7),
}


def load_reference() -> dict[str, dict[str, str]]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


def test_every_state_field_is_digested():
    """A new VillageState field must be added to the digests (regenerate the reference)."""
    reference = load_reference()
    case = reference["village-v1/none/s0"]
    assert {f"state.{name}" for name in state_fields()} <= set(case)
    assert {f.name for f in fields(VillageState)} - SCHEDULE_FIELDS == set(state_fields())
    assert set(reference) == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_digests_match_the_reference(case):
    expected = load_reference()[case]
    got = CASES[case]()
    differing = sorted(k for k in expected if got.get(k) != expected[k])
    missing = sorted(set(expected) - set(got))
    assert not differing and not missing, f"{case}: digests differ for {differing} (missing: {missing})"


def _write() -> None:
    out = {}
    for name in sorted(CASES):
        out[name] = CASES[name]()
        print(name, "done", flush=True)
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/engine/test_state_hashes.py --write")
    _write()
