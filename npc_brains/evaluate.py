"""The emergence benchmark: run policies over the scenario suite on several worlds and seeds, and measure
mourning, revenge, fear, news, consistency, diversity and chain length (docs/emergence.md).

    results = evaluate([("default", policy), ("random", get_baseline("random"))], EvalSpec(...))

numpy only, except `random_init_policy` (it builds a fresh network with torch). Every policy sees the same
scenario runs: the same worlds, victims and simulation seeds (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.metrics import (
    REMEMBERED_KEYS,
    MetricParams,
    Stats,
    Trace,
    group_intervals,
    system_neural_diversity,
    trace_stats,
)
from engine.policy_api import Policy, PolicyOutput
from engine.scenarios import Scenario, ScenarioError, run_scenario
from npc_brains.resolve import policy_slots as built_slots
from npc_brains.tuning import policy_tuning
from worlds import WorldSpec

COMPARISONS: tuple[str, ...] = ("mappo", "scripted", "random_init", "random")
DEFAULT_WORLDS: tuple[str, ...] = ("village-v1", "generated:12:10000", "generated:12:10001")
# generated worlds with a seed at least this were never used in training (a convention: training uses lower)
HELD_OUT_SEED_MIN = 10_000
# metric columns of the table and of the JSON line
SCALARS: tuple[str, ...] = (
    "mourning_rate", "mourning_latency", "revenge_rate", "revenge_accuracy", "fear_rate", "consistency",
    "diversity", "diversity_empirical", "action_entropy", "news_reach", "news_hops", "news_graph_distance",
    "chain_length", "chain_length_max", "chain_branching", "chain_deep_share", "chain_deaths", "news_reach_48",
    "hearsay_accuracy", "hearsay_culprit_share", "hearsay_culprit_delay", "player_reactions", "fear_kept_rate",
    "fear_by_culprit_death", "fear_fled_rate", "fear_chosen_rate", "diversity_played",
)
# the held-out size sweep (`village eval --sweep`): two held-out generated worlds per size
SWEEP_SIZES: tuple[int, ...] = (12, 24, 48, 96)
SWEEP_PER_SIZE = 2  # the round; `village eval --sweep-worlds K` plays more, since worlds of one size differ
VALIDATION_SEED_MIN = 5_000


def size_worlds(per_size: int = SWEEP_PER_SIZE, first: int = HELD_OUT_SEED_MIN,
                sizes: Sequence[int] = SWEEP_SIZES) -> tuple[str, ...]:
    """`per_size` generated worlds of each size, generator seeds `first`, `first` + 1, ... (size-major)."""
    return tuple(f"generated:{n}:{first + j}" for n in sizes for j in range(per_size))


SWEEP_WORLDS: tuple[str, ...] = size_worlds()
# worlds of the sweep's sizes for choosing between trained policies (a lever, a seed): neither trained on nor held
# out, so that the held-out sweep still measures a policy nobody picked by it
VALIDATION_WORLDS: tuple[str, ...] = size_worlds(first=VALIDATION_SEED_MIN)
# the per-size table printed by `village eval` when the run has held-out worlds
SIZE_COLUMNS: tuple[str, ...] = (
    "mourning_rate", "revenge_rate", "revenge_accuracy", "fear_rate", "fear_kept_rate", "fear_fled_rate",
    "fear_chosen_rate", "news_reach_48", "hearsay_accuracy", "chain_length", "chain_branching", "player_reactions",
    "diversity", "diversity_played",
)
# the table printed by `village eval` (results.json and table.md have them all)
TABLE_COLUMNS: tuple[str, ...] = (
    "mourning_rate", "mourning_latency", "revenge_rate", "revenge_accuracy", "fear_rate", "consistency",
    "diversity", "news_reach", "chain_length",
)
RATES: tuple[str, ...] = ("mourning_rate", "revenge_rate", "fear_rate")
# the thresholds for the trained policy (on held-out generated worlds)
THRESHOLDS: dict[str, float] = {
    "mourning_rate": 0.6, "revenge_rate": 0.4, "revenge_accuracy": 0.9, "fear_rate": 0.6, "consistency": 0.95,
}
RANDOM_INIT_MAX_SHARE = 1 / 3
# the second round's targets, checked per held-out size (reported; --strict keeps THRESHOLDS)
TARGETS: dict[str, float] = {"mourning_rate": 0.70, "revenge_rate": 0.60, "revenge_accuracy": 0.95,
                             "fear_rate": 0.75, "fear_kept_rate": 0.75, "fear_fled_rate": 0.75,
                             "fear_chosen_rate": 0.75,
                             "news_reach_48": 0.5}
TARGET_RANDOM_INIT_SHARE = 1 / 4
# held-out worlds of one size from which the targets also get an interval over the worlds (`--sweep-worlds`)
WORLD_INTERVAL_MIN_WORLDS = 4
TARGET_DIVERSITY_RATIO = 3.0


@dataclass
class EvalSpec:
    """What to run: scenarios x worlds, `villages` seeds each (one batched sim per pair)."""

    scenarios: list[Scenario]
    worlds: list[tuple[str, WorldSpec]]  # (label as given, spec)
    villages: int = 32
    seed: int = 0
    max_ticks: int | None = None
    deterministic: bool = False
    params: MetricParams = field(default_factory=MetricParams)
    probe_rows: int = 256
    # each world's place in the list whose villages it plays (part of a sweep, `village eval --sizes`); None: its own
    world_index: tuple[int, ...] | None = None

    def village_seed(self, si: int, wi: int) -> int:
        """The simulation seed of scenario `si` on world `wi`: the same cell of a list, the same villages."""
        place = wi if self.world_index is None else self.world_index[wi]
        return self.seed + 1009 * si + 7 * place


def world_size(label: str) -> int | None:
    """The NPC count N of a `generated:N:SEED` label; None for any other world."""
    parts = label.split(":")
    if len(parts) != 3 or parts[0] != "generated" or not parts[1].isdigit():
        return None
    return int(parts[1])


def is_held_out(label: str) -> bool:
    """`generated:N:SEED` with SEED >= HELD_OUT_SEED_MIN."""
    parts = label.split(":")
    if len(parts) != 3 or parts[0] != "generated":
        return False
    try:
        return int(parts[2]) >= HELD_OUT_SEED_MIN
    except ValueError:
        return False


def policy_slots(policy: Any) -> int:
    """K of the observation a policy was built for (4 for the baselines, which adapt)."""
    return built_slots(policy) or 4


def fresh_policy(net: dict[str, Any], env: dict[str, Any], *, config: dict[str, Any] | None = None, seed: int = 0,
                 name: str = "random_init") -> Any:
    """An untrained actor of the architecture described by `net` (a NetSpec dict), as a numpy policy."""
    import torch

    from npc_brains.networks import Actor, NetSpec
    from npc_brains.runtime import NumpyPolicy

    spec = NetSpec.from_dict(net)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        actor = Actor(spec)
    model = {f"actor.{k}": v.detach().clone() for k, v in actor.state_dict().items()}
    ckpt = {"net": spec.to_dict(), "env": dict(env), "config": dict(config or {}), "model": model}
    return NumpyPolicy(ckpt, name, seed)


class UntrainedPopulation:
    """K untrained networks of one architecture playing as one population: NPC row i acts with draw i mod K.

    One untrained network has habits of its own (a draw that greedily mourns beside any body), so one draw measures
    that draw; a population of draws measures what an untrained network of the architecture does."""

    def __init__(self, draws: Sequence[Any], name: str = "random_init"):
        if not draws:
            raise ValueError("draws: expected at least one untrained network")
        first = draws[0]
        self.draws = list(draws)
        self.name = name
        # what the harness reads off a policy (its world, its slots, its layout): the draws share them
        self.spec, self.env, self.config = first.spec, first.env, first.config
        self.obs_dim, self.n_actions = first.obs_dim, first.n_actions
        self.action_names, self.observation_layout, self.env_id = (first.action_names, first.observation_layout,
                                                                   first.env_id)

    @property
    def temperature(self) -> float:
        """The draws' sampling temperature (npc_brains.runtime.set_temperature): they play alike."""
        return float(self.draws[0].temperature)

    @temperature.setter
    def temperature(self, value: float) -> None:
        for draw in self.draws:
            draw.temperature = value

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        K, R = len(self.draws), len(obs)
        actions = np.zeros(R, np.int64)
        probs = np.zeros((R, self.n_actions), np.float32) if with_probs else None
        values = np.zeros(R, np.float32) if with_values else None
        for k, draw in enumerate(self.draws[:R]):
            part = draw.act(obs[k::K], mask[k::K], deterministic=deterministic, with_probs=with_probs,
                            with_values=with_values)
            actions[k::K] = part.actions
            if probs is not None:
                probs[k::K] = part.probs
            if values is not None:
                values[k::K] = part.values
        return PolicyOutput(actions, probs, values)


