"""The trainer end to end on small budgets: every algorithm, the Dr. MAS switches, learning, rollback."""

import dataclasses
import json

import numpy as np
import pytest

from npc_brains.config import PRESETS, ConfigError, TrainConfig, config_from_dict, update_shape
from npc_brains.envs import EnvError
from npc_brains.metrics import read_metrics
from npc_brains.trainer import Trainer, config_from_checkpoint

TINY = "tests.npc_brains.tiny_env:make_env"


def _small(tmp_path, **kw):
    base = dict(steps=400, envs=1, rollout=16, epochs=1, minibatches=2, run_dir=str(tmp_path), device="cpu")
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("algo", ["ippo", "mappo", "drmas"])
def test_smoke_each_algorithm_on_the_village(tmp_path, algo):
    result = Trainer(_small(tmp_path, algo=algo)).train()
    assert result.updates == 3 and not result.interrupted
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [192, 384, 576]
    assert all("episode_return_mean" in r for r in rows)
    assert all(np.isfinite(r["value_loss"]) and np.isfinite(r["entropy"]) for r in rows)
    assert (tmp_path / "checkpoints" / "last.pt").is_file() and (tmp_path / "policy.pt").is_file()


def test_presets_set_the_components():
    assert TrainConfig(algo="ippo").resolved().central_critic is False
    mappo = TrainConfig(algo="mappo").resolved()
    assert mappo.central_critic and mappo.value_norm and mappo.adv_norm == "global" and not mappo.shaping
    dr = TrainConfig(algo="drmas", shaping=False).resolved()
    assert dr.shaping is False and dr.sync_check is True and dr.adv_norm == "agent"
    assert set(PRESETS["drmas"]) == set(PRESETS["ippo"]) == set(PRESETS["mappo"])


def test_every_optional_path_runs_on_a_pettingzoo_env(tmp_path):
    cfg = _small(tmp_path, env=TINY, envs=4, rollout=8, steps=2000, replay_old_frac=0.3, policy_delay=2,
                 adv_norm="role", contrastive_positive="village", coop_every=1, monitor_warmup=0)
    result = Trainer(cfg).train()
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert result.updates == len(rows) - sum("event" in r for r in rows)
    assert {r["policy_updated"] for r in rows if "policy_updated" in r} == {0.0, 1.0}  # delayed actor updates
    coop = [r for r in rows if "cooperation" in r]
    assert coop and all(np.isfinite(r["coop_joint"]) for r in coop)
    assert any(r.get("sync_kl_mean") is not None for r in rows)


def test_learns_the_tiny_matching_task(tmp_path):
    """Random play earns ~2.7 per 8-step episode; the trained policy must clearly beat 5.5. (The CPU default
    uses each row once, so it needs more rows than four epochs would: 30k reach about 7.6, 15k about 5.3.)"""
    cfg = TrainConfig(env=TINY, algo="drmas", steps=30_000, envs=16, rollout=16, run_dir=str(tmp_path),
                      device="cpu", seed=1)
    Trainer(cfg).train()
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r.get("episode_return_mean") is not None]
    assert rows[0]["episode_return_mean"] < 4.0
    assert rows[-1]["episode_return_mean"] > 5.5


def test_rollback_restores_and_adjusts(tmp_path):
    # an impossible oscillation threshold makes every judged epoch bad -> a rollback every 2 epochs
    cfg = _small(tmp_path, env=TINY, envs=4, rollout=8, steps=3000, oscillation_max=0.0, monitor_window=2,
                 monitor_warmup=1, bad_epochs=2)
    trainer = Trainer(cfg)
    result = trainer.train()
    events = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r.get("event") == "rollback"]
    assert result.rollbacks == len(events) >= 1
    first = events[0]
    assert first["lr_scale"] == pytest.approx(0.5) and first["constraint_scale"] == pytest.approx(1.5)
    assert first["explore_scale"] == pytest.approx(1.1)
    assert "oscillation" in first["reasons"] and "episode_return_mean" in first
    assert trainer.adjust.lr == pytest.approx(0.5 ** len(events))


def test_rollback_switch_off_only_reports(tmp_path):
    cfg = _small(tmp_path, env=TINY, envs=4, rollout=8, steps=3000, oscillation_max=0.0, monitor_window=2,
                 monitor_warmup=1, bad_epochs=2, rollback=False)
    trainer = Trainer(cfg)
    trainer.train()
    events = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "event" in r]
    assert events and {e["event"] for e in events} == {"unstable"}
    assert trainer.adjust.lr == 1.0


