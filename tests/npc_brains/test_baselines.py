"""Baseline policies: always valid actions, and the scripted rules behave as designed."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Action, flat_action, make_vec_env
from engine.constants import TARGETED, UNTARGETED
from engine.observe import SELF_FEATURES, SLOT_FEATURES, observation_layout
from npc_brains.baselines import BASELINES, RandomPolicy, ScriptedPolicy, ScriptedRules, get_baseline
from npc_brains.policy_api import Policy

K = 4
LAYOUT = observation_layout(K)
OBS_DIM = len(LAYOUT)
N_ACTIONS = len(UNTARGETED) + len(TARGETED) * K
ROOT = Path(__file__).resolve().parents[2]


def test_baselines_module_never_imports_torch() -> None:
    tree = ast.parse((ROOT / "npc_brains" / "baselines.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"torch", "zmq", "pygame"}


@pytest.mark.parametrize("name", BASELINES)
def test_get_baseline_satisfies_the_policy_protocol(name: str) -> None:
    policy = get_baseline(name, seed=1)
    assert isinstance(policy, Policy)
    assert policy.name == name


def test_get_baseline_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown baseline 'smart'"):
        get_baseline("smart")


# ------------------------------------------------------------------ valid actions
@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    rows = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1.5, 3.0, (rows, OBS_DIM)).astype(np.float32)
    obs[rng.random(obs.shape) < 0.5] = 0.0  # many features off, like real observations
    obs[rng.random(obs.shape) < 0.2] = 1.0
    density = draw(st.floats(0.0, 1.0))
    mask = rng.random((rows, N_ACTIONS)) < density
    return obs, mask, seed


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(BASELINES), st.booleans())
def test_baselines_respect_random_masks(batch: tuple[np.ndarray, np.ndarray, int], name: str,
                                        deterministic: bool) -> None:
    obs, mask, seed = batch
    out = get_baseline(name, seed=seed).act(obs, mask, deterministic=deterministic, with_probs=True)
    assert out.actions.shape == (len(obs),)
    assert out.actions.dtype == np.int64
    assert out.values is None
    has_valid = mask.any(1)
    rows = np.arange(len(obs))
    assert mask[rows[has_valid], out.actions[has_valid]].all()
    assert (out.actions[~has_valid] == 0).all()  # nothing valid: IDLE, which the engine always accepts
    assert out.probs is not None and out.probs.shape == mask.shape
    assert np.allclose(out.probs.sum(1), 1.0)
    assert (out.probs[has_valid][~mask[has_valid]] == 0).all()
    assert (out.probs[~has_valid, 0] == 1).all()


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("world", ["village-v1", "generated:4:3", "generated:30:1"])
def test_baselines_respect_real_env_masks(name: str, world: str) -> None:
    env = make_vec_env(world, num_envs=3, seed=7, scenario="random_kill", max_ticks=50)
    policy = get_baseline(name, seed=3)
    obs, info = env.reset(seed=7)
    chosen = set()
    for _ in range(80):  # spans an auto-reset
        mask = info["action_mask"]
        actions = policy.act(obs, mask).actions
        assert mask[np.arange(len(actions)), actions].all()
        chosen.update(actions.tolist())
        obs, _, _, _, info = env.step(actions)
    assert len(chosen) > 3  # not stuck on one action


def test_random_policy_is_uniform_over_valid_actions() -> None:
    mask = np.zeros((20000, N_ACTIONS), bool)
    mask[:, [2, 7, 20]] = True
    actions = RandomPolicy(seed=0).act(np.zeros((20000, OBS_DIM), np.float32), mask).actions
    counts = np.bincount(actions, minlength=N_ACTIONS)
    assert set(np.flatnonzero(counts)) == {2, 7, 20}
    assert np.allclose(counts[[2, 7, 20]] / 20000, 1 / 3, atol=0.02)


def test_policies_are_reproducible_from_their_seed() -> None:
    rng = np.random.default_rng(0)
    obs = rng.uniform(0, 1, (64, OBS_DIM)).astype(np.float32)
    mask = rng.random((64, N_ACTIONS)) < 0.5
    mask[:, 0] = True
    for name in BASELINES:
        a = get_baseline(name, seed=5).act(obs, mask).actions
        b = get_baseline(name, seed=5).act(obs, mask).actions
        assert (a == b).all()
    # the scripted policy's deterministic choice does not depend on the seed
    a = ScriptedPolicy(seed=1).act(obs, mask, deterministic=True).actions
    b = ScriptedPolicy(seed=2).act(obs, mask, deterministic=True).actions
    assert (a == b).all()


def test_scripted_policy_rejects_a_foreign_observation_layout() -> None:
    with pytest.raises(ValueError, match="observation width"):
        ScriptedPolicy().act(np.zeros((2, OBS_DIM + 1), np.float32), np.ones((2, N_ACTIONS), bool))
    with pytest.raises(ValueError, match="built for 3 slots"):
        ScriptedPolicy(slots=3).act(np.zeros((2, OBS_DIM), np.float32), np.ones((2, N_ACTIONS), bool))
    with pytest.raises(ValueError, match="actions"):
        ScriptedPolicy().act(np.zeros((2, OBS_DIM), np.float32), np.ones((2, N_ACTIONS + 1), bool))


# ------------------------------------------------------------------ the scripted rules, on constructed observations
def npc(**own: float) -> np.ndarray:
    """An observation row: a rested, fed, sociable, middling villager by day; `own` overrides self features."""
    row = np.zeros(OBS_DIM, np.float32)
    base = {"alive": 1.0, "health": 1.0, "hunger": 0.2, "energy": 0.9, "social": 0.9, "bravery": 0.5,
            "aggression": 0.5, "empathy": 0.5, "sociability": 0.5, "diligence": 0.5}
    for name, value in {**base, **own}.items():
        row[LAYOUT.index(name)] = value
    return row


def with_slot(row: np.ndarray, k: int, **features: float) -> np.ndarray:
    """Fill slot k of an observation row; every slot feature not given is 0."""
    row = row.copy()
    for name in SLOT_FEATURES:
        row[LAYOUT.index(f"slot{k}.{name}")] = features.get(name, 0.0)
    unknown = set(features) - set(SLOT_FEATURES)
    assert not unknown, unknown
    return row


PLAYER_THREAT = {"present": 1, "is_player": 1, "believed_alive": 1, "known_threat": 1, "dist": 0.4}
DEAD_KIN = {"present": 1, "is_npc": 1, "known_dead": 1, "kin": 1, "affinity": 0.9, "dist": 0.5}
FRIEND = {"present": 1, "is_npc": 1, "believed_alive": 1, "friend": 1, "affinity": 0.7, "dist": 0.3}


def choose(*rows: np.ndarray, mask: np.ndarray | None = None) -> list[int]:
    obs = np.stack(rows)
    if mask is None:
        mask = np.ones((len(rows), N_ACTIONS), bool)
    return ScriptedPolicy(slots=K, seed=0).act(obs, mask, deterministic=True).actions.tolist()


def act(kind: Action, slot: int = 0) -> int:
    return flat_action(kind, slot, K)


def test_timid_npc_flees_a_known_threat_it_fears() -> None:
    timid = with_slot(npc(bravery=0.2, fear_max=0.8), 0, **PLAYER_THREAT, fear=0.8)
    brave = with_slot(npc(bravery=0.9, fear_max=0.8), 0, **PLAYER_THREAT, fear=0.8)
    calm = with_slot(npc(bravery=0.2), 0, **PLAYER_THREAT, fear=0.05)
    far = with_slot(npc(bravery=0.2, fear_max=0.8), 0, **{**PLAYER_THREAT, "dist": 2.5}, fear=0.8)
    assert choose(timid, brave, calm, far) == [act(Action.FLEE)] + [act(Action.WORK)] * 3


def test_threat_slot_position_does_not_matter() -> None:
    row = with_slot(npc(bravery=0.2, fear_max=0.8), 0, **FRIEND)
    row = with_slot(row, 2, **PLAYER_THREAT, fear=0.8)
    assert choose(row) == [act(Action.FLEE, 2)]


def test_aggressive_grieving_relative_attacks_the_known_culprit() -> None:
    def relative(aggression: float) -> np.ndarray:
        row = npc(aggression=aggression, bravery=0.8, grief=1.0, anger_max=1.2)
        row = with_slot(row, 0, **DEAD_KIN)
        return with_slot(row, 1, **PLAYER_THREAT, blamed_for_death=1, anger=1.2)

    # the meek relative mourns instead
    assert choose(relative(0.8), relative(0.2)) == [act(Action.ATTACK, 1), act(Action.MOURN, 0)]


def test_masked_out_revenge_falls_back_to_the_best_valid_action() -> None:
    row = with_slot(npc(aggression=0.8, bravery=0.8, grief=1.0), 0, **DEAD_KIN)
    row = with_slot(row, 1, **PLAYER_THREAT, blamed_for_death=1, anger=1.2)
    mask = np.ones((1, N_ACTIONS), bool)
    mask[0, act(Action.ATTACK, 1)] = False
    assert choose(row, mask=mask) == [act(Action.MOURN, 0)]
    mask[0, act(Action.MOURN, 0)] = False
    assert choose(row, mask=mask) == [act(Action.WORK)]
    mask[0, :] = False
    mask[0, act(Action.WANDER)] = True
    assert choose(row, mask=mask) == [act(Action.WANDER)]


def test_grief_needs_a_close_relation_and_enough_grief() -> None:
    mourner = with_slot(npc(grief=0.9), 1, **DEAD_KIN)
    stranger = with_slot(npc(grief=0.9), 1, **{**DEAD_KIN, "kin": 0, "affinity": 0.1})
    over_it = with_slot(npc(grief=0.05), 1, **DEAD_KIN)
    assert choose(mourner, stranger, over_it) == [act(Action.MOURN, 1), act(Action.WORK), act(Action.WORK)]


def test_empathic_npc_comforts_a_grieving_friend() -> None:
    empathic = with_slot(npc(empathy=0.9), 3, **FRIEND, their_grief=0.8)
    cold = with_slot(npc(empathy=0.2), 3, **FRIEND, their_grief=0.8)
    assert choose(empathic, cold) == [act(Action.COMFORT, 3), act(Action.WORK)]


def test_a_frightened_npc_warns_a_friend_out_of_sight() -> None:
    row = npc(bravery=0.8, fear_max=0.4)  # too brave to flee
    row = with_slot(row, 0, **PLAYER_THREAT, fear=0.4)
    away = with_slot(row, 1, **{**FRIEND, "dist": 2.0})
    near = with_slot(row, 1, **FRIEND)
    assert choose(away, near) == [act(Action.WARN, 1), act(Action.WORK)]


def test_timid_npc_does_not_flee_its_own_family() -> None:
    father = {**PLAYER_THREAT, "is_player": 0, "is_npc": 1, "kin": 1, "affinity": 0.8}
    row = with_slot(npc(bravery=0.1, fear_max=0.6), 0, **father, fear=0.6)
    assert choose(row) != [act(Action.FLEE, 0)]


def test_needs_then_work() -> None:
    rules = ScriptedRules()
    hungry = npc(hunger=rules.hungry + 0.1)
    tired = npc(energy=rules.tired - 0.1)
    night = npc(night=1.0, energy=0.6)
    lonely = with_slot(npc(social=rules.lonely - 0.1), 2, **FRIEND)
    content = with_slot(npc(), 2, **FRIEND)
    assert choose(hungry, tired, night, lonely, content) == [
        act(Action.EAT), act(Action.SLEEP), act(Action.SLEEP), act(Action.TALK, 2), act(Action.WORK)]


def test_emotions_outrank_needs() -> None:
    row = with_slot(npc(bravery=0.2, hunger=0.95, energy=0.1, fear_max=0.9), 1, **PLAYER_THREAT, fear=0.9)
    assert choose(row) == [act(Action.FLEE, 1)]


def test_busy_npcs_carry_on() -> None:
    row = with_slot(npc(bravery=0.2, fear_max=0.9, busy=1.0), 0, **PLAYER_THREAT, fear=0.9)
    mask = np.zeros((1, N_ACTIONS), bool)
    mask[0, 0] = True  # the engine allows only IDLE ("carry on") while busy
    assert choose(row, mask=mask) == [0]


def test_layout_names_used_by_the_rules_exist() -> None:
    # the rules read features by name; renaming one in engine/observe.py must fail here, not silently
    for name in ("grief", "anger_max", "fear_max", "hunger", "energy", "social", "night", "bravery",
                 "aggression", "empathy"):
        assert name in SELF_FEATURES
    for name in ("present", "is_npc", "believed_alive", "dist", "in_reach", "affinity", "kin", "spouse",
                 "known_dead", "known_threat", "anger", "fear", "their_grief", "blamed_for_death"):
        assert name in SLOT_FEATURES
