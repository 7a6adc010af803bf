"""Emergence metrics computed from recorded scenario traces (exact definitions: docs/emergence.md).

numpy (+ networkx for social-graph path lengths) only; never torch. A `Trace` is what one scenario run over
B villages of one world leaves behind (`TraceRecorder` fills it from a recording `VillageSim`);
`trace_stats(trace)` turns it into additive counts (`Stats`), and `Stats.result()` into rates. Every reaction
is measured by completed behaviour (time performing at the body, a landed blow, reaching and keeping a safe
distance), never by one action pick.

Index conventions. A state array has T + 1 rows: row t is the state when `state.tick == t` (row 0 before the
first step). Step k is the call of `VillageSim.step` that takes tick k to k + 1; events, messages and
`learned_tick` carry the step number k, and the state just after step k is row k + 1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.constants import CLOSE_AFFINITY, N_KINDS, Action, EntityKind, EventType, Reaction, Trait
from engine.constants import close_relations as is_close

SEEN = -1  # learned_from: saw it or found the body


@dataclass(frozen=True)
class MetricParams:
    """Thresholds and windows of the metrics (ticks are 10 game minutes)."""

    close_affinity: float = CLOSE_AFFINITY  # close relation: kin/spouse, or affinity at least this
    aggressive: float = 0.6  # aggression at least this
    timid: float = 0.4  # bravery at most this
    mourn_window: int = 36  # T: steps after learning of the death (6 h)
    mourn_min_ticks: int = 6  # X: mourning ticks needed within the window
    revenge_window: int = 24  # steps after learning who did it
    fear_window: int = 6  # T_f: steps after the death to reach a safe distance
    fear_hold: int = 6  # consecutive ticks to keep it
    fear_keep: int = 24  # fear_kept_rate: consecutive ticks to keep the safe distance (4 hours)
    fear_own_share: float = 0.5  # share of the distance to gain that the witness's own movement must account for
    news_horizon: int = 48  # steps of the reach curve
    curve_ticks: int = 24  # steps of the distance-from-culprit curves
    news_reach_at: int = 48  # news_reach_48: the reach curve at this many steps after the death
    player_day: int = 144  # player_reactions: steps after a killing by the player (a day)
    remember_window: int = 36  # player_remembered: steps after the player's return (6 hours)
    eps: float = 1e-5


# ------------------------------------------------------------------ the trace
@dataclass
class Trace:
    """One scenario on B villages of one world: what the metrics read (bounded: no per-tick (N, E) arrays)."""

    scenario: str
    world: str
    ticks: int  # steps recorded (T)
    entity_kind: np.ndarray  # (E,)
    traits: np.ndarray  # (B, N, 5)
    affinity: np.ndarray  # (B, N, N)
    kin: np.ndarray  # (B, N, N) bool, kin or spouse
    sight_radius: np.ndarray  # (B,)
    safe_distance: np.ndarray  # (B,) where fleeing ends
    joy_decay: float  # per-step joy decay factor
    # per state, (T + 1, ...)
    pos: np.ndarray  # (T+1, B, E, 2) f32
    alive: np.ndarray  # (T+1, B, E) bool
    activity: np.ndarray  # (T+1, B, N) int8
    target: np.ndarray  # (T+1, B, N) int16
    performing: np.ndarray  # (T+1, B, N) bool
    busy: np.ndarray  # (T+1, B, N) bool
    reaction: np.ndarray  # (T+1, B, N) int8
    grief: np.ndarray  # (T+1, B, N) f32
    joy: np.ndarray  # (T+1, B, N) f32
    fear_actor: np.ndarray  # (T+1, B, N, M) f32: fear of the non-NPC actors (player, raiders)
    anger_actor: np.ndarray  # (T+1, B, N, M) f32
    # knowledge at the end (never shrinks within an episode)
    learned_tick: np.ndarray  # (B, N, E) step, -1 never
    learned_from: np.ndarray  # (B, N, E) sender, -1 first-hand, -2 never
    known_culprit: np.ndarray  # (B, N, E)
    culprit_tick: np.ndarray  # (B, N, E) step at which the culprit became known, -1 never
    death_tick: np.ndarray  # (B, E)
    killer: np.ndarray  # (B, E)
    events: dict[str, np.ndarray]  # columns: id village tick type actor target cause reaction
    messages: dict[str, np.ndarray]  # columns: village tick sender receiver subject culprit how
    # diversity probes: observations of free NPCs, and each NPC's personality columns
    probe_obs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    probe_mask: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    personas: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))  # (N, C)
    persona_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (C,)
    plan: str = ""
    return_tick: int = -1  # the scenario's first talk, gift or attack step (the player's return); -1 none

    @property
    def B(self) -> int:
        return int(self.traits.shape[0])

    @property
    def N(self) -> int:
        return int(self.traits.shape[1])

    @property
    def E(self) -> int:
        return int(self.entity_kind.shape[0])


EVENT_COLUMNS = ("id", "village", "tick", "type", "actor", "target", "cause", "reaction")
MESSAGE_COLUMNS = ("village", "tick", "sender", "receiver", "subject", "culprit", "how")


def empty_events() -> dict[str, np.ndarray]:
    return {c: np.zeros(0, np.int64) for c in EVENT_COLUMNS}


def empty_messages() -> dict[str, np.ndarray]:
    return {c: np.zeros(0, np.int64) for c in MESSAGE_COLUMNS}


class TraceRecorder:
    """Records a `VillageSim` (built with record=True) into a `Trace`: call `before_step()` and `after_step()`
    around every `sim.step`, then `finish()`."""

    def __init__(self, sim: Any, *, scenario: str = "", world: str = "", probe_rows: int = 256,
                 rng: np.random.Generator | None = None):
        from engine.observe import ROLE_SLICE, TRAIT_SLICE

        self.sim = sim
        self.scenario, self.world = scenario, world
        self.rng = rng or np.random.default_rng(0)
        B, N, E, M = sim.B, sim.N, sim.E, sim.M
        T = int(sim.max_ticks)
        self.T = T
        self.t = 0
        self.arr = {
            "pos": np.zeros((T + 1, B, E, 2), np.float32),
            "alive": np.zeros((T + 1, B, E), bool),
            "activity": np.zeros((T + 1, B, N), np.int8),
            "target": np.full((T + 1, B, N), -1, np.int16),
            "performing": np.zeros((T + 1, B, N), bool),
            "busy": np.zeros((T + 1, B, N), bool),
            "reaction": np.zeros((T + 1, B, N), np.int8),
            "grief": np.zeros((T + 1, B, N), np.float32),
            "joy": np.zeros((T + 1, B, N), np.float32),
            "fear_actor": np.zeros((T + 1, B, N, M), np.float32),
            "anger_actor": np.zeros((T + 1, B, N, M), np.float32),
        }
        self.culprit_tick = np.full((B, N, E), -1, np.int32)
        self.per_tick = max(1, -(-probe_rows // max(T, 1)))
        self.probe_rows = probe_rows
        self.probe_obs: list[np.ndarray] = []
        self.probe_mask: list[np.ndarray] = []
        self.persona_cols = np.r_[np.arange(TRAIT_SLICE.start, TRAIT_SLICE.stop),
                                  np.arange(ROLE_SLICE.start, ROLE_SLICE.stop)].astype(np.int64)
        self.personas = sim.obs[0][:, self.persona_cols].copy()
        self._snapshot(0)

    def _snapshot(self, t: int) -> None:
        s, a, N = self.sim.state, self.arr, self.sim.N
        a["pos"][t] = s.pos
        a["alive"][t] = s.alive
        a["activity"][t] = s.activity
        a["target"][t] = s.target
        a["performing"][t] = s.performing
        a["busy"][t] = s.busy
        a["reaction"][t] = self.sim.reaction
        a["grief"][t] = s.grief
        a["joy"][t] = s.joy
        a["fear_actor"][t] = s.fear[:, :, N:]
        a["anger_actor"][t] = s.anger[:, :, N:]

    def before_step(self) -> None:
        """Sample observations of free, living NPCs for the diversity probe."""
        if self.probe_rows <= 0:
            return
        s, N = self.sim.state, self.sim.N
        free = np.flatnonzero((s.alive[:, :N] & ~s.busy).reshape(-1))
        if len(free):
            pick = self.rng.choice(free, size=min(self.per_tick, len(free)), replace=False)
            self.probe_obs.append(self.sim.obs.reshape(-1, self.sim.obs.shape[-1])[pick].copy())
            self.probe_mask.append(self.sim.mask.reshape(-1, self.sim.mask.shape[-1])[pick].copy())

    def after_step(self) -> None:
        self.t += 1
        if self.t > self.T:
            raise ValueError(f"recorded more steps than the sim's max_ticks ({self.T})")
        self._snapshot(self.t)
        s = self.sim.state
        new = (s.known_culprit >= 0) & (self.culprit_tick < 0)
        if new.any():
            self.culprit_tick[new] = self.t - 1

    def finish(self) -> Trace:
        sim, s, t = self.sim, self.sim.state, self.t
        arrays = {k: v[: t + 1].copy() for k, v in self.arr.items()}
        ev = sim.log.events
        events = {c: np.array([getattr(e, c) for e in ev], np.int64) if ev else np.zeros(0, np.int64)
                  for c in EVENT_COLUMNS}
        ms = sim.log.messages
        messages = {c: np.array([getattr(m, c) for m in ms], np.int64) if ms else np.zeros(0, np.int64)
                    for c in MESSAGE_COLUMNS}
        probe_obs = np.concatenate(self.probe_obs) if self.probe_obs else np.zeros((0, sim.obs.shape[-1]), np.float32)
        probe_mask = np.concatenate(self.probe_mask) if self.probe_mask else np.zeros((0, sim.n_actions), bool)
        if len(probe_obs) > self.probe_rows:
            keep = np.sort(self.rng.choice(len(probe_obs), self.probe_rows, replace=False))
            probe_obs, probe_mask = probe_obs[keep], probe_mask[keep]
        tuning = sim.t
        return Trace(
            scenario=self.scenario, world=self.world, ticks=t, entity_kind=np.asarray(sim.w.entity_kind).copy(),
            traits=sim.w.traits.copy(), affinity=s.affinity.copy(), kin=np.asarray(sim.w.kin).copy(),
            sight_radius=sim.w.sight_radius.astype(np.float64).copy(),
            safe_distance=sim.safe_distance.astype(np.float64),
            joy_decay=float(0.5 ** (1.0 / tuning.joy_half_life)),
            learned_tick=s.learned_tick.copy(), learned_from=s.learned_from.copy(),
            known_culprit=s.known_culprit.copy(), culprit_tick=self.culprit_tick.copy(),
            death_tick=s.death_tick.copy(), killer=s.killer.copy(), events=events, messages=messages,
            probe_obs=probe_obs, probe_mask=probe_mask, personas=self.personas, persona_cols=self.persona_cols,
            **arrays,
        )


# ------------------------------------------------------------------ building blocks
@dataclass(frozen=True)
class Death:
    village: int
    victim: int
    killer: int
    step: int
    event: int


def trigger_deaths(trace: Trace) -> list[Death]:
    """The deaths the scenario causes: NPCs killed by a non-NPC actor (the player, a raider)."""
    ev, N = trace.events, trace.N
    sel = (ev["type"] == EventType.DEATH) & (ev["target"] >= 0) & (ev["target"] < N) & (ev["actor"] >= N)
    return [Death(int(b), int(v), int(k), int(t), int(i))
            for b, v, k, t, i in zip(ev["village"][sel], ev["target"][sel], ev["actor"][sel], ev["tick"][sel],
                                     ev["id"][sel], strict=True)]


def all_npc_deaths(trace: Trace) -> list[Death]:
    ev, N = trace.events, trace.N
    sel = (ev["type"] == EventType.DEATH) & (ev["target"] >= 0) & (ev["target"] < N)
    return [Death(int(b), int(v), int(k), int(t), int(i))
            for b, v, k, t, i in zip(ev["village"][sel], ev["target"][sel], ev["actor"][sel], ev["tick"][sel],
                                     ev["id"][sel], strict=True)]


def performed(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(acted, kind, target), each (T, B, N): whether NPC i performed its activity during step k, and which.

    An NPC performs in step k if it is performing after step k (it arrived or carried on) or was performing
    after step k - 1 (a busy NPC carries on; the last performing tick clears the flag at the end of the step).
    """
    perf = trace.performing
    after, before = perf[1:], perf[:-1]
    acted = after | before
    kind = np.where(after, trace.activity[1:], trace.activity[:-1])
    target = np.where(after, trace.target[1:], trace.target[:-1])
    return acted, kind, target


