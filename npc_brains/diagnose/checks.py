"""The checks of `village diagnose`: each reads a Run's series and returns a Finding (numpy only).

A check whose keys never appear in the log returns SKIP (older runs, `--env` runs, other learners). Formulas,
thresholds and their sources are in docs/diagnose.md; the constants below are those thresholds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from npc_brains.diagnose.logs import Run

OK, WARN, FAIL, SKIP = "OK", "WARN", "FAIL", "SKIP"
SEVERITY = {FAIL: 0, WARN: 1, OK: 2, SKIP: 3}

# thresholds (docs/diagnose.md cites where each comes from)
KL_TARGET = 0.02  # upper end of the usual PPO target KL (0.01-0.02)
KL_LIMIT = 1.5 * KL_TARGET  # Schulman et al. 2017's adaptive-KL rule: d > 1.5 d_targ is too far
KL_JUMP = 1.0  # nats in one update: the policy became a different one
SPIKE_SIGMA = 3.0  # a spike: over the rolling mean + 3 rolling standard deviations
SPIKE_RATIO = 3.0  # ... and over 3x the rolling mean (so a quiet, near-constant series does not spike on noise)
ROLL = 10  # rolling window (updates)
CLIPFRAC_WARN, CLIPFRAC_FAIL = 0.2, 0.3
EV_FAIL = 0.0
ENTROPY_WARN, ENTROPY_FAIL = 0.1, 0.03  # entropy / log(valid actions)
ENTROPY_DROP = 0.8  # share of the starting (normalised) entropy lost within the first half of the run
GRAD_SPIKE_CLIP = 100.0  # grad norm over 100x the clip threshold
LR_HIGH, LR_LOW = 3e-3, 1e-5  # 10x above / 30x below the usual Adam PPO rate 3e-4
RETURN_SCALE_WARN, RETURN_SCALE_FAIL = 100.0, 1000.0  # mean |value target|
DRAWDOWN_MAX = 0.5  # share of the progress lost (the stability monitor's default)
OSCILLATION_MAX = 0.3  # the seed's std(returns) / mean(returns)
HF_SHARE_MAX = 0.5  # share of the detrended curve's energy at periods of HF_PERIOD epochs or shorter
HF_PERIOD = 8
ACF_PEAK_MIN = 0.5  # an autocorrelation peak at a lag >= 2 over this means a period
HOMOGENEOUS_KL = 1e-3  # nats: personalities choose the same distribution on the same observations
HOMOGENEOUS_MIN_UPDATES = 100  # "never differentiated" needs a long run (FiLM starts at zero: no difference)
MANY_AGENTS = 8  # the seed: above 8 agents policies converge unless the constraint is raised
DEAD_ALIVE = 0.05  # an agent slot alive in under 5% of its rows
IDLE_ENTROPY = 0.05  # an agent whose chosen actions have under 0.05 of the population's entropy spread
CONFLICT_MIN = 0.25  # the seed's gradient conflict ||sum g_i|| / sum ||g_i||
COOPERATION_MIN = 0.15  # the seed's cooperation efficiency
ROLLBACKS_FAIL = 3
REPLAY_OLD_WARN, REPLAY_OLD_FAIL = 0.3, 0.5  # the seed's 7:3 new:old
REPLAY_AGE_WARN = 100.0  # mean age (updates) of the sampled transitions
Q_BLOWUP = 10.0  # |Q| over 10x the largest return the run has seen


@dataclass
class Finding:
    check: str
    title: str
    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    updates: list[int] = field(default_factory=list)  # flagged updates
    formula: str = ""
    threshold: str = ""
    fix: str = ""
    keys: list[str] = field(default_factory=list)  # the series the plot shows
    rank: int = 0  # causes before symptoms at equal severity

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    a = abs(x)
    if a != 0 and (a >= 1e4 or a < 1e-3):
        return f"{x:.3g}"
    return f"{x:.4g}"


def _pairs(xs: np.ndarray, ys: np.ndarray, limit: int = 5) -> str:
    """'update 12: 0.31, update 13: 0.44' for the first `limit` points (and how many more)."""
    parts = [f"update {int(u)}: {_fmt(float(v))}" for u, v in zip(xs[:limit], ys[:limit], strict=False)]
    more = len(xs) - limit
    return ", ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def warmup(n: int) -> int:
    """Updates skipped at the start for checks that need a trained critic or policy."""
    return min(max(3, n // 10), max(n - 1, 0))


def spikes(values: np.ndarray, window: int = ROLL, sigma: float = SPIKE_SIGMA,
           ratio: float = SPIKE_RATIO) -> np.ndarray:
    """Indices i where values[i] > mean + sigma * std and > ratio * mean of the `window` values before it."""
    v = np.asarray(values, np.float64)
    out = []
    for i in range(window, v.size):
        ref = v[i - window:i]
        mean, std = float(ref.mean()), float(ref.std())
        if v[i] > mean + sigma * std and v[i] > ratio * abs(mean):
            out.append(i)
    return np.array(out, np.int64)


def high_frequency_share(curve: np.ndarray) -> float:
    """Energy of the linearly detrended curve at periods of HF_PERIOD samples or shorter / its total energy."""
    c = np.asarray(curve, np.float64)
    if c.size < 8:
        return float("nan")
    t = np.arange(c.size)
    detrended = c - np.polyval(np.polyfit(t, c, 1), t)
    power = np.abs(np.fft.rfft(detrended)) ** 2
    freq = np.fft.rfftfreq(c.size)[1:]  # cycles per sample, the mean dropped
    power = power[1:]
    total = float(power.sum())
    if total <= 1e-12 * max(float((c ** 2).sum()), 1e-12):
        return 0.0
    return float(power[freq >= 1.0 / HF_PERIOD - 1e-12].sum() / total)


def autocorrelation_peak(curve: np.ndarray) -> tuple[int, float]:
    """(lag, value) of the highest autocorrelation of the detrended curve at lags 2 .. n/2 that is a local
    maximum; (0, nan) when there is none."""
    c = np.asarray(curve, np.float64)
    if c.size < 8:
        return 0, float("nan")
    t = np.arange(c.size)
    d = c - np.polyval(np.polyfit(t, c, 1), t)
    var = float((d ** 2).sum())
    if var <= 0:
        return 0, float("nan")
    acf = np.array([float((d[:-k] * d[k:]).sum()) / var for k in range(1, c.size // 2 + 1)])
    best_lag, best = 0, float("nan")
    for k in range(2, acf.size):  # acf[k - 1] is lag k; a peak needs both neighbours
        if acf[k - 1] > acf[k - 2] and acf[k - 1] >= acf[k] and (math.isnan(best) or acf[k - 1] > best):
            best_lag, best = k, float(acf[k - 1])
    return best_lag, best


def _skip(check: str, title: str, why: str, **kw: Any) -> Finding:
    return Finding(check, title, SKIP, why, **kw)


# ---------------------------------------------------------------------------------------------- checks
NON_FINITE_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm", "loss", "q_mean", "q_max",
                   "td_error", "critic_loss", "actor_loss")


def check_non_finite(run: Run) -> Finding:
    meta = dict(formula="any loss-side value (policy_loss, value_loss, entropy, approx_kl, grad_norm, q_*, td_error)"
                        " is NaN, infinite or null on a row where the key is logged",
                threshold="none may occur", keys=["value_loss", "grad_norm"], rank=0,
                fix="Find the first update named here and lower the learning rate or the reward scale; check the "
                    "rewards and observations for NaN/inf (an environment bug); keep gradient clipping on "
                    "(--max-grad-norm) and the value normalisation (--value-norm).")
    bad: list[tuple[int, str]] = []
    seen = False
    for i, r in enumerate(run.rows):
        for k in NON_FINITE_KEYS:
            if k not in r:
                continue
            seen = True
            v = r[k]
            if v is None or (isinstance(v, (int, float)) and not math.isfinite(v)) or \
                    (isinstance(v, (int, float)) and abs(v) > 1e30):
                bad.append((int(r.get("update", i + 1)), k))
    if not seen:
        return _skip("non_finite", "Non-finite values", "no loss keys logged", **meta)
    if not bad:
        return Finding("non_finite", "Non-finite values", OK, "every logged loss value is finite", **meta)
    first = bad[0]
    ev = [f"first at update {first[0]} ({first[1]})",
          "rows: " + ", ".join(f"update {u} {k}" for u, k in bad[:6]) + (f" (+{len(bad) - 6} more)" if len(bad) > 6
                                                                         else "")]
    return Finding("non_finite", "Non-finite values", FAIL,
                   f"{len(bad)} non-finite value(s), first at update {first[0]} ({first[1]})", evidence=ev,
                   updates=sorted({u for u, _ in bad}), **meta)


def check_kl(run: Run) -> Finding:
    meta = dict(formula="approx_kl = mean((r - 1) - log r) per update; share of updates over 1.5 x target; spikes: "
                        f"approx_kl > rolling mean + {SPIKE_SIGMA:g} sigma and > {SPIKE_RATIO:g} x mean over the "
                        f"previous {ROLL} updates",
                threshold=f"FAIL when the median exceeds {KL_LIMIT:g} (1.5 x {KL_TARGET:g}), over half the updates "
                          f"do, or one update's KL exceeds {KL_JUMP:g} nat; WARN when over 10% of updates exceed "
                          f"{KL_LIMIT:g} or a spike occurs",
                keys=["approx_kl"], rank=6,
                fix="Each update moves the policy too far: lower --lr (halve it), use fewer --epochs, or tighten "
                    "--clip; a spike after a rollback or a schedule change is a sign the step size is at its edge.")
    x, y = run.series("approx_kl")
    if y.size < 3:
        return _skip("kl", "Policy KL per update", "approx_kl not logged", **meta)
    w = warmup(y.size)
    xs, ys = x[w:], y[w:]
    over = ys > KL_LIMIT
    spk = spikes(y)
    med = float(np.median(ys))
    ev = [f"median {_fmt(med)}, max {_fmt(float(ys.max()))} at update {int(xs[ys.argmax()])}",
          f"{int(over.sum())} of {ys.size} updates over {KL_LIMIT:g}"]
    if over.any():
        ev.append("over: " + _pairs(xs[over], ys[over]))
    if spk.size:
        ev.append("spikes: " + _pairs(x[spk], y[spk]))
    flagged = sorted(set(xs[over].tolist()) | set(x[spk].tolist()))
    if med > KL_LIMIT or over.mean() > 0.5 or float(ys.max()) > KL_JUMP:
        what = (f"median {_fmt(med)} against {KL_LIMIT:g}" if med > KL_LIMIT or over.mean() > 0.5
                else f"{_fmt(float(ys.max()))} nats at update {int(xs[ys.argmax()])}, {int(over.sum())} updates over "
                     f"{KL_LIMIT:g}")
        return Finding("kl", "Policy KL per update", FAIL, f"policy KL too large: {what}", ev, flagged, **meta)
    if over.mean() > 0.1 or spk.size:
        what = f"{int(over.sum())} updates over {KL_LIMIT:g}" if over.mean() > 0.1 else f"{spk.size} KL spike(s)"
        return Finding("kl", "Policy KL per update", WARN, what, ev, flagged, **meta)
    return Finding("kl", "Policy KL per update", OK, f"median {_fmt(med)} (limit {KL_LIMIT:g})", ev, **meta)


def check_clipfrac(run: Run) -> Finding:
    meta = dict(formula="clipfrac = share of rows with |r - 1| > clip, median after warm-up",
                threshold=f"WARN over {CLIPFRAC_WARN:g}, FAIL over {CLIPFRAC_FAIL:g}", keys=["clipfrac"], rank=7,
                fix="Too many samples hit the clip, so the surrogate's gradient comes from few rows: lower --lr or "
                    "--epochs; with stale (double-buffered) rows keep --proximal-clip on.")
    x, y = run.series("clipfrac")
    if y.size < 3:
        return _skip("clipfrac", "Clip fraction", "clipfrac not logged", **meta)
    w = warmup(y.size)
    xs, ys = x[w:], y[w:]
    med = float(np.median(ys))
    over = ys > CLIPFRAC_WARN
    ev = [f"median {_fmt(med)}, max {_fmt(float(ys.max()))} at update {int(xs[ys.argmax()])}",
          f"{int(over.sum())} of {ys.size} updates over {CLIPFRAC_WARN:g}"]
    status = FAIL if med > CLIPFRAC_FAIL else WARN if med > CLIPFRAC_WARN else OK
    summary = f"median clip fraction {_fmt(med)}" + ("" if status == OK else f" (over {CLIPFRAC_WARN:g})")
    return Finding("clipfrac", "Clip fraction", status, summary, ev, xs[over].tolist() if status != OK else [],
                   **meta)


def check_explained_variance(run: Run) -> Finding:
    meta = dict(formula="explained_variance = 1 - Var(returns - values) / Var(returns); median over the second "
                        "half of the run, and the share of post-warm-up updates below 0",
                threshold=f"FAIL when the second half's median < {EV_FAIL:g}; WARN when over a quarter of the "
                          "post-warm-up updates are below 0",
                keys=["explained_variance"], rank=10,
                fix="The critic predicts the returns worse than their mean: check the reward scale (value targets "
                    "of thousands), keep --value-norm on, lower --lr or raise --vf-coef; a central critic "
                    "(--central-critic) needs the global state to be informative.")
    x, y = run.series("explained_variance")
    if y.size < 4:
        return _skip("explained_variance", "Explained variance", "explained_variance not logged", **meta)
    w = warmup(y.size)
    xs, ys = x[w:], y[w:]
    late = y[y.size // 2:]
    med = float(np.median(late))
    neg = ys < 0
    ev = [f"median of the second half {_fmt(med)}; {int(neg.sum())} of {ys.size} post-warm-up updates below 0"]
    if neg.any():
        ev.append("below 0: " + _pairs(xs[neg], ys[neg]))
    if med < EV_FAIL:
        return Finding("explained_variance", "Explained variance", FAIL,
                       f"critic worse than a constant: median explained variance {_fmt(med)}", ev,
                       xs[neg].tolist(), **meta)
    if neg.mean() > 0.25:
        return Finding("explained_variance", "Explained variance", WARN,
                       f"{int(neg.sum())} updates with negative explained variance", ev, xs[neg].tolist(), **meta)
    return Finding("explained_variance", "Explained variance", OK, f"second-half median {_fmt(med)}", ev, **meta)


def _valid_actions(run: Run) -> tuple[float, str]:
    _, va = run.series("valid_actions")
    if va.size:
        return float(np.median(va)), "valid_actions (mean valid actions per living row)"
    n = run.env.get("n_actions")
    if n:
        return float(n), "n_actions (no action-mask count logged: every action counted)"
    return float("nan"), ""


def check_entropy(run: Run) -> Finding:
    meta = dict(formula="H_norm = entropy / log(valid actions); collapse when H_norm falls under the limit, or when "
                        f"it loses over {ENTROPY_DROP:.0%} of its starting value within the first half of the run",
                threshold=f"FAIL when H_norm < {ENTROPY_FAIL:g} after warm-up, or the early drop happens and "
                          f"H_norm < {ENTROPY_WARN:g}; WARN when H_norm < {ENTROPY_WARN:g} or the early drop happens",
                keys=["entropy"], rank=3,
                fix="The policy became deterministic before it learned: raise --ent-coef (0.01 is the usual "
                    "start), keep the entropy schedule's floor (--ent-final-frac), use a larger --hidden, or lower "
                    "--lr.")
    x, y = run.series("entropy")
    if y.size < 4:
        return _skip("entropy", "Entropy collapse", "entropy not logged", **meta)
    n_valid, source = _valid_actions(run)
    if not (n_valid > 1):
        return _skip("entropy", "Entropy collapse", "number of actions unknown (no valid_actions key, no checkpoint)",
                     **meta)
    h = y / math.log(n_valid)
    w = warmup(y.size)
    start = float(np.mean(h[: max(1, min(3, h.size))]))
    half = h[: max(h.size // 2, 1)]
    low_i = int(np.argmin(half))
    dropped = start > 0 and float(half[low_i]) < (1 - ENTROPY_DROP) * start
    post = h[w:]
    low = float(post.min())
    at = int(x[w:][post.argmin()])
    ent_coef = run.setting("ent_coef")
    ev = [f"normalised entropy starts at {_fmt(start)}, lowest {_fmt(low)} at update {at}, ends at "
          f"{_fmt(float(h[-1]))} (log of {_fmt(n_valid)} from {source})"]
    if dropped:
        ev.append(f"lost {1 - float(half[low_i]) / start:.0%} of it by update {int(x[low_i])} (first half)")
    if ent_coef is not None:
        ev.append(f"entropy coefficient {_fmt(float(ent_coef))}")
    if not run.has("valid_actions"):
        # log(all actions) overstates the choice where most actions are masked: only the relative drop is judged
        ev.append("no valid-action count logged: only the relative drop is judged")
        if dropped:
            return Finding("entropy", "Entropy collapse", WARN,
                           f"entropy fell {1 - float(half[low_i]) / start:.0%} by update {int(x[low_i])}", ev,
                           [int(x[low_i])], **meta)
        return Finding("entropy", "Entropy collapse", OK, f"lowest H_norm {_fmt(low)} (of all actions)", ev, **meta)
    flagged = x[w:][post < ENTROPY_WARN].tolist()
    if low < ENTROPY_FAIL or (dropped and low < ENTROPY_WARN):
        return Finding("entropy", "Entropy collapse", FAIL, f"entropy collapsed: H_norm {_fmt(low)} at update {at}",
                       ev, flagged, **meta)
    if low < ENTROPY_WARN or dropped:
        return Finding("entropy", "Entropy collapse", WARN,
                       f"entropy low or falling fast: H_norm {_fmt(low)} at update {at}", ev,
                       flagged or [int(x[low_i])], **meta)
    return Finding("entropy", "Entropy collapse", OK, f"lowest H_norm {_fmt(low)}", ev, **meta)


def check_value_spikes(run: Run) -> Finding:
    meta = dict(formula=f"value_loss or adv_std (raw advantages) > rolling mean + {SPIKE_SIGMA:g} sigma and > "
                        f"{SPIKE_RATIO:g} x the rolling mean of the previous {ROLL} updates",
                threshold="WARN on 1-2 spikes, FAIL on 3 or more", keys=["value_loss", "adv_std"], rank=9,
                fix="A spike in the critic's loss or the advantages' scale means the value targets jumped (a rare "
                    "large reward, a reward-scale change, a rollback): clip or rescale the rewards, keep "
                    "--value-norm and --value-clip on, and lower --lr if they recur.")
    found = False
    ev: list[str] = []
    flagged: set[int] = set()
    for key in ("value_loss", "adv_std"):
        x, y = run.series(key)
        if y.size < ROLL + 1:
            continue
        found = True
        s = spikes(y)
        if s.size:
            ev.append(f"{key} spikes: " + _pairs(x[s], y[s]))
            flagged |= set(x[s].tolist())
    if not found:
        return _skip("value_spikes", "Value-loss and advantage spikes",
                     f"value_loss / adv_std logged on fewer than {ROLL + 1} updates", **meta)
    n = len(flagged)
    status = FAIL if n >= 3 else WARN if n else OK
    summary = f"{n} update(s) with a value-loss or advantage spike" if n else "no spikes"
    return Finding("value_spikes", "Value-loss and advantage spikes", status, summary, ev, sorted(flagged), **meta)


def check_grad_norm(run: Run) -> Finding:
    clip = float(run.setting("max_grad_norm", 0.5) or 0.5)
    meta = dict(formula=f"grad_norm (before clipping) spikes: > rolling mean + {SPIKE_SIGMA:g} sigma and > "
                        f"{SPIKE_RATIO:g} x mean; grad_norm > {GRAD_SPIKE_CLIP:g} x max_grad_norm; grad_clipped = "
                        "share of gradient steps rescaled by the clip",
                threshold=f"FAIL when any update's norm exceeds {GRAD_SPIKE_CLIP:g} x max_grad_norm or 3+ spikes; "
                          "WARN on 1-2 spikes, or when every step is clipped at over 10 x the threshold",
                keys=["grad_norm"], rank=8,
                fix="Exploding gradients: lower --lr, check the reward scale and the value normalisation; keep "
                    "--max-grad-norm (0.5) on. Clipping every step is normal for small networks, but at 10x the "
                    "threshold the clip, not the learning rate, sets the step size.")
    x, y = run.series("grad_norm")
    if y.size < 3:
        return _skip("grad_norm", "Gradient norm", "grad_norm not logged", **meta)
    s = spikes(y)
    huge = y > GRAD_SPIKE_CLIP * clip
    med = float(np.median(y))
    ev = [f"median {_fmt(med)}, max {_fmt(float(y.max()))} at update {int(x[y.argmax()])}, clip {_fmt(clip)}"]
    _, share = run.series("grad_clipped")
    if share.size:
        ev.append(f"share of clipped steps: mean {float(share.mean()):.0%}")
    if s.size:
        ev.append("spikes: " + _pairs(x[s], y[s]))
    if huge.any():
        ev.append(f"over {GRAD_SPIKE_CLIP:g} x clip: " + _pairs(x[huge], y[huge]))
    flagged = sorted(set(x[s].tolist()) | set(x[huge].tolist()))
    if huge.any() or s.size >= 3:
        return Finding("grad_norm", "Gradient norm", FAIL,
                       f"exploding gradients: max norm {_fmt(float(y.max()))} ({_fmt(float(y.max()) / clip)} x clip)",
                       ev, flagged, **meta)
    always = share.size > 0 and float(share.mean()) > 0.9 and med > 10 * clip
    if s.size or always:
        what = f"{s.size} gradient spike(s)" if s.size else f"every step clipped at median {_fmt(med / clip)} x"
        return Finding("grad_norm", "Gradient norm", WARN, what, ev, flagged, **meta)
    return Finding("grad_norm", "Gradient norm", OK, f"median norm {_fmt(med)}", ev, **meta)


def check_learning_rate(run: Run) -> Finding:
    meta = dict(formula=f"lr (this update's, after the schedule) against [{LR_LOW:g}, {LR_HIGH:g}]; a high rate "
                        f"counts as the cause when the policy moves too far (median approx_kl > {KL_LIMIT:g}, "
                        f"median clipfrac > {CLIPFRAC_WARN:g}) or entropy collapses (the kl or entropy check FAILs); "
                        "a low rate when the policy "
                        "barely moves (median approx_kl < 1e-6) and the return does not improve",
                threshold=f"FAIL: lr > {LR_HIGH:g} with a symptom; WARN: lr > {LR_HIGH:g} alone, or lr < {LR_LOW:g}, "
                          "or the policy does not move",
                keys=["lr"], rank=1,
                fix="Adam on PPO works at 3e-4 for networks of this size (--lr 3e-4, decayed by the cosine "
                    "schedule); go down by factors of 3 when KL and clip fraction are high, up when they are "
                    "near 0 and the return is flat.")
    x, lr = run.series("lr")
    if lr.size == 0:
        cfg_lr = run.config.get("lr")
        if cfg_lr is None:
            return _skip("learning_rate", "Learning rate", "lr not logged and no stored configuration", **meta)
        lr = np.array([float(cfg_lr)])
        x = np.array([1])
    top = float(lr.max())
    _, kl = run.series("approx_kl")
    _, cf = run.series("clipfrac")
    kl_med = float(np.median(kl[warmup(kl.size):])) if kl.size else float("nan")
    cf_med = float(np.median(cf[warmup(cf.size):])) if cf.size else float("nan")
    ev = [f"lr from {_fmt(float(lr[0]))} to {_fmt(float(lr[-1]))} (max {_fmt(top)})"]
    if kl.size:
        ev.append(f"median approx_kl {_fmt(kl_med)}, median clipfrac {_fmt(cf_med)}")
    if top > LR_HIGH:
        symptoms = []
        kl_f = check_kl(run)
        if kl_f.status == FAIL:
            symptoms.append("the policy moves too far per update")
            ev.append(f"KL: {kl_f.summary}")
        if cf_med > CLIPFRAC_WARN:
            symptoms.append("most rows hit the clip")
        ent = check_entropy(run)
        if ent.status == FAIL:
            symptoms.append("the entropy collapsed")
            ev.append(f"entropy: {ent.summary}")
        status = FAIL if symptoms else WARN
        return Finding("learning_rate", "Learning rate", status,
                       f"learning rate too high: {_fmt(top)}" + (f" ({', '.join(symptoms)})" if symptoms else ""),
                       ev, x[lr > LR_HIGH].tolist(), **meta)
    _, ret_y = run.epoch_returns()
    flat_return = ret_y.size < 4 or float(ret_y[ret_y.size // 2:].mean() - ret_y[: max(ret_y.size // 4, 1)].mean()) \
        <= 0.0
    if top < LR_LOW or (kl.size and kl_med < 1e-6 and flat_return):
        return Finding("learning_rate", "Learning rate", WARN,
                       f"learning rate too low: max {_fmt(top)}, median approx_kl {_fmt(kl_med)}", ev, **meta)
    return Finding("learning_rate", "Learning rate", OK, f"lr {_fmt(top)} in range", ev, **meta)


def check_reward_scale(run: Run) -> Finding:
    meta = dict(formula="return_abs_mean = mean |value target| of the update's living rows (raw units), median over "
                        "the run; without it, median |episode_return_mean|",
                threshold=f"WARN over {RETURN_SCALE_WARN:g}, FAIL over {RETURN_SCALE_FAIL:g}",
                keys=["return_abs_mean", "episode_return_mean"], rank=2,
                fix="Rewards this large make the critic chase thousands with a small output layer and put the "
                    "loss terms on different scales: scale the rewards down (village: --tuning reward_scale), "
                    "keep --value-norm on, or normalise the rewards by a running return std.")
    x, y = run.series("return_abs_mean")
    source = "return_abs_mean"
    if y.size == 0:
        x, y = run.series("episode_return_mean")
        y = np.abs(y)
        source = "|episode_return_mean|"
    if y.size == 0:
        return _skip("reward_scale", "Reward scale", "no return or value-target scale logged", **meta)
    med = float(np.median(y))
    ev = [f"median {source} {_fmt(med)}, max {_fmt(float(y.max()))} at update {int(x[y.argmax()])}"]
    status = FAIL if med > RETURN_SCALE_FAIL else WARN if med > RETURN_SCALE_WARN else OK
    flagged = x[y > RETURN_SCALE_WARN].tolist() if status != OK else []
    summary = f"value targets of {_fmt(med)} ({source})" + (": rewards too large" if status != OK else "")
    return Finding("reward_scale", "Reward scale", status, summary, ev, flagged, **meta)


def check_reward_collapse(run: Run) -> Finding:
    meta = dict(formula="curve = 3-epoch moving average of the epoch returns; drawdown = running peak - last value; "
                        "relative = drawdown / (peak - first value) and, over the whole curve, the largest fall / "
                        "(max - min)",
                threshold=f"FAIL when the curve ends with relative drawdown > {DRAWDOWN_MAX:g} after real progress "
                          "(peak - first > 3 x the epochs' noise, when logged); WARN when a fall of over "
                          f"{DRAWDOWN_MAX:g} of the curve's range happened and was recovered",
                keys=["episode_return_mean"], rank=11,
                fix="A late reward drop (the seed's first fault): check the constraint layer's gradient clip "
                    "(--max-grad-norm too small?) and the share of old samples (--replay-old-frac); add 10% "
                    "exploration (--ent-coef x 1.1) and raise the constraint weight (--constraint); keep --rollback "
                    "on so the monitor restores the last good state.")
    x, y = run.epoch_returns()
    if y.size < 4:
        return _skip("reward_collapse", "Reward collapse", "fewer than 4 epoch returns", **meta)
    from npc_brains.stability import smoothed

    s = smoothed(y)
    peak = np.maximum.accumulate(s)
    fall = peak - s
    span = float(s.max() - s.min())
    progress = float(s.max() - s[0])
    _, noise = run.series("drawdown_noise")
    noise_v = float(np.median(noise)) if noise.size else 0.0
    end_rel = float(fall[-1] / max(progress, 1e-9)) if progress > 0 else 0.0
    worst = int(fall.argmax())
    worst_rel = float(fall[worst] / span) if span > 0 else 0.0
    peak_at = int(x[int(np.argmax(s[: worst + 1]))])
    ev = [f"smoothed return: first {_fmt(float(s[0]))}, peak {_fmt(float(s.max()))} at update "
          f"{int(x[s.argmax()])}, last {_fmt(float(s[-1]))}",
          f"largest fall {_fmt(float(fall[worst]))} from update {peak_at} to {int(x[worst])} "
          f"({worst_rel:.0%} of the range); at the end {end_rel:.0%} of the progress lost"]
    real = progress > 3 * noise_v and fall[-1] > 3 * noise_v
    end = worst  # the fall lasts until half of it is recovered
    while end + 1 < fall.size and fall[end + 1] > 0.5 * fall[worst]:
        end += 1
    span_updates = x[(x >= peak_at) & (x <= int(x[end]))].tolist()
    if end_rel > DRAWDOWN_MAX and real:
        return Finding("reward_collapse", "Reward collapse", FAIL,
                       f"return collapsed: {end_rel:.0%} of the progress lost since update {peak_at}", ev,
                       x[x >= peak_at].tolist(), **meta)
    if worst_rel > DRAWDOWN_MAX and fall[worst] > 3 * noise_v and progress > 3 * noise_v:
        return Finding("reward_collapse", "Reward collapse", WARN,
                       f"a fall of {worst_rel:.0%} of the range between updates {peak_at} and {int(x[worst])}, "
                       "recovered", ev, span_updates, **meta)
    if end_rel > DRAWDOWN_MAX:
        ev.append(f"progress {_fmt(progress)} and fall {_fmt(float(fall[-1]))} against 3 x the epochs' noise "
                  f"{_fmt(3 * noise_v)}")
        return Finding("reward_collapse", "Reward collapse", OK,
                       f"{end_rel:.0%} of the progress lost at the end, within the epochs' noise", ev, **meta)
    return Finding("reward_collapse", "Reward collapse", OK, f"{end_rel:.0%} of the progress lost at the end", ev,
                   **meta)


def check_oscillation(run: Run) -> Finding:
    meta = dict(formula="the seed's coefficient std(r)/|mean(r)| over the monitor's window (key oscillation); "
                        f"hf = energy of the detrended epoch-return curve at periods <= {HF_PERIOD} epochs / its "
                        "energy; acf = highest autocorrelation peak at a lag >= 2",
                threshold=f"FAIL when hf > {HF_SHARE_MAX:g} and acf > {ACF_PEAK_MIN:g} (a periodic swing), or the "
                          f"coefficient exceeds {OSCILLATION_MAX:g} on the last 3+ epochs; WARN when the "
                          f"autocorrelation peak alone exceeds {ACF_PEAK_MIN:g}, or the coefficient did on 3+ epochs "
                          "in a row earlier (white noise has hf near 0.75 and no peak: hf alone says nothing)",
                keys=["episode_return_mean", "oscillation"], rank=12,
                fix="Periodic oscillation comes from a delay coupling between policy updates and the environment's "
                    "feedback (the seed's second fault): delay the policy update by 2-3 cycles (--policy-delay 2), "
                    "lower --lr, or raise the constraint weight (--constraint).")
    x, y = run.epoch_returns()
    ox, oy = run.series("oscillation")
    if y.size < 8 and oy.size == 0:
        return _skip("oscillation", "Periodic oscillation", "fewer than 8 epoch returns", **meta)
    hf = high_frequency_share(y) if y.size >= 8 else float("nan")
    lag, acf = autocorrelation_peak(y) if y.size >= 8 else (0, float("nan"))
    streak, run_len, flagged = 0, 0, []
    for u, v in zip(ox, oy, strict=True):
        run_len = run_len + 1 if v > OSCILLATION_MAX else 0
        streak = max(streak, run_len)
        if v > OSCILLATION_MAX:
            flagged.append(int(u))
    tail_streak = 0
    for v in oy[::-1]:
        if v <= OSCILLATION_MAX:
            break
        tail_streak += 1
    ev = [f"high-frequency share {_fmt(hf)}, autocorrelation peak {_fmt(acf)} at lag {lag} epochs"]
    if oy.size:
        ev.append(f"coefficient std/mean: last {_fmt(float(oy[-1]))}, {len(flagged)} of {oy.size} epochs over "
                  f"{OSCILLATION_MAX:g}, longest run {streak}")
    periodic = hf > HF_SHARE_MAX and acf > ACF_PEAK_MIN
    if periodic or tail_streak >= 3:
        what = (f"periodic: period ~{lag} epochs, {hf:.0%} of the energy at high frequency" if periodic
                else f"oscillation coefficient over {OSCILLATION_MAX:g} for the last {tail_streak} epochs")
        return Finding("oscillation", "Periodic oscillation", FAIL, what, ev, flagged or x.tolist(), **meta)
    if acf > ACF_PEAK_MIN or streak >= 3:
        return Finding("oscillation", "Periodic oscillation", WARN,
                       f"some oscillation: hf {_fmt(hf)}, acf {_fmt(acf)}, longest run over the limit {streak}",
                       ev, flagged, **meta)
    return Finding("oscillation", "Periodic oscillation", OK, f"hf {_fmt(hf)}, acf {_fmt(acf)}", ev, **meta)


def check_homogenisation(run: Run) -> Finding:
    meta = dict(formula="sync_kl_mean = mean KL between agents' policies (the shared network with each "
                        "personality swapped in) on the same observations; its median over the last quarter, "
                        "against the peak it reached",
                threshold=f"with more than {MANY_AGENTS} agents FAIL when the late median < {HOMOGENEOUS_KL:g} nats "
                          "after a peak 10x higher (personalities learned, then merged); WARN when it stays under "
                          f"{HOMOGENEOUS_KL:g} over {HOMOGENEOUS_MIN_UPDATES} updates or more (never differentiated) "
                          f"or, with {MANY_AGENTS} agents or fewer, when it merged",
                keys=["sync_kl_mean"], rank=13,
                fix="The agents behave as one: above 8 agents raise the policy-constraint weight by 30-50% "
                    "(--constraint-many-agents, the seed's advice), keep --film on, add --trait-noise so "
                    "personalities differ in training, and check that the traits reach the observation.")
    x, y = run.series("sync_kl_mean")
    if y.size < 4:
        return _skip("homogenisation", "Policy homogenisation", "sync_kl_mean not logged (no --sync-check)", **meta)
    n = run.num_agents or 0
    late = float(np.median(y[-max(y.size // 4, 1):]))
    peak = float(y.max())
    merged = late < HOMOGENEOUS_KL and peak > 10 * max(late, 1e-12) and peak > HOMOGENEOUS_KL
    ev = [f"sync_kl_mean peak {_fmt(peak)} at update {int(x[y.argmax()])}, last-quarter median {_fmt(late)}"
          + (f"; {n} agents" if n else "")]
    flagged = x[-max(y.size // 4, 1):].tolist()
    if merged:
        status = FAIL if n > MANY_AGENTS else WARN
        return Finding("homogenisation", "Policy homogenisation", status,
                       f"personalities merged: KL between agents fell from {_fmt(peak)} to {_fmt(late)}", ev,
                       flagged, **meta)
    if late < HOMOGENEOUS_KL and peak <= HOMOGENEOUS_KL and y.size >= HOMOGENEOUS_MIN_UPDATES:
        return Finding("homogenisation", "Policy homogenisation", WARN,
                       f"agents never differentiated: KL between agents at most {_fmt(peak)}", ev, flagged, **meta)
    return Finding("homogenisation", "Policy homogenisation", OK, f"late KL between agents {_fmt(late)}", ev, **meta)


def check_dead_idle(run: Run) -> Finding:
    meta = dict(formula="agent_alive[i] = share of agent slot i's rows alive, agent_action_entropy[i] = entropy of "
                        "its chosen actions; both averaged over the last quarter of the run; idle = entropy under "
                        f"{IDLE_ENTROPY:g} x the population's median",
                threshold=f"WARN when a slot is alive in under {DEAD_ALIVE:.0%} of its rows or idle; FAIL when over "
                          "half the slots are",
                keys=["agent_alive", "agent_action_entropy"], rank=14,
                fix="A dead slot learns nothing (its rows are masked out): check the scenario (does it kill that "
                    "NPC at once?) and the death penalty; an idle agent repeats one action: check its action mask "
                    "and its reward (is doing nothing optimal for it?), and the entropy bonus.")
    xa, alive = run.lists("agent_alive")
    xe, ent = run.lists("agent_action_entropy")
    if not alive and not ent:
        return _skip("dead_idle", "Dead or idle agents", "per-agent activity not logged (older run)", **meta)

    def late_mean(lists: list[list[float | None]]) -> np.ndarray:
        k = max(len(lists) // 4, 1)
        width = len(lists[-1])
        arr = np.array([[np.nan if v is None else float(v) for v in row] for row in lists[-k:] if len(row) == width])
        if arr.size == 0:
            return np.array([])
        with warnings.catch_warnings():  # a slot with no living row in the window: nan, not a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(arr, axis=0)

    dead: list[int] = []
    idle: list[int] = []
    ev: list[str] = []
    n = 0
    if alive:
        a = late_mean(alive)
        n = a.size
        dead = [i for i, v in enumerate(a) if np.isfinite(v) and v < DEAD_ALIVE]
        ev.append("alive share by slot: " + ", ".join(f"{v:.2f}" for v in a))
    if ent:
        e = late_mean(ent)
        n = max(n, e.size)
        ref = float(np.nanmedian(e)) if np.isfinite(e).any() else 0.0
        idle = [i for i, v in enumerate(e) if np.isfinite(v) and ref > 0 and v < IDLE_ENTROPY * ref
                and i not in dead]
        ev.append("action entropy by slot: " + ", ".join("-" if not np.isfinite(v) else f"{v:.2f}" for v in e))
    bad = len(dead) + len(idle)
    parts = ([f"dead slot(s) {dead}"] if dead else []) + ([f"idle slot(s) {idle}"] if idle else [])
    updates = (xa if alive else xe)[-max(len(alive or ent) // 4, 1):].tolist()
    if bad == 0:
        return Finding("dead_idle", "Dead or idle agents", OK, f"all {n} agent slots active", ev, **meta)
    status = FAIL if bad > n / 2 else WARN
    return Finding("dead_idle", "Dead or idle agents", status, ", ".join(parts) + f" of {n}", ev, updates, **meta)


def check_grad_conflict(run: Run) -> Finding:
    meta = dict(formula="grad_conflict = ||sum_i g_i|| / sum_i ||g_i|| of the agents' policy gradients (1 aligned, "
                        "0 cancelling), median over the run and over its last quarter",
                threshold=f"WARN when the median is under the seed's {CONFLICT_MIN:g}; FAIL when the last quarter's "
                          f"median is under {CONFLICT_MIN / 2:g}",
                keys=["grad_conflict"], rank=15,
                fix="The agents' gradients cancel: normalise advantages per agent (--adv-norm agent), strengthen "
                    "the personality adaptation (--film) so agents stop fighting over shared weights, or raise the "
                    "constraint; on worlds where personalities want different things some conflict is expected.")
    x, y = run.series("grad_conflict")
    if y.size < 3:
        return _skip("grad_conflict", "Gradient conflict", "grad_conflict not logged (one agent, or older run)",
                     **meta)
    med = float(np.median(y))
    late = float(np.median(y[-max(y.size // 4, 1):]))
    ev = [f"median {_fmt(med)}, last-quarter median {_fmt(late)}, min {_fmt(float(y.min()))} at update "
          f"{int(x[y.argmin()])}"]
    low = y < CONFLICT_MIN
    if late < CONFLICT_MIN / 2:
        return Finding("grad_conflict", "Gradient conflict", FAIL, f"agents' gradients cancel: median {_fmt(late)}",
                       ev, x[low].tolist(), **meta)
    if med < CONFLICT_MIN:
        return Finding("grad_conflict", "Gradient conflict", WARN, f"gradient conflict median {_fmt(med)} under "
                       f"{CONFLICT_MIN:g}", ev, x[low].tolist(), **meta)
    return Finding("grad_conflict", "Gradient conflict", OK, f"median {_fmt(med)}", ev, **meta)


def check_cooperation(run: Run) -> Finding:
    meta = dict(formula="cooperation = (joint - sum_indiv) / |sum_indiv| from the cooperation probe (--coop-every)",
                threshold=f"WARN when the last probe is under the seed's {COOPERATION_MIN:g}", keys=["cooperation"],
                rank=16,
                fix="NPCs do no better among trained village-mates than among random ones: on worlds whose "
                    "rewards are individual this is by design; otherwise add shared reward terms or a "
                    "centralised critic (--central-critic).")
    x, y = run.series("cooperation")
    if y.size == 0:
        return _skip("cooperation", "Cooperation efficiency", "no cooperation probe (--coop-every 0)", **meta)
    last = float(y[-1])
    ev = ["probes: " + _pairs(x, y, 8)]
    if last < COOPERATION_MIN:
        return Finding("cooperation", "Cooperation efficiency", WARN,
                       f"cooperation {_fmt(last)} under {COOPERATION_MIN:g}", ev, x[y < COOPERATION_MIN].tolist(),
                       **meta)
    return Finding("cooperation", "Cooperation efficiency", OK, f"cooperation {_fmt(last)}", ev, **meta)


def check_rollbacks(run: Run) -> Finding:
    meta = dict(formula="count of {event: rollback} rows (and {event: unstable} rows: the monitor would have "
                        "rolled back)",
                threshold=f"WARN on 1-{ROLLBACKS_FAIL - 1}, FAIL on {ROLLBACKS_FAIL} or more", keys=[], rank=5,
                fix="Every rollback halved the learning rate and strengthened the constraint; repeated ones mean "
                    "the run keeps destabilising: start again with a lower --lr and a stronger --constraint, or "
                    "look at the other findings for the cause (the reasons are listed).")
    events = [e for e in run.events if e.get("event") in ("rollback", "unstable")]
    if not events:
        return Finding("rollbacks", "Repeated rollbacks", OK, "no rollback", **meta)
    ups = [int(e.get("update", 0)) for e in events]
    ev = ["; ".join(f"update {int(e.get('update', 0))}: {e.get('event')} ({e.get('reasons', '')})"
                    for e in events[:6])]
    last = events[-1]
    if "lr_scale" in last:
        ev.append(f"after the last: lr x {_fmt(float(last['lr_scale']))}, constraint x "
                  f"{_fmt(float(last.get('constraint_scale', 1.0)))}")
    status = FAIL if len(events) >= ROLLBACKS_FAIL else WARN
    return Finding("rollbacks", "Repeated rollbacks", status, f"{len(events)} rollback(s)", ev, ups, **meta)


def check_replay_staleness(run: Run) -> Finding:
    meta = dict(formula="replay_old_frac = share of old (previous-batch) rows in each minibatch; replay_age_mean "
                        "(or replay_age) = mean age in gradient updates of the sampled transitions (off-policy "
                        "learners)",
                threshold=f"replay_old_frac: WARN over {REPLAY_OLD_WARN:g} (the seed's 7:3), FAIL over "
                          f"{REPLAY_OLD_FAIL:g}; replay_age: WARN when its median exceeds {REPLAY_AGE_WARN:g} updates "
                          "and it keeps growing",
                keys=["replay_old_frac", "replay_age_mean", "replay_age"], rank=4,
                fix="The learner trains on data from policies long gone (the seed's second cause of a late reward "
                    "drop): lower the old-sample share (--replay-old-frac 0.3 at most), shrink the replay buffer, "
                    "or raise the number of fresh transitions per update.")
    xo, old = run.series("replay_old_frac")
    xa, age = run.series("replay_age_mean")
    if age.size == 0:
        xa, age = run.series("replay_age")
    if old.size == 0 and age.size == 0:
        frac = run.config.get("replay_old_frac")
        if frac:
            old, xo = np.array([float(frac)]), np.array([int(run.updates[-1])])
        else:
            return _skip("replay_staleness", "Replay staleness", "no replay in this run", **meta)
    ev: list[str] = []
    status = OK
    flagged: list[int] = []
    if old.size:
        top = float(old.max())
        ev.append(f"old-sample share up to {_fmt(top)}")
        if top > REPLAY_OLD_FAIL:
            status = FAIL
        elif top > REPLAY_OLD_WARN:
            status = WARN
        flagged += xo[old > REPLAY_OLD_WARN].tolist()
    if age.size:
        med = float(np.median(age))
        growing = age.size >= 4 and float(age[-max(age.size // 4, 1):].mean()) > float(age[: max(age.size // 4, 1)]
                                                                                       .mean())
        ev.append(f"replay age: median {_fmt(med)} updates, last {_fmt(float(age[-1]))}"
                  + (", growing" if growing else ""))
        if med > REPLAY_AGE_WARN and growing:
            status = FAIL if status == FAIL else WARN
            flagged += xa[age > REPLAY_AGE_WARN].tolist()
    summary = "replayed samples fresh enough" if status == OK else "replayed samples stale: " + "; ".join(ev)
    return Finding("replay_staleness", "Replay staleness", status, summary, ev, sorted(set(flagged)), **meta)


def check_q_blowup(run: Run) -> Finding:
    meta = dict(formula="|Q| = max(|q_mean|, |q_max|) against the largest |episode return| seen; growth = last "
                        "quarter's median |q_mean| / first quarter's",
                threshold=f"FAIL when |Q| > {Q_BLOWUP:g} x the largest |return| (or non-finite); WARN when |q_mean| "
                          "grew 10x while the return did not",
                keys=["q_mean", "q_max"], rank=4,
                fix="Over-estimation feeding on itself (the deadly triad): use target networks with a slower update "
                    "(smaller tau), double-Q targets, clip the TD targets, lower --lr, and check the reward scale.")
    xq, q = run.series("q_mean")
    xm, qm = run.series("q_max")
    if q.size == 0 and qm.size == 0:
        return _skip("q_blowup", "Q-value blow-up", "no Q values logged (on-policy learner)", **meta)
    _, ret = run.series("episode_return_mean")
    bound = float(np.abs(ret).max()) if ret.size else float("nan")
    mags = np.concatenate([np.abs(q), np.abs(qm)])
    xs = np.concatenate([xq, xm])
    top = float(mags.max())
    ev = [f"max |Q| {_fmt(top)} at update {int(xs[mags.argmax()])}; largest |episode return| {_fmt(bound)}"]
    flagged: list[int] = []
    if math.isfinite(bound) and bound > 0 and top > Q_BLOWUP * bound:
        flagged = xs[mags > Q_BLOWUP * bound].tolist()
        return Finding("q_blowup", "Q-value blow-up", FAIL,
                       f"Q values blew up: {_fmt(top)} against returns of at most {_fmt(bound)}", ev,
                       sorted(set(flagged)), **meta)
    if q.size >= 8:
        k = max(q.size // 4, 1)
        first, last = float(np.median(np.abs(q[:k]))), float(np.median(np.abs(q[-k:])))
        ev.append(f"|q_mean| first quarter {_fmt(first)}, last quarter {_fmt(last)}")
        ret_grew = ret.size >= 8 and float(np.abs(ret[-k:]).mean()) > 5 * float(np.abs(ret[:k]).mean())
        if first > 0 and last > 10 * first and not ret_grew:
            return Finding("q_blowup", "Q-value blow-up", WARN, f"|Q| grew {last / first:.0f}x", ev,
                           xq[-k:].tolist(), **meta)
    return Finding("q_blowup", "Q-value blow-up", OK, f"max |Q| {_fmt(top)}", ev, **meta)


CHECKS: tuple[Callable[[Run], Finding], ...] = (
    check_non_finite, check_learning_rate, check_reward_scale, check_entropy, check_kl, check_clipfrac,
    check_explained_variance, check_value_spikes, check_grad_norm, check_reward_collapse, check_oscillation,
    check_homogenisation, check_dead_idle, check_grad_conflict, check_cooperation, check_rollbacks,
    check_replay_staleness, check_q_blowup,
)


def run_checks(run: Run) -> list[Finding]:
    """Every check, ordered by severity, then causes before symptoms (Finding.rank)."""
    findings = [check(run) for check in CHECKS]
    return sorted(findings, key=lambda f: (SEVERITY[f.status], f.rank))