def random_init_policy(policy: Any, seed: int = 0, draws: int = 1) -> Any | None:
    """The same architecture as a trained `policy`, untrained (torch seed `seed`); with `draws` K > 1, an
    `UntrainedPopulation` of K networks (seeds `seed` to `seed` + K - 1). None for policies without a network."""
    spec, env = getattr(policy, "spec", None), getattr(policy, "env", None)
    if spec is None or env is None or not hasattr(spec, "to_dict"):
        return None
    if draws < 1:
        raise ValueError(f"draws: expected an integer >= 1, got {draws}")
    nets = [fresh_policy(spec.to_dict(), env, config=getattr(policy, "config", {}), seed=seed + k)
            for k in range(draws)]
    for net in nets:  # played as the trained policy is played
        net.temperature = getattr(policy, "temperature", 1.0)
    return nets[0] if draws == 1 else UntrainedPopulation(nets)


def persona_probs(policy: Policy, trace: Trace) -> np.ndarray | None:
    """(P, G, A): the policy's action distributions on each of the trace's P probe observations with each of its
    G NPCs' personality columns (traits, role) swapped in; None for a policy that gives no probabilities."""
    obs, mask, personas, cols = trace.probe_obs, trace.probe_mask, trace.personas, trace.persona_cols
    P, G = len(obs), len(personas)
    batch = np.repeat(obs[:, None, :], G, axis=1)
    batch[:, :, cols] = personas[None]
    masks = np.repeat(mask[:, None, :], G, axis=1)
    out = policy.act(batch.reshape(P * G, -1), masks.reshape(P * G, -1), deterministic=True, with_probs=True)
    if out.probs is None:
        return None
    return np.asarray(out.probs, float).reshape(P, G, -1)