def close_relations(trace: Trace, b: int, v: int, threshold: float) -> np.ndarray:
    """(N,) bool: kin/spouse of v or affinity >= threshold, v excluded."""
    close = is_close(trace.affinity[b, :, v], trace.kin[b, :, v], threshold)
    close[v] = False
    return close


def _window_ok(start: int, length: int, last: int) -> bool:
    return start + length <= last


# ------------------------------------------------------------------ statistics
# the pooled rates that get a confidence interval: (numerator, denominator) counts, kept per village as well
INTERVAL_RATES: dict[str, tuple[str, str]] = {
    "mourning_rate": ("mourn_hit", "mourn_eligible"),
    "revenge_rate": ("revenge_hit", "revenge_eligible"),
    "fear_rate": ("fear_hit", "fear_eligible"),
    "fear_kept_rate": ("fear_kept_hit", "fear_kept_eligible"),
    "fear_fled_rate": ("fear_fled_hit", "fear_kept_eligible"),
    "fear_chosen_rate": ("fear_chosen_hit", "fear_kept_eligible"),
}
UNIT_COUNTS: tuple[str, ...] = tuple(dict.fromkeys(k for pair in INTERVAL_RATES.values() for k in pair))
INTERVAL_LEVEL = 0.95
INTERVAL_RESAMPLES = 2000


def bootstrap_weights(villages: int, resamples: int = INTERVAL_RESAMPLES, seed: int = 0) -> np.ndarray:
    """(resamples, villages): how many times each village is drawn in each bootstrap resample."""
    if villages == 0:
        return np.zeros((resamples, 0))
    return np.random.default_rng(seed).multinomial(villages, np.full(villages, 1 / villages), size=resamples)


