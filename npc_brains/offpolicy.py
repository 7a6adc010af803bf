"""The off-policy trainer: QMIX and MADDPG over episode replay, on the same envs, checkpoints, metrics and
`village train` flags as the PPO family (npc_brains.trainer).

    OffPolicyTrainer.train() ─┬─ one round: `round_ticks` ticks of the B envs, actions from the learner
                              │    (QMIX: epsilon-greedy on Q; MADDPG: Gumbel-softmax sample); finished
                              │    episodes go to the EpisodeReplay (npc_brains.replay)
                              ├─ updates_per_episode gradient steps per finished episode, each on
                              │    batch_episodes episodes sampled uniformly (once the replay holds that many)
                              └─ metrics.jsonl (+ TensorBoard) row per round, checkpoints (atomic; the replay
                                   travels in checkpoints/last.pt so --resume after kill -9 goes on with it):
                                   the run loop of npc_brains.runloop, shared with the PPO family

Defaults that adapt to the run (docs/training.md "Off-policy learners"): epsilon anneals over
min(epsilon_anneal, half the run's joint steps); QMIX's hard target copy every min(target_update, a twentieth
of the run's gradient steps); the replay is allocated for min(replay_episodes, the episodes the run collects).

The rounds are played by an EpisodeCollector (npc_brains.offpolicy_collect) over the envs of this process or,
with `--ray`, by rollout workers (npc_brains.distributed.RayReplayCollector), each running one over its own
envs with a CPU copy of the acting network: the same acting code.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from npc_brains import checkpoint
from npc_brains import offpolicy_maths as om
from npc_brains.checkpoint import (
    CheckpointError,
    check_env_compatible,
    env_description,
    load_checkpoint,
)
from npc_brains.config import TrainConfig
from npc_brains.envs import agents_and_episode_len, make_flat_env, slot_layout
from npc_brains.metrics import MetricsWriter
from npc_brains.networks import NetSpec
from npc_brains.offpolicy_collect import EpisodeCollector, acting_rule
from npc_brains.replay import EpisodeReplay
from npc_brains.runloop import Result, RunLoop

if TYPE_CHECKING:
    from npc_brains.distributed import RayOptions

MAX_AUTO_ENVS = 16  # parallel envs of an off-policy run when --envs is not given
MIN_ROUNDS = 32  # ... few enough that the run has at least this many rounds


def offpolicy_envs(steps: int, n_agents: int, episode_len: int) -> int:
    """Parallel envs when --envs is not given: at most MAX_AUTO_ENVS, and few enough for MIN_ROUNDS rounds of
    one episode length each."""
    return int(min(MAX_AUTO_ENVS, max(1, steps // (MIN_ROUNDS * n_agents * max(episode_len, 1)))))


class OffPolicyTrainer(RunLoop):
    def __init__(self, cfg: TrainConfig, *, progress: bool = False, resume: str | Path | None = None,
                 tensorboard: bool = True, ray: RayOptions | None = None):
        from npc_brains.trainer import pick_device

        cfg = cfg.resolved()
        n_agents, episode_len = agents_and_episode_len(cfg)
        if cfg.envs == 0:
            cfg = dataclasses.replace(cfg, envs=offpolicy_envs(cfg.steps, n_agents, episode_len))
        self.ray = ray  # rollout workers as Ray actors (npc_brains.distributed): B = workers x envs each
        if ray is not None:
            ray.check()
            cfg = dataclasses.replace(cfg, envs=ray.workers * ray.villages(cfg.envs))
        self.cfg = cfg
        self.device = pick_device(cfg.device)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.progress, self.tensorboard = progress, tensorboard
        self.metrics_listeners: list[Any] = []  # callables given every metrics row (MetricsWriter.listeners)
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        resume_ckpt = None
        if resume is not None:
            resume_ckpt = load_checkpoint(resume, map_location="cpu")
            if resume_ckpt.get("kind") != "train":
                raise CheckpointError(f"{resume}: a policy export cannot be resumed; pass a training checkpoint")
            if resume_ckpt["config"].get("algo") != cfg.algo:
                raise CheckpointError(f"{resume}: made by --algo {resume_ckpt['config'].get('algo')}, "
                                      f"not {cfg.algo}")

        self.env = make_flat_env(cfg)
        if resume_ckpt is not None:
            check_env_compatible(resume_ckpt["env"], self.env, str(resume))
        env = self.env
        self.N, self.R, self.B = env.num_agents, env.num_rows, env.num_envs
        # the replay's episode length: the env's time limit, else the probed length with room (longer ones are cut)
        self.max_len = int(getattr(env, "max_episode_steps", None) or 2 * episode_len)
        self.round_ticks = max(1, min(self.max_len, episode_len))
        self.rows_per_update = self.R * self.round_ticks
        self.total_updates = max(1, math.ceil(cfg.steps / self.rows_per_update))
        joint_total = self.total_updates * self.round_ticks * self.B
        self.epsilon_anneal = max(1, min(cfg.epsilon_anneal, joint_total // 2))
        episodes = math.ceil(self.total_updates * self.B * self.round_ticks / max(episode_len, 1))
        grad_total = max(1, int(episodes * cfg.updates_per_episode))
        self.target_interval = max(1, min(cfg.target_update, grad_total // 20))
        self.spec = NetSpec(env.obs_dim, env.n_actions, env.state_dim, tuple(env.cond_index), cfg.hidden,
                            cfg.intent_dim, True, cfg.algo == "maddpg",
                            slot_layout(env) if cfg.slot_head else (), cfg.slot_hidden)
        if cfg.algo == "qmix":
            from npc_brains.qmix import QMIXLearner

            self.learner: Any = QMIXLearner(self.spec, self.N, cfg, self.device, self.target_interval)
        else:
            from npc_brains.maddpg import MADDPGLearner

            self.learner = MADDPGLearner(self.spec, self.N, cfg, self.device)
        capacity = max(cfg.batch_episodes, min(cfg.replay_episodes, episodes + self.B))
        self.replay = EpisodeReplay(capacity, self.max_len, self.N, env.obs_dim, env.n_actions, env.state_dim)
        # the envs of this process, played with the learner's own acting network (with --ray: the workers' envs)
        self.collector = EpisodeCollector(env, self.learner.agent, acting_rule(cfg), self.device, self.max_len,
                                          cfg.seed + 1)
        self.sample_rng = torch.Generator()
        self.sample_rng.manual_seed(cfg.seed + 3)
        self.update = 0
        self.global_step = 0
        self.joint_step = 0
        self.pending_updates = 0.0
        self.last_return: float | None = None
        self.last_win: float | None = None
        self.collector_kind = "inline" if ray is None else "ray"
        env_seed = cfg.seed
        if resume_ckpt is not None:
            self._load_state(resume_ckpt)
            env_seed = cfg.seed + 1_000_003 * self.update  # fresh episodes, deterministic per resume point
        self._env_seed = env_seed
        if ray is None:
            self.collector.reset(env_seed)
        # what train() collects with: this EpisodeCollector, or Ray workers (_start_rollouts)
        self._rollouts: Any = self.collector

    def summary(self) -> str:
        c = self.cfg
        return (f"{c.algo} on {c.env or c.world}, {self.B} envs x {self.N} agents, {self.total_updates} rounds of "
                f"{self.rows_per_update} NPC-steps ({c.updates_per_episode:g} gradient step(s) per episode on "
                f"{c.batch_episodes} episodes; replay {self.replay.capacity} episodes; epsilon over "
                f"{self.epsilon_anneal} joint steps; target every {self.target_interval}), device {self.device}, "
                f"collector {self.collector_kind}"
                + (f" ({self.ray.workers} workers x {self.B // self.ray.workers} envs)" if self.ray is not None
                   else ""))

    # ------------------------------------------------------------------ state
    def _state_dict(self) -> dict[str, Any]:
        return {"kind": "train", "config": self.cfg.to_dict(), "net": self.spec.to_dict(),
                "env": env_description(self.env), "model": self.learner.model_state(),
                "optimizer": self.learner.optim_state(),
                "progress": {"update": self.update, "global_step": self.global_step, "joint_step": self.joint_step,
                             "pending_updates": self.pending_updates, "last_return": self.last_return,
                             "last_win": self.last_win},
                "rng": {"torch": torch.get_rng_state(), "act_rng": self._rollouts.rng_state(),
                        "sample_rng": self.sample_rng.get_state()},
                "replay": self.replay.state_dict()}

    def _load_state(self, ckpt: dict[str, Any]) -> None:
        try:
            self.learner.load_model_state(ckpt["model"])
            self.learner.load_optim_state(ckpt["optimizer"])
            prog = ckpt["progress"]
            self.update, self.global_step = int(prog["update"]), int(prog["global_step"])
            self.joint_step, self.pending_updates = int(prog["joint_step"]), float(prog["pending_updates"])
            self.last_return, self.last_win = prog.get("last_return"), prog.get("last_win")
            torch.set_rng_state(ckpt["rng"]["torch"].cpu())
            self.collector.generator.set_state(ckpt["rng"]["act_rng"].cpu())
            self.sample_rng.set_state(ckpt["rng"]["sample_rng"].cpu())
            self.replay.load_state_dict(ckpt["replay"])
        except (KeyError, RuntimeError, ValueError, TypeError) as exc:
            msg = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise CheckpointError(f"checkpoint does not fit this configuration ({msg})") from None

    def policy_payload(self) -> dict[str, Any]:
        model = {k: v for k, v in self.learner.model_state().items() if k.startswith("actor.")}
        return checkpoint.policy_payload(self.cfg.to_dict(), self.spec.to_dict(), self.env, model)

    # ------------------------------------------------------------------ one round
    def epsilon(self) -> float:
        cfg = self.cfg
        return om.epsilon_at(self.joint_step, cfg.epsilon_start, cfg.epsilon_finish, self.epsilon_anneal)

    def round_epsilons(self) -> list[float]:
        """The exploration rate of each tick of the next round (the schedule runs on joint steps: B per tick)."""
        cfg = self.cfg
        return [om.epsilon_at(self.joint_step + t * self.B, cfg.epsilon_start, cfg.epsilon_finish,
                              self.epsilon_anneal) for t in range(self.round_ticks)]

    def collect_round(self) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
        """round_ticks ticks of every env; returns (episodes stored, their returns, their win flags)."""
        self._rollouts.sync(self.learner.agent)
        done = self._rollouts.collect(self.round_epsilons(), self.replay, self.learner.updates)
        self.joint_step += self.round_ticks * self.B
        return done.stored, done.returns, done.wins

    def _start_rollouts(self) -> Any:
        """This run's collector: the in-process EpisodeCollector, or Ray workers (--ray)."""
        if self.ray is not None:
            from npc_brains.distributed import RayReplayCollector

            self._rollouts = RayReplayCollector(self.cfg, self.learner.agent, self._env_seed, self.max_len, self.ray,
                                              self.B // self.ray.workers)
        return self._rollouts

    def learn(self, new_episodes: int) -> dict[str, float]:
        """updates_per_episode gradient steps per new episode, once the replay can fill a batch."""
        cfg = self.cfg
        if not self.replay.can_sample(cfg.batch_episodes):
            return {}
        self.pending_updates += new_episodes * cfg.updates_per_episode
        rows: list[dict[str, float]] = []
        ages: list[float] = []
        while self.pending_updates >= 1:
            batch = self.replay.sample(cfg.batch_episodes, self.sample_rng, self.device, self.learner.updates)
            ages.append(float(batch.age.float().mean()))
            rows.append(self.learner.update(batch))
            self.pending_updates -= 1
        if not rows:
            return {}
        out = {k: float(np.nanmean([r[k] for r in rows])) for k in rows[0] if k != "target_updates"}
        if "target_updates" in rows[-1]:
            out["target_updates"] = rows[-1]["target_updates"]
        out["gradient_steps"] = len(rows)
        out["replay_age_mean"] = float(np.mean(ages))
        return out

    # ------------------------------------------------------------------ main loop
    def _open_collection(self) -> Any:
        return self._start_rollouts()

    def _update_once(self, writer: MetricsWriter, start: float) -> tuple[dict[str, Any], dict[str, str]]:
        t0 = time.perf_counter()
        stored, returns, wins = self.collect_round()
        t_collect = time.perf_counter() - t0
        stats = self.learn(stored)
        self.update += 1
        self.global_step += self.rows_per_update
        row: dict[str, Any] = {"step": self.global_step, "update": self.update, "time_s": time.perf_counter() - start}
        if returns:
            finished = np.concatenate(returns)
            self.last_return = float(finished.mean())
            row["episodes"] = int(finished.size // self.N)
        else:
            row["episodes"] = 0
        if wins:
            self.last_win = float(np.concatenate(wins).mean())
            row["win_rate"] = self.last_win
        row["episode_return_mean"] = self.last_return
        elapsed = time.perf_counter() - t0
        row.update(sps=self.rows_per_update / max(elapsed, 1e-9), collect_s=t_collect,
                   update_s=elapsed - t_collect, epsilon=self.epsilon() if self.cfg.algo == "qmix" else None,
                   replay_size=self.replay.size, replay_episodes_added=self.replay.added)
        row.update(stats)
        return row, {"q": f"{stats.get('q_mean', float('nan')):.2f}"}

    def _close_collection(self) -> None:
        if self._rollouts is not self.collector:
            self._rollouts.close()


__all__ = ["OffPolicyTrainer", "Result", "offpolicy_envs"]