def played_distribution(probs: np.ndarray, deterministic: bool) -> np.ndarray:
    """The distribution an NPC acts from: its probabilities when it samples; when it takes its most likely action
    (`village eval --deterministic`), that action with probability 1, as the scripted rules' always are."""
    if not deterministic:
        return probs
    return np.eye(probs.shape[-1])[probs.argmax(-1)]


def probe_diversities(policy: Policy, trace: Trace, deterministic: bool = False
                      ) -> tuple[float | None, float | None, int]:
    """(SND of the policy's probabilities, SND of what it plays (`played_distribution`), number of probe
    observations) over its NPCs' personalities; (None, None, 0) where there is nothing to probe."""
    if len(trace.probe_obs) == 0 or len(trace.personas) < 2:
        return None, None, 0
    if isinstance(policy, UntrainedPopulation):
        # personalities are compared within one network: a population's SND is its draws' mean, since rows of
        # different draws would differ by the draw, not by the personality
        values = [probe_diversities(draw, trace, deterministic)[:2] for draw in policy.draws]
        if any(None in v for v in values):
            return None, None, 0
        snd, played = np.mean(values, axis=0)
        return float(snd), float(played), len(trace.probe_obs)
    probs = persona_probs(policy, trace)
    if probs is None:
        return None, None, 0
    return (system_neural_diversity(probs), system_neural_diversity(played_distribution(probs, deterministic)),
            len(trace.probe_obs))


def probe_diversity(policy: Policy, trace: Trace) -> tuple[float | None, int]:
    """SND of the policy over its NPCs' personalities: mean pairwise TV of `persona_probs`.
    Returns (SND, number of probe observations)."""
    snd, _played, n = probe_diversities(policy, trace)
    return snd, n


def scalar_view(result: dict[str, Any]) -> dict[str, Any]:
    """The scalar metrics; player_remembered and its companions only where a run had a player's return."""
    return {**{k: result.get(k) for k in SCALARS}, **{k: result[k] for k in REMEMBERED_KEYS if k in result}}


def with_remembered(results: dict[str, Any], columns: Sequence[str], views: Callable[[dict[str, Any]], Iterator[
        dict[str, Any]]]) -> tuple[str, ...]:
    """`columns`, plus the player_remembered columns when some result (as `views` yields them) has them."""
    present = any(k in v for r in results.values() for v in views(r) for k in REMEMBERED_KEYS)
    return (*columns, *REMEMBERED_KEYS) if present else tuple(columns)


@dataclass
class Cell:
    """One scenario on one world for one policy: what the suite's totals are summed from."""

    si: int
    wi: int
    stats: Stats | None = None
    plan: str = ""
    snd: float | None = None
    snd_n: int = 0
    snd_played: float | None = None  # SND of the distribution the NPCs act from (`played_distribution`)
    skipped: str | None = None  # why the scenario cannot run on this world