def rate_draws(units: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray | None]:
    """Each INTERVAL_RATES rate, pooled over the villages as weighted by each row of `weights` (bootstrap
    resamples): {rate: (resamples,) with nan where a resample has nobody eligible}, None where no village has."""
    col = {k: j for j, k in enumerate(UNIT_COUNTS)}
    sums = weights @ units  # (resamples, counts)
    out: dict[str, np.ndarray | None] = {}
    for rate, (num, den) in INTERVAL_RATES.items():
        if units[:, col[den]].sum() <= 0:
            out[rate] = None
            continue
        d = sums[:, col[den]]
        out[rate] = np.divide(sums[:, col[num]], d, out=np.full(len(d), np.nan), where=d > 0)
    return out


def percentile_interval(draws: np.ndarray | None, level: float = INTERVAL_LEVEL) -> list[float] | None:
    """[low, high] holding `level` of the bootstrap draws (nan draws left out); None without draws."""
    if draws is None or not np.isfinite(draws).any():
        return None
    tail = 100 * (1 - level) / 2
    low, high = np.nanpercentile(draws, [tail, 100 - tail])
    return [float(low), float(high)]


def paired_intervals(a: Stats, b: Stats, resamples: int = INTERVAL_RESAMPLES, level: float = INTERVAL_LEVEL,
                     seed: int = 0) -> dict[str, list[float] | None]:
    """Bootstrap intervals of each INTERVAL_RATES rate of `a` minus `b`, where a and b hold the same villages in
    the same order (two policies on the same scenario runs and seeds): each resample draws the same villages for
    both, so what the villages share (who was killed, who saw it) cancels out of the difference."""
    if a.units.shape != b.units.shape:
        raise ValueError(f"paired_intervals: {a.units.shape[0]} villages against {b.units.shape[0]}; expected the "
                         "same villages in the same order")
    weights = bootstrap_weights(len(a.units), resamples, seed)
    da, db = rate_draws(a.units, weights), rate_draws(b.units, weights)
    return {rate: None if da[rate] is None or db[rate] is None else percentile_interval(da[rate] - db[rate], level)
            for rate in INTERVAL_RATES}


def group_intervals(groups: Sequence[Stats], resamples: int = INTERVAL_RESAMPLES, level: float = INTERVAL_LEVEL,
                    seed: int = 0) -> dict[str, list[float] | None]:
    """Bootstrap intervals of each INTERVAL_RATES rate pooled over `groups` (the worlds of one size, say),
    resampling whole groups: how the pooled rate would move on other groups drawn alike, which the villages'
    intervals (`Stats.intervals`) do not measure."""
    if not groups:
        return dict.fromkeys(INTERVAL_RATES)
    units = np.array([[g.n.get(k, 0) for k in UNIT_COUNTS] for g in groups], dtype=float)
    draws = rate_draws(units, bootstrap_weights(len(groups), resamples, seed))
    return {rate: percentile_interval(d, level) for rate, d in draws.items()}


class Stats:
    """Additive counts and samples from one or more traces; `result()` turns them into metrics."""

    def __init__(self) -> None:
        # one row per simulated village (one scenario run of one world with one seed): its UNIT_COUNTS, the
        # units a confidence interval resamples (the deaths of one village are not independent of each other)
        self.units = np.zeros((0, len(UNIT_COUNTS)))
        self.n: dict[str, float] = defaultdict(float)
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.hist: dict[str, np.ndarray] = {}
        self.checks: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def add_curve(self, name: str, values: np.ndarray) -> None:
        """Accumulate a curve (nan = not observed) as (sum, count)."""
        ok = ~np.isnan(values)
        s, c = np.where(ok, values, 0.0), ok.astype(float)
        if name in self.curves:
            s0, c0 = self.curves[name]
            n = max(len(s0), len(s))
            s = np.pad(s, (0, n - len(s))) + np.pad(s0, (0, n - len(s0)))
            c = np.pad(c, (0, n - len(c))) + np.pad(c0, (0, n - len(c0)))
        self.curves[name] = (s, c)

    def check(self, name: str, ok: bool) -> None:
        self.checks[name][0] += int(bool(ok))
        self.checks[name][1] += 1

    def __iadd__(self, other: Stats) -> Stats:
        self.units = np.concatenate([self.units, other.units])
        for k, v in other.n.items():
            self.n[k] += v
        for k, v in other.samples.items():
            self.samples[k].extend(v)
        for k, (s, c) in other.curves.items():
            if k in self.curves:
                s0, c0 = self.curves[k]
                n = max(len(s0), len(s))
                self.curves[k] = (np.pad(s0, (0, n - len(s0))) + np.pad(s, (0, n - len(s))),
                                  np.pad(c0, (0, n - len(c0))) + np.pad(c, (0, n - len(c))))
            else:
                self.curves[k] = (s.copy(), c.copy())
        for k, h in other.hist.items():
            self.hist[k] = self.hist[k] + h if k in self.hist else h.copy()
        for k, (p, t) in other.checks.items():
            self.checks[k][0] += p
            self.checks[k][1] += t
        return self

    def ratio(self, num: str, den: str) -> float | None:
        d = self.n.get(den, 0.0)
        return None if d <= 0 else float(self.n.get(num, 0.0) / d)

    def intervals(self, resamples: int = INTERVAL_RESAMPLES, level: float = INTERVAL_LEVEL,
                  seed: int = 0) -> dict[str, list[float] | None]:
        """Percentile bootstrap intervals of the INTERVAL_RATES over the villages (resampled with replacement,
        each bringing all its deaths): {rate: [low, high]}, None where nothing was eligible. A fixed seed, so the
        same runs give the same intervals. They measure the simulation's chance (which villages and seeds were
        drawn), not how the figures would move on other worlds."""
        draws = rate_draws(self.units, bootstrap_weights(len(self.units), resamples, seed))
        return {rate: percentile_interval(d, level) for rate, d in draws.items()}

    def mean(self, name: str) -> float | None:
        v = self.samples.get(name)
        return float(np.mean(v)) if v else None

    def curve(self, name: str) -> list[float | None]:
        if name not in self.curves:
            return []
        s, c = self.curves[name]
        return [None if ci == 0 else float(si / ci) for si, ci in zip(s, c, strict=True)]

    def result(self) -> dict[str, Any]:
        """The metrics (None where nothing was eligible)."""
        checks = {k: {"passed": int(p), "total": int(t)} for k, (p, t) in sorted(self.checks.items())}
        passed = sum(p for p, _ in self.checks.values())
        total = sum(t for _, t in self.checks.values())
        samples = self.samples
        out: dict[str, Any] = {
            "mourning_rate": self.ratio("mourn_hit", "mourn_eligible"),
            "mourning_latency": self.mean("mourn_latency"),
            "revenge_rate": self.ratio("revenge_hit", "revenge_eligible"),
            "revenge_accuracy": self.mean("revenge_accuracy"),
            "fear_rate": self.ratio("fear_hit", "fear_eligible"),
            "fear_kept_rate": self.ratio("fear_kept_hit", "fear_kept_eligible"),
            "fear_fled_rate": self.ratio("fear_fled_hit", "fear_kept_eligible"),
            "fear_chosen_rate": self.ratio("fear_chosen_hit", "fear_kept_eligible"),
            "fear_by_culprit_death": self.ratio("fear_hit_culprit_dead", "fear_hit"),
            "consistency": None if total == 0 else passed / total,
            "news_reach": self.mean("news_reach"),
            "news_hops": self.mean("news_hops"),
            "news_graph_distance": self.mean("news_graph_distance"),
            "chain_length": self.mean("chain_length"),
            "chain_length_max": max(samples["chain_length"]) if samples.get("chain_length") else None,
            "chain_events": self.mean("chain_events"),
            "chain_branching": self.ratio("chain_children", "chain_inner"),
            "chain_deep_share": self.ratio("chain_deep", "chain_roots"),
            "chain_deaths": self.mean("chain_deaths"),
            "news_reach_48": self.mean("news_reach_48"),
            "hearsay_accuracy": self.ratio("hearsay_right", "hearsay_believers"),
            "hearsay_culprit_share": self.ratio("hearsay_believers", "hearsay_told"),
            "hearsay_culprit_delay": self.mean("hearsay_delay"),
            "player_reactions": self.ratio("player_reaction_kinds", "player_witnessed"),
            "action_entropy": self.mean("action_entropy"),
            "diversity_empirical": self.mean("diversity_empirical"),
            "counts": {k: int(v) for k, v in sorted(self.n.items())},
            "consistency_checks": checks,
            "curves": {
                "news_reach": self.curve("news_reach"),
                "distance_witness": self.curve("distance_witness"),
                "distance_hearsay": self.curve("distance_hearsay"),
            },
            "entropy_by_trait": self.entropy_by_trait(),
        }
        out.update(remembered_result(self))
        return out

    def entropy_by_trait(self) -> dict[str, dict[str, float | None]]:
        from worlds import TRAIT_NAMES

        out: dict[str, dict[str, float | None]] = {}
        for trait in TRAIT_NAMES:
            out[trait] = {}
            for band in BANDS:
                h = self.hist.get(f"{trait}:{band}")
                out[trait][band] = None if h is None or h.sum() == 0 else entropy(h)
        return out


