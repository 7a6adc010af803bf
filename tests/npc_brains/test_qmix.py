"""QMIX: the monotonic mixer, the exploration schedule, masked choice, TD targets, target copies, learning on the
tiny matching task, and kill -9 then --resume through `village train`."""

import copy
from types import SimpleNamespace

import pytest
import torch

from npc_brains import offpolicy_maths as om
from npc_brains.networks import NetSpec
from npc_brains.qmix import QMixer, QMIXLearner
from npc_brains.replay import EpisodeBatch


def test_mixer_is_monotonic_in_every_agent_q():
    torch.manual_seed(0)
    mixer = QMixer(n_agents=5, state_dim=7, embed=8, hypernet_hidden=16)
    for _ in range(20):
        q = torch.randn(64, 5, requires_grad=True)
        s = torch.randn(64, 7) * 3
        total = mixer(q, s)
        (grad,) = torch.autograd.grad(total.sum(), q)
        assert (grad >= 0).all()
    # and not trivially: the weights depend on the state
    q = torch.randn(3, 5)
    assert not torch.allclose(mixer(q, torch.zeros(3, 7)), mixer(q, torch.ones(3, 7)))


def test_mixer_keeps_leading_axes():
    mixer = QMixer(3, 4)
    assert mixer(torch.randn(2, 6, 3), torch.randn(2, 6, 4)).shape == (2, 6)


def test_epsilon_schedule():
    assert om.epsilon_at(0, 1.0, 0.05, 100) == 1.0
    assert om.epsilon_at(50, 1.0, 0.05, 100) == pytest.approx(0.525)
    assert om.epsilon_at(100, 1.0, 0.05, 100) == pytest.approx(0.05)
    assert om.epsilon_at(10_000, 1.0, 0.05, 100) == pytest.approx(0.05)


def test_masked_argmax_never_picks_an_invalid_action():
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        q = torch.randn(200, 9, generator=g) * 10
        mask = torch.rand(200, 9, generator=g) < 0.3
        mask[torch.arange(200), torch.randint(9, (200,), generator=g)] = True  # at least one valid
        a = om.masked_argmax(q, mask)
        assert mask[torch.arange(200), a].all()
        best = torch.where(mask, q, torch.full_like(q, -1e30)).max(1).values
        assert torch.equal(q[torch.arange(200), a], best)
        for eps in (0.0, 0.5, 1.0):
            e = om.epsilon_greedy(q, mask, eps, g)
            assert mask[torch.arange(200), e].all()


def test_epsilon_greedy_explores_uniformly_over_valid_actions():
    g = torch.Generator().manual_seed(2)
    q = torch.zeros(20000, 4)
    q[:, 0] = 1.0
    mask = torch.tensor([True, True, False, True]).expand(20000, 4)
    a = om.epsilon_greedy(q, mask, 1.0, g)
    counts = torch.bincount(a, minlength=4).float() / 20000
    assert counts[2] == 0
    assert torch.allclose(counts[[0, 1, 3]], torch.full((3,), 1 / 3), atol=0.02)
    assert (om.epsilon_greedy(q, mask, 0.0, g) == 0).all()


def test_td_targets_by_hand():
    r = torch.tensor([[1.0, 2.0, 3.0]])
    nxt = torch.tensor([[10.0, 20.0, 99.0]])
    last = torch.tensor([[False, False, True]])
    one_step = om.td_lambda_targets(r, nxt, last, 0.5, 0.0)
    assert torch.allclose(one_step, torch.tensor([[1 + 5.0, 2 + 10.0, 3.0]]))
    lam = om.td_lambda_targets(r, nxt, last, 0.5, 0.5)
    g2 = 3.0
    g1 = 2 + 0.5 * (0.5 * 20 + 0.5 * g2)
    g0 = 1 + 0.5 * (0.5 * 10 + 0.5 * g1)
    assert torch.allclose(lam, torch.tensor([[g0, g1, g2]]))
    assert torch.allclose(om.td_lambda_targets(r, nxt, last, 0.5, 1.0)[0, 0], torch.tensor(1 + 0.5 * 2 + 0.25 * 3))


def _cfg(**kw):
    base = dict(mixer_embed=8, hypernet_hidden=16, q_lr=5e-3, q_grad_clip=10.0, double_q=True, gamma=0.9,
                td_lambda=0.0, seed=0, hidden=16)
    base.update(kw)
    return SimpleNamespace(**base)


