"""A constraint teacher played at a personality strength: its logits are the neutral villager's plus S times each
NPC's difference from them, so the KL to it pulls the personalities apart; at 1 it is the teacher as it is."""

from __future__ import annotations

import pytest
import torch

from npc_brains.config import ConfigError, TrainConfig, validate
from npc_brains.personality import NEUTRAL_TRAIT, trait_columns
from npc_brains.trainer import Trainer


def trainer(tmp_path, strength: float, traits: str = "all") -> Trainer:
    cfg = TrainConfig(algo="drmas", steps=400, envs=2, rollout=8, device="cpu",
                      run_dir=str(tmp_path / f"{strength}-{traits}"), constraint=0.1, teacher_tau=0.0,
                      teacher_personality=strength, teacher_personality_traits=traits)
    return Trainer(cfg, tensorboard=False)


def test_the_teachers_logits_follow_the_guidance_formula(tmp_path):
    tr = trainer(tmp_path, 2.5)
    batch = tr.collector.collect(False)
    obs = batch.obs.reshape(-1, batch.obs.shape[-1])[:64]
    mask = batch.mask.reshape(-1, batch.mask.shape[-1])[:64]
    cols = torch.as_tensor(trait_columns(tr.env.observation_layout))
    neutral = obs.clone()
    neutral[:, cols] = NEUTRAL_TRAIT
    with torch.no_grad():
        own, ref = tr.brain.teacher(obs, mask), tr.brain.teacher(neutral, mask)
        guided = tr._teacher_logits(obs, mask)
    expected = ref + 2.5 * (own - ref)
    assert torch.allclose(torch.log_softmax(guided, -1)[mask], torch.log_softmax(expected, -1)[mask], atol=1e-4)
    assert (torch.softmax(guided, -1)[~mask] == 0).all()
    assert not torch.allclose(guided[mask], own[mask], atol=1e-3)  # the personalities do count here
    plain = trainer(tmp_path, 1.0)
    with torch.no_grad():
        assert torch.equal(plain._teacher_logits(obs, mask), plain.brain.teacher(obs, mask))


def test_an_update_with_a_personal_teacher_runs(tmp_path):
    tr = trainer(tmp_path, 2.0)
    stats = tr.learn(tr.collector.collect(False))
    assert torch.isfinite(torch.tensor(stats["policy_loss"]))


@pytest.mark.parametrize("value", [-1, 11, True])
def test_a_bad_teacher_strength_names_the_field(value):
    with pytest.raises(ConfigError, match="teacher_personality: expected a number"):
        validate(TrainConfig(teacher_personality=value))


def test_a_teacher_strengthens_only_the_chosen_traits(tmp_path):
    tr = trainer(tmp_path, 3.0, "empathy,aggression")
    batch = tr.collector.collect(False)
    obs = batch.obs.reshape(-1, batch.obs.shape[-1])[:64]
    mask = batch.mask.reshape(-1, batch.mask.shape[-1])[:64]
    chosen = torch.as_tensor(trait_columns(tr.env.observation_layout, traits=("aggression", "empathy")))
    neutral = obs.clone()
    neutral[:, chosen] = NEUTRAL_TRAIT  # bravery, sociability and diligence stay the NPC's own
    with torch.no_grad():
        own, ref = tr.brain.teacher(obs, mask), tr.brain.teacher(neutral, mask)
        guided = tr._teacher_logits(obs, mask)
    expected = ref + 3.0 * (own - ref)
    assert torch.allclose(torch.log_softmax(guided, -1)[mask], torch.log_softmax(expected, -1)[mask], atol=1e-4)
    every = trainer(tmp_path, 3.0)
    with torch.no_grad():
        assert not torch.allclose(every._teacher_logits(obs, mask)[mask], guided[mask], atol=1e-3)


@pytest.mark.parametrize("value", ["courage", "empathy,empathy", "", 3])
def test_bad_teacher_traits_name_the_field(value):
    with pytest.raises(ConfigError, match="teacher_personality_traits: expected"):
        validate(TrainConfig(teacher_personality_traits=value))