BANDS = ("low", "mid", "high")  # trait < 0.4, 0.4..0.6, >= 0.6


def entropy(counts: np.ndarray) -> float:
    """Shannon entropy (bits) of a histogram."""
    p = np.asarray(counts, float)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum()) if len(p) else 0.0


def tv_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total-variation distance 0.5 * |p - q|_1 over the last axis."""
    return 0.5 * np.abs(np.asarray(p, float) - np.asarray(q, float)).sum(-1)


def pairwise_tv(probs: np.ndarray) -> np.ndarray:
    """(P, G (G - 1) / 2): TV(pi_g(o), pi_h(o)) for every observation and agent pair g < h; probs (P, G, A)."""
    gi, hi = np.triu_indices(probs.shape[1], 1)
    return tv_distance(probs[:, gi], probs[:, hi])


def system_neural_diversity(probs: np.ndarray) -> float | None:
    """SND (Bettini et al. 2023) with total variation: probs (P, G, A) are G agents' action distributions on the
    same P observations; the mean over observations and agent pairs of TV(pi_g(o), pi_h(o))."""
    probs = np.asarray(probs, float)
    if probs.ndim != 3:
        raise ValueError(f"probs: expected (P, G, A), got shape {probs.shape}")
    P, G, _ = probs.shape
    if P == 0 or G < 2:
        return None
    return float(pairwise_tv(probs).mean())


# ------------------------------------------------------------------ the metrics of one trace
def mourning_ticks(trace: Trace, p: MetricParams, d: Death, acted: np.ndarray, kind: np.ndarray,
                   target: np.ndarray, st: Stats | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
    """For each close relation i of the victim of `d` whom `mourning_rate` counts as eligible: (i, L, mourn), L the
    step i learned of the death and mourn (the window's steps L + 1 .. L + mourn_window) True where i performed MOURN
    on the body or COMFORT on a bereaved close relation who knew. With `st`, counts the close, informed and
    eligible relations on the way."""
    last = trace.ticks - 1
    b, v = d.village, d.victim
    grieving = close_relations(trace, b, v, p.close_affinity)
    close = grieving & trace.alive[d.step + 1, b, : trace.N]
    knows_v = trace.learned_tick[b, :, v]
    for i in np.flatnonzero(close):
        if st is not None:
            st.n["mourn_close"] += 1
        L = int(knows_v[i])
        if L < 0:
            continue
        if st is not None:
            st.n["mourn_informed"] += 1
        if not _window_ok(L, p.mourn_window, last):
            continue
        if st is not None:
            st.n["mourn_eligible"] += 1
        steps = np.arange(L + 1, L + p.mourn_window + 1)
        a, kd, tg = acted[steps, b, i], kind[steps, b, i], target[steps, b, i]
        at_body = a & (kd == Action.MOURN) & (tg == v)
        tg_c = np.clip(tg, 0, trace.N - 1)
        consoling = (a & (kd == Action.COMFORT) & (tg >= 0) & (tg < trace.N) & grieving[tg_c]
                     & (knows_v[tg_c] >= 0) & (knows_v[tg_c] <= steps))
        yield int(i), L, at_body | consoling


def mourning_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death],
                   acted: np.ndarray, kind: np.ndarray, target: np.ndarray) -> None:
    for d in deaths:
        for _, _, mourn in mourning_ticks(trace, p, d, acted, kind, target, st):
            if mourn.sum() >= p.mourn_min_ticks:
                st.n["mourn_hit"] += 1
                st.samples["mourn_latency"].append(float(np.argmax(mourn) + 1))


def revenge_candidates(trace: Trace, p: MetricParams, d: Death) -> tuple[int, list[tuple[int, int, bool]]]:
    """The avengers of death d: how many aggressive close relations of the victim were alive after it, and for
    those who came to know the right culprit, (NPC, step it learned him, eligible): eligible when he was still
    alive then and the revenge window lies inside the episode."""
    b, v, k = d.village, d.victim, d.killer
    close = close_relations(trace, b, v, p.close_affinity) & trace.alive[d.step + 1, b, : trace.N]
    close &= trace.traits[b, :, Trait.AGGRESSION] >= p.aggressive
    informed = []
    for i in np.flatnonzero(close):
        Lc = int(trace.culprit_tick[b, i, v])
        if Lc < 0 or trace.known_culprit[b, i, v] != k:
            continue
        eligible = bool(trace.alive[Lc + 1, b, k]) and _window_ok(Lc, p.revenge_window, trace.ticks - 1)
        informed.append((int(i), Lc, eligible))
    return int(close.sum()), informed


def revenge_blow(trace: Trace, p: MetricParams, d: Death, avenger: int, learned: int) -> int | None:
    """Steps from learning the culprit (`learned`) to the avenger's first blow on him within the revenge window,
    None without one: what makes an eligible avenger a hit."""
    ev = trace.events
    hit = (ev["type"] == EventType.ATTACK) & (ev["village"] == d.village) & (ev["actor"] == avenger) & (
        ev["target"] == d.killer) & (ev["tick"] >= learned) & (ev["tick"] <= learned + p.revenge_window)
    return int(ev["tick"][hit].min() - learned) if hit.any() else None


def revenge_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death]) -> None:
    for d in deaths:
        n_close, informed = revenge_candidates(trace, p, d)
        st.n["revenge_close"] += n_close
        for i, Lc, eligible in informed:
            st.n["revenge_informed"] += 1
            if not eligible:
                continue
            st.n["revenge_eligible"] += 1
            latency = revenge_blow(trace, p, d, i, Lc)
            if latency is not None:
                st.n["revenge_hit"] += 1
                st.samples["revenge_latency"].append(float(latency))


def revenge_accuracy_stats(trace: Trace, st: Stats, deaths: list[Death]) -> None:
    """Per NPC who attacked after the village's first trigger death: the share of its attacks on a culprit,
    i.e. a non-NPC actor that had attacked or killed an NPC by then."""
    ev, N = trace.events, trace.N
    violent = (ev["actor"] >= N) & (ev["target"] >= 0) & (ev["target"] < N) & (
        (ev["type"] == EventType.ATTACK) | (ev["type"] == EventType.DEATH))
    first: dict[int, int] = {}
    for d in deaths:
        first[d.village] = min(first.get(d.village, d.step), d.step)
    npc_attacks = (ev["type"] == EventType.ATTACK) & (ev["actor"] >= 0) & (ev["actor"] < N)
    for b, t0 in first.items():
        mine = npc_attacks & (ev["village"] == b) & (ev["tick"] >= t0)
        vb = violent & (ev["village"] == b)
        for i in np.unique(ev["actor"][mine]):
            sel = mine & (ev["actor"] == i)
            on_culprit = [bool((vb & (ev["actor"] == tgt) & (ev["tick"] <= tick)).any())
                          for tgt, tick in zip(ev["target"][sel], ev["tick"][sel], strict=True)]
            st.samples["revenge_accuracy"].append(float(np.mean(on_culprit)))
            st.n["attackers"] += 1


def _distance_to(trace: Trace, b: int, i: int, k: int) -> np.ndarray:
    """(T+1,) distance of NPC i from entity k per state; inf once k is dead (no longer a threat)."""
    d = np.linalg.norm(trace.pos[:, b, i] - trace.pos[:, b, k], axis=-1).astype(float)
    return np.where(trace.alive[:, b, k], d, np.inf)


def reached_safety(trace: Trace, b: int, i: int, k: int, t_event: int, safe: float, p: MetricParams,
                   hold: int | None = None, *, threat_alive: bool = False, dist: np.ndarray | None = None) -> int:
    """First state t1 in (t_event, t_event + fear_window] from which NPC i stays at least `safe` from k for
    `hold` states (default `fear_hold`), having got there by its own movement (else -1). Own movement: at t1,
    i is farther from k than its position at the event would be, by at least `fear_own_share` of the distance
    it had to gain; a witness who stood still while the killer walked off has not fled. A dead k counts as
    safe, unless `threat_alive`: then t1 must find k alive (the witness got away while the threat lived).
    `dist`: i's distance from k per state (`_distance_to`), when the caller has it already."""
    hold = p.fear_hold if hold is None else hold
    dist = _distance_to(trace, b, i, k) if dist is None else dist
    need = safe - dist[t_event]
    for t1 in range(t_event + 1, min(t_event + p.fear_window, trace.ticks) + 1):
        if t1 + hold - 1 > trace.ticks or not (dist[t1:t1 + hold] >= safe).all():
            continue
        if not trace.alive[t1, b, k]:
            if threat_alive:
                continue
            return t1  # the threat is dead
        stayed = float(np.linalg.norm(trace.pos[t_event, b, i] - trace.pos[t1, b, k]))
        if dist[t1] - stayed >= p.fear_own_share * need:
            return t1
    return -1


def _timid_who_know(trace: Trace, p: MetricParams, d: Death) -> tuple[np.ndarray, np.ndarray]:
    """(knows, witness), each (N,) bool: the timid NPCs alive just after death d (killer and victim excluded)
    that saw it or heard of it, and which of them saw it (learned it first-hand at the death's step)."""
    b, v = d.village, d.victim
    alive_then = trace.alive[d.step + 1, b, : trace.N]
    timid = trace.traits[b, :, Trait.BRAVERY] <= p.timid
    learned, source = trace.learned_tick[b, :, v], trace.learned_from[b, :, v]
    witness = (source == SEEN) & (learned == d.step)
    hearsay = (source >= 0) & (learned >= 0)
    knows = alive_then & timid & (witness | hearsay)
    for e in (d.killer, v):
        if 0 <= e < trace.N:
            knows[e] = False
    return knows, witness & knows


def _fear_eligible(trace: Trace, p: MetricParams, d: Death, dist: np.ndarray) -> bool:
    """A timid witness counts for `fear_rate` if it was within the safe distance of the culprit just after the
    killing and the flight window fits in the episode."""
    return bool(dist[d.step + 1] < trace.safe_distance[d.village]
                and d.step + 1 + p.fear_window + p.fear_hold - 1 <= trace.ticks)


def timid_witnesses(trace: Trace, p: MetricParams, d: Death) -> Iterator[tuple[int, np.ndarray]]:
    """The timid witnesses of death d that `fear_rate` counts, with each one's distance from the culprit per
    state (inf once the culprit is dead)."""
    _, witness = _timid_who_know(trace, p, d)
    for i in np.flatnonzero(witness):
        dist = _distance_to(trace, d.village, int(i), d.killer)
        if _fear_eligible(trace, p, d, dist):
            yield int(i), dist


def fear_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death]) -> None:
    T = trace.ticks
    H = p.curve_ticks
    for d in deaths:
        b, v, k = d.village, d.victim, d.killer
        safe = trace.safe_distance[b]
        learned = trace.learned_tick[b, :, v]
        knows, witness = _timid_who_know(trace, p, d)
        for i in np.flatnonzero(knows):
            dist = _distance_to(trace, b, i, k)
            start = int(learned[i]) + 1
            curve = np.full(H + 1, np.nan)
            n_obs = max(0, min(H + 1, T + 1 - start))
            curve[:n_obs] = dist[start:start + n_obs] / trace.sight_radius[b]
            curve[np.isinf(curve)] = np.nan  # the culprit is dead: no distance to keep
            st.add_curve("distance_witness" if witness[i] else "distance_hearsay", curve)
            if not witness[i]:
                continue
            st.n["fear_witnesses"] += 1
            if not _fear_eligible(trace, p, d, dist):
                continue  # already safe when it happened, or the window does not fit
            st.n["fear_eligible"] += 1
            t1 = reached_safety(trace, b, i, k, d.step + 1, safe, p, dist=dist)
            if t1 >= 0:
                st.n["fear_hit"] += 1
                st.samples["fear_latency"].append(float(t1 - (d.step + 1)))
                # safe because the culprit died (often at the witnesses' own hands), not by a flight
                st.n["fear_hit_culprit_dead"] += int(not trace.alive[t1, b, k])
            if not kept_window_fits(trace, p, d):
                continue
            st.n["fear_kept_eligible"] += 1  # fled and kept away: the same flight, held for fear_keep ticks
            kept, chosen = kept_away(trace, p, d, i, dist)
            st.n["fear_kept_hit"] += int(kept)
            st.n["fear_chosen_hit"] += int(chosen)
            # fled from a living killer and kept away: a crowd's revenge does not make the witness's safety
            st.n["fear_fled_hit"] += int(reached_safety(trace, b, i, k, d.step + 1, safe, p, p.fear_keep,
                                                        threat_alive=True, dist=dist) >= 0)