class SndPool:
    """SND pooled over cells per key (all, a scenario, a world, a size), each cell weighted by its probe
    observations, so that a pooled SND is the mean over every probe row of the cells it pools."""

    def __init__(self) -> None:
        self._sums: dict[Any, list[float]] = {}  # key -> [snd x n, snd as played x n, n]

    def add(self, key: Any, cell: Cell) -> None:
        if cell.snd is None:
            return
        acc = self._sums.setdefault(key, [0.0, 0.0, 0])
        acc[0] += cell.snd * cell.snd_n
        acc[1] += (cell.snd_played or 0.0) * cell.snd_n
        acc[2] += cell.snd_n

    def probed(self) -> list[Any]:
        """The keys with at least one probe row, in the order they were first added."""
        return [key for key, (_, _, n) in self._sums.items() if n]

    def figures(self, key: Any) -> dict[str, float | None]:
        """{diversity, diversity_played} of `key` (None where it has no probe rows)."""
        snd, played, n = self._sums.get(key, (0.0, 0.0, 0))
        return {"diversity": snd / n if n else None, "diversity_played": played / n if n else None}


def evaluate_cell(policy: Policy, spec: EvalSpec, si: int, wi: int) -> Cell:
    """Scenario `si` on world `wi`, `spec.villages` seeds batched. Its simulation seed depends on the cell
    alone, but a sampling policy's draws go on from the cell before: the same results need the same order."""
    scenario, (label, world) = spec.scenarios[si], spec.worlds[wi]
    try:
        trace = run_scenario(policy, scenario, world, villages=spec.villages,
                             seed=spec.village_seed(si, wi), slots=policy_slots(policy),
                             max_ticks=spec.max_ticks, deterministic=spec.deterministic,
                             probe_rows=spec.probe_rows, tuning=policy_tuning(policy))
    except ScenarioError as exc:
        return Cell(si, wi, skipped=f"skipped {scenario.id} on {label}: {exc}")
    snd, played, n = probe_diversities(policy, trace, spec.deterministic)
    return Cell(si, wi, trace_stats(trace, spec.params), f"{scenario.id} on {label}: {trace.plan}", snd, n, played)


def evaluate_policy(policy: Policy, spec: EvalSpec, *, progress: Callable[[str], None] | None = None,
                    notes: list[str] | None = None, cells: Sequence[Cell] | None = None) -> dict[str, Any]:
    """Metrics of one policy over the suite: overall, on held-out worlds, per scenario and per world. With
    `cells` (every scenario x world, scenario-major, computed elsewhere) only their sums."""
    overall, held = Stats(), Stats()
    by_scenario: dict[str, Stats] = {}
    by_world: dict[str, Stats] = {}
    by_size: dict[int, Stats] = {}
    snd = SndPool()
    plans: list[str] = []
    def computed() -> Iterator[Cell]:
        if cells is not None:
            yield from cells
            return
        for si, scenario in enumerate(spec.scenarios):
            for wi, (label, _world) in enumerate(spec.worlds):
                if progress is not None:
                    progress(f"{policy.name} {scenario.id} {label}")
                yield evaluate_cell(policy, spec, si, wi)

    for cell in computed():
        scenario, label = spec.scenarios[cell.si], spec.worlds[cell.wi][0]
        if cell.stats is None:
            if notes is not None and cell.skipped:
                notes.append(cell.skipped)
            continue
        plans.append(cell.plan)
        held_out = is_held_out(label)
        st = cell.stats
        overall += st
        if held_out:
            held += st
        by_scenario.setdefault(scenario.id, Stats()).__iadd__(st)
        by_world.setdefault(label, Stats()).__iadd__(st)
        size = len(spec.worlds[cell.wi][1].npcs)
        if held_out:
            by_size.setdefault(size, Stats()).__iadd__(st)
        for key in ("all", f"s:{scenario.id}", f"w:{label}", *(("held", f"n:{size}") if held_out else ())):
            snd.add(key, cell)

    def with_snd(result: dict[str, Any], key: str) -> dict[str, Any]:
        result.update(snd.figures(key))
        return result

    result = with_snd(overall.result(), "all")
    result["held_out"] = scalar_view(with_snd(held.result(), "held")) if held.n.get("villages") else None
    if result["held_out"] is not None:
        result["held_out"]["intervals"] = held.intervals()
    result["by_scenario"] = {k: scalar_view(with_snd(v.result(), f"s:{k}")) for k, v in by_scenario.items()}
    result["by_world"] = {k: scalar_view(with_snd(v.result(), f"w:{k}")) for k, v in by_world.items()}
    result["held_out_by_size"] = {str(k): scalar_view(with_snd(v.result(), f"n:{k}"))
                                  for k, v in sorted(by_size.items())}
    world_size = {label: len(world.npcs) for label, world in spec.worlds}
    for k, v in by_size.items():
        result["held_out_by_size"][str(k)]["curves"] = {"news_reach": v.curve("news_reach")}
        result["held_out_by_size"][str(k)]["intervals"] = v.intervals()
        worlds = [st for label, st in by_world.items() if is_held_out(label) and world_size[label] == k]
        if len(worlds) >= WORLD_INTERVAL_MIN_WORLDS:
            result["held_out_by_size"][str(k)]["world_intervals"] = group_intervals(worlds)
    result["plans"] = plans
    return result


