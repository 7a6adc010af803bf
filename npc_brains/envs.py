"""Training environments as flat rows: the village vector env, or any PettingZoo ParallelEnv wrapped the same way.

Interface (what the trainer relies on), B copies ("villages") of N agents, R = B * N rows, village-major:
    reset(seed) -> obs (R, obs_dim), info
    step(actions (R,)) -> obs, reward (R,), terminated (R,), truncated (R,), info
    info: action_mask (R, A) bool, alive (R,) bool, state (B, state_dim) float32; after a step also
          done_envs (B,) bool (copies that finished an episode and were reset), and when copies finished:
          episode_returns (per agent), episode_return_mean
Attributes: num_envs, num_agents, num_rows, obs_dim, n_actions, state_dim, action_names,
observation_layout, cond_index (personality columns of obs), groups_role (R,) int, env_id.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import numpy as np

from npc_brains.config import ConfigError, TrainConfig


class EnvError(ConfigError):
    """The environment cannot be trained on (wrong spaces, bad factory...)."""


class VillageFlatEnv:
    """engine.make_vec_env plus the metadata the trainer needs."""

    def __init__(self, worlds: list[str], num_envs: int, seed: int | None, *, slots: int = 4, max_ticks: int = 144,
                 scenario: str = "mixed", trait_noise: float = 0.0, tuning: Any = None):
        from engine import make_vec_env
        from engine.observe import ROLE_SLICE, TRAIT_SLICE
        from engine.vec_env import resolve_world

        specs = [resolve_world(w) for w in worlds]
        sizes = {(len(s.npcs), len(s.actors)) for s in specs}
        if len(sizes) > 1:
            detail = ", ".join(f"{w}: {len(s.npcs)} NPCs" for w, s in zip(worlds, specs, strict=True))
            raise ConfigError(f"world: a pool needs worlds of the same size here, got {detail}")
        self.vec = make_vec_env(specs if len(specs) > 1 else specs[0], num_envs=num_envs, seed=seed, slots=slots,
                                max_ticks=max_ticks, scenario=scenario, trait_noise=trait_noise, tuning=tuning)
        v = self.vec
        self.num_envs, self.num_agents, self.num_rows = v.num_envs, v.num_agents, v.num_rows
        self.obs_dim, self.n_actions, self.state_dim = v.obs_dim, v.n_actions, v.state_dim
        self.action_names = list(v.action_names)
        self.observation_layout = list(v.observation_layout)
        self.cond_index = tuple(range(TRAIT_SLICE.start, TRAIT_SLICE.stop)) + tuple(
            range(ROLE_SLICE.start, ROLE_SLICE.stop))
        self.groups_role = np.asarray(v.sim.w.role).reshape(-1).astype(np.int64)
        self.env_id = "village:" + ",".join(worlds)
        self.max_episode_steps = max_ticks
        # a world with a task (engine.tasks) reports each finished episode's win flag: info["episode_wins"]
        from engine.tasks import RaidOutcome, task_for_world

        task = task_for_world(worlds[0]) if len(worlds) == 1 else None
        self.task = task
        self.outcome = RaidOutcome(task, self.num_envs, self.num_agents, v.sim.w.entity_kind) if task else None
        self._bonus = np.zeros(self.num_rows, np.float64)  # task reward of each row's episode so far

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.vec.reset(seed)
        self._bonus = np.zeros(self.num_rows, np.float64)
        if self.outcome is not None:
            self.outcome = type(self.outcome)(self.task, self.num_envs, self.num_agents,
                                              self.vec.sim.w.entity_kind)
        self.groups_role = np.asarray(info["role"]).astype(np.int64)
        return obs, info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        alive_before = self._alive_rows()
        obs, reward, terminated, truncated, info = self.vec.step(actions)
        done = self.vec.sim.state.tick == 0  # villages that finished and were reset this step
        info["done_envs"] = done
        if self.outcome is not None:
            state = self.vec.sim.state
            bonus = self.outcome.update(state.present, state.alive, state.health, ~done)
            # the task's team reward goes to the villagers alive at the tick's start (the finished villages'
            # final tick included: their win or their last blows); engine episode returns are topped up with it
            team = np.repeat(bonus, self.num_agents) * alive_before
            reward = reward + team
            self._bonus += team
            if done.any():
                finished = np.repeat(done, self.num_agents)
                info["episode_returns"] = info["episode_returns"] + self._bonus[finished]
                info["episode_return_mean"] = float(info["episode_returns"].mean())
                self._bonus[finished] = 0.0
                info["episode_wins"] = self.outcome.finish(np.flatnonzero(done))
        return obs, reward, terminated, truncated, info

    def _alive_rows(self) -> np.ndarray:
        return self.vec.sim.state.alive[:, : self.num_agents].reshape(-1).copy()


class MixedSizeFlatEnv:
    """A pool of village worlds of different sizes as one flat env: one engine vec env per NPC count, each
    village padded to the largest count with absent rows (alive False, zero observation, only IDLE allowed,
    reward 0), so that rows stay village-major with a fixed number of agents per village. The global state is
    padded the same way inside its per-NPC block (actors and time keep their columns). Villages are shared
    evenly between the sizes; within a size the engine spreads them over that size's worlds."""

    def __init__(self, worlds: list[str], num_envs: int, seed: int | None, *, slots: int = 4, max_ticks: int = 144,
                 scenario: str = "mixed", trait_noise: float = 0.0, tuning: Any = None):
        from engine import make_vec_env
        from engine.observe import ROLE_SLICE, TRAIT_SLICE
        from engine.vec_env import resolve_world

        specs = [resolve_world(w) for w in worlds]
        actors = {len(s.actors) for s in specs}
        if len(actors) > 1:
            detail = ", ".join(f"{w}: {len(s.actors)} actors" for w, s in zip(worlds, specs, strict=True))
            raise ConfigError(f"world: a pool of sizes needs the same actors (player, raiders) in every world, "
                              f"got {detail}")
        by_size: dict[int, list[Any]] = {}
        for spec in specs:
            by_size.setdefault(len(spec.npcs), []).append(spec)
        self.sizes = sorted(by_size)
        if num_envs < len(self.sizes):
            raise ConfigError(f"envs: a pool of {len(self.sizes)} world sizes needs at least {len(self.sizes)} "
                              f"villages, got {num_envs}")
        share = [num_envs // len(self.sizes) + (k < num_envs % len(self.sizes)) for k in range(len(self.sizes))]
        self.vecs = []
        for k, n in enumerate(self.sizes):
            group = by_size[n]
            self.vecs.append(make_vec_env(group if len(group) > 1 else group[0], num_envs=share[k],
                                          seed=None if seed is None else seed + 7919 * k, slots=slots,
                                          max_ticks=max_ticks, scenario=scenario, trait_noise=trait_noise,
                                          tuning=tuning))
        first = self.vecs[0]
        self.M = len(specs[0].actors)
        self.num_agents = self.sizes[-1]
        self.num_envs = sum(v.num_envs for v in self.vecs)
        self.num_rows = self.num_envs * self.num_agents
        self.obs_dim, self.n_actions = first.obs_dim, first.n_actions
        self.state_dim = self.num_agents * 10 + self.M * 4 + 4
        self.action_names = list(first.action_names)
        self.observation_layout = list(first.observation_layout)
        self.cond_index = tuple(range(TRAIT_SLICE.start, TRAIT_SLICE.stop)) + tuple(
            range(ROLE_SLICE.start, ROLE_SLICE.stop))
        # (rows of each vec env inside the padded layout)
        self._rows = []
        start = 0
        for v in self.vecs:
            village = start + np.arange(v.num_envs)
            self._rows.append((village[:, None] * self.num_agents + np.arange(v.num_agents)[None, :]).reshape(-1))
            start += v.num_envs
        self.real = np.zeros(self.num_rows, bool)
        for rows in self._rows:
            self.real[rows] = True
        self.groups_role = np.zeros(self.num_rows, np.int64)
        self.env_id = "village:" + ",".join(worlds)
        self.max_episode_steps = max_ticks

    def _pad_state(self, v: Any, state: np.ndarray) -> np.ndarray:
        n, N = v.num_agents, self.num_agents
        out = np.zeros((state.shape[0], self.state_dim), np.float32)
        out[:, : n * 10] = state[:, : n * 10]
        out[:, N * 10:] = state[:, n * 10:]
        return out

    def _merge(self, parts: list[tuple[np.ndarray, dict]]) -> tuple[np.ndarray, dict]:
        R = self.num_rows
        obs = np.zeros((R, self.obs_dim), np.float32)
        mask = np.zeros((R, self.n_actions), bool)
        mask[:, 0] = True
        alive = np.zeros(R, bool)
        role = np.zeros(R, np.int64)
        states = []
        for rows, v, (o, info) in zip(self._rows, self.vecs, parts, strict=True):
            obs[rows] = o
            mask[rows] = info["action_mask"]
            alive[rows] = info["alive"]
            role[rows] = np.asarray(info["role"]).reshape(-1)
            states.append(self._pad_state(v, np.asarray(info["state"], np.float32)))
        self.groups_role = role
        return obs, {"action_mask": mask, "alive": alive, "state": np.concatenate(states), "role": role}

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        parts = [v.reset(None if seed is None else seed + 7919 * k) for k, v in enumerate(self.vecs)]
        return self._merge(parts)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        actions = np.asarray(actions).reshape(-1)
        R = self.num_rows
        reward = np.zeros(R, np.float32)
        terminated = np.zeros(R, bool)
        truncated = np.zeros(R, bool)
        parts, done, finals, final_states, returns = [], [], [], [], []
        for rows, v in zip(self._rows, self.vecs, strict=True):
            o, r, term, trunc, info = v.step(actions[rows])
            reward[rows], terminated[rows], truncated[rows] = r, term, trunc
            parts.append((o, info))
            done.append(v.sim.state.tick == 0)
            if "episode_returns" in info:
                returns.append(np.asarray(info["episode_returns"], np.float64))
            finals.append(info.get("final_obs", o))
            final_states.append(self._pad_state(v, np.asarray(info.get("final_state", info["state"]), np.float32)))
        obs, merged = self._merge(parts)
        done_envs = np.concatenate(done)
        # a finished village's padding rows end with it, like its NPCs
        truncated |= np.repeat(done_envs, self.num_agents) & ~self.real
        merged["done_envs"] = done_envs
        if returns:
            final_obs = np.zeros_like(obs)
            for rows, fo in zip(self._rows, finals, strict=True):
                final_obs[rows] = fo
            merged["final_obs"] = final_obs
            merged["final_state"] = np.concatenate(final_states)
            merged["episode_returns"] = np.concatenate(returns)
            merged["episode_return_mean"] = float(merged["episode_returns"].mean())
        return obs, reward, terminated, truncated, merged


def load_factory(spec: str):
    """'package.module:callable' -> the callable (the current directory is importable, like `python -m`)."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EnvError(f"env: cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise EnvError(f"env: {module_name!r} has no callable {attr!r}")
    return factory


class ParallelFlatEnv:
    """B copies of a PettingZoo ParallelEnv with discrete actions, as flat rows.

    Observations: the agent's observation (the "observation" entry of a Dict space, else the Box),
    flattened, then a one-hot of the agent index (the personality the FiLM layer conditions on).
    Masks: the "action_mask" entry or infos[agent]["action_mask"], else everything allowed.
    Agents that are done stay as dead rows (zero obs, only action 0) until every agent of their copy is
    done; then the copy resets. State: env.state() when implemented, else every agent's observation.
    """

    def __init__(self, factory_spec: str, num_envs: int, seed: int | None):
        factory = load_factory(factory_spec)
        try:
            self.envs = [factory() for _ in range(num_envs)]
        except Exception as exc:  # a third-party factory: report what it raised, in one line
            raise EnvError(f"env: {factory_spec} failed to build an environment "
                           f"({type(exc).__name__}: {exc})") from None
        env = self.envs[0]
        if not hasattr(env, "possible_agents") or not hasattr(env, "step"):
            raise EnvError(f"env: {factory_spec} did not return a PettingZoo ParallelEnv")
        from gymnasium import spaces

        self.agents = list(env.possible_agents)
        self._index = {a: i for i, a in enumerate(self.agents)}
        self.num_envs, self.num_agents = num_envs, len(self.agents)
        self.num_rows = num_envs * self.num_agents
        n_actions: set[int] = set()
        obs_shapes: set[tuple[int, ...]] = set()
        self._dict_obs = False
        for agent in self.agents:
            a_space = env.action_space(agent)
            if not isinstance(a_space, spaces.Discrete):
                raise EnvError(f"env: agent {agent!r} has a {type(a_space).__name__} action space; "
                               "only Discrete actions can be trained")
            n_actions.add(int(a_space.n))
            o_space = env.observation_space(agent)
            if isinstance(o_space, spaces.Dict) and "observation" in o_space.spaces:
                self._dict_obs = True
                o_space = o_space.spaces["observation"]
            if not isinstance(o_space, spaces.Box):
                raise EnvError(f"env: agent {agent!r} has a {type(o_space).__name__} observation space; "
                               "expected a Box (or a Dict with an 'observation' Box)")
            obs_shapes.add(tuple(o_space.shape))
        if len(n_actions) != 1 or len(obs_shapes) != 1:
            raise EnvError("env: every agent needs the same observation shape and number of actions, got "
                           f"shapes {sorted(obs_shapes)} and action counts {sorted(n_actions)}")
        self.n_actions = n_actions.pop()
        self._raw_dim = int(np.prod(obs_shapes.pop()))
        self.obs_dim = self._raw_dim + self.num_agents
        self.cond_index = tuple(range(self._raw_dim, self.obs_dim))
        self._seed = seed
        self._has_state = True
        try:
            env.reset(seed=seed)
            st = np.asarray(env.state(), np.float32).reshape(-1)
            self.state_dim = int(st.size)
        except (NotImplementedError, AttributeError, TypeError, ValueError):
            self._has_state = False
            self.state_dim = self._raw_dim * self.num_agents
        self.action_names = [f"action{a}" for a in range(self.n_actions)]
        self.observation_layout = [f"obs{k}" for k in range(self._raw_dim)] + [f"agent_{a}" for a in self.agents]
        self.groups_role = np.tile(np.arange(self.num_agents), num_envs).astype(np.int64)
        self.env_id = f"pettingzoo:{factory_spec}"
        self.max_episode_steps = int(getattr(env, "max_cycles", 0) or 0) or None
        R = self.num_rows
        self._obs = np.zeros((R, self.obs_dim), np.float32)
        self._mask = np.ones((R, self.n_actions), bool)
        self._alive = np.zeros(R, bool)
        self._returns = np.zeros(R, np.float64)
        self._state = np.zeros((num_envs, self.state_dim), np.float32)
        eye = np.eye(self.num_agents, dtype=np.float32)
        self._onehot = np.tile(eye, (num_envs, 1))

    def _row(self, b: int, i: int) -> int:
        return b * self.num_agents + i

    def _write(self, b: int, obs: dict, infos: dict) -> None:
        env = self.envs[b]
        live = set(env.agents)
        for i, agent in enumerate(self.agents):
            r = self._row(b, i)
            if agent in live and agent in obs:
                o = obs[agent]
                m = None
                if self._dict_obs and isinstance(o, dict):
                    m = o.get("action_mask")
                    o = o["observation"]
                if m is None and isinstance(infos.get(agent), dict):
                    m = infos[agent].get("action_mask")
                self._obs[r, : self._raw_dim] = np.asarray(o, np.float32).reshape(-1)
                self._obs[r, self._raw_dim:] = self._onehot[r]
                self._mask[r] = True if m is None else np.asarray(m).astype(bool)
                if not self._mask[r].any():
                    self._mask[r, 0] = True
                self._alive[r] = True
            else:
                self._obs[r] = 0.0
                self._mask[r] = False
                self._mask[r, 0] = True
                self._alive[r] = False
        if self._has_state:
            self._state[b] = np.asarray(env.state(), np.float32).reshape(-1)
        else:
            rows = slice(self._row(b, 0), self._row(b, self.num_agents))
            self._state[b] = self._obs[rows, : self._raw_dim].reshape(-1)

    def _info(self) -> dict:
        return {"action_mask": self._mask.copy(), "alive": self._alive.copy(), "state": self._state.copy(),
                "role": self.groups_role}

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        base = self._seed if seed is None else seed
        for b, env in enumerate(self.envs):
            obs, infos = env.reset(seed=None if base is None else base + b)
            self._write(b, obs, infos or {})
        self._returns[:] = 0
        self._episodes = 0 if base is None else base + self.num_envs
        return self._obs.copy(), self._info()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        actions = np.asarray(actions).reshape(-1)
        R = self.num_rows
        reward = np.zeros(R, np.float32)
        terminated = np.zeros(R, bool)
        truncated = np.zeros(R, bool)
        finished: list[int] = []
        for b, env in enumerate(self.envs):
            live = list(env.agents)
            act = {a: int(actions[self._row(b, self._index[a])]) for a in live}
            obs, rew, terms, truncs, infos = env.step(act)
            for a in live:
                r = self._row(b, self._index[a])
                reward[r] = float(rew.get(a, 0.0))
                terminated[r] = bool(terms.get(a, False))
                truncated[r] = bool(truncs.get(a, False)) and not terminated[r]
            if not env.agents:
                finished.append(b)
            else:
                self._write(b, obs, infos or {})
        self._returns += reward
        info: dict[str, Any] = {"done_envs": np.isin(np.arange(self.num_envs), finished)}
        if finished:
            rows = np.concatenate([np.arange(self._row(b, 0), self._row(b, self.num_agents)) for b in finished])
            info["episode_returns"] = self._returns[rows].copy()
            info["episode_return_mean"] = float(self._returns[rows].mean())
            self._returns[rows] = 0
            for b in finished:
                self._episodes += 1
                obs, infos = self.envs[b].reset(seed=self._episodes)
                self._write(b, obs, infos or {})
        info.update(self._info())
        return self._obs.copy(), reward, terminated, truncated, info


PROBE_TICKS = 1000  # longest episode probe_episode_len plays


def probe_episode_len(env: Any, seed: int, limit: int = PROBE_TICKS) -> int:
    """Ticks of one episode of a PettingZoo ParallelEnv played with uniformly random valid actions (at most
    `limit`): the episode length an env without `max_cycles` is planned with. Anything the env raises gives
    `limit`'s tenth (the trainer reports the env's own error when it builds its copies)."""
    rng = np.random.default_rng(seed)
    try:
        obs, infos = env.reset(seed=seed)
        for t in range(1, limit + 1):
            actions = {}
            for agent in env.agents:
                n = int(env.action_space(agent).n)
                m = None
                o = obs.get(agent) if isinstance(obs, dict) else None
                if isinstance(o, dict):
                    m = o.get("action_mask")
                if m is None and isinstance((infos or {}).get(agent), dict):
                    m = infos[agent].get("action_mask")
                valid = np.flatnonzero(np.asarray(m).astype(bool)) if m is not None else np.arange(n)
                actions[agent] = int(rng.choice(valid)) if len(valid) else 0
            obs, _, _, _, infos = env.step(actions)
            if not env.agents:
                return t
    except Exception:  # noqa: BLE001 (a third-party env: planning falls back to a guess)
        return max(1, limit // 10)
    return limit


def agents_and_episode_len(cfg: TrainConfig) -> tuple[int, int]:
    """(agents per copy, typical episode length) without building the full batch."""
    if cfg.env is not None:
        env = load_factory(cfg.env)()
        n = len(getattr(env, "possible_agents", [])) or 1
        return n, int(getattr(env, "max_cycles", 0) or probe_episode_len(env, cfg.seed))
    from engine.vec_env import resolve_world

    return max(len(resolve_world(w).npcs) for w in cfg.worlds), task_episode(cfg)[1]


def make_flat_env(cfg: TrainConfig, num_envs: int | None = None, seed: int | None = None
                  ) -> VillageFlatEnv | MixedSizeFlatEnv | ParallelFlatEnv:
    """The training environment a config describes (`--env` wins over `--world`)."""
    n = cfg.envs if num_envs is None else num_envs
    if n < 1:
        raise ConfigError(f"envs: expected an integer >= 1 here, got {n}")
    s = cfg.seed if seed is None else seed
    if cfg.env is not None:
        return ParallelFlatEnv(cfg.env, n, s)
    from engine.vec_env import resolve_world
    from npc_brains.config import engine_tuning

    scenario, max_ticks = task_episode(cfg)
    options = dict(slots=cfg.slots, max_ticks=max_ticks, scenario=scenario, trait_noise=cfg.trait_noise,
                   tuning=engine_tuning(cfg.tuning) if cfg.tuning else None)
    if len({len(resolve_world(w).npcs) for w in cfg.worlds}) > 1:
        return MixedSizeFlatEnv(cfg.worlds, n, s, **options)
    return VillageFlatEnv(cfg.worlds, n, s, **options)


def task_episode(cfg: TrainConfig) -> tuple[str, int]:
    """(scenario, episode ticks) of a village run: a world with a task (engine.tasks, e.g. raid-defence-v1)
    brings its own, used where --scenario / --max-ticks are left at their defaults (a value equal to the
    default counts as left)."""
    from npc_brains.config import default_fields

    defaults = default_fields()
    scenario, ticks = cfg.scenario, cfg.max_ticks
    if len(cfg.worlds) == 1 and cfg.env is None:
        from engine.tasks import task_for_world

        task = task_for_world(cfg.worlds[0])
        if task is not None:
            scenario = task.scenario if scenario == defaults["scenario"] else scenario
            ticks = task.ticks if ticks == defaults["max_ticks"] else ticks
    return scenario, ticks


def slot_layout(env: Any) -> tuple[int, ...]:
    """(offset, features per slot, slots, untargeted actions, targeted kinds) of a village env's observation
    and action layout, for the entity head; () when the env has no slots (a wrapped PettingZoo env)."""
    from engine.constants import TARGETED, UNTARGETED

    names = list(getattr(env, "observation_layout", []))
    if "slot0.present" not in names:
        return ()
    offset = names.index("slot0.present")
    features = sum(1 for n in names if n.startswith("slot0."))
    slots = len({n.split(".", 1)[0] for n in names if n.startswith("slot")})
    if offset + slots * features != len(names) or env.n_actions != len(UNTARGETED) + len(TARGETED) * slots:
        return ()
    return (offset, features, slots, len(UNTARGETED), len(TARGETED))