def kept_window_fits(trace: Trace, p: MetricParams, d: Death) -> bool:
    """Whether a flight after death d, held for `fear_keep` ticks, fits in the episode (`fear_kept_rate`,
    `fear_fled_rate` and `fear_chosen_rate` count a witness only then)."""
    return d.step + 1 + p.fear_window + p.fear_keep - 1 <= trace.ticks


def kept_away(trace: Trace, p: MetricParams, d: Death, i: int, dist: np.ndarray) -> tuple[bool, bool]:
    """Whether witness i of death d (`dist`: its distance from the culprit per state) kept away for `fear_keep`
    ticks (`fear_kept_rate`), and did so after a flight it chose (`fear_chosen_rate`)."""
    b, k = d.village, d.killer
    t_kept = reached_safety(trace, b, i, k, d.step + 1, trace.safe_distance[b], p, p.fear_keep, dist=dist)
    # kept away by a flight it chose: FLEE from the culprit on the way to safety, not a walk to the tavern
    return t_kept >= 0, bool(t_kept >= 0 and chose_flight(trace, b, i, k, d.step + 1, t_kept))


def chosen_flights(trace: Trace, p: MetricParams, d: Death) -> dict[int, bool]:
    """`fear_chosen_rate`'s witnesses of death d, each with whether it kept away after a flight it chose."""
    if not kept_window_fits(trace, p, d):
        return {}
    return {i: kept_away(trace, p, d, i, dist)[1] for i, dist in timid_witnesses(trace, p, d)}