def evaluate(policies: Sequence[tuple[str, Policy]], spec: EvalSpec, *,
             progress: Callable[[str], None] | None = None, notes: list[str] | None = None) -> dict[str, Any]:
    """{name: metrics} for each (name, policy), all on the same scenario runs."""
    out = {}
    for name, policy in policies:
        out[name] = evaluate_policy(policy, spec, progress=progress, notes=notes)
    add_diversity_ratio(out)
    return out


def add_diversity_ratio(results: dict[str, Any]) -> None:
    """`diversity_ratio` and `diversity_played_ratio`: each policy's SND (of its probabilities; of what it plays)
    over the scripted rules' on the same runs (overall, held-out, per held-out size); None without the scripted
    comparison. The rules always play their one-hot choice, so both ratios divide by the same SND of theirs."""
    ref = results.get("scripted")

    def add(mine: Any, theirs: Any) -> None:
        for metric in ("diversity", "diversity_played"):
            ok = mine and theirs and mine.get(metric) is not None and theirs.get(metric)
            mine[f"{metric}_ratio"] = float(mine[metric] / theirs[metric]) if ok else None

    for r in results.values():
        add(r, ref)
        if r.get("held_out") is not None:
            add(r["held_out"], (ref or {}).get("held_out"))
        for size, v in r.get("held_out_by_size", {}).items():
            add(v, (ref or {}).get("held_out_by_size", {}).get(size))


# ------------------------------------------------------------------ thresholds and reporting
@dataclass(frozen=True)
class Check:
    name: str
    value: float | None
    target: str
    passed: bool | None  # None: not applicable (missing comparison or nothing eligible)
    interval: list[float] | None = None  # the value's 95% bootstrap interval over the villages, where it has one
    world_interval: list[float] | None = None  # over the worlds of its size, with WORLD_INTERVAL_MIN_WORLDS or more


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def threshold_checks(results: dict[str, Any], main: str) -> tuple[list[Check], str]:
    """The issue's thresholds for the `main` policy; on held-out generated worlds when the run has any.

    Returns (checks, which worlds they were computed on)."""
    def view(name: str) -> dict[str, Any] | None:
        r = results.get(name)
        if r is None:
            return None
        return r["held_out"] if use_held else scalar_view(r)

    use_held = results.get(main, {}).get("held_out") is not None
    scope = "held-out generated worlds" if use_held else "all worlds (no held-out generated world in --worlds)"
    m = view(main) or {}
    checks = []
    for metric, limit in THRESHOLDS.items():
        v = m.get(metric)
        checks.append(Check(metric, v, f">= {limit}", None if v is None else bool(v >= limit)))
    ri = view("random_init")
    for metric in RATES:
        v, ref = (ri or {}).get(metric), m.get(metric)
        applicable = ri is not None and v is not None and ref is not None
        checks.append(Check(f"random_init {metric}", v,
                            f"<= 1/3 of {main} ({_fmt(None if ref is None else ref * RANDOM_INIT_MAX_SHARE)})",
                            bool(v <= ref * RANDOM_INIT_MAX_SHARE + 1e-12) if applicable else None))
    sc = view("scripted") if main != "scripted" else None
    v, ref = m.get("diversity"), (sc or {}).get("diversity")
    checks.append(Check("diversity", v, f"> scripted ({_fmt(ref)})",
                        bool(v > ref) if (v is not None and ref is not None) else None))
    return checks, scope


