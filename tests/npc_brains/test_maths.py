"""Each piece of trainer maths against a small case computed by hand."""

import math

import pytest
import torch

from npc_brains import maths


def test_gae_matches_hand_computation():
    # one row, three steps, episode ends after step 1 (index 1), bootstrap value 10 for the new episode
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [2.0]])
    dones = torch.tensor([[False], [True], [False]])
    last = torch.tensor([10.0])
    g, lam = 0.9, 0.5
    adv, ret = maths.gae(rewards, values, dones, last, g, lam)
    d2 = 3.0 + g * 10.0 - 2.0  # 10.0
    d1 = 2.0 - 1.0  # done: no bootstrap
    d0 = 1.0 + g * 1.0 - 0.5  # 1.4
    a2, a1 = d2, d1  # the episode boundary cuts the trace
    a0 = d0 + g * lam * a1
    assert adv[:, 0].tolist() == pytest.approx([a0, a1, a2])
    assert ret[:, 0].tolist() == pytest.approx([a0 + 0.5, a1 + 1.0, a2 + 2.0])


def test_gae_lambda_one_is_discounted_return_minus_value():
    rewards = torch.tensor([[1.0], [1.0], [1.0]])
    values = torch.zeros(3, 1)
    adv, _ = maths.gae(rewards, values, torch.zeros(3, 1, dtype=torch.bool), torch.tensor([0.0]), 0.5, 1.0)
    assert adv[:, 0].tolist() == pytest.approx([1 + 0.5 + 0.25, 1 + 0.5, 1.0])


def test_agentwise_advantage_normalisation_by_hand():
    adv = torch.tensor([1.0, 3.0, 10.0, 30.0, 100.0])
    groups = torch.tensor([0, 0, 1, 1, 1])
    valid = torch.tensor([True, True, True, True, False])  # the dead row is ignored and zeroed
    out = maths.normalize_advantages(adv, valid, groups, eps=0.0)
    # group 0: mean 2, std 1 -> [-1, 1]; group 1 (valid: 10, 30): mean 20, std 10 -> [-1, 1]
    assert out.tolist() == pytest.approx([-1.0, 1.0, -1.0, 1.0, 0.0])


def test_global_normalisation_differs_from_agentwise():
    adv = torch.tensor([1.0, 3.0, 10.0, 30.0])
    valid = torch.ones(4, dtype=torch.bool)
    out = maths.normalize_advantages(adv, valid, None, eps=0.0)
    mean, std = 11.0, math.sqrt(((1 - 11) ** 2 + (3 - 11) ** 2 + (10 - 11) ** 2 + (30 - 11) ** 2) / 4)
    assert out.tolist() == pytest.approx([(a - mean) / std for a in [1, 3, 10, 30]])


def test_kl_matrix_by_hand():
    p = torch.tensor([0.5, 0.5])
    q = torch.tensor([0.9, 0.1])
    logps = torch.stack([p.log(), q.log()])[:, None, :]  # 2 agents, 1 probe state
    m = maths.kl_matrix(logps)
    kl_pq = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    kl_qp = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    assert m.reshape(-1).tolist() == pytest.approx([0.0, kl_pq, kl_qp, 0.0], abs=1e-6)


def test_kl_matrix_ignores_masked_actions():
    masked = maths.masked_logits(torch.tensor([[0.0, 0.0, 5.0]]), torch.tensor([[True, True, False]]))
    logp = torch.log_softmax(masked, -1)
    logps = torch.stack([logp, logp])
    assert maths.kl_matrix(logps).abs().max() < 1e-6
    assert logp.exp()[0, 2] == 0.0


def test_divergence_from_population():
    p = torch.tensor([1.0, 0.0]).clamp_min(1e-30)
    q = torch.tensor([0.0, 1.0]).clamp_min(1e-30)
    logps = torch.stack([p.log(), q.log()])[:, None, :]
    # population mean (0.5, 0.5): KL of a one-hot from it is log 2
    assert maths.divergence_from_population(logps).tolist() == pytest.approx([math.log(2)] * 2, abs=1e-5)