def chose_flight(trace: Trace, b: int, i: int, k: int, start: int, t1: int) -> bool:
    """NPC i's activity was FLEE with k as its target in some state of start..t1 (it chose to run from k)."""
    steps = slice(start, t1 + 1)
    return bool(((trace.activity[steps, b, i] == Action.FLEE) & (trace.target[steps, b, i] == k)).any())


def _positive_graph(trace: Trace, b: int) -> Any:
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(trace.N))
    ii, jj = np.nonzero(np.triu(trace.affinity[b] > 0, 1))
    g.add_edges_from(zip(ii.tolist(), jj.tolist(), strict=True))
    return g


def news_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death]) -> None:
    import networkx as nx

    last = trace.ticks - 1
    graphs: dict[int, Any] = {}
    for d in deaths:
        b, v, k = d.village, d.victim, d.killer
        pop = trace.alive[d.step + 1, b, : trace.N].copy()
        pop[v] = False
        if 0 <= k < trace.N:
            pop[k] = False
        if not pop.any():
            continue
        learned = trace.learned_tick[b, :, v]
        curve = np.full(p.news_horizon + 1, np.nan)
        for h in range(p.news_horizon + 1):
            if d.step + h > last:
                break
            curve[h] = float(((learned >= 0) & (learned <= d.step + h))[pop].mean())
        st.add_curve("news_reach", curve)
        observed = curve[~np.isnan(curve)]
        if len(observed):
            st.samples["news_reach"].append(float(observed[-1]))
        if d.step + p.news_reach_at <= last:
            at = (learned >= 0) & (learned <= d.step + p.news_reach_at)
            st.samples["news_reach_48"].append(float(at[pop].mean()))
        source = trace.learned_from[b, :, v]
        told = np.flatnonzero((source >= 0) & pop)
        firsthand = np.flatnonzero(source == SEEN)
        if not len(told) or not len(firsthand):
            continue
        if b not in graphs:
            graphs[b] = _positive_graph(trace, b)
        dist = nx.multi_source_dijkstra_path_length(graphs[b], set(firsthand.tolist()))
        for i in told:
            hops, j = 0, int(i)  # tellers between a first-hand knower and i
            while source[j] >= 0 and hops <= trace.N:
                j = int(source[j])
                hops += 1
            st.samples["news_hops"].append(float(hops))
            if int(i) in dist:
                st.samples["news_graph_distance"].append(float(dist[int(i)]))
            else:
                st.n["news_off_graph"] += 1


def consistency_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death],
                      acted: np.ndarray, kind: np.ndarray, target: np.ndarray) -> None:
    """World-logic rules, one check per item (docs/emergence.md lists them)."""
    ev, ms, N, T = trace.events, trace.messages, trace.N, trace.ticks
    eps = p.eps
    death_by_id = {(d.village, d.event): d for d in all_npc_deaths(trace)}
    # 1. every reaction to a death (mourning, revenge, gloating, a revenge blow: events whose cause is that
    # death) comes after the actor knew of it. Fear, defense, aggression and alarm point at the threat's latest
    # violence, which an NPC can know as a threat without knowing of the death; consoling points at the death
    # the consoler learned last (a guess, not what the comforted grieves): neither is checked here.
    about_death = ((ev["type"] == EventType.ATTACK) | ((ev["type"] == EventType.REACTION) & np.isin(
        ev["reaction"], (Reaction.MOURNING, Reaction.REVENGE, Reaction.GLOATING))))
    for b, a, tick, cause in zip(*(ev[c][about_death] for c in ("village", "actor", "tick", "cause")), strict=True):
        if not (0 <= a < N) or cause < 0 or (int(b), int(cause)) not in death_by_id:
            continue
        victim = death_by_id[(int(b), int(cause))].victim
        lt = trace.learned_tick[b, a, victim]
        st.check("reacts_after_knowing", 0 <= lt <= tick)
    # 2. mourning at the body only of a death one knows
    mourn = acted & (kind == Action.MOURN) & (target >= 0)
    for b, i, v in {(int(b), int(i), int(target[k, b, i])) for k, b, i in zip(*np.nonzero(mourn), strict=True)}:
        steps = np.flatnonzero(mourn[:, b, i] & (target[:, b, i] == v))
        lt = trace.learned_tick[b, i, v]
        st.check("mourns_after_knowing", bool(0 <= lt <= steps.min()))
    # 3. grief does not rise before knowing of a death (except on steps where another death was learned)
    learned_any = np.zeros((T + 1, trace.B, N), bool)
    lb, li, le = np.nonzero(trace.learned_tick >= 0)
    learned_any[np.minimum(trace.learned_tick[lb, li, le], T), lb, li] = True
    rise = trace.grief[1:] > trace.grief[:-1] + eps  # (T, B, N): grief rose during step k
    for d in deaths:
        b, v = d.village, d.victim
        liked = (trace.affinity[b, :, v] > 0) | trace.kin[b, :, v]
        liked[v] = False
        for i in np.flatnonzero(liked & trace.alive[d.step + 1, b, :N]):
            L = int(trace.learned_tick[b, i, v])
            end = T if L < 0 else L
            k = np.arange(d.step, end)
            st.check("no_grief_before_knowing", not (rise[k, b, i] & ~learned_any[k, b, i]).any())
    # 4. a disliked victim brings no grief, gloating (joy) instead
    for d in deaths:
        b, v = d.village, d.victim
        disliked = (trace.affinity[b, :, v] < 0) & ~trace.kin[b, :, v]
        for i in np.flatnonzero(disliked & trace.alive[d.step + 1, b, :N]):
            L = int(trace.learned_tick[b, i, v])
            if L < 0 or L >= T:
                continue
            others = (trace.learned_tick[b, i] == L) & (np.arange(trace.E) != v)
            others_liked = others[:N] & ((trace.affinity[b, i] > 0) | trace.kin[b, i])
            no_grief = others_liked.any() or trace.grief[L + 1, b, i] <= trace.grief[L, b, i] + eps
            gloats = trace.joy[L + 1, b, i] > trace.joy[L, b, i] * trace.joy_decay + eps
            st.check("gloating_not_grief", bool(no_grief and gloats))
    # 5. revenge only against a known culprit (or one's own attacker)
    revenge_ev = (ev["type"] == EventType.REACTION) & (ev["reaction"] == Reaction.REVENGE)
    revenge_blow = (ev["type"] == EventType.ATTACK) & (ev["actor"] >= 0) & (ev["actor"] < N) & (ev["cause"] >= 0)
    hits_on = (ev["type"] == EventType.ATTACK) | (ev["type"] == EventType.DEATH)
    for b, i, tgt, tick in zip(*(ev[c][revenge_ev | revenge_blow] for c in ("village", "actor", "target", "tick")),
                               strict=True):
        blamed = (trace.known_culprit[b, i] == tgt) & (trace.culprit_tick[b, i] >= 0) & (
            trace.culprit_tick[b, i] <= tick)
        attacked_me = (hits_on & (ev["village"] == b) & (ev["actor"] == tgt) & (ev["target"] == i)
                       & (ev["tick"] <= tick)).any()
        st.check("revenge_on_known_culprit", bool(blamed.any() or attacked_me))
    # 6. the dead do nothing: no events, messages, labels or activity after their death
    for d in all_npc_deaths(trace):
        b, i, t = d.village, d.victim, d.step
        acts = ((ev["village"] == b) & (ev["actor"] == i) & (ev["tick"] > t)).any()
        tells = ((ms["village"] == b) & (ms["sender"] == i) & (ms["tick"] > t)).any()
        after = slice(t + 1, None)
        shows = (trace.reaction[after, b, i] != 0).any() or trace.busy[after, b, i].any() or acted[
            t + 1:, b, i].any()
        st.check("dead_do_nothing", not (acts or tells or shows))


