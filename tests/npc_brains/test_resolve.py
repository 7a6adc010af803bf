"""npc_brains.load_policy: one resolver for every front door, the tuning a policy learned in, the checks that a
file is a village policy, and the checksum of its tensors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import npc_brains
from npc_brains import PolicyError, bundled_policy, load_policy, policy_slots, policy_tuning
from npc_brains.checkpoint import CHECKSUM_KEY, CheckpointError, load_checkpoint, save_checkpoint


def test_the_bundled_policies_are_package_data():
    for name in ("default", "mappo"):
        path = bundled_policy(name)
        assert path.is_file() and path.parent.parent.parent == Path(npc_brains.__file__).parent


def test_the_bundled_policies_hold_cpu_tensors():
    """They were trained on a GPU; a game without one loads them with a plain torch.load."""
    from npc_brains.checkpoint import policy_payload

    for name in ("default", "mappo"):
        data = torch.load(bundled_policy(name), weights_only=True)
        assert {t.device.type for t in data["model"].values()} == {"cpu"}
    weight = torch.nn.Parameter(torch.ones(2))

    class Env:
        env_id, obs_dim, n_actions, state_dim, num_agents = "e", 1, 1, 1, 1
        observation_layout, action_names = [], []

    model = policy_payload({}, {}, Env(), {"actor.w": weight})["model"]
    assert not model["actor.w"].requires_grad and model["actor.w"].device.type == "cpu"


def test_a_trained_policy_comes_with_the_tuning_it_was_trained_in():
    policy = load_policy("default")
    overrides = policy.config["tuning"]
    assert overrides  # the bundled command trains with engine overrides (docs/training.md)
    assert policy.tuning is not None
    for key, value in overrides.items():
        assert getattr(policy.tuning, key) == value
    assert policy_tuning(policy) is policy.tuning


def test_the_baselines_run_under_the_engine_defaults():
    for name in ("scripted", "random"):
        policy = load_policy(name, seed=3)
        assert policy.tuning is None and policy_tuning(policy) is None
        assert policy_slots(policy) is None  # they adapt to any K


def test_mappo_is_a_name():
    policy = load_policy("mappo")
    assert policy.name == "mappo" and policy.config["algo"] == "mappo"


@pytest.mark.parametrize(("spec", "message"), [
    ("nonsense", "expected default, mappo, scripted, random or a policy file, got 'nonsense' (no such file)"),
    (".", "(a directory)"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(PolicyError) as info:
        load_policy(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_missing_bundled_policy_is_an_error(monkeypatch, tmp_path):
    import npc_brains.resolve as resolve

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)
    with pytest.raises(PolicyError, match="the bundled default policy is missing from this installation"):
        load_policy("default")


def test_the_training_config_no_longer_decides_the_physics():
    import npc_brains.config as config

    assert not hasattr(config, "policy_tuning")


def test_a_policy_fixes_its_slots_and_refuses_others(untrained_policy_file):
    six_slot_policy = untrained_policy_file(slots=6)
    policy = load_policy(six_slot_policy)
    assert policy_slots(policy) == 6
    with pytest.raises(PolicyError, match=r"trained with 6 observation slots, not 4; run it with --slots 6"):
        load_policy(six_slot_policy, slots=4)


def test_a_policy_of_another_environment_is_refused(untrained_policy_file):
    pytest.importorskip("mpe2")
    path = untrained_policy_file(env="mpe2.simple_spread_v3:parallel_env")
    with pytest.raises(PolicyError, match=r"was trained on pettingzoo:mpe2\.simple_spread_v3:parallel_env, not on a "
                                          r"village"):
        load_policy(path)


def test_a_village_policy_of_an_older_observation_names_the_missing_feature(tmp_path):
    data = load_checkpoint(bundled_policy("default"))
    layout = data["env"]["observation_layout"]
    data["env"]["observation_layout"] = [n for n in layout if not n.endswith("news_for_them")]
    data["env"]["obs_dim"] = len(data["env"]["observation_layout"])
    save_checkpoint(tmp_path / "old.pt", data)
    with pytest.raises(PolicyError, match=r"old\.pt was trained on another version of the village's observation "
                                          r"\(it lacks news_for_them\): retrain it with `village train`"):
        load_policy(tmp_path / "old.pt")


def test_a_brain_file_without_weights_is_a_one_line_error(tmp_path):
    data = load_checkpoint(bundled_policy("default"))
    data["model"] = {k: v for k, v in data["model"].items() if not k.startswith("actor.encoder")}
    save_checkpoint(tmp_path / "gutted.pt", data)
    with pytest.raises(PolicyError, match=r"gutted\.pt: not a usable policy \(KeyError"):
        load_policy(tmp_path / "gutted.pt")


# ------------------------------------------------------------------ the checksum of the tensors
def test_save_writes_a_checksum_and_load_checks_it(tmp_path):
    path = save_checkpoint(tmp_path / "x.pt", {"config": {}, "net": {}, "env": {}, "model": {"w": torch.ones(3)}})
    assert len(load_checkpoint(path)[CHECKSUM_KEY]) == 64
    assert load_checkpoint(bundled_policy("default"))[CHECKSUM_KEY]  # the bundled files carry one


def test_flipped_bytes_in_the_weights_are_an_error(tmp_path, flip_tensor_bytes):
    flipped = tmp_path / "flipped.pt"
    flip_tensor_bytes(bundled_policy("default"), flipped)
    data = torch.load(flipped, weights_only=True)  # the file itself still reads: only the checksum can tell
    assert data["format"] == "village-npc-brain"
    with pytest.raises(CheckpointError, match="its tensors do not match the checksum stored in the file") as info:
        load_checkpoint(flipped)
    assert "\n" not in str(info.value)
    with pytest.raises(PolicyError, match="do not match the checksum"):
        load_policy(flipped)


def test_a_file_without_a_checksum_loads_with_the_check_skipped(tmp_path, flip_tensor_bytes):
    data = load_checkpoint(bundled_policy("default"))
    del data[CHECKSUM_KEY]
    old = tmp_path / "old.pt"
    torch.save(data, old)  # as files written before the checksum existed
    assert CHECKSUM_KEY not in load_checkpoint(old)
    flipped = tmp_path / "old-flipped.pt"
    flip_tensor_bytes(old, flipped)
    load_checkpoint(flipped)  # nothing to check it against
    shutil.copy(old, tmp_path / "copy.pt")
    assert load_policy(tmp_path / "copy.pt").name == "copy"