def test_same_seed_same_run(tmp_path):
    def run(sub):
        cfg = _small(tmp_path / sub, env=TINY, envs=4, rollout=8, steps=1500, seed=3)
        Trainer(cfg).train()
        return [(r["step"], r.get("episode_return_mean"), round(r["value_loss"], 6))
                for r in read_metrics(tmp_path / sub / "metrics.jsonl") if "update" in r and "event" not in r]
    assert run("a") == run("b")


def test_update_shape_auto_takes_16_gradient_steps_and_one_epoch_on_cpu():
    auto = TrainConfig()
    assert update_shape(auto, "cpu") == (1, 16)
    assert update_shape(auto, "cuda") == (4, 4)
    assert update_shape(TrainConfig(epochs=2), "cpu") == (2, 8)
    assert update_shape(TrainConfig(epochs=32), "cuda") == (32, 1)
    assert update_shape(TrainConfig(minibatches=3), "cpu") == (1, 3)
    assert update_shape(TrainConfig(epochs=4, minibatches=4), "cpu") == (4, 4)
    with pytest.raises(ConfigError, match="epochs: expected an integer >= 0"):
        TrainConfig(epochs=-1)


def test_the_trainer_records_the_update_shape_it_resolved(tmp_path):
    tr = Trainer(_small(tmp_path, epochs=0, minibatches=0), tensorboard=False)
    assert (tr.cfg.epochs, tr.cfg.minibatches) == (1, 16)
    tr.train()
    # a resumed run keeps the shape it started with, whatever device resumes it
    stored = config_from_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert (stored.epochs, stored.minibatches) == (1, 16)
    assert update_shape(stored, "cuda") == (1, 16)


def test_a_pool_of_world_sizes_pads_the_smaller_villages_with_absent_rows(tmp_path):
    from npc_brains.envs import MixedSizeFlatEnv, make_flat_env

    env = make_flat_env(_small(tmp_path, world="village-v1,generated:6:1"), num_envs=3, seed=4)
    assert isinstance(env, MixedSizeFlatEnv) and env.sizes == [6, 12] and env.num_agents == 12
    obs, info = env.reset()
    first = obs.copy()
    assert obs.shape == (3 * 12, env.obs_dim) and info["state"].shape == (3, env.state_dim)
    pad = ~env.real
    assert pad.sum() == 6 * 2  # villages 0 and 1 are the 6-NPC world (two of three villages), padded to 12
    assert not info["alive"][pad].any() and not obs[pad].any()
    assert info["action_mask"][pad].sum(1).tolist() == [1] * int(pad.sum())
    assert info["alive"][env.real].all()
    rng = np.random.default_rng(0)
    for _ in range(5):
        mask = info["action_mask"]
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, reward, term, trunc, info = env.step(acts)
        assert not reward[pad].any() and not term[pad].any() and not info["alive"][pad].any()
    again = make_flat_env(_small(tmp_path, world="village-v1,generated:6:1"), num_envs=3, seed=4)
    assert np.array_equal(again.reset()[0], first)  # same seed, same start


def test_a_pool_of_world_sizes_trains(tmp_path):
    result = Trainer(_small(tmp_path, world="village-v1,generated:6:1", envs=2, steps=200)).train()
    assert result.updates == 1


def test_world_pool_of_same_size_trains(tmp_path):
    result = Trainer(_small(tmp_path, world="village-v1,generated:12:5", envs=2, steps=200)).train()
    assert result.updates == 1


def test_env_with_continuous_actions_is_refused(tmp_path):
    with pytest.raises(EnvError, match="only Discrete actions"):
        Trainer(_small(tmp_path, env="tests.npc_brains.tiny_env:make_box_env"))


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="algo: expected one of ippo, mappo, drmas, qmix, maddpg, got 'vibes'"):
        TrainConfig(algo="vibes")
    with pytest.raises(ConfigError, match="unknown option 'learning_rate'"):
        config_from_dict({"learning_rate": 1e-3})
    with pytest.raises(ConfigError, match="rollback_on"):
        config_from_dict({"rollback_on": "oscillation,vibes"})
    with pytest.raises(ConfigError, match="steps"):
        dataclasses.replace(TrainConfig(), steps=0)