def cause_parents(trace: Trace, rows: np.ndarray) -> dict[int, int]:
    """{event id: the event it follows} for the log rows of one village: its cause link, and for a death by an
    NPC's blow (which carries no cause) that blow."""
    ev, N = trace.events, trace.N
    parent: dict[int, int] = {}
    for r in rows:
        if ev["cause"][r] >= 0:
            parent[int(ev["id"][r])] = int(ev["cause"][r])
        elif ev["type"][r] == EventType.DEATH and 0 <= ev["actor"][r] < N:
            blow = rows[(ev["type"][rows] == EventType.ATTACK) & (ev["actor"][rows] == ev["actor"][r])
                        & (ev["target"][rows] == ev["target"][r]) & (ev["tick"][rows] == ev["tick"][r])]
            if len(blow):
                parent[int(ev["id"][r])] = int(ev["id"][blow[0]])
    return parent


def chain_stats(trace: Trace, st: Stats, deaths: list[Death]) -> dict[tuple[int, int], dict[int, int]]:
    """Causal chains from each trigger death along the log's cause links (a death by an NPC's blow is linked
    to that blow); depth 1 = a direct reaction. Returns {(village, trigger death event id): {event id: depth}}."""
    ev = trace.events
    by_village: dict[int, tuple[np.ndarray, dict[int, int]]] = {}
    trees: dict[tuple[int, int], dict[int, int]] = {}
    for d in deaths:
        b = d.village
        if b not in by_village:
            village_rows = np.flatnonzero(ev["village"] == b)
            by_village[b] = village_rows, cause_parents(trace, village_rows)
        rows, parent = by_village[b]
        ids = ev["id"][rows]
        depth: dict[int, int] = {d.event: 0}
        for e in sorted(ids.tolist()):
            chain, j = [], e
            while j in parent and j not in depth and len(chain) <= len(ids):
                chain.append(j)
                j = parent[j]
            if j in depth:
                for n_up, node in enumerate(reversed(chain), 1):
                    depth[node] = depth[j] + n_up
        below = [v for k, v in depth.items() if k != d.event]
        st.samples["chain_length"].append(float(max(below, default=0)))
        st.samples["chain_events"].append(float(len(below)))
        # branching: children per inner node of the tree (events below the root / events with a child)
        inner = {parent[e] for e in depth if e != d.event and e in parent}
        st.n["chain_children"] += len(below)
        st.n["chain_inner"] += len(inner)
        st.n["chain_roots"] += 1
        st.n["chain_deep"] += int(max(below, default=0) >= 2)
        tree_rows = rows[np.isin(ids, np.fromiter(depth, np.int64, len(depth)))]
        st.samples["chain_deaths"].append(float(((ev["type"][tree_rows] == EventType.DEATH)
                                                 & (ev["id"][tree_rows] != d.event)).sum()))
        trees[(b, d.event)] = depth
    return trees


def hearsay_stats(trace: Trace, st: Stats, deaths: list[Death]) -> None:
    """Who learned the culprit without witnessing the killing, and whether the rumour named the right one."""
    for d in deaths:
        b, v, k = d.village, d.victim, d.killer
        learned, source = trace.learned_tick[b, :, v], trace.learned_from[b, :, v]
        witness = (source == SEEN) & (learned == d.step)
        told = trace.alive[d.step + 1, b, : trace.N] & ~witness & (learned >= 0)
        told[v] = False
        if 0 <= k < trace.N:
            told[k] = False
        culprit = trace.known_culprit[b, :, v]
        believers = told & (culprit >= 0)
        st.n["hearsay_told"] += int(told.sum())
        st.n["hearsay_believers"] += int(believers.sum())
        st.n["hearsay_right"] += int((believers & (culprit == k)).sum())
        for i in np.flatnonzero(believers):
            when = int(trace.culprit_tick[b, i, v])
            if when >= 0:
                st.samples["hearsay_delay"].append(float(max(0, when - int(learned[i]))))


def player_reaction_stats(trace: Trace, p: MetricParams, st: Stats, deaths: list[Death],
                          trees: dict[tuple[int, int], dict[int, int]]) -> None:
    """Distinct reaction labels each NPC shows about a killing by the player, in the day after it."""
    ev, N = trace.events, trace.N
    reactions = ev["type"] == EventType.REACTION
    for d in deaths:
        b, v, k = d.village, d.victim, d.killer
        if not (0 <= k < trace.E) or trace.entity_kind[k] != EntityKind.PLAYER:
            continue
        in_tree = np.fromiter(trees.get((b, d.event), {}), np.int64)
        sel = (reactions & (ev["village"] == b) & (ev["tick"] >= d.step) & (ev["tick"] < d.step + p.player_day)
               & ((ev["target"] == k) | np.isin(ev["id"], in_tree)))
        alive = trace.alive[d.step + 1, b, :N].copy()
        alive[v] = False
        st.n["player_witnessed"] += int(alive.sum())
        kinds = {(int(a), int(r)) for a, r in zip(ev["actor"][sel], ev["reaction"][sel], strict=True)
                 if 0 <= a < N and alive[a] and r != Reaction.NONE}
        st.n["player_reaction_kinds"] += len(kinds)


