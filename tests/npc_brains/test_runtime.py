"""Networks, checkpoints and the policy runtime."""

import numpy as np
import pytest
import torch

from npc_brains import PolicyError, load_policy
from npc_brains.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from npc_brains.config import TrainConfig
from npc_brains.networks import FiLM, NetSpec, ValueNorm
from npc_brains.policy_api import Policy
from npc_brains.trainer import Trainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    cfg = TrainConfig(algo="drmas", steps=200, envs=1, rollout=8, epochs=1, minibatches=1, run_dir=str(run_dir),
                      device="cpu", double_buffer=False)
    trainer = Trainer(cfg)
    trainer.train()
    return trainer, run_dir


def test_film_starts_as_identity():
    film = FiLM(3, 5)
    h = torch.randn(4, 5)
    assert torch.equal(film(h, torch.randn(4, 3)), h)


def test_value_norm_matches_batch_statistics_after_one_update():
    vn = ValueNorm(beta=0.99)
    x = torch.tensor([1.0, 2.0, 3.0, 6.0])
    vn.update(x)
    mean, std = vn.stats()
    assert mean.item() == pytest.approx(3.0)
    assert std.item() == pytest.approx(x.std(unbiased=False).item(), rel=1e-4)
    assert vn.denormalize(vn.normalize(x)).tolist() == pytest.approx(x.tolist(), rel=1e-5)


def test_policy_file_satisfies_the_protocol(trained):
    trainer, run_dir = trained
    policy = load_policy(run_dir / "policy.pt", seed=0)
    assert isinstance(policy, Policy)
    env = trainer.env
    obs, info = env.reset(3)
    out = policy.act(obs, info["action_mask"], with_probs=True, with_values=True)
    assert out.actions.shape == (env.num_rows,) and out.actions.dtype == np.int64
    assert info["action_mask"][np.arange(env.num_rows), out.actions].all()
    assert out.probs.shape == (env.num_rows, env.n_actions)
    assert np.allclose(out.probs.sum(1), 1, atol=1e-5)
    assert (out.probs[~info["action_mask"]] == 0).all()
    assert out.values.shape == (env.num_rows,) and np.isfinite(out.values).all()
    policy.check_env(env)  # same layout: no error


def test_masked_actions_are_never_sampled(trained):
    _, run_dir = trained
    policy = load_policy(run_dir / "policy.pt", seed=1)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((500, policy.obs_dim)).astype(np.float32)
    mask = rng.random((500, policy.n_actions)) < 0.2
    mask[:, 0] = False
    mask[np.arange(500), rng.integers(1, policy.n_actions, 500)] = True
    for deterministic in (False, True):
        a = policy.act(obs, mask, deterministic=deterministic).actions
        assert mask[np.arange(500), a].all()


def test_sampling_is_one_stream_however_the_calls_are_batched(trained):
    """Noise is drawn ahead in blocks: the actions depend on the seed and the order of the rows, not on how the
    rows are split into calls, and assigning a new rng re-seeds (the sandbox does)."""
    _, run_dir = trained
    rng = np.random.default_rng(0)
    one = load_policy(run_dir / "policy.pt", seed=5)
    obs = rng.standard_normal((3000, one.obs_dim)).astype(np.float32)
    mask = rng.random((3000, one.n_actions)) < 0.5
    mask[:, 0] = True
    whole = one.act(obs, mask).actions
    split = load_policy(run_dir / "policy.pt", seed=5)
    cuts = [0, 1, 17, 400, 401, 2999, 3000]
    parts = np.concatenate([split.act(obs[a:b], mask[a:b]).actions for a, b in zip(cuts[:-1], cuts[1:], strict=True)])
    np.testing.assert_array_equal(whole, parts)
    split.rng = np.random.default_rng(5)  # a fresh stream, not the rest of the old one
    np.testing.assert_array_equal(split.act(obs, mask).actions, whole)
    assert not np.array_equal(load_policy(run_dir / "policy.pt", seed=6).act(obs, mask).actions, whole)


def test_numpy_and_torch_backends_agree(trained):
    _, run_dir = trained
    fast = load_policy(run_dir / "policy.pt")
    ref = load_policy(run_dir / "policy.pt", backend="torch")
    rng = np.random.default_rng(1)
    obs = rng.standard_normal((16, fast.obs_dim)).astype(np.float32)
    mask = np.ones((16, fast.n_actions), bool)
    a = fast.act(obs, mask, deterministic=True, with_probs=True, with_values=True)
    b = ref.act(obs, mask, deterministic=True, with_probs=True, with_values=True)
    assert np.array_equal(a.actions, b.actions)
    assert np.allclose(a.probs, b.probs, atol=1e-5)
    assert np.allclose(a.values, b.values, atol=1e-4)