def target_checks(results: dict[str, Any], main: str) -> dict[str, list[Check]]:
    """The second round's targets (docs/emergence.md) for `main`, per held-out size: {size: checks}."""
    sizes = results.get(main, {}).get("held_out_by_size", {})
    out: dict[str, list[Check]] = {}
    for size, m in sizes.items():
        def other(name: str, size: str = size) -> dict[str, Any] | None:
            return results.get(name, {}).get("held_out_by_size", {}).get(size)

        ri = other("random_init")
        checks = []
        for metric, limit in TARGETS.items():
            v = m.get(metric)
            checks.append(Check(metric, v, f">= {limit}", None if v is None else bool(v >= limit),
                                (m.get("intervals") or {}).get(metric), (m.get("world_intervals") or {}).get(metric)))
        for metric in (*RATES, "fear_kept_rate", "fear_fled_rate", "fear_chosen_rate"):
            v, ref = (ri or {}).get(metric), m.get(metric)
            ok = None if v is None or ref is None else bool(v <= ref * TARGET_RANDOM_INIT_SHARE + 1e-12)
            checks.append(Check(f"random_init {metric}", v, f"<= 1/4 of {main} "
                                f"({_fmt(None if ref is None else ref * TARGET_RANDOM_INIT_SHARE)})", ok))
        for metric, name in (("news_reach_48", "random_init"), ("chain_length", "random_init"),
                             ("chain_length", "scripted")):
            v, ref = m.get(metric), (other(name) or {}).get(metric)
            checks.append(Check(f"{metric} > {name}", v, f"> {_fmt(ref, _digits(metric))}",
                                None if v is None or ref is None else bool(v > ref)))
        for metric, what in (("diversity_ratio", "SND"), ("diversity_played_ratio", "SND as played")):
            v = m.get(metric)
            checks.append(Check(metric, v, f">= {TARGET_DIVERSITY_RATIO:g} ({what} / scripted SND)",
                                None if v is None else bool(v >= TARGET_DIVERSITY_RATIO)))
        out[size] = checks
    return out


def targets_summary(targets: dict[str, list[Check]]) -> str:
    """One line: how many of the per-size targets pass, and which fail."""
    checks = [(size, c) for size in sorted(targets, key=int) for c in targets[size]]
    failed = [f"{c.name} at {size}" for size, c in checks if c.passed is False]
    passed = sum(c.passed is True for _, c in checks)
    line = f"targets: {passed} of {len(checks)} pass"
    return line + (f"; failing: {', '.join(failed)}" if failed else "")


def size_report(results: dict[str, Any], targets: dict[str, list[Check]], main: str) -> str:
    """What a run with held-out worlds prints per size: the table, the targets and their count."""
    return "\n\n".join((size_table(results), targets_table(targets, main), targets_summary(targets)))


# run settings that the parts of one sweep split by world size must share (results.json "config"); --seed differs
# on purpose (each part starts at its first world's index) and so do the worlds
MERGE_SHARED_CONFIG: tuple[str, ...] = (
    "scenarios", "seeds", "max_ticks", "deterministic", "temperature", "personality_strength", "personality_traits",
    "random_init_draws", "random_init_seed",
)


class MergeError(ValueError):
    """Parts of a split sweep that cannot be merged; the message names the part and the field."""


