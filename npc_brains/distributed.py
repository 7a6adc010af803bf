"""Rollout workers as Ray actors feeding one learner (Ray core: actors and the object store; not RLlib).

    learner (Trainer, CUDA when present)            K RolloutWorker actors (CPU)
      sync(actor) ─ weights, one ray.put ─────────▶  load them into a CPU copy of the policy
      submit()    ─ one collect call per worker ──▶  T ticks of E villages (a Collector, as in one process)
      result()    ◀── whole batches, object store ─  numpy arrays (read-only once they arrive)
                  concatenated worker by worker into the trainer's layout: B = K x E villages, village-major

The replay learners (QMIX, MADDPG) use ReplayWorker actors the same way (RayReplayCollector): one collect call
per worker per round, each playing its envs with npc_brains.offpolicy_collect.EpisodeCollector (the learner's own
acting code: epsilon-greedy for QMIX, the actor's Gumbel sample for MADDPG) and a CPU copy of the acting
network; the finished episodes come back packed in one object and go into the learner's replay worker by worker.

Worker k's villages are seeded `seed + k * WORKER_SEED_STRIDE`, so a fixed seed and K give the same batches in
the same order, and K = 1 gives the in-process collector's batches. A worker whose process dies is restarted
by Ray (its actor is restartable), re-seeded with fresh episodes, and asked for its part again; each restart is
an event row of metrics.jsonl. Nothing here is imported unless `--ray` is asked for.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from npc_brains.collect import Batch, Collector
from npc_brains.config import ConfigError
from npc_brains.networks import Actor, NetSpec

if TYPE_CHECKING:
    from npc_brains.config import TrainConfig

EXTRA_HINT = "pip install 'village-npc[distributed]'"
WORKER_SEED_STRIDE = 1_000_033  # between workers' env seeds: their villages never share a seed
RESTART_SEED_STRIDE = 7_919  # a restarted worker plays fresh episodes, deterministically per restart
MAX_RESTARTS_PER_BATCH = 3  # a worker that dies this often while collecting one batch ends the run
RESTART_WAIT_S = 120.0  # how long a restarted worker may take to come back
CONNECT_TIMEOUT_S = 5.0  # TCP check of a head's address before ray.init tries (and retries) it
# (T, R, ...) arrays are joined on the row axis, (T, B, S) on the village axis
ROLLOUT_KEYS = ("obs", "mask", "actions", "logp", "rewards", "dones", "alive", "state", "probs")


class RolloutWorkerError(RuntimeError):
    """A worker failed (an exception in the env or the policy) or kept dying; the message says which."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to collect: `--ray`, `--workers`, `--envs-per-worker`."""

    address: str = "local"  # local (start Ray here) | auto (the cluster this node belongs to) | HOST:PORT
    workers: int = 2
    envs_per_worker: int | None = None  # None: the run's villages shared out (ceil(envs / workers) each)
    cpus_per_worker: float = 1.0

    def check(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers: expected an integer >= 1, got {self.workers!r}")
        if self.envs_per_worker is not None and self.envs_per_worker < 1:
            raise ConfigError(f"envs-per-worker: expected an integer >= 1, got {self.envs_per_worker!r}")
        parse_address(self.address)

    def villages(self, envs: int) -> int:
        """Villages per worker for a run of `envs` villages in one process."""
        return self.envs_per_worker or max(1, math.ceil(envs / self.workers))


def parse_address(address: str) -> tuple[str, int] | None:
    """(host, port) of a HOST:PORT or ray://HOST:PORT address; None for local and auto."""
    if address in ("local", "auto"):
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"ray: expected local, auto or a head's HOST:PORT (ray://HOST:PORT for Ray Client), "
                          f"got {address!r}")
    return host, int(port)