def test_training_checkpoint_loads_as_a_policy_too(trained):
    _, run_dir = trained
    policy = load_policy(run_dir / "checkpoints" / "last.pt")
    assert policy.n_actions == len(policy.action_names)


def test_wrong_obs_shape_is_a_clear_error(trained):
    _, run_dir = trained
    policy = load_policy(run_dir / "policy.pt")
    with pytest.raises(ValueError, match="obs: expected shape"):
        policy.act(np.zeros((2, 3), np.float32), np.ones((2, policy.n_actions), bool))


def test_corrupted_checkpoint_is_one_clear_error(trained, tmp_path):
    _, run_dir = trained
    data = (run_dir / "policy.pt").read_bytes()
    bad = tmp_path / "cut.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(PolicyError, match="not a readable checkpoint"):
        load_policy(bad)
    noise = tmp_path / "noise.pt"
    noise.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(noise)


def test_foreign_checkpoints_are_refused(tmp_path):
    plain = tmp_path / "plain.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, plain)
    with pytest.raises(PolicyError, match="not a village NPC brain checkpoint"):
        load_policy(plain)
    # an arbitrary pickled object is refused by weights_only=True, not executed
    evil = tmp_path / "evil.pt"
    torch.save({"format": "village-npc-brain", "obj": NetSpec(1, 1, 1, ())}, evil)
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(evil)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(PolicyError, match="no such file"):
        load_policy(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_checkpoint(tmp_path / "nope.pt")


def test_mismatched_environment_is_detected(trained):
    _, run_dir = trained
    policy = load_policy(run_dir / "policy.pt")
    from npc_brains.envs import VillageFlatEnv

    other = VillageFlatEnv(["village-v1"], 1, 0, slots=2)
    with pytest.raises(CheckpointError, match="obs_dim"):
        policy.check_env(other)


def test_atomic_save_leaves_no_temp_files(tmp_path):
    path = save_checkpoint(tmp_path / "x.pt", {"config": {}, "net": {}, "env": {}, "model": {}})
    save_checkpoint(path, {"config": {"a": 1}, "net": {}, "env": {}, "model": {}})
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]
    assert load_checkpoint(path)["config"] == {"a": 1}


def test_default_policy_missing_is_one_clear_error(monkeypatch, tmp_path):
    import npc_brains.resolve as resolve

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)
    with pytest.raises(PolicyError, match="bundled default policy is missing"):
        load_policy("default")


def test_torch_backend_satisfies_the_protocol(trained):
    _, run_dir = trained
    policy = load_policy(run_dir / "policy.pt", backend="torch")
    assert isinstance(policy, Policy)
    obs = np.zeros((3, policy.obs_dim), np.float32)
    mask = np.zeros((3, policy.n_actions), bool)
    mask[:, 2] = True
    assert policy.act(obs, mask).actions.tolist() == [2, 2, 2]


def test_importing_the_package_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, npc_brains, npc_brains.config, village.cmd_train; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def _loud_slot_head(run_dir, tmp_path):
    """The trained checkpoint with a random, strong entity head (the trained one starts near zero)."""
    ckpt = load_checkpoint(run_dir / "policy.pt")
    assert ckpt["net"]["slot_layout"], "village policies have an entity head by default"
    gen = torch.Generator().manual_seed(3)
    for key in [k for k in ckpt["model"] if k.startswith("actor.slot_head.")]:
        ckpt["model"][key] = torch.randn(ckpt["model"][key].shape, generator=gen)
    path = tmp_path / "loud.pt"
    save_checkpoint(path, ckpt)
    return path


def test_entity_head_numpy_and_torch_agree(trained, tmp_path):
    _, run_dir = trained
    path = _loud_slot_head(run_dir, tmp_path)
    fast, ref = load_policy(path), load_policy(path, backend="torch")
    rng = np.random.default_rng(2)
    obs = rng.standard_normal((32, fast.obs_dim)).astype(np.float32)
    mask = rng.random((32, fast.n_actions)) < 0.7
    mask[:, 0] = True
    a = fast.act(obs, mask, deterministic=True, with_probs=True)
    b = ref.act(obs, mask, deterministic=True, with_probs=True)
    assert a.probs.max(1).mean() > 0.3  # the head really shapes the distribution
    assert np.array_equal(a.actions, b.actions)
    assert np.allclose(a.probs, b.probs, atol=1e-5)