def merge_by_size(parts: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Merge the results.json payloads (label, payload) of one held-out sweep run as parts split by world size.

    Returns (main policy, {policy: {"held_out_by_size": {size: metrics}}}, the shared config). Each size must come
    from one part, and the parts must share the policies and MERGE_SHARED_CONFIG; a MergeError names what differs."""
    if not parts:
        raise MergeError("no parts to merge")
    first_label, first = parts[0]
    main: str | None = None
    names: list[str] = []
    merged: dict[str, Any] = {}
    where: dict[str, str] = {}  # size -> the part it came from
    for label, payload in parts:
        if not isinstance(payload, dict) or not isinstance(payload.get("results"), dict) \
                or not isinstance(payload.get("config"), dict):
            raise MergeError(f"{label}: not a results.json written by village eval --out (expected 'config' and "
                             "'results')")
        if main is None:
            main, names = payload.get("policy"), list(payload["results"])
        elif payload.get("policy") != main:
            raise MergeError(f"{label}: measures policy {payload.get('policy')!r}, {first_label} measures {main!r}")
        elif sorted(payload["results"]) != sorted(names):
            raise MergeError(f"{label}: compares {', '.join(sorted(payload['results']))}, {first_label} compares "
                             f"{', '.join(sorted(names))}; the parts of one sweep must run the same policies")
        for key in MERGE_SHARED_CONFIG:
            if key.startswith("random_init") and "random_init" not in names:
                continue  # recorded for every run, read only by the untrained comparison
            a, b = first["config"].get(key), payload["config"].get(key)
            if a != b:
                raise MergeError(f"{label}: config.{key} is {b!r}, {first_label} has {a!r}; the parts of one sweep "
                                 "must share it")
        sizes = set(payload["results"].get(main, {}).get("held_out_by_size") or {})
        if not sizes:
            raise MergeError(f"{label}: no held-out generated world in it (worlds generated:N:SEED with SEED >= "
                             f"{HELD_OUT_SEED_MIN}), so nothing to merge by size")
        for size in sorted(sizes, key=int):
            if size in where:
                raise MergeError(f"{label}: its {size}-NPC worlds are also in {where[size]}; each size must come "
                                 "from one part")
            where[size] = label
        for name in names:
            by_size = payload["results"][name].get("held_out_by_size") or {}
            merged.setdefault(name, {"held_out_by_size": {}})["held_out_by_size"].update(by_size)
    for r in merged.values():
        r["held_out_by_size"] = dict(sorted(r["held_out_by_size"].items(), key=lambda kv: int(kv[0])))
    config = {key: first["config"].get(key) for key in MERGE_SHARED_CONFIG}
    return str(main), merged, config


def size_table(results: dict[str, Any], columns: Sequence[str] = SIZE_COLUMNS) -> str:
    """One row per (held-out size, policy)."""
    columns = with_remembered(results, columns, lambda r: iter(r.get("held_out_by_size", {}).values()))
    lines = ["Held-out worlds by size:", "", "| NPCs | policy | " + " | ".join(columns) + " |",
             "|---:|---|" + "---:|" * len(columns)]
    sizes = sorted({int(k) for r in results.values() for k in r.get("held_out_by_size", {})})
    for n in sizes:
        for name, r in results.items():
            m = r.get("held_out_by_size", {}).get(str(n))
            if m is None:
                continue
            lines.append(f"| {n} | {name} | " + " | ".join(_fmt(m.get(c), _digits(c)) for c in columns) + " |")
    return "\n".join(lines)


def targets_table(targets: dict[str, list[Check]], main: str) -> str:
    """The targets per size, one column per size."""
    sizes = sorted(targets, key=int)
    if not sizes:
        return ""
    by_worlds = any(c.world_interval is not None for checks in targets.values() for c in checks)
    lines = [f"Targets for {main} (held-out worlds by size; reported, not part of --strict; [low, high]: 95% "
             "bootstrap interval over the villages run" + ("; worlds [low, high]: over the worlds of that size, how "
                                                           "the rate would move on other worlds" if by_worlds else "")
             + "):", "",
             "| check | " + " | ".join(f"{n} NPCs" for n in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for k, check in enumerate(targets[sizes[0]]):
        cells = []
        for n in sizes:
            c = targets[n][k]
            verdict = "n/a" if c.passed is None else ("PASS" if c.passed else "FAIL")
            interval = "" if c.interval is None else f" [{_fmt(c.interval[0])}, {_fmt(c.interval[1])}]"
            if c.world_interval is not None:
                interval += f" worlds [{_fmt(c.world_interval[0])}, {_fmt(c.world_interval[1])}]"
            cells.append(f"{_fmt(c.value)}{interval} {c.target} {verdict}")
        lines.append(f"| {check.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _digits(column: str) -> int:
    """Rates and shares with 3 decimals; tick counts, hops and lengths with 2."""
    return 2 if any(w in column for w in ("latency", "chain", "hops", "graph_distance")) else 3


def markdown_table(results: dict[str, Any], columns: Sequence[str] = TABLE_COLUMNS) -> str:
    columns = with_remembered(results, columns, lambda r: iter((r,)))
    head = "| policy | " + " | ".join(columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    rows = [f"| {name} | " + " | ".join(_fmt(r.get(c), _digits(c)) for c in columns) + " |"
            for name, r in results.items()]
    return "\n".join([head, rule, *rows])


def checks_table(checks: list[Check], main: str, scope: str) -> str:
    lines = [f"Thresholds for {main} ({scope}):", "", "| check | value | threshold | result |", "|---|---:|---|---|"]
    for c in checks:
        verdict = "n/a" if c.passed is None else ("PASS" if c.passed else "FAIL")
        lines.append(f"| {c.name} | {_fmt(c.value)} | {c.target} | {verdict} |")
    return "\n".join(lines)


def scenario_table(results: dict[str, Any], metric: str) -> str:
    names = list(results)
    scenarios: list[str] = []
    for r in results.values():
        scenarios += [s for s in r.get("by_scenario", {}) if s not in scenarios]
    lines = [f"{metric} by scenario:", "", "| scenario | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for s in scenarios:
        lines.append(f"| {s} | " + " | ".join(_fmt(results[n].get("by_scenario", {}).get(s, {}).get(metric))
                                                for n in names) + " |")
    return "\n".join(lines)


def without_curves(by_size: dict[str, Any]) -> dict[str, Any]:
    """`held_out_by_size` as the JSON line prints it: every figure but the curves (results.json keeps them)."""
    return {size: {k: v for k, v in m.items() if k != "curves"} for size, m in by_size.items()}


def json_line(results: dict[str, Any]) -> dict[str, Any]:
    """What `village eval --json` prints on its last line: scalars, held-out scalars, per-scenario and per-world
    rates."""
    return {name: {**scalar_view(r), "diversity_ratio": r.get("diversity_ratio"),
                   "diversity_played_ratio": r.get("diversity_played_ratio"), "held_out": r.get("held_out"),
                   "held_out_by_size": without_curves(r.get("held_out_by_size", {})),
                   "by_scenario": r.get("by_scenario"), "by_world": r.get("by_world"), "counts": r.get("counts")}
            for name, r in results.items()}


def write_plots(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """rates.png, reach.png, diversity.png, distance.png (matplotlib, headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    names = list(results)
    # reaction rates per policy
    metrics = ("mourning_rate", "revenge_rate", "revenge_accuracy", "fear_rate", "consistency")
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(metrics))
    for k, name in enumerate(names):
        vals = [results[name].get(m) for m in metrics]
        ax.bar(x + k * width, [np.nan if v is None else v for v in vals], width, label=name)
    for m, limit in THRESHOLDS.items():
        if m in metrics:
            i = metrics.index(m)
            ax.hlines(limit, i - 0.1, i + 0.9, colors="black", linestyles="dashed", linewidth=1)
    ax.set_xticks(x + width * (len(names) - 1) / 2, [m.replace("_", " ") for m in metrics])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share")
    ax.set_title("Reactions by completed behaviour (dashed: thresholds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out_dir / "rates.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    # news reach curve
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in names:
        curve = results[name].get("curves", {}).get("news_reach", [])
        ax.plot(range(len(curve)), [np.nan if v is None else v for v in curve], label=name)
    ax.set_xlabel("ticks since the death (10 min)")
    ax.set_ylabel("share of living NPCs who know")
    ax.set_ylim(0, 1.05)
    ax.set_title("News reach")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out_dir / "reach.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    # news reach per held-out size (one panel per size)
    sizes = sorted({int(k) for r in results.values() for k in r.get("held_out_by_size", {})})
    if sizes:
        fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 3.4), sharey=True, squeeze=False)
        for ax, n in zip(axes[0], sizes, strict=True):
            for name in names:
                curve = results[name].get("held_out_by_size", {}).get(str(n), {}).get("curves", {}).get(
                    "news_reach", [])
                ax.plot(range(len(curve)), [np.nan if v is None else v for v in curve], label=name)
            ax.axvline(48, color="black", linewidth=0.8, linestyle=":")
            ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
            ax.set_title(f"{n} NPCs")
            ax.set_xlabel("ticks since the death")
            ax.set_ylim(0, 1.05)
        axes[0][0].set_ylabel("share who know")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle("News reach on held-out worlds by size (dashed: target 0.5 at 48 ticks)")
        fig.tight_layout()
        written.append(out_dir / "reach_by_size.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    # diversity
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(names))
    snd = [results[n].get("diversity") for n in names]
    emp = [results[n].get("diversity_empirical") for n in names]
    ax.bar(x - 0.2, [np.nan if v is None else v for v in snd], 0.4, label="SND (TV, personality swap)")
    ax.bar(x + 0.2, [np.nan if v is None else v for v in emp], 0.4, label="empirical (per-NPC histograms)")
    ax.set_xticks(x, names)
    ax.set_ylabel("mean pairwise TV distance")
    ax.set_title("Behavioural diversity")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out_dir / "diversity.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    # distance from the culprit, witnesses vs hearsay
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, name in enumerate(names):
        color = f"C{k}"
        for key, style in (("distance_witness", "-"), ("distance_hearsay", ":")):
            curve = results[name].get("curves", {}).get(key, [])
            ax.plot(range(len(curve)), [np.nan if v is None else v for v in curve], style, color=color,
                    label=f"{name} {key.split('_')[1]}")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("ticks since learning of the death")
    ax.set_ylabel("distance from the culprit / sight radius")
    ax.set_title("Timid NPCs: distance kept from the culprit")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    written.append(out_dir / "distance.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written
