"""The trainer's faster formulations compute the same functions (and gradients) as the plain ones."""

import dataclasses

import pytest
import torch

from npc_brains import maths
from npc_brains.config import TrainConfig
from npc_brains.networks import Brain, Critic, FiLM, NetSpec
from npc_brains.trainer import Trainer


def _close(a, b, tol=1e-5):
    return (a - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


def test_kl_from_terms_equals_categorical_kl_with_masked_actions():
    g = torch.Generator().manual_seed(0)
    p_logits = maths.masked_logits(torch.randn(50, 7, generator=g), torch.rand(50, 7, generator=g) > 0.3)
    mask = p_logits > maths.MASKED_LOGIT
    q_logits = maths.masked_logits(torch.randn(50, 7, generator=g), mask).requires_grad_(True)
    q_logp = torch.log_softmax(q_logits, -1)
    ref = maths.categorical_kl(torch.log_softmax(p_logits, -1), q_logp)
    p, neg_entropy = maths.kl_reference_terms(p_logits)
    fast = maths.kl_from_terms(p, neg_entropy, q_logp)
    assert torch.isfinite(fast).all() and _close(fast, ref)
    g_ref, = torch.autograd.grad(ref.sum(), q_logits, retain_graph=True)
    g_fast, = torch.autograd.grad(fast.sum(), q_logits)
    assert _close(g_fast, g_ref)
    assert float(p[~mask].abs().max()) == 0.0  # masked actions: probability exactly 0


def test_film_is_h_times_one_plus_gamma_plus_beta():
    film = FiLM(5, 16)
    torch.nn.init.normal_(film.lin.weight)
    torch.nn.init.normal_(film.lin.bias)
    h = torch.randn(30, 16, requires_grad=True)
    cond = torch.randn(30, 5)
    gamma, beta = film.lin(cond).chunk(2, dim=-1)
    ref = h * (1 + gamma) + beta
    out = film(h, cond)
    assert _close(out, ref)
    params = [h, film.lin.weight, film.lin.bias]
    for a, b in zip(torch.autograd.grad(out.square().sum(), params), torch.autograd.grad(ref.square().sum(), params),
                    strict=True):
        assert _close(a, b)


def test_critic_split_first_layer_matches_the_concatenated_input():
    critic = Critic(NetSpec(obs_dim=9, n_actions=3, state_dim=6, cond_index=(0,), hidden=16))
    state = torch.randn(4, 6)  # four village-ticks
    vt = torch.tensor([0, 0, 1, 3, 3, 3, 2])
    obs = torch.randn(7, 9)
    ref = critic(obs, state[vt])
    fast = critic.from_state_features(obs, critic.state_features(state).index_select(0, vt))
    assert _close(fast, ref)
    params = list(critic.parameters())
    for a, b in zip(torch.autograd.grad(fast.sum(), params), torch.autograd.grad(ref.sum(), params), strict=True):
        assert _close(a, b)


def test_trainer_critic_rows_match_brain_value(tmp_path):
    for algo in ("drmas", "ippo"):
        tr = Trainer(TrainConfig(algo=algo, steps=400, envs=2, rollout=8, device="cpu", run_dir=str(tmp_path)),
                     tensorboard=False)
        batch = tr.collector.collect(False)
        T, R = batch.rewards.shape
        B = batch.state.shape[1]
        obs = batch.obs.reshape(T * R, -1)
        vt = (torch.arange(T)[:, None] * B + tr.row_village[None, :]).reshape(-1)
        state_vt = batch.state.reshape(T * B, -1)
        ref = tr.brain.critic(obs, state_vt[vt] if tr.brain.critic.central else None)
        with torch.no_grad():
            assert _close(tr._critic(obs, vt, state_vt), ref)  # every village-tick at once
            assert _close(tr._critic(obs[:5], vt[:5], state_vt)[:5], ref[:5])  # a few rows: per-row path
        assert isinstance(tr.brain, Brain)


def test_half_minibatch_on_a_second_thread_gives_the_same_update(tmp_path, monkeypatch):
    def one_update(worker: bool):
        torch.manual_seed(0)
        tr = Trainer(TrainConfig(algo="drmas", steps=10_000, envs=2, rollout=8, device="cpu", seed=1,
                                 run_dir=str(tmp_path), threads=1), tensorboard=False)
        if not worker:
            monkeypatch.setattr(tr, "_second_thread", lambda: None)
        stats = tr.learn(tr.collector.collect(False))
        return stats, {k: v.clone() for k, v in tr.brain.state_dict().items()}

    s1, p1 = one_update(True)
    s2, p2 = one_update(False)
    assert s1["value_loss"] == s2["value_loss"] and s1["policy_loss"] == s2["policy_loss"]
    assert all(torch.equal(p1[k], p2[k]) for k in p1)


def test_minibatch_halves_sum_to_the_whole_minibatch_update(tmp_path):
    """Cutting each minibatch in two share-weighted halves is the same loss: the update matches the one of
    whole minibatches up to float rounding (the contrastive term, drawn once per minibatch, is off here so
    both draw the same random numbers)."""
    def one_update(split: bool):
        torch.manual_seed(0)
        tr = Trainer(TrainConfig(algo="drmas", steps=10_000, envs=2, rollout=8, device="cpu", seed=1,
                                 run_dir=str(tmp_path), threads=1, contrastive=0.0), tensorboard=False)
        tr._split_minibatches = split
        stats = tr.learn(tr.collector.collect(False))
        return stats, {k: v.clone() for k, v in tr.brain.state_dict().items()}

    s1, p1 = one_update(True)
    s2, p2 = one_update(False)
    for key in ("value_loss", "policy_loss", "entropy", "constraint_kl", "grad_norm"):
        assert s1[key] == pytest.approx(s2[key], rel=1e-4, abs=1e-7), key
    assert any(not torch.equal(p1[k], p2[k]) for k in p1)  # float rounding differs: the halves did run
    for k in p1:
        assert torch.allclose(p1[k], p2[k], rtol=1e-4, atol=1e-6), k


def test_slot_head_in_place_activations_match_the_plain_formula():
    from npc_brains.networks import SlotHead

    torch.manual_seed(0)
    head = SlotHead(16, (3, 5, 4, 2, 3))  # slots start at column 3: 4 slots x 5 features, 3 targeted kinds
    obs = torch.randn(11, 23, requires_grad=True)
    adapted = torch.randn(11, 16, requires_grad=True)
    slots = obs[:, 3:23].reshape(11, 4, 5)
    z = torch.tanh(head.from_slot(slots) + head.from_self(adapted).unsqueeze(1))
    ref = head.out(z).transpose(1, 2).reshape(11, 12)
    out = head(adapted, obs)
    assert _close(out, ref)
    params = [obs, adapted, *head.parameters()]
    for a, b in zip(torch.autograd.grad(out.square().sum(), params), torch.autograd.grad(ref.square().sum(), params),
                    strict=True):
        assert _close(a, b)


def _trainer_and_rows(tmp_path, **overrides):
    tr = Trainer(TrainConfig(algo="drmas", steps=10_000, envs=2, rollout=8, device="cpu", seed=1,
                             run_dir=str(tmp_path), **overrides), tensorboard=False)
    batch = tr.collector.collect(False)
    T, R = batch.rewards.shape
    rows = {"obs": batch.obs.reshape(T * R, -1), "mask": batch.mask.reshape(T * R, -1),
            "actions": batch.actions.reshape(-1)}
    return tr, batch, rows


def test_no_grad_passes_in_row_chunks_match_one_pass(tmp_path):
    tr, batch, rows = _trainer_and_rows(tmp_path)
    T, R = batch.rewards.shape
    B = batch.state.shape[1]
    vt = (torch.arange(T)[:, None] * B + tr.row_village[None, :]).reshape(-1)
    state_vt = batch.state.reshape(T * B, -1)
    with torch.no_grad():
        whole_logp = tr._logp(rows)
        whole_v = tr._critic(rows["obs"], vt, state_vt)
        tr._rows_per_pass = 7  # not a divisor of the rows: the last pass is short
        n = rows["obs"].shape[0]
        assert n % 7 and len(tr._passes(n)) == n // 7 + 1
        assert _close(tr._logp(rows), whole_logp)
        assert _close(tr._critic(rows["obs"], vt, state_vt, chunk=7), whole_v)
        assert _close(tr._critic(rows["obs"][:20], vt[:20], state_vt, chunk=7), whole_v[:20])  # per-row path


def test_teacher_terms_on_a_share_of_rows_estimate_the_kl_without_bias(tmp_path):
    tr, _, rows = _trainer_and_rows(tmp_path, constraint_rows=1.0)
    n = rows["obs"].shape[0]
    with torch.no_grad():  # a teacher that differs from the actor, so the KL is not 0
        for p in tr.brain.teacher.parameters():
            p.add_(0.3 * torch.randn_like(p))
        q_logp = torch.log_softmax(tr.brain.actor(rows["obs"], rows["mask"]), -1)
        full_p, full_negent = tr._teacher_terms(rows, n)
        ref_p, ref_negent = maths.kl_reference_terms(tr.brain.teacher(rows["obs"], rows["mask"]))
        assert _close(full_p, ref_p) and _close(full_negent, ref_negent)
        kl_rows = maths.kl_from_terms(full_p, full_negent, q_logp)
        assert float(kl_rows.mean()) > 0.01

        tr.cfg = dataclasses.replace(tr.cfg, constraint_rows=0.25)
        estimates = []
        for _ in range(200):
            p, negent = tr._teacher_terms(rows, n)
            picked = p.sum(-1) > 0
            assert int(picked.sum()) == round(n * 0.25)
            assert _close(p[picked], full_p[picked] / 0.25) and _close(negent[picked], full_negent[picked] / 0.25)
            assert float(p[~picked].abs().max()) == 0.0 and float(negent[~picked].abs().max()) == 0.0
            estimates.append(float(maths.kl_from_terms(p, negent, q_logp).mean()))
    # the mean over draws approaches the KL over every row (the draws' spread shrinks as 1 / sqrt(200))
    spread = float(torch.tensor(estimates).std()) / len(estimates) ** 0.5
    assert abs(sum(estimates) / len(estimates) - float(kl_rows.mean())) < 4 * spread + 1e-6
    assert spread > 0  # the draws did differ