def test_shaping_schedule_anneals_to_zero():
    assert maths.shaping_weight(0, 10_000) == 1.0
    assert maths.shaping_weight(2_500, 10_000) == pytest.approx(0.75)
    assert maths.shaping_weight(10_000, 10_000) == 0.0
    assert maths.shaping_weight(50_000, 10_000) == 0.0
    assert maths.shaping_weight(0, 0) == 0.0


def test_cosine_alignment_by_hand():
    probs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    group = torch.tensor([0, 0, 1])
    valid = torch.tensor([True, True, True])
    out = maths.cosine_alignment(probs, group, valid)
    # group 0 mean (0.5, 0.5): cos = 1/sqrt(2) for both; group 1 alone: cos 1
    assert out.tolist() == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2), 1.0], abs=1e-6)


def test_knn_state_entropy_is_larger_for_isolated_states():
    ref = torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [5.0, 5.0]])
    h = maths.knn_state_entropy(torch.tensor([[0.0, 0.0], [5.0, 5.0]]), ref, k=1)
    assert h[0] < h[1]


def test_gradient_conflict_ratio():
    a = torch.tensor([1.0, 0.0])
    assert maths.gradient_conflict([a, a]) == pytest.approx(1.0)
    assert maths.gradient_conflict([a, -a]) == pytest.approx(0.0)
    b = torch.tensor([0.0, 1.0])
    assert maths.gradient_conflict([a, b]) == pytest.approx(math.sqrt(2) / 2)
    assert maths.gradient_conflict([torch.tensor([3.0, 0.0]), torch.tensor([-1.0, 0.0])]) == pytest.approx(0.5)


def test_ppo_loss_clips():
    logp = torch.log(torch.tensor([1.5, 0.5, 3.0, 0.5]))
    old = torch.zeros(4)
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])
    loss, ratio = maths.ppo_policy_loss(logp, old, adv, 0.2)
    # min(r A, clip(r) A): 1.5 -> 1.2; 0.5 with A<0 -> -0.8; 3 -> 1.2; 0.5 with A>0 keeps 0.5 (pessimistic)
    assert (-loss).tolist() == pytest.approx([1.2, -0.8, 1.2, 0.5])
    assert ratio.tolist() == pytest.approx([1.5, 0.5, 3.0, 0.5])


def test_decoupled_ppo_loss_by_hand():
    adv = torch.tensor([1.0, 1.0])
    logp = torch.log(torch.tensor([1.2, 1.5]))
    prox = torch.zeros(2)
    # same proximal and behaviour policy: the ordinary clipped surrogate
    loss, _ = maths.decoupled_ppo_loss(logp, prox, prox, adv, 0.2, 2.0)
    assert (-loss).tolist() == pytest.approx([1.2, 1.2])
    # behaviour took the actions with prob 0.25 of the proximal's: weight prox/behaviour = 4, truncated at 2
    behaviour = torch.log(torch.tensor([0.25, 0.8]))
    loss, ratio = maths.decoupled_ppo_loss(logp, prox, behaviour, adv, 0.2, 2.0)
    assert ratio.tolist() == pytest.approx([1.2, 1.5])
    assert (-loss).tolist() == pytest.approx([1.2 * 2.0, 1.2 * 1.25])


def test_cosine_lr_endpoints():
    assert maths.cosine_lr(0, 11, 1e-3, 0.1) == pytest.approx(1e-3)
    assert maths.cosine_lr(5, 11, 1e-3, 0.1) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
    assert maths.cosine_lr(10, 11, 1e-3, 0.1) == pytest.approx(1e-4)


def test_constraint_weight_raised_above_eight_agents():
    assert maths.constraint_weights(8, None, 0.4, 2.0).tolist() == [1.0] * 8
    w = maths.constraint_weights(12, torch.tensor([True] + [False] * 11), 0.4, 2.0)
    assert w[0].item() == pytest.approx(2.8)
    assert w[1:].tolist() == pytest.approx([1.4] * 11)


def test_info_nce_prefers_matching_pairs():
    a = torch.eye(4)
    good = maths.info_nce(a, a, 0.1)
    bad = maths.info_nce(a, a.roll(1, 0), 0.1)
    assert good < 0.01 < bad