# ------------------------------------------------------------------ NPCs who remember the player
ABOUT_PLAYER = (Reaction.FEAR, Reaction.REVENGE, Reaction.DEFENSE)  # labels whose target is the threat
REMEMBERED_KEYS: tuple[str, ...] = ("player_remembered", "player_reacted_unknowing", "player_remembered_gap",
                                    "player_known_share")


def player_blamers(trace: Trace, b: int, player: int, before: int) -> np.ndarray:
    """(N,) bool: NPCs of village b who, before step `before`, came to believe the player killed someone."""
    blames = (trace.known_culprit[b] == player) & (trace.culprit_tick[b] >= 0) & (trace.culprit_tick[b] < before)
    return blames.any(1)


def reacted_to_player(trace: Trace, b: int, player: int, start: int, stop: int) -> np.ndarray:
    """(N,) bool: NPCs of village b who start a reaction about the player in steps start .. stop - 1: FEAR,
    REVENGE or DEFENSE aimed at the player, or ALARM whose cause is the player's violence."""
    ev, N = trace.events, trace.N
    here = ev["village"] == b
    by_player = set(ev["id"][here & (ev["actor"] == player)].tolist())
    sel = here & (ev["type"] == EventType.REACTION) & (ev["tick"] >= start) & (ev["tick"] < stop) & (
        ev["actor"] >= 0) & (ev["actor"] < N)
    aimed = np.isin(ev["reaction"], ABOUT_PLAYER) & (ev["target"] == player)
    alarm = (ev["reaction"] == Reaction.ALARM) & np.isin(ev["cause"], np.fromiter(by_player, np.int64))
    out = np.zeros(N, bool)
    out[ev["actor"][sel & (aimed | alarm)]] = True
    return out


def remembered_stats(trace: Trace, p: MetricParams, st: Stats) -> None:
    """At the player's return R: the living NPCs who blame the player for a killing and those who do not, and
    in each group who reacts about the player in the W steps from R (docs/emergence.md). Adds nothing to a
    trace without a return (or whose episode ends before the window does)."""
    R, W = trace.return_tick, p.remember_window
    players = np.flatnonzero(trace.entity_kind == EntityKind.PLAYER)
    if R < 0 or trace.ticks < R + W or not len(players):
        return
    player = int(players[0])
    ev = trace.events
    for b in range(trace.B):
        if not trace.alive[R, b, player]:
            st.n["remember_player_dead"] += 1  # killed before his return (revenge on day 1): no return
            continue
        alive = trace.alive[R, b, : trace.N]
        knew = alive & player_blamers(trace, b, player, R)
        unknowing = alive & ~knew
        reacted = reacted_to_player(trace, b, player, R, R + W)
        st.n["remember_villages"] += 1
        st.n["remember_knew"] += int(knew.sum())
        st.n["remember_knew_reacted"] += int((knew & reacted).sum())
        st.n["remember_unknowing"] += int(unknowing.sum())
        st.n["remember_unknowing_reacted"] += int((unknowing & reacted).sum())
        acts = (ev["village"] == b) & (ev["actor"] == player) & (ev["tick"] >= R)
        st.n["remember_talks"] += int((acts & (ev["type"] == EventType.TALK)).sum())
        st.n["remember_gifts"] += int((acts & (ev["type"] == EventType.GIFT)).sum())
        st.n["remember_strikes"] += int((acts & (ev["type"] == EventType.ATTACK)).sum())


def remembered_result(st: Stats) -> dict[str, float | None]:
    """player_remembered and its companions; {} when no run had a return (the keys are then absent)."""
    if "remember_villages" not in st.n and "remember_player_dead" not in st.n:
        return {}
    knew = st.ratio("remember_knew_reacted", "remember_knew")
    unknowing = st.ratio("remember_unknowing_reacted", "remember_unknowing")
    population = st.n.get("remember_knew", 0.0) + st.n.get("remember_unknowing", 0.0)
    return {
        "player_remembered": knew,
        "player_reacted_unknowing": unknowing,
        "player_remembered_gap": None if knew is None or unknowing is None else knew - unknowing,
        "player_known_share": None if population <= 0 else float(st.n.get("remember_knew", 0.0) / population),
    }


def action_stats(trace: Trace, st: Stats) -> None:
    """Histograms of the macro-actions NPCs chose when free, per personality band, and per-NPC diversity."""

    N = trace.N
    free = trace.alive[:-1, :, :N] & ~trace.busy[:-1]  # (T, B, N) chose an action at step k
    started = trace.activity[1:].astype(np.int64)
    per_npc = np.zeros((trace.B, N, N_KINDS))
    kk, bb, ii = np.nonzero(free)
    np.add.at(per_npc, (bb, ii, started[kk, bb, ii]), 1)
    total = per_npc.sum((0, 1))
    if total.sum() > 0:
        st.samples["action_entropy"].append(entropy(total))
    for trait in Trait:
        value = trace.traits[:, :, trait]
        band = np.where(value < 0.4, 0, np.where(value < 0.6, 1, 2))
        for k, name in enumerate(BANDS):
            h = per_npc[band == k].sum(0)
            key = f"{trait.name.lower()}:{name}"
            st.hist[key] = st.hist[key] + h if key in st.hist else h
    # empirical diversity: NPCs of one world differ by personality; pool each NPC's histogram over villages
    npc_hist = per_npc.sum(0)
    rows = npc_hist.sum(1) > 0
    if rows.sum() >= 2:
        dist = npc_hist[rows] / npc_hist[rows].sum(1, keepdims=True)
        gi, hi = np.triu_indices(len(dist), 1)
        st.samples["diversity_empirical"].append(float(tv_distance(dist[gi], dist[hi]).mean()))


def trace_stats(trace: Trace, params: MetricParams | None = None) -> Stats:
    """All the additive statistics of one trace."""
    p = params or MetricParams()
    st = Stats()
    deaths = trigger_deaths(trace)
    st.n["deaths"] += len(deaths)
    st.n["villages"] += trace.B
    acted, kind, target = performed(trace)
    units = np.zeros((trace.B, len(UNIT_COUNTS)))
    for b in range(trace.B):  # the rates with an interval, village by village (the units it resamples)
        village = Stats()
        mine = [d for d in deaths if d.village == b]
        mourning_stats(trace, p, village, mine, acted, kind, target)
        revenge_stats(trace, p, village, mine)
        fear_stats(trace, p, village, mine)
        units[b] = [village.n.get(k, 0.0) for k in UNIT_COUNTS]
        st += village
    st.units = units
    revenge_accuracy_stats(trace, st, deaths)
    news_stats(trace, p, st, deaths)
    consistency_stats(trace, p, st, deaths, acted, kind, target)
    trees = chain_stats(trace, st, deaths)
    hearsay_stats(trace, st, deaths)
    player_reaction_stats(trace, p, st, deaths, trees)
    remembered_stats(trace, p, st)
    action_stats(trace, st)
    return st


def summarize(traces: list[Trace], params: MetricParams | None = None) -> dict[str, Any]:
    """Metrics pooled over traces (rates are pooled ratios, not means of per-trace rates)."""
    total = Stats()
    for tr in traces:
        total += trace_stats(tr, params)
    return total.result()


__all__ = [
    "MetricParams", "Trace", "TraceRecorder", "Stats", "Death", "trigger_deaths", "performed", "trace_stats",
    "summarize", "system_neural_diversity", "pairwise_tv", "tv_distance", "entropy",
]
