"""MADDPG: straight-through Gumbel-softmax gradients, masking, the centralised critic, soft target updates,
learning on the tiny matching task, and kill -9 then --resume through `village train`."""

from types import SimpleNamespace

import torch

from npc_brains import offpolicy_maths as om
from npc_brains.maddpg import CentralCritic, MADDPGLearner, masked_actor_logits
from npc_brains.networks import NetSpec
from npc_brains.replay import EpisodeBatch


def test_straight_through_gumbel_is_one_hot_forward_with_the_softmax_gradient():
    torch.manual_seed(0)
    logits = torch.randn(6, 5, requires_grad=True)
    weights = torch.randn(6, 5)
    g1 = torch.Generator().manual_seed(7)
    y = om.st_gumbel_softmax(logits, 0.7, g1)
    assert torch.equal(y.detach().sum(-1), torch.ones(6))
    assert set(y.detach().unique().tolist()) <= {0.0, 1.0}
    (grad_st,) = torch.autograd.grad((y * weights).sum(), logits)
    # the same noise, the relaxed sample: its gradient is what the straight-through estimator passes back
    g2 = torch.Generator().manual_seed(7)
    noise = om.gumbel_noise(logits.shape, g2, logits.device)
    soft = torch.softmax((logits + noise) / 0.7, -1)
    (grad_soft,) = torch.autograd.grad((soft * weights).sum(), logits)
    assert torch.allclose(grad_st, grad_soft, atol=1e-6)
    assert grad_st.abs().sum() > 0
    # the forward value is the relaxed sample's argmax
    assert torch.equal(y.detach().argmax(-1), soft.detach().argmax(-1))


def test_gumbel_never_samples_a_masked_action():
    g = torch.Generator().manual_seed(3)
    logits = torch.zeros(5000, 4)
    logits[:, 2] = 50.0  # the masked action would win every draw if it were allowed
    mask = torch.tensor([True, True, False, True]).expand(5000, 4)
    y = om.st_gumbel_softmax(logits.masked_fill(~mask, om.GUMBEL_MASK), 1.0, g)
    assert y[:, 2].sum() == 0
    assert (y.sum(-1) == 1).all()


def test_masked_actor_logits_use_minus_1e10():
    spec = NetSpec(6, 3, 4, (4, 5), hidden=8, intent_dim=4)
    from npc_brains.networks import Actor

    actor = Actor(spec)
    mask = torch.tensor([[True, False, True]])
    logits = masked_actor_logits(actor, torch.randn(1, 6), mask)
    assert logits[0, 1] == om.GUMBEL_MASK and logits[0, 0] > -1e9


def test_central_critic_sees_every_agents_action():
    torch.manual_seed(1)
    critic = CentralCritic(state_dim=4, n_agents=3, n_actions=2, hidden=16)
    s = torch.randn(5, 4)
    joint = torch.zeros(5, 6)
    joint[:, [0, 2, 4]] = 1
    q = critic(s, joint)
    assert q.shape == (5, 3)
    other = joint.clone()
    other[:, 4], other[:, 5] = 0, 1  # only agent 2's action changes: every agent's Q moves
    assert (critic(s, other) - q).abs().min() > 0


def test_soft_update_moves_targets_by_tau():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = b.weight.detach().clone()
    om.soft_update(b, a, 0.25)
    assert torch.allclose(b.weight, 0.75 * before + 0.25 * a.weight)
    om.hard_update(b, a)
    assert torch.equal(b.weight, a.weight)


def test_one_update_changes_actor_and_critic_and_soft_targets():
    spec = NetSpec(6, 3, 4, (4, 5), hidden=16, intent_dim=8)
    cfg = SimpleNamespace(q_lr=1e-2, q_grad_clip=10.0, gamma=0.9, seed=0, hidden=16, target_tau=0.5,
                          gumbel_temperature=1.0, actor_reg=1e-3)
    learner = MADDPGLearner(spec, 2, cfg, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    E, T, N = 4, 5, 2
    batch = EpisodeBatch(torch.randn(E, T, N, 6, generator=g), torch.ones(E, T, N, 3, dtype=torch.bool),
                         torch.randint(3, (E, T, N), generator=g), torch.randn(E, T, N, generator=g),
                         torch.ones(E, T, N, dtype=torch.bool), torch.randn(E, T, 4, generator=g),
                         torch.ones(E, T, dtype=torch.bool), torch.zeros(E, dtype=torch.long))
    head0 = learner.agent.head.weight.detach().clone()
    critic0 = learner.critic.net[0].weight.detach().clone()
    target0 = learner.target_critic.net[0].weight.detach().clone()
    stats = learner.update(batch)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert not torch.equal(learner.agent.head.weight, head0)
    assert not torch.equal(learner.critic.net[0].weight, critic0)
    expected = 0.5 * target0 + 0.5 * learner.critic.net[0].weight.detach()
    assert torch.allclose(learner.target_critic.net[0].weight, expected, atol=1e-6)


def test_maddpg_learns_the_tiny_matching_task(tmp_path):
    from tests.npc_brains.offpolicy_helpers import greedy_reward_per_step, train_tiny

    policy = train_tiny("maddpg", tmp_path, 4800, batch_episodes=8, updates_per_episode=0.5, q_lr=3e-3)
    assert greedy_reward_per_step(policy) > 0.9


def test_maddpg_kill_9_then_resume(tmp_path, capsys, monkeypatch):
    from tests.npc_brains.offpolicy_helpers import ROOT, kill_9_then_resume, run_village_train

    monkeypatch.chdir(ROOT)
    kill_9_then_resume(tmp_path, lambda *a: run_village_train(capsys, *a), "maddpg")