def import_ray() -> Any:
    """The ray module, or a one-line error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"ray: Ray is not installed; install the distributed extra ({EXTRA_HINT})") from None
    return ray


def connect(address: str) -> tuple[Any, bool]:
    """(ray, whether this call started Ray): joins a Ray already initialised in this process as it is,
    else starts a local one (`local`) or connects to a cluster (`auto`, HOST:PORT)."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    where = parse_address(address)
    if where is not None:  # ray.init would retry an unreachable head for a minute before saying so
        try:
            socket.create_connection(where, timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise ConfigError(f"ray: cannot reach a Ray head at {address} ({exc.strerror or exc}); start one with "
                              "`ray start --head` there, or use --ray local") from None
    # workers started on this node import the code the driver runs (a checkout on PYTHONPATH, --env modules
    # from the current directory), as `python -m` would
    paths = os.pathsep.join(dict.fromkeys([os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]))
    runtime_env = {"env_vars": {"PYTHONPATH": paths.rstrip(os.pathsep)}} if address == "local" else None
    try:
        if address == "local":
            ray.init(include_dashboard=False, runtime_env=runtime_env, logging_level="WARNING")
        else:
            ray.init(address=address, logging_level="WARNING")
    except ConnectionError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"ray: cannot connect to {address} ({first}); start a head with `ray start --head`, "
                          "or use --ray local") from None
    return ray, True


def _worker_setup(paths: Sequence[str]) -> None:
    # Ctrl-C is the learner's: it saves, then ends the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    for path in paths:
        if path not in sys.path and os.path.isdir(path):
            sys.path.append(path)


def _numpy_weights(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def _load_weights(module: torch.nn.Module, weights: dict[str, np.ndarray]) -> None:
    # weights arrive read-only from the object store; load_state_dict copies them into the module
    module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})


class RolloutWorker:
    """One actor: a vectorised env of E villages and a CPU copy of the policy (a Collector)."""

    def __init__(self, cfg: TrainConfig, spec: dict[str, Any], envs: int, seed: int, rollout: int,
                 bootstrap_truncated: bool, paths: list[str]):
        _worker_setup(paths)
        from npc_brains.envs import make_flat_env

        self.cfg, self.envs, self.rollout, self.bootstrap_truncated = cfg, envs, rollout, bootstrap_truncated
        self.actor = Actor(NetSpec.from_dict(spec))
        self.env = make_flat_env(cfg, num_envs=envs, seed=seed)
        self.collector = Collector(self.env, self.actor, torch.device("cpu"), seed, rollout, bootstrap_truncated)

    def pid(self) -> int:
        return os.getpid()

    def reseed(self, seed: int) -> None:
        """Fresh episodes and sampling from `seed` (after a restart, which would replay the first ones)."""
        self.collector = Collector(self.env, self.collector.actor, torch.device("cpu"), seed, self.rollout,
                                   self.bootstrap_truncated)

    def weights(self) -> dict[str, np.ndarray]:
        return _numpy_weights(self.collector.actor)

    def collect(self, weights: dict[str, np.ndarray], store_probs: bool) -> dict[str, Any]:
        """One batch of T ticks as numpy arrays (one object-store transfer)."""
        _load_weights(self.collector.actor, weights)
        batch = self.collector.collect(store_probs)
        out: dict[str, Any] = {k: getattr(batch, k).numpy() for k in ROLLOUT_KEYS if getattr(batch, k) is not None}
        out.update(next_obs=batch.next_obs.numpy(), next_state=batch.next_state.numpy(),
                   cond_table=batch.cond_table.numpy(), episode_returns=batch.episode_returns,
                   episode_wins=batch.episode_wins,
                   seconds=batch.seconds, rng_state=self.collector.rng_state().numpy(),
                   truncated=None if batch.truncated is None else tuple(t.numpy() for t in batch.truncated))
        return out


