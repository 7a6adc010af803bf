"""The raid-defence task: its file, the win rule tick by tick, the team reward, and the calibration a learner is
measured against (random play wins < 10%, a rule that attacks whenever it can wins most raids)."""

import numpy as np
import pytest

from engine.constants import EntityKind
from engine.tasks import RaidOutcome, TaskError, bundled_tasks, task_for_world, task_from_dict
from npc_brains.config import TrainConfig
from npc_brains.envs import make_flat_env


def test_bundled_task_and_its_world():
    assert "raid-defence-v1" in bundled_tasks()
    task = task_for_world("raid-defence-v1")
    assert task is not None and task.max_losses == 3 and task.ticks == 48 and task.scenario == "world"
    assert task_for_world("village-v1") is None


@pytest.mark.parametrize(("table", "message"), [
    ({"id": "x", "world": "w", "max_losses": 0}, "task.max_losses: expected an integer >= 1"),
    ({"id": "x", "world": "w", "win": "all_dead"}, "task.win: expected one of raiders_gone"),
    ({"id": "x", "world": "w", "ticks": "long"}, "task.ticks: expected an integer in 2..10000"),
    ({"id": "x", "world": "w", "win_reward": -1}, "task.win_reward: expected a number >= 0"),
    ({"id": "x", "world": "w", "colour": 1}, "task: unknown key 'colour'"),
])
def test_bad_task_fields_are_named(table, message):
    with pytest.raises(TaskError, match=message):
        task_from_dict({"task": table}, source="t.toml")


def _outcome(max_losses: int = 2) -> RaidOutcome:
    task = task_from_dict({"task": {"id": "t", "world": "w", "max_losses": max_losses, "damage_reward": 1.0,
                                    "win_reward": 5.0}})
    kinds = np.array([EntityKind.NPC] * 3 + [EntityKind.RAIDER] * 2)
    return RaidOutcome(task, 2, 3, kinds)


def test_win_when_every_raider_is_gone_before_the_losses():
    out = _outcome()
    alive = np.ones((2, 5), bool)
    present = np.ones((2, 5), bool)
    health = np.ones((2, 5), np.float32)
    active = np.ones(2, bool)
    assert out.update(present, alive, health, active).tolist() == [0.0, 0.0]  # the raid begins
    health[0, 3] = 0.5  # village 0 lands a blow: every living villager is paid for the raider's lost health
    assert out.update(present, alive, health, active).tolist() == [0.5, 0.0]
    present[0, 3] = False  # one raider retreats off the map, one is killed
    alive[0, 4] = False
    bonus = out.update(present, alive, health, active)
    assert bonus[0] == pytest.approx(1.0 + 5.0)  # the killed raider's health, then the win
    alive[1, :2] = False  # village 1 loses two villagers: lost, whatever follows
    out.update(present, alive, health, active)
    present[1, 3:] = False
    assert out.update(present, alive, health, active)[1] == 0.0
    assert out.finish(np.array([0, 1])).tolist() == [True, False]
    assert not out.started.any() and not out.won.any()


def test_no_win_before_the_raid_starts():
    out = _outcome()
    present = np.zeros((2, 5), bool)
    present[:, :3] = True
    out.update(present, np.ones((2, 5), bool), np.ones((2, 5), np.float32), np.ones(2, bool))
    assert out.finish(np.array([0, 1])).tolist() == [False, False]


def _win_rate(env, choose, episodes: int) -> tuple[float, float]:
    obs, info = env.reset(11)
    wins, returns = [], []
    while len(wins) < episodes:
        obs, _, _, _, info = env.step(choose(obs, info["action_mask"]))
        if "episode_wins" in info:
            wins += list(info["episode_wins"])
            returns.append(info["episode_return_mean"])
    return float(np.mean(wins)), float(np.mean(returns))


def test_calibration_random_rarely_wins_an_attacking_rule_mostly_does():
    cfg = TrainConfig(world="raid-defence-v1")
    env = make_flat_env(cfg, num_envs=120, seed=11)
    assert env.max_episode_steps == 48
    rng = np.random.default_rng(0)
    attack = np.array([n.startswith("attack") for n in env.action_names])
    idle = env.action_names.index("idle")

    def uniform(obs, mask):
        return np.where(mask, rng.random(mask.shape), -1).argmax(1)

    def attacker(obs, mask):
        can = mask & attack
        return np.where(can.any(1), can.argmax(1), idle)

    random_wins, random_return = _win_rate(env, uniform, 120)
    attack_wins, attack_return = _win_rate(env, attacker, 120)
    assert random_wins < 0.10
    assert attack_wins > 0.5 and attack_return > random_return


@pytest.mark.parametrize(("algo", "options"), [("drmas", {"collector": "process", "rollout": 48}),
                                               ("ippo", {"rollout": 48}), ("qmix", {"batch_episodes": 1})])
def test_training_metrics_carry_the_win_rate(tmp_path, algo, options):
    from npc_brains.algorithms import make_trainer
    from npc_brains.metrics import read_metrics

    cfg = TrainConfig(world="raid-defence-v1", algo=algo, steps=3 * 384, envs=1, device="cpu", hidden=16,
                      intent_dim=8, run_dir=str(tmp_path), **options)
    make_trainer(cfg, tensorboard=False).train()
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "event" not in r]
    rates = [r["win_rate"] for r in rows if "win_rate" in r]
    assert len(rates) == 3 and all(0.0 <= w <= 1.0 for w in rates)