def test_engine_tuning_overrides_are_checked_and_reach_the_engine(tmp_path):
    with pytest.raises(ConfigError, match="tuning: unknown engine field 'w_alvie'"):
        TrainConfig(tuning={"w_alvie": 1.0})
    with pytest.raises(ConfigError, match="tuning.attack_needs_grievance: expected a bool"):
        TrainConfig(tuning={"attack_needs_grievance": 0.5})
    with pytest.raises(ConfigError, match="tuning.w_alive: expected a float"):
        TrainConfig(tuning={"w_alive": "high"})
    with pytest.raises(ConfigError, match=r"tuning.curriculum_late: expected a share in \[0, 1\], got 1.5"):
        TrainConfig(tuning={"curriculum_late": 1.5})
    with pytest.raises(ConfigError, match=r"tuning.rumour_error: expected a share in \[0, 1\], got -0.1"):
        TrainConfig(tuning={"rumour_error": -0.1})
    TrainConfig(tuning={"curriculum_late": 1, "rumour_error": 0.0})  # the ends are shares too
    cfg = _small(tmp_path, tuning={"w_alive": 0.0, "attack_needs_grievance": False})
    from npc_brains.envs import make_flat_env

    env = make_flat_env(cfg, num_envs=1)
    t = env.vec.sim.t
    assert t.w_alive == 0.0 and t.attack_needs_grievance is False and t.death_penalty == 10.0
    trainer = Trainer(cfg)
    trainer.train()
    from npc_brains import load_policy
    from npc_brains.evaluate import policy_tuning

    policy = load_policy(str(tmp_path / "policy.pt"))
    assert policy.config["tuning"] == {"w_alive": 0.0, "attack_needs_grievance": False}
    assert policy_tuning(policy).w_alive == 0.0  # evaluated in the world it was trained in


def test_metrics_are_valid_json_lines(tmp_path):
    Trainer(_small(tmp_path, env=TINY, envs=2, rollout=8, steps=300)).train()
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert "step" in row and "episode_return_mean" in row


def test_entropy_bonus_follows_its_cosine_schedule(tmp_path):
    Trainer(_small(tmp_path, env=TINY, envs=2, rollout=8, steps=8 * 2 * 2 * 5, ent_coef=0.02,
                   ent_final_frac=0.1)).train()
    coefs = [r["ent_coef"] for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert coefs[0] == pytest.approx(0.02) and coefs[-1] == pytest.approx(0.002)
    assert all(a > b for a, b in zip(coefs, coefs[1:], strict=False))


@pytest.mark.slow
def test_drmas_learns_on_village_v1(tmp_path):
    """2M NPC-steps. The first epochs score about -26 per NPC-episode (a
    near-random policy); the return dips, then climbs (to about -9 when this test was written). Dr. MAS must
    end clearly above where it started."""
    cfg = TrainConfig(world="village-v1", algo="drmas", steps=2_000_000, envs=64, run_dir=str(tmp_path),
                      device="cpu", seed=0)
    Trainer(cfg).train()
    epochs = [r["episode_return_mean"] for r in read_metrics(tmp_path / "metrics.jsonl") if r.get("epoch")]
    assert np.mean(epochs[-3:]) > epochs[0] + 5.0
    assert np.mean(epochs[-3:]) > -20.0


def test_time_limit_cut_bootstraps_with_the_final_state_value(tmp_path, monkeypatch):
    import torch

    from npc_brains import trainer as trainer_module

    cfg = TrainConfig(algo="mappo", steps=400, envs=2, rollout=8, max_ticks=5, device="cpu", seed=3,
                      run_dir=str(tmp_path), bootstrap_truncated=True)
    tr = Trainer(cfg, tensorboard=False)
    batch = tr.collector.collect(False)
    t_cut, r_cut, final_obs, final_state = batch.truncated
    # 5-tick episodes are cut after step 4: every row alive at that step, and no other
    assert set(t_cut.tolist()) == {4}
    assert sorted(r_cut.tolist()) == batch.alive[4].nonzero().flatten().tolist()
    assert batch.dones[4].all()
    assert not torch.equal(final_obs, batch.obs[5, r_cut])  # the state before the reset, not the new episode's
    seen = {}
    real_gae = trainer_module.maths.gae

    def spy(rewards, *args):
        seen["rewards"] = rewards.clone()
        return real_gae(rewards, *args)

    monkeypatch.setattr(trainer_module.maths, "gae", spy)
    with torch.no_grad():
        v_final = tr.brain.value(final_obs, final_state).reshape(-1)
    stats = tr.learn(batch)
    expected = batch.rewards.clone()
    expected[t_cut, r_cut] += cfg.gamma * v_final
    assert torch.allclose(seen["rewards"], expected) and stats["bootstrapped_rows"] == len(r_cut)
    off = Trainer(dataclasses.replace(cfg, bootstrap_truncated=False, run_dir=str(tmp_path / "off")),
                  tensorboard=False)
    assert off.collector.collect(False).truncated is None