def join_parts(parts: Sequence[dict[str, Any]], rows_per_worker: int, device: torch.device) -> Batch:
    """The workers' parts as one Batch in the trainer's layout (worker k's rows, then worker k+1's). Every
    array is copied (np.concatenate) out of the read-only object-store buffers before the learner sees it."""

    def joined(key: str, axis: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        array = np.concatenate([p[key] for p in parts], axis=axis)
        return torch.from_numpy(array).to(device=device, dtype=dtype)

    roll = {k: joined(k, 1) for k in ROLLOUT_KEYS if k in parts[0]}
    cuts = [(k, p["truncated"]) for k, p in enumerate(parts) if p["truncated"] is not None]
    truncated = None
    if cuts:
        truncated = (torch.from_numpy(np.concatenate([c[0] for _, c in cuts])).to(device),
                     torch.from_numpy(np.concatenate([c[1] + k * rows_per_worker for k, c in cuts])).to(device),
                     torch.from_numpy(np.concatenate([c[2] for _, c in cuts])).to(device),
                     torch.from_numpy(np.concatenate([c[3] for _, c in cuts])).to(device))
    returns = [np.asarray(r) for p in parts for r in p["episode_returns"]]
    wins = [np.asarray(w) for p in parts for w in p.get("episode_wins", [])]
    return Batch(roll["obs"], roll["mask"], roll["actions"], roll["logp"], roll["rewards"], roll["dones"],
                 roll["alive"], roll["state"], joined("next_obs", 0), joined("next_state", 0),
                 joined("cond_table", 0), roll.get("probs"), returns, max(p["seconds"] for p in parts), truncated,
                 wins)


class RayPending:
    """A batch being collected by the workers (`done()` / `result()`, like a Future)."""

    def __init__(self, owner: RayCollector, refs: list[Any], weights_ref: Any, store_probs: bool):
        self.owner, self.refs, self.weights_ref, self.store_probs = owner, refs, weights_ref, store_probs
        self._batch: Batch | None = None

    def done(self) -> bool:
        if self._batch is not None:
            return True
        ready, _ = self.owner.ray.wait(self.refs, num_returns=len(self.refs), timeout=0)
        return len(ready) == len(self.refs)

    def result(self) -> Batch:
        if self._batch is None:
            parts = [self.owner.part(k, ref, "collect", (self.weights_ref, self.store_probs))
                     for k, ref in enumerate(self.refs)]
            self.owner.last_rng_state = torch.from_numpy(np.array(parts[0]["rng_state"]))
            self._batch = join_parts(parts, self.owner.rows_per_worker, self.owner.device)
            self.owner.pending = None
        return self._batch


class RayWorkers:
    """K restartable actors of one kind, each asked for its part of a batch (one call per worker per batch); a
    worker whose process dies is restarted, re-seeded with fresh episodes and asked again (an event row each)."""

    def __init__(self, options: RayOptions, seed: int, worker_class: type,
                 init_args: Callable[[int], tuple[Any, ...]]):
        """`init_args(seed)`: worker_class's arguments for a worker seeded `seed` (the code paths follow)."""
        self.ray, self.started_ray = connect(options.address)
        self.options, self.seed = options, seed
        self.restarts = [0] * options.workers
        self._events: list[dict[str, Any]] = []
        paths = [p for p in dict.fromkeys([os.getcwd(), *sys.path]) if p]
        remote = self.ray.remote(num_cpus=options.cpus_per_worker, max_restarts=-1, max_task_retries=0)(worker_class)
        self.workers = [remote.options(name=None).remote(*init_args(self.worker_seed(k)), paths)
                        for k in range(options.workers)]
        try:
            self.pids = self.ray.get([w.pid.remote() for w in self.workers])
        except self.ray.exceptions.RayError as exc:
            self.close()
            raise RolloutWorkerError(f"a rollout worker failed to start: {_first_line(exc)}") from None

    def worker_seed(self, k: int, restarts: int = 0) -> int:
        return self.seed + k * WORKER_SEED_STRIDE + restarts * RESTART_SEED_STRIDE

    def ask(self, method: str, args: tuple[Any, ...]) -> list[Any]:
        """One call of `method(*args)` per worker; their refs, worker by worker."""
        return [getattr(w, method).remote(*args) for w in self.workers]

    def gather(self, method: str, args: tuple[Any, ...]) -> list[Any]:
        """Every worker's answer to `method(*args)`, worker by worker (see part)."""
        return [self.part(k, ref, method, args) for k, ref in enumerate(self.ask(method, args))]

    def part(self, k: int, ref: Any, method: str, args: tuple[Any, ...]) -> Any:
        """Worker k's answer; a worker that died is restarted, re-seeded and asked again."""
        ray = self.ray
        for _attempt in range(MAX_RESTARTS_PER_BATCH + 1):
            try:
                return ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                self.restarts[k] += 1
                self._events.append({"event": "worker_restarted", "worker": k, "restarts": self.restarts[k],
                                     "reason": _first_line(exc)[:200]})
                self._wait_restarted(k)
                self.workers[k].reseed.remote(self.worker_seed(k, self.restarts[k]))
                ref = getattr(self.workers[k], method).remote(*args)
            except ray.exceptions.RayTaskError as exc:
                raise RolloutWorkerError(f"rollout worker {k} failed:\n{exc}") from None
        raise RolloutWorkerError(f"rollout worker {k} died {MAX_RESTARTS_PER_BATCH + 1} times during one batch")

    def _wait_restarted(self, k: int) -> None:
        ray, deadline = self.ray, time.monotonic() + RESTART_WAIT_S
        while True:
            try:
                self.pids[k] = ray.get(self.workers[k].pid.remote(), timeout=RESTART_WAIT_S)
                return
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise RolloutWorkerError(f"rollout worker {k} did not come back after its process died "
                                             f"({_first_line(exc)})") from None

    def events(self) -> list[dict[str, Any]]:
        out, self._events = self._events, []
        return out

    def worker_weights(self, k: int) -> dict[str, np.ndarray]:
        """The policy weights worker k holds now."""
        return self.ray.get(self.workers[k].weights.remote())

    def close(self) -> None:
        """End the workers (a collection under way is abandoned) and a Ray these workers started."""
        for w in getattr(self, "workers", []):
            with contextlib.suppress(Exception):  # already gone: nothing to end
                self.ray.kill(w, no_restart=True)
        self.workers = []
        if self.started_ray:
            self.ray.shutdown()
            self.started_ray = False


class RayCollector(RayWorkers):
    """K RolloutWorker actors collecting one batch together; the Rollouts seam of npc_brains.collect."""

    def __init__(self, cfg: TrainConfig, actor: Actor, device: torch.device, seed: int, rollout: int,
                 bootstrap_truncated: bool, options: RayOptions, envs_per_worker: int, num_agents: int):
        self.device = device
        self.envs_per_worker = envs_per_worker
        self.rows_per_worker = envs_per_worker * num_agents
        self.pending: RayPending | None = None
        self.last_rng_state = torch.Generator().manual_seed(seed + 1).get_state()
        self.weights: dict[str, np.ndarray] = {}
        self.sync(actor)
        spec = actor.spec.to_dict()
        super().__init__(options, seed, RolloutWorker,
                         lambda s: (cfg, spec, envs_per_worker, s, rollout, bootstrap_truncated))

    def sync(self, actor: Actor) -> None:
        """Weights for the next collection (sent once per batch through the object store)."""
        self.weights = _numpy_weights(actor)

    def submit(self, store_probs: bool) -> RayPending:
        if self.pending is not None:
            raise RuntimeError("ray collector: the previous batch was not taken")
        weights_ref = self.ray.put(self.weights)
        refs = self.ask("collect", (weights_ref, store_probs))
        self.pending = RayPending(self, refs, weights_ref, store_probs)
        return self.pending

    def collect(self, store_probs: bool) -> Batch:
        return self.submit(store_probs).result()

    def rng_state(self) -> torch.Tensor:
        """Worker 0's sampling state after the last batch (what a one-process run would store)."""
        return self.last_rng_state

    def close(self) -> None:
        super().close()
        self.pending = None


# ------------------------------------------------------------------ replay learners (QMIX, MADDPG)
class ReplayWorker:
    """One actor of a replay learner: E envs played with the algorithm's exploration by the learner's own
    acting code (npc_brains.offpolicy_collect.EpisodeCollector) and a CPU copy of the acting network."""

    def __init__(self, cfg: TrainConfig, spec: dict[str, Any], envs: int, seed: int, max_len: int,
                 paths: list[str]):
        _worker_setup(paths)
        from npc_brains.envs import make_flat_env
        from npc_brains.offpolicy_collect import EpisodeCollector, acting_rule

        self.env = make_flat_env(cfg, num_envs=envs, seed=seed)
        self.rounds = EpisodeCollector(self.env, Actor(NetSpec.from_dict(spec)), acting_rule(cfg),
                                       torch.device("cpu"), max_len, seed + 1)
        self.rounds.reset(seed)

    def pid(self) -> int:
        return os.getpid()

    def reseed(self, seed: int) -> None:
        """Fresh episodes and exploration from `seed` (after a restart, which would replay the first ones)."""
        self.rounds.generator.manual_seed(seed + 1)
        self.rounds.reset(seed)

    def weights(self) -> dict[str, np.ndarray]:
        return _numpy_weights(self.rounds.agent)

    def collect(self, weights: dict[str, np.ndarray], epsilons: list[float], update: int) -> dict[str, Any]:
        """One round (a tick per epsilon) of this worker's envs; its finished episodes packed in one object."""
        from npc_brains.replay import EpisodeList

        _load_weights(self.rounds.agent, weights)
        episodes = EpisodeList()
        done = self.rounds.collect(epsilons, episodes, update)
        return {"episodes": episodes.packed(), "returns": done.returns, "wins": done.wins,
                "rng_state": self.rounds.rng_state().numpy()}


class RayReplayCollector(RayWorkers):
    """K ReplayWorker actors playing one round together; the finished episodes go into the learner's replay
    worker by worker (worker k's in the order they finished, then worker k+1's)."""

    def __init__(self, cfg: TrainConfig, agent: Actor, seed: int, max_len: int, options: RayOptions,
                 envs_per_worker: int):
        self.last_rng_state = torch.Generator().manual_seed(seed + 1).get_state()
        self.weights: dict[str, np.ndarray] = {}
        self.sync(agent)
        spec = agent.spec.to_dict()
        super().__init__(options, seed, ReplayWorker, lambda s: (cfg, spec, envs_per_worker, s, max_len))

    def sync(self, agent: Actor) -> None:
        """The acting network's weights for the next round (one ray.put per round)."""
        self.weights = _numpy_weights(agent)

    def collect(self, epsilons: Sequence[float], sink: Any, update: int) -> Any:
        """One round of every worker (a tick per epsilon); its episodes added to `sink`; a Round."""
        from npc_brains.offpolicy_collect import Round
        from npc_brains.replay import add_packed

        parts = self.gather("collect", (self.ray.put(self.weights), list(epsilons), update))
        done = Round()
        for part in parts:
            done.stored += add_packed(sink, part["episodes"])
            done.returns.extend(part["returns"])
            done.wins.extend(part["wins"])
        self.last_rng_state = torch.from_numpy(np.array(parts[0]["rng_state"]))
        return done

    def rng_state(self) -> torch.Tensor:
        """Worker 0's exploration state after the last round."""
        return self.last_rng_state


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ------------------------------------------------------------------ evaluation
class EvalWorker:
    """One actor of `village eval --ray`: evaluates whole policies over the suite."""

    def __init__(self, paths: list[str]):
        _worker_setup(paths)

    def evaluate(self, policy: Any, spec: Any) -> tuple[dict[str, Any], list[str]]:
        from npc_brains.evaluate import evaluate_policy

        notes: list[str] = []
        return evaluate_policy(policy, spec, notes=notes), notes


def evaluate_parallel(policies: Sequence[tuple[str, Any]], spec: Any, options: RayOptions, *,
                      progress: Callable[[str], None] | None = None,
                      notes: list[str] | None = None) -> dict[str, Any]:
    """npc_brains.evaluate.evaluate with its policies evaluated side by side on K Ray actors: the same results.
    A policy's runs stay in order on one actor: a sampling policy draws from one random stream through the
    whole suite, so splitting its runs would change what it samples."""
    from npc_brains.evaluate import add_diversity_ratio

    ray, started = connect(options.address)
    paths = [p for p in dict.fromkeys([os.getcwd(), *sys.path]) if p]
    remote = ray.remote(num_cpus=options.cpus_per_worker)(EvalWorker)
    actors = [remote.remote(paths) for _ in range(min(options.workers, len(policies)))]
    try:
        spec_ref = ray.put(spec)
        refs = [actors[j % len(actors)].evaluate.remote(policy, spec_ref) for j, (_, policy) in enumerate(policies)]
        out: dict[str, Any] = {}
        for (name, _), ref in zip(policies, refs, strict=True):
            if progress is not None:
                for scenario in spec.scenarios:
                    for label, _world in spec.worlds:
                        progress(f"{name} {scenario.id} {label}")
            try:
                out[name], policy_notes = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise RolloutWorkerError(f"evaluation worker failed on {name}: {_first_line(exc)}") from None
            if notes is not None:
                notes.extend(policy_notes)
        add_diversity_ratio(out)
        return out
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()