def test_entity_head_is_shared_across_slots(trained, tmp_path):
    """Swapping two slots' features swaps their targeted logits (and nothing else) when only the entity head
    reads the slots."""
    _, run_dir = trained
    ckpt = load_checkpoint(_loud_slot_head(run_dir, tmp_path))
    ckpt["model"]["actor.head.weight"].zero_()
    ckpt["model"]["actor.head.bias"].zero_()
    offset = ckpt["net"]["slot_layout"][0]
    ckpt["model"]["actor.encoder.l1.weight"][:, offset:] = 0  # the trunk ignores the slots: only the head sees them
    save_checkpoint(tmp_path / "shared.pt", ckpt)
    policy = load_policy(tmp_path / "shared.pt")
    offset, feats, slots, untargeted, kinds = ckpt["net"]["slot_layout"]
    rng = np.random.default_rng(4)
    obs = rng.standard_normal((8, policy.obs_dim)).astype(np.float32)
    swapped = obs.copy()
    s0, s1 = slice(offset, offset + feats), slice(offset + feats, offset + 2 * feats)
    swapped[:, s0], swapped[:, s1] = obs[:, s1], obs[:, s0]
    mask = np.ones((8, policy.n_actions), bool)
    p = policy.act(obs, mask, with_probs=True).probs
    q = policy.act(swapped, mask, with_probs=True).probs
    targeted = p[:, untargeted:].reshape(8, kinds, slots)
    targeted_q = q[:, untargeted:].reshape(8, kinds, slots)
    assert np.allclose(targeted[:, :, 0], targeted_q[:, :, 1], atol=1e-6)
    assert np.allclose(targeted[:, :, 1], targeted_q[:, :, 0], atol=1e-6)
    assert np.allclose(p[:, :untargeted], q[:, :untargeted], atol=1e-6)


def test_policy_files_from_before_slot_hidden_load_with_the_older_width(trained, tmp_path):
    """Files written before `slot_hidden` existed have a 64-wide entity head and no width in their spec: they
    load as they are, as a policy and for --resume (which also keeps their teacher's KL on every row)."""
    from npc_brains.networks import LEGACY_SLOT_HIDDEN
    from npc_brains.trainer import config_from_checkpoint

    run_dir = tmp_path / "old"
    cfg = TrainConfig(algo="drmas", steps=200, envs=1, rollout=8, epochs=1, minibatches=1, run_dir=str(run_dir),
                      device="cpu", double_buffer=False)
    Trainer(cfg).train()
    for path in (run_dir / "policy.pt", run_dir / "checkpoints" / "last.pt"):
        ckpt = load_checkpoint(path)
        assert ckpt["net"].pop("slot_hidden") == LEGACY_SLOT_HIDDEN
        ckpt["config"].pop("slot_hidden")
        ckpt["config"].pop("constraint_rows")
        save_checkpoint(path, ckpt)
    policy = load_policy(run_dir / "policy.pt", backend="torch")
    assert policy.actor.slot_head.from_slot.out_features == LEGACY_SLOT_HIDDEN
    obs = np.zeros((3, policy.obs_dim), np.float32)
    assert load_policy(run_dir / "policy.pt").act(obs, np.ones((3, policy.n_actions), bool)).actions.shape == (3,)
    resumed = config_from_checkpoint(run_dir / "checkpoints" / "last.pt", {"steps": 400})
    assert resumed.slot_hidden == LEGACY_SLOT_HIDDEN
    assert resumed.constraint_rows == 1.0  # such a run evaluated the teacher's KL on every row, and goes on so
    narrow = load_checkpoint(run_dir / "policy.pt")  # a narrower head records its width and loads with it
    narrow["net"]["slot_hidden"] = 32
    for name in ("from_self.weight", "from_self.bias", "from_slot.weight", "from_slot.bias"):
        narrow["model"][f"actor.slot_head.{name}"] = narrow["model"][f"actor.slot_head.{name}"][:32]
    narrow["model"]["actor.slot_head.out.weight"] = narrow["model"]["actor.slot_head.out.weight"][:, :32]
    save_checkpoint(tmp_path / "narrow.pt", narrow)
    assert load_policy(tmp_path / "narrow.pt", backend="torch").actor.slot_head.from_slot.out_features == 32
    assert load_policy(tmp_path / "narrow.pt").act(obs, np.ones((3, policy.n_actions), bool)).actions.shape == (3,)
    Trainer(resumed, resume=run_dir / "checkpoints" / "last.pt").train()
