"""One trainer for IPPO, MAPPO and Dr. MAS (CleanRL-style: config, seeding, rollout, advantages, update).

    train(cfg) ─┬─ Collector.collect()        T ticks of B villages, actions sampled from the actor
                │     (double buffering: the next batch is collected while the learner updates, in a thread
                │     or, on a multi-core CPU, in a child process: npc_brains.collect)
                ├─ Trainer.learn(batch)
                │     sync check (KL matrix on a probe batch) -> per-agent constraint weights, priorities
                │     values (current critic) -> shaping -> GAE -> value norm -> per-agent advantage norm
                │     PPO epochs: clipped surrogate + value + entropy + KL-to-teacher + InfoNCE (+ replay rows)
                │     gradient-conflict probe, teacher EMA
                │     (on CPU each minibatch is cut in halves, the second on another core once the collector is done)
                ├─ StabilityMonitor.end_epoch() -> rollback to the last good state + adjustment
                └─ metrics.jsonl, checkpoints (atomic), progress bar (npc_brains.runloop, shared with the
                   replay learners)

The maths lives in npc_brains.maths so tests can call it; this file is the order in which it runs.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from npc_brains import checkpoint, maths
from npc_brains.checkpoint import (
    CheckpointError,
    check_env_compatible,
    env_description,
    load_checkpoint,
)
from npc_brains.collect import (
    Batch,
    Collector,
    PendingRollout,
    ProcessCollector,
    Rollouts,
    shared_bytes,
    shm_free_bytes,
)
from npc_brains.config import ConfigError, TrainConfig, config_from_dict, update_shape
from npc_brains.diagnose.signals import batch_signals
from npc_brains.envs import agents_and_episode_len, make_flat_env, slot_layout
from npc_brains.metrics import MetricsWriter
from npc_brains.networks import Brain, NetSpec
from npc_brains.runloop import Result, RunLoop, RunWriteError, WriteFailed
from npc_brains.stability import StabilityMonitor, Thresholds, cooperation_efficiency

if TYPE_CHECKING:
    from npc_brains.distributed import RayOptions

PROJECTION_DIM = 16  # random projection used by the k-NN state-entropy estimate
# the first of a minibatch's two halves also computes the contrastive term (the encoder on 512 more rows): with
# this share of the rows both halves take about as long (docs/history.md, "Timings behind code choices")
FIRST_HALF_SHARE = 0.45
ROWS_PER_CPU_PASS = 2048  # rows per no-grad pass over a whole batch on CPU (Trainer._rows_per_pass)
PROCESS_COLLECTOR_MIN_UPDATES = 8  # --collector auto: shorter runs collect in a thread (see _collector_kind)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device: {name!r} requested but no CUDA device is available (use --device cpu or auto)")
    return torch.device(name)


MAX_AUTO_ENVS = 64  # villages in parallel of a long run when --envs is not given
MIN_AUTO_UPDATES = 32  # ... and few enough that the run makes at least this many updates


def auto_envs(cfg: TrainConfig, num_agents: int, episode_len: int) -> int:
    """Villages in parallel when --envs is not given: enough for each to finish ~4 episodes, few enough for
    MIN_AUTO_UPDATES updates of --rollout ticks, at most MAX_AUTO_ENVS (docs/training.md "Defaults that adapt
    to the env")."""
    by_episodes = cfg.steps // (4 * num_agents * max(episode_len, 1))
    by_updates = cfg.steps // (MIN_AUTO_UPDATES * num_agents * cfg.rollout)
    return int(min(MAX_AUTO_ENVS, max(1, min(by_episodes, by_updates))))


@dataclass
class Adjust:
    """Multipliers the rollback applies (lower LR, stronger constraint, more exploration)."""

    lr: float = 1.0
    constraint: float = 1.0
    explore: float = 1.0


class Trainer(RunLoop):
    def __init__(self, cfg: TrainConfig, *, progress: bool = False, resume: str | Path | None = None,
                 tensorboard: bool = True, ray: RayOptions | None = None):
        cfg = cfg.resolved()
        if cfg.envs == 0:
            n_agents, episode_len = agents_and_episode_len(cfg)
            cfg = dataclasses.replace(cfg, envs=auto_envs(cfg, n_agents, episode_len))
        self.ray = ray  # rollout workers as Ray actors (npc_brains.distributed): B = workers x villages each
        if ray is not None:
            ray.check()
            cfg = dataclasses.replace(cfg, envs=ray.workers * ray.villages(cfg.envs))
        self.device = pick_device(cfg.device)
        epochs, minibatches = update_shape(cfg, self.device.type)
        cfg = dataclasses.replace(cfg, epochs=epochs, minibatches=minibatches)
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        elif self.device.type == "cpu" and cfg.double_buffer:
            # collector and learner each keep one core busy; more intra-op threads only make them contend
            torch.set_num_threads(1)
        torch.manual_seed(cfg.seed)
        self.progress = progress
        self.tensorboard = tensorboard
        self.metrics_listeners: list[Any] = []  # callables given every metrics row (MetricsWriter.listeners)
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        resume_ckpt = None
        if resume is not None:
            resume_ckpt = load_checkpoint(resume, map_location=self.device)
            if resume_ckpt.get("kind") != "train":
                raise CheckpointError(f"{resume}: a policy export cannot be resumed; pass a training checkpoint")

        # --- environment and networks
        self.env = make_flat_env(cfg)
        if resume_ckpt is not None:
            check_env_compatible(resume_ckpt["env"], self.env, str(resume))
        env = self.env
        self.N, self.R, self.B = env.num_agents, env.num_rows, env.num_envs
        self.T = cfg.rollout
        self.rows_per_update = self.R * self.T
        self.total_updates = max(1, math.ceil(cfg.steps / self.rows_per_update))
        self.spec = NetSpec(env.obs_dim, env.n_actions, env.state_dim, tuple(env.cond_index), cfg.hidden,
                            cfg.intent_dim, bool(cfg.film), bool(cfg.central_critic),
                            slot_layout(env) if cfg.slot_head else (), cfg.slot_hidden)
        self.brain = Brain(self.spec, bool(cfg.value_norm)).to(self.device)
        params = [p for n, p in self.brain.named_parameters() if not n.startswith("teacher.")]
        self._grad_params = [p for p in params if p.requires_grad]
        # fused: one kernel for every parameter instead of a loop over tensors
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr, eps=1e-5,
                                          fused=self.device.type in ("cpu", "cuda"))
        self.actor_params = [p for n, p in self.brain.actor.named_parameters() if not n.startswith("runtime_value")]
        self.clip_actor = list(self.brain.actor.parameters())
        self.clip_critic = list(self.brain.critic.parameters())
        dev = self.device
        self.row_agent = torch.arange(self.R, device=dev) % self.N
        self.row_village = torch.arange(self.R, device=dev) // self.N
        self.cond_index = torch.tensor(self.spec.cond_index, dtype=torch.long, device=dev)
        gen = np.random.default_rng(cfg.seed + 7)
        self.projection = torch.from_numpy(gen.standard_normal((env.obs_dim, PROJECTION_DIM)).astype(np.float32)
                                           / math.sqrt(env.obs_dim)).to(dev)

        # --- progress and Dr. MAS state
        self.update = 0
        self.global_step = 0
        self.adjust = Adjust()
        self.ent_coef = cfg.ent_coef  # this update's entropy bonus (cosine schedule, see learn())
        self.monitor = StabilityMonitor(Thresholds(cfg.oscillation_max, cfg.cooperation_min, cfg.conflict_min,
                                                   cfg.drawdown_max, cfg.monitor_window, cfg.monitor_warmup,
                                                   cfg.bad_epochs, tuple(cfg.rollback_on)))
        self.good: dict[str, Any] | None = None
        self.last_return: float | None = None
        self.epoch_returns: list[np.ndarray] = []
        self.epoch_conflicts: list[float] = []
        self.agent_weight = maths.constraint_weights(self.N, None, cfg.constraint_many_agents, 1.0).to(dev)
        self.agent_priority = torch.ones(self.N, device=dev)
        self.old: dict[str, torch.Tensor] | None = None  # previous batch, for the replay mix
        self._pool: ThreadPoolExecutor | None = None  # see _second_thread
        # minibatches cut in two halves that run on two cores (_minibatch_backward)
        self._split_minibatches = (self.device.type == "cpu" and torch.get_num_threads() == 1
                                   and (os.cpu_count() or 1) > 1)
        self._collecting: Future | PendingRollout | None = None  # the double-buffered collection during learn()
        # rows per no-grad pass over a whole batch (proximal and teacher policies, values): on CPU small enough
        # that a pass's activations (the slot head's are rows x slots x 64) stay in cache; on a GPU one pass
        self._rows_per_pass = ROWS_PER_CPU_PASS if self.device.type == "cpu" else 65536
        env_seed = cfg.seed
        if cfg.init_from and resume_ckpt is None:  # a resumed run already holds the fine-tuned weights
            self._init_actor(cfg.init_from)
        if resume_ckpt is not None:
            self._load_state(resume_ckpt)
            env_seed = cfg.seed + 1_000_003 * self.update  # fresh episodes, deterministic per resume point
        self._env_seed = env_seed
        self.collector_kind = self._collector_kind()
        self.collector = Collector(env, self.brain.actor, dev, env_seed, self.T, cfg.bootstrap_truncated)
        if resume_ckpt is not None and "collector_rng" in resume_ckpt.get("rng", {}):
            self.collector.generator.set_state(resume_ckpt["rng"]["collector_rng"].cpu())
        # what train() collects with: this Collector, or a ProcessCollector that starts from the same state,
        # or Ray workers
        self._rollouts: Collector | Rollouts = self.collector

    # ------------------------------------------------------------------ state
    def _state_dict(self) -> dict[str, Any]:
        return {
            "kind": "train",
            "config": self.cfg.to_dict(),
            "net": self.spec.to_dict(),
            "env": env_description(self.env),
            "model": self.brain.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "progress": {"update": self.update, "global_step": self.global_step,
                         "last_return": self.last_return},
            "monitor": self.monitor.state_dict(),
            "adjust": {"lr": self.adjust.lr, "constraint": self.adjust.constraint, "explore": self.adjust.explore},
            "good": self.good,
            "rng": {"torch": torch.get_rng_state(), "collector_rng": self._rollouts.rng_state()},
        }

    def _load_state(self, ckpt: dict[str, Any]) -> None:
        try:
            self.brain.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            prog = ckpt["progress"]
            self.update = int(prog["update"])
            self.global_step = int(prog["global_step"])
            self.last_return = prog.get("last_return")
            self.monitor.load_state_dict(ckpt["monitor"])
            self.adjust = Adjust(**{k: float(v) for k, v in ckpt["adjust"].items()})
            self.good = ckpt.get("good")
            torch.set_rng_state(ckpt["rng"]["torch"].cpu())
        except (KeyError, RuntimeError, ValueError, TypeError) as exc:
            msg = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise CheckpointError(f"checkpoint does not fit this configuration ({msg})") from None

    def _init_actor(self, source: str) -> None:
        """Start from a trained policy's actor and value normaliser (fine-tuning); the critic and the optimiser
        start afresh, and the EMA teacher starts as the loaded actor."""
        from npc_brains.resolve import BUNDLED, bundled_policy

        path = bundled_policy(source) if source in BUNDLED else Path(source)
        try:
            ckpt = load_checkpoint(path, map_location=self.device)
        except CheckpointError as exc:
            raise CheckpointError(f"init-from: {exc}") from None
        net = ckpt.get("net") or {}
        for key in ("obs_dim", "n_actions"):
            theirs, ours = net.get(key), getattr(self.spec, key)
            if theirs != ours:
                raise CheckpointError(f"init-from: {source} has {key} {theirs}, this run's village has {ours} "
                                      f"(same slots and engine version needed)")
        def part(prefix: str) -> dict[str, torch.Tensor]:
            return {k[len(prefix):]: v for k, v in ckpt["model"].items() if k.startswith(prefix)}

        try:
            self.brain.actor.load_state_dict(part("actor."))
            norm = part("value_norm.")
            if self.brain.value_norm is not None and norm:
                self.brain.value_norm.load_state_dict(norm)
        except RuntimeError as exc:
            msg = str(exc).splitlines()[0][:160]
            raise CheckpointError(f"init-from: {source}'s network does not fit this run's ({msg})") from None
        self.brain.teacher.load_state_dict(self.brain.actor.state_dict())

    def policy_payload(self) -> dict[str, Any]:
        model = {k: v for k, v in self.brain.state_dict().items() if k.startswith(("actor.", "value_norm."))}
        return checkpoint.policy_payload(self.cfg.to_dict(), self.spec.to_dict(), self.env, model)

    def _snapshot(self) -> dict[str, Any]:
        return {"model": copy.deepcopy(self.brain.state_dict()),
                "optimizer": copy.deepcopy(self.optimizer.state_dict()), "step": self.global_step}

    # ------------------------------------------------------------------ sync check
    def sync_check(self, batch: Batch) -> dict[str, float]:
        """KL matrix between the agents' policies on a probe batch: agent i's policy is the shared network
        with i's personality features swapped in. Flags agents far from the population."""
        cfg, N, dev = self.cfg, self.N, self.device
        valid = batch.alive.reshape(-1).nonzero().squeeze(1)
        if valid.numel() == 0:
            return {}
        pick = valid[torch.randint(valid.numel(), (min(cfg.sync_probe, valid.numel()),), device=dev)]
        obs = batch.obs.reshape(-1, batch.obs.shape[-1])[pick]
        mask = batch.mask.reshape(-1, batch.mask.shape[-1])[pick]
        village = self.row_village[pick % self.R]
        P = pick.numel()
        probe = obs.unsqueeze(0).repeat(N, 1, 1)  # (N, P, D)
        if self.cond_index.numel():
            rows = village[None, :] * N + torch.arange(N, device=dev)[:, None]  # (N, P)
            probe[:, :, self.cond_index] = batch.cond_table[rows]
        with torch.no_grad():
            logits = self.brain.actor(probe.reshape(N * P, -1), mask.repeat(N, 1))
            logp = torch.log_softmax(logits, -1).reshape(N, P, -1)
            matrix = maths.kl_matrix(logp)
            divergence = maths.divergence_from_population(logp)
        over = divergence > cfg.sync_threshold
        self.agent_weight = maths.constraint_weights(N, over, cfg.constraint_many_agents, cfg.sync_boost).to(dev)
        self.agent_priority = 1.0 + divergence / divergence.mean().clamp_min(1e-8)
        off_diag = matrix[~torch.eye(N, dtype=torch.bool, device=dev)] if N > 1 else matrix.reshape(-1)
        return {"sync_kl_mean": float(off_diag.mean()), "sync_kl_max": float(matrix.max()),
                "sync_over": int(over.sum())}

    # ------------------------------------------------------------------ shaping
    def shaping_bonus(self, batch: Batch, weight: float) -> torch.Tensor:
        """weight * cos(agent's action distribution, its village's mean) * scale * state entropy."""
        T, R = batch.rewards.shape
        assert batch.probs is not None
        village = self.row_village.repeat(T) + torch.arange(T, device=self.device).repeat_interleave(R) * self.B
        align = maths.cosine_alignment(batch.probs.reshape(T * R, -1), village, batch.alive.reshape(-1))
        feats = batch.obs @ self.projection  # (T, R, P)
        n_ref = min(128, R)
        ref_rows = torch.randperm(R, device=self.device)[:n_ref]
        ref = feats[:, ref_rows]  # (T, n_ref, P)
        d = torch.cdist(feats, ref)  # (T, R, n_ref)
        k = min(4, n_ref)
        entropy = torch.log1p(d.topk(k, dim=-1, largest=False).values[..., -1])
        return weight * align.reshape(T, R) * self.cfg.shaping_scale * entropy * batch.alive

    # ------------------------------------------------------------------ update
    def learn(self, batch: Batch) -> dict[str, float]:
        cfg, dev, brain = self.cfg, self.device, self.brain
        T, R = batch.rewards.shape
        stats: dict[str, float] = {}
        if cfg.sync_check and self.N > 1:
            stats.update(self.sync_check(batch))

        # rows index the village states by "village-tick" (t * B + village): the centralised critic's state part
        # is computed once per village-tick, never copied per row (see Critic.state_features)
        obs_all = batch.obs.reshape(T * R, -1)
        B = batch.state.shape[1]
        row_vt = (torch.arange(T, device=dev)[:, None] * B + self.row_village[None, :]).reshape(-1)
        state_vt = batch.state.reshape(T * B, -1)
        with torch.no_grad():
            values = self._critic(obs_all, row_vt, state_vt, chunk=self._rows_per_pass)
            if brain.value_norm is not None:
                values = brain.value_norm.denormalize(values)
            values = values.reshape(T, R)
            next_value = brain.value(batch.next_obs, batch.next_state[self.row_village])
        rewards = batch.rewards
        joint_steps = self.global_step // max(self.N, 1)
        w_shape = maths.shaping_weight(joint_steps, cfg.shaping_anneal) if cfg.shaping else 0.0
        stats["shaping_weight"] = w_shape
        if w_shape > 0 and batch.probs is not None:
            bonus = self.shaping_bonus(batch, w_shape)
            rewards = rewards + bonus
            stats["shaping_bonus"] = float(bonus.sum() / batch.alive.sum().clamp_min(1))
        if batch.truncated is not None:  # the village goes on: the cut step's return continues with V(final)
            t_cut, r_cut, final_obs, final_state = batch.truncated
            with torch.no_grad():
                v_final = brain.value(final_obs, final_state if brain.critic.central else None)
            rewards = rewards.index_put((t_cut, r_cut), cfg.gamma * v_final.reshape(-1), accumulate=True)
            stats["bootstrapped_rows"] = float(t_cut.numel())
        adv, returns = maths.gae(rewards, values, batch.dones, next_value, cfg.gamma, cfg.gae_lambda)
        valid = batch.alive.reshape(-1)
        if brain.value_norm is not None:
            brain.value_norm.update(returns.reshape(-1)[valid])
        groups = {"agent": self.row_agent, "role": torch.from_numpy(self.env.groups_role).to(dev)}.get(cfg.adv_norm)
        if cfg.adv_norm == "none":
            adv_n = adv.reshape(-1) * valid
        else:
            adv_n = maths.normalize_advantages(adv, batch.alive, None if groups is None else groups.repeat(T))

        # flat training set: valid (living) rows only = death masking
        idx_valid = valid.nonzero().squeeze(1)
        flat = {  # index_select: several times faster than x[idx] on CPU
            "obs": obs_all.index_select(0, idx_valid),
            "vt": row_vt.index_select(0, idx_valid),
            "mask": batch.mask.reshape(T * R, -1).index_select(0, idx_valid),
            "actions": batch.actions.reshape(-1).index_select(0, idx_valid),
            "logp": batch.logp.reshape(-1).index_select(0, idx_valid),
            "adv": adv_n.index_select(0, idx_valid),
            "returns": returns.reshape(-1).index_select(0, idx_valid),
            "values": values.reshape(-1).index_select(0, idx_valid),
            "agent": self.row_agent.repeat(T).index_select(0, idx_valid),
        }
        flat["group"] = (groups.repeat(T)[idx_valid] if cfg.adv_norm == "role" and groups is not None
                         else flat["agent"])
        stats.update(batch_signals(flat, adv.reshape(-1).index_select(0, idx_valid), batch.alive, self.N))
        n = idx_valid.numel()
        if n == 0:
            return stats
        # importance weights of prioritised sampling (1 when uniform)
        if cfg.sync_check:
            prob = self.agent_priority[flat["agent"]]
            prob = prob / prob.sum()
            is_weight = 1.0 / (n * prob)
        else:
            prob = None
            is_weight = torch.ones(n, device=dev)

        if cfg.proximal_clip and (cfg.double_buffer or cfg.replay_old_frac > 0):
            # the rows were collected by an older actor: the clip is centred on the actor as it is now
            with torch.no_grad():
                flat["prox_logp"] = self._logp(flat)
                if self.old is not None:
                    self.old["prox_logp"] = self._logp(self.old)
        if cfg.constraint:  # the teacher is fixed during an update: its probabilities and entropy once
            flat["teacher_p"], flat["teacher_negent"] = self._teacher_terms(flat, n)

        # contrastive pairs (anchor flat index in the (T, R) grid, positive index)
        pairs = self._contrastive_pairs(batch) if cfg.contrastive else None

        # the conflict probe uses this update's advantages before any step is taken
        conflict = self.gradient_conflict(flat)
        if conflict is not None:
            stats["grad_conflict"] = conflict
            self.epoch_conflicts.append(conflict)

        update_policy = (self.update % cfg.policy_delay) == 0
        lr = maths.cosine_lr(self.update, self.total_updates, cfg.lr, cfg.lr_final_frac) * self.adjust.lr
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        stats["lr"] = lr
        self.ent_coef = maths.cosine_lr(self.update, self.total_updates, cfg.ent_coef, cfg.ent_final_frac)
        stats["ent_coef"] = self.ent_coef
        mb_size = max(1, math.ceil(n / cfg.minibatches))
        n_old = 0
        if self.old is not None and cfg.replay_old_frac > 0:
            n_old = int(round(mb_size * cfg.replay_old_frac / (1 - cfg.replay_old_frac)))
        sums: dict[str, float] = {}
        count = 0
        for _epoch in range(cfg.epochs):
            order = (torch.multinomial(prob, n, replacement=True) if prob is not None
                     else torch.randperm(n, device=dev))
            for start in range(0, n, mb_size):
                mb = order[start:start + mb_size]
                if mb.numel() < 2:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                out = self._minibatch_backward(flat, mb, is_weight, update_policy, n_old, pairs, batch)
                # actor and critic clipped separately: a large value gradient must not shrink the policy's
                grad_norm = torch.nn.utils.clip_grad_norm_(self.clip_actor, cfg.max_grad_norm)
                torch.nn.utils.clip_grad_norm_(self.clip_critic, cfg.max_grad_norm)
                self.optimizer.step()
                out["grad_norm"] = float(grad_norm)
                out["grad_clipped"] = float(grad_norm > cfg.max_grad_norm)
                for k, v in out.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        for k, v in sums.items():
            stats[k] = v / max(count, 1)
        if cfg.constraint:
            brain.update_teacher(cfg.teacher_tau)
        var_y = float(flat["returns"].var())
        stats["explained_variance"] = (float("nan") if var_y == 0
                                       else 1 - float((flat["returns"] - flat["values"]).var()) / var_y)
        stats["policy_updated"] = float(update_policy)
        if cfg.replay_old_frac > 0:
            self.old = {k: flat[k] for k in ("obs", "mask", "actions", "logp", "adv", "agent")}
        return stats

    def _critic(self, obs: torch.Tensor, vt: torch.Tensor, state_vt: torch.Tensor, chunk: int | None = None
                ) -> torch.Tensor:
        """Critic output (normalised units when value normalisation is on) for rows `obs` whose village state
        is state_vt[vt]; the same as brain.critic(obs, state_vt[vt]) up to float rounding. With `chunk`, in
        passes of that many rows."""
        critic = self.brain.critic
        if not critic.central:
            def value(part: slice) -> torch.Tensor:
                return critic(obs[part], None)
        elif vt.numel() >= state_vt.shape[0]:  # (nearly) every village-tick occurs: its state part once
            feats_vt = critic.state_features(state_vt)

            def value(part: slice) -> torch.Tensor:
                return critic.from_state_features(obs[part], feats_vt.index_select(0, vt[part]))
        else:
            def value(part: slice) -> torch.Tensor:
                return critic.from_state_features(obs[part], critic.state_features(state_vt.index_select(0, vt[part])))
        if chunk is None:  # the minibatch path: one pass, no concatenation
            return value(slice(None))
        return torch.cat([value(part) for part in self._passes(obs.shape[0], chunk)])

    @torch.no_grad()
    def _teacher_terms(self, flat: dict[str, torch.Tensor], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The teacher's (p, sum p log p) of a random `constraint_rows` share of the n rows, scaled by 1 / share,
        and zero elsewhere, where the KL to the teacher (`maths.kl_from_terms`) is then 0: the mean over a
        minibatch is an unbiased estimate of the KL over all its rows, for a share of the teacher's forward."""
        share = self.cfg.constraint_rows
        picked = torch.arange(n, device=self.device)
        if share < 1:
            picked = torch.randperm(n, device=self.device)[:max(1, round(n * share))].sort().values
        terms = [maths.kl_reference_terms(self._teacher_logits(flat["obs"].index_select(0, rows),
                                                               flat["mask"].index_select(0, rows)))
                 for rows in (picked[part] for part in self._passes(picked.numel()))]
        p = torch.zeros(n, flat["mask"].shape[1], device=self.device)
        negent = torch.zeros(n, device=self.device)
        p[picked] = torch.cat([t[0] for t in terms]) / share
        negent[picked] = torch.cat([t[1] for t in terms]) / share
        return p, negent

    @torch.no_grad()
    def _teacher_logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The constraint teacher's masked logits, at its personality strength (`teacher_personality`): the
        neutral villager's logits (`teacher_personality_traits` at 0.5) plus S times each NPC's difference from them
        (npc_brains.personality)."""
        strength = self.cfg.teacher_personality
        if strength == 1.0:
            return self.brain.teacher(obs, mask)
        from npc_brains.personality import NEUTRAL_TRAIT, check_traits, trait_columns

        cols = getattr(self, "_trait_cols", None)
        if cols is None:  # the layout is fixed for the run: looked up once
            traits = check_traits(self.cfg.teacher_personality_traits, "teacher_personality_traits")
            cols = self._trait_cols = torch.as_tensor(
                trait_columns(self.env.observation_layout, "teacher_personality", traits), device=obs.device)
        neutral = obs.clone()
        neutral[:, cols] = NEUTRAL_TRAIT
        both = self.brain.teacher(torch.cat([obs, neutral]), torch.cat([mask, mask]))
        own, ref = both[:obs.shape[0]], both[obs.shape[0]:]
        return ref + strength * (own - ref)  # masked entries: equal masked logits on both sides stay masked

    def _passes(self, n: int, chunk: int | None = None) -> list[slice]:
        """Row slices of a no-grad pass over n rows (see _rows_per_pass)."""
        chunk = chunk or self._rows_per_pass
        return [slice(i, i + chunk) for i in range(0, n, chunk)]

    def _logp(self, rows: dict[str, torch.Tensor]) -> torch.Tensor:
        """Log-probability of the taken actions under the current actor (no grad), in passes."""
        out = []
        for part in self._passes(rows["obs"].shape[0]):
            logits = self.brain.actor(rows["obs"][part], rows["mask"][part])
            out.append(torch.log_softmax(logits, -1).gather(1, rows["actions"][part, None]).squeeze(1))
        return torch.cat(out)

    def _contrastive_pairs(self, batch: Batch) -> torch.Tensor | None:
        T, R = batch.rewards.shape
        dev = self.device
        if self.cfg.contrastive_positive == "next":
            ok = batch.alive[:-1] & batch.alive[1:] & ~batch.dones[:-1]  # (T-1, R)
            t, r = ok.nonzero(as_tuple=True)
            anchor, positive = t * R + r, (t + 1) * R + r
        else:  # a random village-mate alive at the same tick
            if self.N < 2:
                return None
            shift = torch.randint(1, self.N, (T, R), device=dev)
            mate = self.row_village[None, :] * self.N + (self.row_agent[None, :] + shift) % self.N
            mate_alive = batch.alive.gather(1, mate)
            t, r = (batch.alive & mate_alive).nonzero(as_tuple=True)
            anchor, positive = t * R + r, t * R + mate[t, r]
        if anchor.numel() < 2:
            return None
        return torch.stack([anchor, positive], 1)

    def _second_thread(self) -> ThreadPoolExecutor | None:
        """A second thread for half of each minibatch (the double-buffered collector shares the cores: the OS
        balances the three)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="learner")
        return self._pool

    def _minibatch_backward(self, flat: dict[str, torch.Tensor], mb: torch.Tensor, is_weight: torch.Tensor,
                            update_policy: bool, n_old: int, pairs: torch.Tensor | None, batch: Batch
                            ) -> dict[str, float]:
        """Accumulates the gradient of minibatch mb's loss (the actor's + vf_coef x the critic's) into the
        parameters; returns the minibatch's statistics.

        On a multi-core CPU with one intra-op thread the minibatch is cut in two halves (the first a little
        smaller when it carries the contrastive term: FIRST_HALF_SHARE), each loss weighted by its share of the
        rows, so their gradients sum to the whole minibatch's. The second half runs on a second core once the
        double-buffered collector is done with it (three busy threads on two cores are slower than two), else
        after the first on this thread. Its gradient is added after the first's either way, and it draws no
        random numbers (the contrastive sample goes with the first half), so a run's numbers do not depend on
        that timing."""
        n_rows = mb.numel()
        parts = [mb]
        if self._split_minibatches and n_old == 0 and n_rows >= 4:
            cut = round(n_rows * (FIRST_HALF_SHARE if pairs is not None and self.cfg.contrastive else 0.5))
            parts = [mb[:cut], mb[cut:]]
        worker = (self._second_thread() if len(parts) == 2
                  and (self._collecting is None or self._collecting.done()) else None)
        job = None
        if worker is not None:
            job = worker.submit(self._part_loss, flat, parts[1], is_weight, update_policy, n_old, None, batch,
                                parts[1].numel() / n_rows, True)
        loss, stats = self._part_loss(flat, parts[0], is_weight, update_policy, n_old, pairs, batch,
                                      parts[0].numel() / n_rows, False)
        loss.backward()
        if len(parts) == 2:
            grads, more = (job.result() if job is not None else
                           self._part_loss(flat, parts[1], is_weight, update_policy, n_old, None, batch,
                                           parts[1].numel() / n_rows, True))
            for p, g in zip(self._grad_params, grads, strict=True):
                if g is not None:
                    p.grad = g if p.grad is None else p.grad.add_(g)
            for k, v in more.items():
                stats[k] = stats.get(k, 0.0) + v
        return stats

    def _part_loss(self, flat: dict[str, torch.Tensor], rows: torch.Tensor, is_weight: torch.Tensor,
                   update_policy: bool, n_old: int, pairs: torch.Tensor | None, batch: Batch, share: float,
                   as_grads: bool) -> Any:
        """The loss of `rows`, a `share` of their minibatch (its row means weighted by the share; the
        contrastive term, drawn only with `pairs`, counts whole), and its statistics weighted the same way.
        Returns (loss, stats), or (the loss's gradients w.r.t. the trained parameters, stats) with as_grads."""
        obs = flat["obs"].index_select(0, rows)
        out = self._minibatch_loss(flat, rows, obs, is_weight, update_policy, n_old, pairs, batch, share)
        v_loss = self._critic_loss(flat, rows, obs, is_weight, batch)
        loss = out.pop("loss") + (self.cfg.vf_coef * share) * v_loss
        stats = {k: float(v) * (1.0 if k == "infonce" else share) for k, v in out.items()}
        stats["value_loss"] = float(v_loss.detach()) * share
        if not as_grads:
            return loss, stats
        return torch.autograd.grad(loss, self._grad_params, allow_unused=True), stats

    def _value_target(self, ret: torch.Tensor) -> torch.Tensor:
        return self.brain.value_norm.normalize(ret) if self.brain.value_norm is not None else ret

    def _critic_loss(self, flat: dict[str, torch.Tensor], mb: torch.Tensor, obs: torch.Tensor,
                     is_weight: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Value loss of the minibatch's new rows (replayed rows carry stale targets)."""
        cfg, brain = self.cfg, self.brain
        ret = flat["returns"].index_select(0, mb)
        v_old = flat["values"].index_select(0, mb)
        v = self._critic(obs, flat["vt"].index_select(0, mb), batch.state.reshape(-1, batch.state.shape[-1]))
        target = self._value_target(ret)
        if brain.value_norm is not None:
            v_old_n = brain.value_norm.normalize(v_old)
            # value clipping is in normalised units; on raw returns (~-28 here) it would freeze the critic
            v_clipped = v_old_n + (v - v_old_n).clamp(-cfg.value_clip, cfg.value_clip)
            v_err = torch.maximum((v - target) ** 2, (v_clipped - target) ** 2)
        else:
            v_err = (v - target) ** 2
        return 0.5 * (v_err * is_weight.index_select(0, mb)).mean()

    def _minibatch_loss(self, flat: dict[str, torch.Tensor], mb: torch.Tensor, obs: torch.Tensor,
                        is_weight: torch.Tensor, update_policy: bool, n_old: int, pairs: torch.Tensor | None,
                        batch: Batch, share: float = 1.0) -> dict[str, torch.Tensor]:
        """The actor's loss on rows mb (obs = its rows of flat["obs"]), its row means weighted by `share` (the
        rows' part of their minibatch); the contrastive term, drawn only with `pairs`, counts whole. The
        critic's is _critic_loss."""
        cfg, brain, dev = self.cfg, self.brain, self.device
        def rows(t: torch.Tensor) -> torch.Tensor:
            return t.index_select(0, mb)

        mask = rows(flat["mask"])
        actions, old_logp, adv = rows(flat["actions"]), rows(flat["logp"]), rows(flat["adv"])
        agent = rows(flat["agent"])
        teacher = (rows(flat["teacher_p"]), rows(flat["teacher_negent"])) if "teacher_p" in flat else None
        isw = rows(is_weight)
        prox_logp = rows(flat["prox_logp"]) if "prox_logp" in flat else None
        n_new = mb.numel()
        if n_old and self.old is not None:
            pick = torch.randint(self.old["obs"].shape[0], (n_old,), device=dev)
            obs = torch.cat([obs, self.old["obs"][pick]])
            mask = torch.cat([mask, self.old["mask"][pick]])
            actions = torch.cat([actions, self.old["actions"][pick]])
            old_logp = torch.cat([old_logp, self.old["logp"][pick]])
            adv = torch.cat([adv, self.old["adv"][pick]])
            agent = torch.cat([agent, self.old["agent"][pick]])
            if prox_logp is not None:
                prox_logp = torch.cat([prox_logp, self.old["prox_logp"][pick]])
            if teacher is not None:
                with torch.no_grad():
                    old_p, old_negent = maths.kl_reference_terms(self._teacher_logits(obs[n_new:], mask[n_new:]))
                teacher = (torch.cat([teacher[0], old_p]), torch.cat([teacher[1], old_negent]))
            isw = torch.cat([isw, torch.ones(n_old, device=dev)])
        logits, h, adapted = brain.actor.logits_and_features(obs, mask)
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(1, actions[:, None]).squeeze(1)
        probs = torch.softmax(logits, -1)  # not logp_all.exp(): exp of the masked entries is slow on CPU
        entropy = -(probs * logp_all).sum(-1)
        if prox_logp is not None:  # stale or replayed rows: clip around the proximal policy
            pg_rows, ratio = maths.decoupled_ppo_loss(logp, prox_logp, old_logp, adv, cfg.clip, cfg.ratio_cap)
        else:
            pg_rows, ratio = maths.ppo_policy_loss(logp, old_logp, adv, cfg.clip)
        pg_loss = (pg_rows * isw).mean()
        out: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            log_ratio = logp - (old_logp if prox_logp is None else prox_logp)
            out["approx_kl"] = ((log_ratio.exp() - 1) - log_ratio)[:n_new].mean()
            out["clipfrac"] = ((ratio[:n_new] - 1).abs() > cfg.clip).float().mean()

        # the runtime's local value head (new rows only), on the detached actor features
        target = self._value_target(rows(flat["returns"]))
        runtime_v = brain.actor.runtime_value(adapted[:n_new].detach()).squeeze(-1)
        rv_loss = 0.5 * ((runtime_v - target) ** 2).mean()
        loss = cfg.vf_coef * rv_loss
        contrastive = None
        out["entropy"] = entropy.mean().detach()
        out["policy_loss"] = pg_loss.detach()
        if update_policy:
            loss = loss + pg_loss - self.ent_coef * self.adjust.explore * entropy.mean()
            if cfg.constraint and teacher is not None:
                kl = maths.kl_from_terms(teacher[0], teacher[1], logp_all)
                kl_loss = (kl * self.agent_weight[agent]).mean()
                loss = loss + cfg.constraint * self.adjust.constraint * kl_loss
                out["constraint_kl"] = kl.mean().detach()
            if cfg.contrastive and pairs is not None:
                k = min(cfg.contrastive_samples, pairs.shape[0])
                sel = pairs[torch.randint(pairs.shape[0], (k,), device=dev)]
                flat_obs = batch.obs.reshape(-1, batch.obs.shape[-1])
                z = brain.actor.encoder.project(brain.actor.encoder(flat_obs.index_select(0, sel.reshape(-1))))
                z = z.reshape(k, 2, -1)
                nce = maths.info_nce(z[:, 0], z[:, 1], cfg.contrastive_temperature)
                contrastive = cfg.contrastive * nce
                out["infonce"] = nce.detach()
        loss = share * loss if share != 1.0 else loss
        if contrastive is not None:
            loss = loss + contrastive
        out["loss"] = loss
        return out

    def gradient_conflict(self, flat: dict[str, torch.Tensor]) -> float | None:
        """||sum of per-agent policy gradients|| / sum of their norms on a small probe of each agent's rows."""
        if self.N < 2:
            return None
        dev = self.device
        group = flat["group"]
        rows = []
        for g in torch.unique(group):
            members = (group == g).nonzero().squeeze(1)
            rows.append(members[torch.randperm(members.numel(), device=dev)[:32]])
        if len(rows) < 2:
            return None
        idx = torch.cat(rows)
        logits = self.brain.actor(flat["obs"][idx], flat["mask"][idx])
        logp = torch.log_softmax(logits, -1).gather(1, flat["actions"][idx][:, None]).squeeze(1)
        pg_rows, _ = maths.ppo_policy_loss(logp, flat["logp"][idx], flat["adv"][idx], self.cfg.clip)
        grads = []
        offset = 0
        for r in rows:
            loss_g = pg_rows[offset:offset + r.numel()].mean()
            offset += r.numel()
            gs = torch.autograd.grad(loss_g, self.actor_params, retain_graph=True, allow_unused=True)
            grads.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                                    for g, p in zip(gs, self.actor_params, strict=True)]))
        return maths.gradient_conflict(grads)

    # ------------------------------------------------------------------ cooperation probe
    def cooperation_probe(self, reps: int = 2) -> dict[str, float]:
        """joint = sum over NPCs i of i's episode return when every NPC plays the policy;
        individual = the same sum when only i plays the policy and the others act uniformly at random
        over their valid actions. Same worlds and seeds in both runs."""
        N = self.N
        B = N * reps
        seed = self.cfg.seed + 5_000_000 + self.monitor.epoch

        def run(solo: bool) -> float:
            env = make_flat_env(self.cfg, num_envs=B, seed=seed)
            obs, info = env.reset(seed)
            rng = torch.Generator().manual_seed(seed)
            rows = np.arange(env.num_rows)
            own = (rows % N) == (rows // N) % N  # in copy b, NPC b mod N is the one that plays the policy
            own_t = torch.from_numpy(own)
            ret = np.zeros(env.num_rows)
            finished = np.zeros(B, bool)
            limit = getattr(env, "max_episode_steps", None) or 1000
            for _ in range(limit):
                with torch.no_grad():
                    m = torch.from_numpy(info["action_mask"])
                    logits = self.brain.actor(torch.from_numpy(obs).to(self.device), m.to(self.device)).cpu()
                u = torch.rand(logits.shape, generator=rng).clamp_(1e-12, 1 - 1e-7)
                gumbel = -torch.log(-torch.log(u))
                a = (logits + gumbel).argmax(-1)
                if solo:  # everyone else: uniform over their valid actions
                    a = torch.where(own_t, a, torch.where(m, gumbel, torch.full_like(gumbel, -1e9)).argmax(-1))
                obs, r, _, _, info = env.step(a.numpy())
                ret += np.where(np.repeat(finished, N), 0.0, r)
                finished |= np.asarray(info["done_envs"], bool)
                if finished.all():
                    break
            return float(ret[own].sum() / reps)

        joint, individual = run(False), run(True)
        return {"coop_joint": joint, "coop_individual": individual,
                "cooperation": cooperation_efficiency(joint, individual)}

    # ------------------------------------------------------------------ epochs and rollback
    def end_epoch(self, writer: MetricsWriter) -> dict[str, Any]:
        returns = np.concatenate(self.epoch_returns)
        self.epoch_returns = []
        # villages are the independent samples (NPCs of one village share its fate)
        n_v = returns.size // self.N
        if n_v >= 2:
            village_means = returns[: n_v * self.N].reshape(n_v, self.N).mean(1)
            stderr = float(village_means.std(ddof=1) / math.sqrt(n_v))
        else:
            stderr = float(returns.std() / math.sqrt(max(returns.size, 1)))
        conflict = float(np.mean(self.epoch_conflicts)) if self.epoch_conflicts else None
        self.epoch_conflicts = []
        coop = None
        extra: dict[str, Any] = {}
        if self.cfg.coop_every and (self.monitor.epoch + 1) % self.cfg.coop_every == 0:
            extra = self.cooperation_probe()
            coop = extra["cooperation"]
        report = self.monitor.end_epoch(float(returns.mean()), conflict, coop, stderr)
        row = {"epoch": report.epoch, **report.metrics, **extra, "bad_epoch": report.bad,
               "violations": ",".join(report.violations)}
        if report.good:
            self.good = self._snapshot()
        if report.rollback:
            event: dict[str, Any] = {"step": self.global_step, "update": self.update,
                                     "episode_return_mean": self.last_return,
                                     "reasons": ",".join(report.violations)}
            if self.cfg.rollback:
                if self.good is not None:
                    self.brain.load_state_dict(self.good["model"])
                    self.optimizer.load_state_dict(self.good["optimizer"])
                    event["restored_step"] = self.good["step"]
                self.adjust = Adjust(self.adjust.lr * self.cfg.rollback_lr,
                                     self.adjust.constraint * self.cfg.rollback_constraint,
                                     self.adjust.explore * self.cfg.rollback_explore)
                event.update(event="rollback", lr_scale=self.adjust.lr, constraint_scale=self.adjust.constraint,
                             explore_scale=self.adjust.explore)
            else:
                event["event"] = "unstable"  # the monitor would have rolled back (rollback switch off)
            writer.write(event)
        return row

    # ------------------------------------------------------------------ main loop
    def _collector_kind(self) -> str:
        """Where this run collects: "process" (a child process) where `--collector` asks for one or, on auto,
        where double buffering runs on a multi-core CPU for at least PROCESS_COLLECTOR_MIN_UPDATES updates
        (starting the process costs a couple of seconds) and /dev/shm has room for its buffers; else "thread"
        (double buffering in this process) or "inline" (no double buffering)."""
        cfg = self.cfg
        if self.ray is not None:
            if cfg.collector != "auto":
                raise ConfigError(f"collector: {cfg.collector!r} collects on this machine and --ray on Ray workers; "
                                  "drop one of them")
            return "ray"
        if cfg.collector == "process" and not (self.device.type == "cpu" and cfg.double_buffer):
            raise ConfigError("collector: 'process' needs --device cpu and double buffering (--double-buffer)")
        if not cfg.double_buffer:
            return "inline"
        wanted = cfg.collector == "process" or (
            cfg.collector == "auto" and self.device.type == "cpu" and (os.cpu_count() or 1) > 1
            and self.total_updates - self.update >= PROCESS_COLLECTOR_MIN_UPDATES)
        # the shared buffers live in /dev/shm, which a container may keep small: writing past it kills the child
        need, free = (shared_bytes(self.env, self.T), shm_free_bytes()) if wanted else (0, None)
        if free is not None and free < need * 1.25:
            if cfg.collector == "process":
                raise ConfigError(f"collector: 'process' needs {need / 2**20:.0f} MiB of shared memory and /dev/shm "
                                  f"has {free / 2**20:.0f} MiB free (raise a container's --shm-size, or use "
                                  "--collector thread)")
            wanted = False
        return "process" if wanted else "thread"

    def _start_rollouts(self) -> Collector | Rollouts:
        """This run's collector (see _collector_kind)."""
        if self.collector_kind == "ray":
            from npc_brains.distributed import RayCollector

            assert self.ray is not None
            self._rollouts = RayCollector(self.cfg, self.brain.actor, self.device, self._env_seed, self.T,
                                          self.cfg.bootstrap_truncated, self.ray, self.B // self.ray.workers, self.N)
        elif self.collector_kind == "process":
            self._rollouts = ProcessCollector(self.cfg, self.env, self.brain.actor, self._env_seed, self.T,
                                              self.cfg.bootstrap_truncated, self.collector.rng_state())
        return self._rollouts

    def _open_collection(self) -> Collector | Rollouts:
        # first: a forked child copies none of the threads TensorBoard's writer and the progress bar start
        rollouts = self._start_rollouts()
        self._remote = rollouts is not self.collector  # collected elsewhere: a child process or Ray workers
        self._executor = (ThreadPoolExecutor(1, thread_name_prefix="collector")
                          if self.cfg.double_buffer and not self._remote else None)
        self._pending: Future | PendingRollout | None = None  # the next batch, being collected
        return rollouts

    def _store_probs(self) -> bool:
        cfg = self.cfg
        return bool(cfg.shaping) and maths.shaping_weight(self.global_step // max(self.N, 1), cfg.shaping_anneal) > 0

    def _update_once(self, writer: MetricsWriter, start: float) -> tuple[dict[str, Any], dict[str, str]]:
        cfg, rollouts = self.cfg, self._rollouts
        t0 = time.perf_counter()
        if cfg.double_buffer:
            batch = self._pending.result() if self._pending is not None else rollouts.collect(self._store_probs())
            self._pending = None
            if self.update + 1 < self.total_updates:
                rollouts.sync(self.brain.actor)
                self._pending = (rollouts.submit(self._store_probs()) if self._remote
                                 else self._executor.submit(rollouts.collect, self._store_probs()))
        else:
            rollouts.sync(self.brain.actor)
            batch = rollouts.collect(self._store_probs())
        t_collect = time.perf_counter() - t0
        self._collecting = self._pending
        stats = self.learn(batch)
        self.update += 1
        self.global_step += self.rows_per_update
        row: dict[str, Any] = {"step": self.global_step, "update": self.update, "time_s": time.perf_counter() - start}
        if batch.episode_returns:
            finished = np.concatenate(batch.episode_returns)
            self.last_return = float(finished.mean())
            self.epoch_returns.append(finished)
            row["episodes"] = int(finished.size)
        else:
            row["episodes"] = 0
        if batch.episode_wins:  # a world with a win condition (engine.tasks)
            row["win_rate"] = float(np.concatenate(batch.episode_wins).mean())
        row["episode_return_mean"] = self.last_return
        elapsed = time.perf_counter() - t0
        row["sps"] = self.rows_per_update / max(elapsed, 1e-9)
        row["collect_s"] = batch.seconds if cfg.double_buffer else t_collect
        row["update_s"] = elapsed - t_collect
        row.update(stats)
        if self.epoch_returns and batch.episode_returns:
            row.update(self.end_epoch(writer))
        return row, {"ent": f"{stats.get('entropy', float('nan')):.2f}",
                     "kl": f"{stats.get('approx_kl', float('nan')):.3f}"}

    def _close_collection(self) -> None:
        if self._remote:
            self._rollouts.close()
        self.collector.stop.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        self.collector.stop.clear()
        self._collecting = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    @property
    def rollbacks(self) -> int:
        return self.monitor.rollbacks


def train(cfg: TrainConfig, *, progress: bool = False, resume: str | Path | None = None) -> Result:
    """Train with `cfg` (optionally resuming from a checkpoint); returns a summary."""
    return Trainer(cfg, progress=progress, resume=resume).train()


def stored_config(ckpt: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's training options, with those it was written before filled in as it was trained."""
    stored = dict(ckpt["config"])
    # written before these options: the entity head's width its networks have, the teacher's KL on every row
    if "slot_hidden" not in stored and "net" in ckpt:
        stored["slot_hidden"] = NetSpec.from_dict(ckpt["net"]).slot_hidden
    stored.setdefault("constraint_rows", 1.0)
    return stored


def config_from_checkpoint(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """The configuration stored in a checkpoint, with `overrides` applied (for --resume)."""
    stored = stored_config(load_checkpoint(path))
    stored.update(overrides or {})
    try:
        return config_from_dict(stored, source=str(path))
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{path}: stored configuration is not valid here ({exc})") from None


# the options a recipe leaves to the new run: where it writes, what it starts from, its seed, and the machine's
RECIPE_LEAVES: tuple[str, ...] = ("run_dir", "init_from", "seed", "device", "threads", "collector", "checkpoint_every")


def recipe_of(source: str) -> dict[str, Any]:
    """The training options a policy (default, mappo or a policy file) was trained with, as a flat mapping for
    config_from_dict: its hyperparameters, components, worlds, steps and engine tuning, less RECIPE_LEAVES. A
    weight average carries its first policy's; CheckpointError (one line) for a file that is not a policy."""
    from npc_brains.resolve import BUNDLED, bundled_policy

    path = bundled_policy(source) if source in BUNDLED else Path(source)
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        raise CheckpointError(f"recipe: {exc}") from None
    recipe = {k: v for k, v in stored_config(ckpt).items() if k not in RECIPE_LEAVES}
    try:
        config_from_dict(recipe, source=f"recipe {source}")
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"recipe: {source}'s stored configuration is not valid here ({exc})") from None
    return recipe


__all__ = ["Batch", "Collector", "RECIPE_LEAVES", "Result", "RunWriteError", "Trainer", "WriteFailed", "auto_envs",
           "config_from_checkpoint", "pick_device", "recipe_of", "train"]