def _batch(E=4, T=5, N=2, D=6, A=3, S=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    filled = torch.ones(E, T, dtype=torch.bool)
    filled[0, 3:] = False
    return EpisodeBatch(torch.randn(E, T, N, D, generator=g), torch.ones(E, T, N, A, dtype=torch.bool),
                        torch.randint(A, (E, T, N), generator=g), torch.randn(E, T, N, generator=g),
                        torch.ones(E, T, N, dtype=torch.bool), torch.randn(E, T, S, generator=g), filled,
                        torch.zeros(E, dtype=torch.long))


def test_hard_target_update_every_interval():
    spec = NetSpec(6, 3, 4, (4, 5), hidden=16, intent_dim=8)
    learner = QMIXLearner(spec, 2, _cfg(), torch.device("cpu"), target_interval=3)
    start = copy.deepcopy(learner.target_agent.state_dict())
    batch = _batch()
    for k in range(1, 7):
        learner.update(batch)
        target = learner.target_agent.state_dict()
        online = learner.agent.state_dict()
        same_as_online = all(torch.equal(target[n], online[n]) for n in target)
        if k % 3 == 0:
            assert same_as_online and learner.target_updates == k // 3
        else:
            assert not same_as_online
        if k < 3:
            assert all(torch.equal(target[n], start[n]) for n in target)


def test_padding_does_not_enter_the_loss():
    spec = NetSpec(6, 3, 4, (4, 5), hidden=16, intent_dim=8)
    torch.manual_seed(3)
    a = QMIXLearner(spec, 2, _cfg(), torch.device("cpu"), 100)
    b = copy.deepcopy(a)
    b.optimizer = torch.optim.Adam(b.params, lr=5e-3)
    b.optimizer.load_state_dict(a.optimizer.state_dict())
    batch = _batch()
    noisy = copy.deepcopy(batch)
    noisy.rewards[0, 3:] = 1e6  # padding past episode 0's end
    noisy.obs[0, 3:] = 1e3  # read only by the final real tick's target (t = 2), which does not bootstrap
    assert a.update(batch)["loss"] == pytest.approx(b.update(noisy)["loss"], rel=1e-5)


def test_qmix_learns_the_tiny_matching_task(tmp_path):
    from tests.npc_brains.offpolicy_helpers import greedy_reward_per_step, train_tiny

    policy = train_tiny("qmix", tmp_path, 4800, epsilon_anneal=300, batch_episodes=8, updates_per_episode=0.5)
    # random play earns ~1/3 per step; the greedy policy of a learner that matched its target earns ~1
    assert greedy_reward_per_step(policy) > 0.9


def test_qmix_kill_9_then_resume(tmp_path, capsys, monkeypatch):
    from tests.npc_brains.offpolicy_helpers import ROOT, kill_9_then_resume, run_village_train

    monkeypatch.chdir(ROOT)
    kill_9_then_resume(tmp_path, lambda *a: run_village_train(capsys, *a), "qmix")


def test_a_checkpoint_write_that_fails_is_one_line_and_saves_what_it_can(tmp_path, capsys, monkeypatch):
    import errno
    from pathlib import Path

    import npc_brains.runloop as runloop  # the run loop the replay learners share with the PPO family
    from npc_brains.checkpoint import load_checkpoint
    from tests.npc_brains.offpolicy_helpers import ROOT, TINY, run_village_train

    monkeypatch.chdir(ROOT)
    real = runloop.save_checkpoint
    calls = {"last.pt": 0}

    def disk_full_on_the_second_checkpoint(path, payload):
        if Path(path).name == "last.pt":
            calls["last.pt"] += 1
            if calls["last.pt"] == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, payload)

    monkeypatch.setattr(runloop, "save_checkpoint", disk_full_on_the_second_checkpoint)
    code, err = run_village_train(capsys, "--env", TINY, "--algo", "qmix", "--steps", "400", "--envs", "2",
                                  "--batch-episodes", "2", "--hidden", "16", "--checkpoint-every", "1",
                                  "--run-dir", str(tmp_path), "--no-progress")
    assert code == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "last.pt: No space left on device" in line and "saved" in line and "policy.pt" in line
    assert load_checkpoint(tmp_path / "policy.pt")["kind"] == "policy"
