"""Every diagnosis check on a synthetic log with its fault planted (it fires, with the evidence) and on a
healthy log (it stays quiet)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from npc_brains.diagnose import FAIL, OK, SKIP, WARN, load_run, run_checks
from npc_brains.diagnose import checks as C
from npc_brains.diagnose.logs import Run

N_UPDATES = 120
N_AGENTS = 12


def healthy_rows(n: int = N_UPDATES, seed: int = 0, off_policy: bool = False) -> list[dict]:
    """A run that learns smoothly: every key the trainer logs, with small multiplicative noise."""
    rng = np.random.default_rng(seed)

    def noisy(v: float, rel: float = 0.1) -> float:
        return float(v * (1 + rel * rng.standard_normal()))

    rows = []
    for u in range(1, n + 1):
        t = u / n
        ret = -20 + 30 * (1 - math.exp(-u / 25)) + 0.3 * rng.standard_normal()
        row = {
            "step": u * 1000, "update": u, "episodes": 8, "episode_return_mean": ret,
            "approx_kl": noisy(0.005, 0.2), "clipfrac": noisy(0.05, 0.2),
            "entropy": noisy(1.0 - 0.4 * t, 0.02), "valid_actions": 4.0,
            "explained_variance": min(0.95, 0.2 + 0.6 * t + 0.05 * rng.standard_normal()),
            "value_loss": noisy(1.0 - 0.8 * t, 0.1), "policy_loss": noisy(-0.01, 0.5),
            "adv_std": noisy(1.0, 0.05), "adv_abs_max": noisy(4.0, 0.1), "return_abs_mean": noisy(10.0, 0.05),
            "grad_norm": noisy(0.8, 0.1), "grad_clipped": 0.9,
            "lr": 3e-4 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))), "ent_coef": 0.01,
            "sync_kl_mean": 1e-4 + 5e-3 * t, "grad_conflict": noisy(0.35, 0.1),
            "agent_alive": [round(noisy(0.8, 0.05), 3) for _ in range(N_AGENTS)],
            "agent_action_entropy": [round(noisy(0.9, 0.05), 3) for _ in range(N_AGENTS)],
            "epoch": u, "oscillation": noisy(0.05, 0.2) if u >= 5 else None, "drawdown_noise": 0.2,
            "conflict": noisy(0.35, 0.05),
        }
        if u % 10 == 0:
            row["cooperation"] = noisy(0.25, 0.1)
        if off_policy:
            row.update(q_mean=ret * 0.5 + 0.2 * rng.standard_normal(), q_max=abs(ret) * 0.8 + 1.0,
                       td_error=noisy(0.5, 0.1), replay_age_mean=noisy(5.0, 0.1), replay_old_frac=0.2)
        rows.append(row)
    return rows


def make_run(rows: list[dict], events: list[dict] | None = None, env: dict | None = None) -> Run:
    return Run(Path("synthetic"), rows, events or [], {}, env if env is not None else {"num_agents": N_AGENTS,
                                                                                          "n_actions": 40})


def finding(run: Run, check: str) -> C.Finding:
    found = {f.check: f for f in run_checks(run)}
    return found[check]


@pytest.mark.parametrize("off_policy", [False, True])
def test_healthy_log_is_quiet(off_policy: bool) -> None:
    for seed in range(3):
        run = make_run(healthy_rows(seed=seed, off_policy=off_policy))
        findings = run_checks(run)
        loud = [(f.check, f.status, f.summary) for f in findings if f.status not in (OK, SKIP)]
        assert loud == [], loud
        ran = {f.check for f in findings if f.status == OK}
        assert len(ran) >= 14
        if off_policy:
            assert {"q_blowup", "replay_staleness"} <= ran


def test_at_least_twelve_checks() -> None:
    assert len(C.CHECKS) >= 12


def plant(rows: list[dict], key: str, updates: range | list[int], value) -> list[dict]:
    for r in rows:
        if r["update"] in updates:
            r[key] = value(r) if callable(value) else value
    return rows


def test_non_finite() -> None:
    rows = plant(healthy_rows(), "value_loss", [57], None)
    f = finding(make_run(rows), "non_finite")
    assert f.status == FAIL and f.updates == [57] and "update 57" in f.summary and "value_loss" in f.summary


def test_kl_too_large_and_spike() -> None:
    rows = plant(healthy_rows(), "approx_kl", range(30, 121), 0.08)
    f = finding(make_run(rows), "kl")
    assert f.status == FAIL and 30 in f.updates and "0.08" in f.summary
    rows = plant(healthy_rows(), "approx_kl", [70], 0.025)  # under the limit, but a 3-sigma spike
    f = finding(make_run(rows), "kl")
    assert f.status == WARN and f.updates == [70] and any("update 70" in e for e in f.evidence)


def test_clipfrac_high() -> None:
    rows = plant(healthy_rows(), "clipfrac", range(1, 121), 0.35)
    f = finding(make_run(rows), "clipfrac")
    assert f.status == FAIL and "0.35" in f.summary


def test_explained_variance_negative() -> None:
    rows = plant(healthy_rows(), "explained_variance", range(40, 121), -0.3)
    f = finding(make_run(rows), "explained_variance")
    assert f.status == FAIL and 40 in f.updates and "-0.3" in f.summary


def test_entropy_collapse() -> None:
    rows = plant(healthy_rows(), "entropy", range(20, 121), lambda r: 0.02)
    f = finding(make_run(rows), "entropy")
    assert f.status == FAIL and 20 in f.updates and "update 20" in f.summary
    assert any("0.01" in e for e in f.evidence)  # the entropy coefficient is named


def test_entropy_of_older_runs_judged_by_its_drop_only() -> None:
    rows = healthy_rows()
    for r in rows:
        del r["valid_actions"]
    assert finding(make_run(rows), "entropy").status == OK  # log(40 actions) would make 0.6 nats look low
    rows = plant(rows, "entropy", range(30, 121), 0.05)
    f = finding(make_run(rows), "entropy")
    assert f.status == WARN and f.updates == [30]


def test_value_loss_spikes() -> None:
    rows = plant(healthy_rows(), "value_loss", [50, 80, 100], 40.0)
    f = finding(make_run(rows), "value_spikes")
    assert f.status == FAIL and f.updates == [50, 80, 100]
    rows = plant(healthy_rows(), "adv_std", [66], 30.0)
    f = finding(make_run(rows), "value_spikes")
    assert f.status == WARN and f.updates == [66] and "adv_std" in f.evidence[0]


def test_gradient_norm_explodes() -> None:
    rows = plant(healthy_rows(), "grad_norm", [77], 500.0)
    f = finding(make_run(rows), "grad_norm")
    assert f.status == FAIL and f.updates == [77] and "500" in f.summary


def test_learning_rate_too_high_with_its_symptom() -> None:
    rows = plant(healthy_rows(), "lr", range(1, 121), 0.05)
    assert finding(make_run(rows), "learning_rate").status == WARN  # high, but the policy still moves slowly
    rows = plant(rows, "approx_kl", range(1, 121), 0.2)
    f = finding(make_run(rows), "learning_rate")
    assert f.status == FAIL and "0.05" in f.summary
    assert run_checks(make_run(rows))[0].check == "learning_rate"  # the cause comes before the KL symptom


def test_learning_rate_too_low() -> None:
    rows = plant(healthy_rows(), "lr", range(1, 121), 1e-7)
    f = finding(make_run(rows), "learning_rate")
    assert f.status == WARN and "low" in f.summary


def test_reward_scale() -> None:
    rows = plant(healthy_rows(), "return_abs_mean", range(1, 121), lambda r: r["return_abs_mean"] * 1e4)
    f = finding(make_run(rows), "reward_scale")
    assert f.status == FAIL and any("1e+05" in e or "1.0" in e for e in f.evidence)
    assert run_checks(make_run(rows))[0].check == "reward_scale"


def test_reward_collapse() -> None:
    rows = plant(healthy_rows(), "episode_return_mean", range(90, 121), -19.0)
    f = finding(make_run(rows), "reward_collapse")
    assert f.status == FAIL and 90 in f.updates and "collapsed" in f.summary


def test_reward_dip_recovered_warns() -> None:
    rows = plant(healthy_rows(), "episode_return_mean", range(60, 70), -18.0)
    f = finding(make_run(rows), "reward_collapse")
    assert f.status == WARN and 60 in f.updates and 69 in f.updates


def test_periodic_oscillation() -> None:
    rows = plant(healthy_rows(), "episode_return_mean", range(1, 121),
                 lambda r: 5.0 + 4.0 * (1 if (r["update"] // 2) % 2 else -1))  # period of 4 updates
    f = finding(make_run(rows), "oscillation")
    assert f.status == FAIL and "period ~4" in f.summary


def test_oscillation_coefficient_streak() -> None:
    rows = plant(healthy_rows(), "oscillation", range(115, 121), 0.6)
    f = finding(make_run(rows), "oscillation")
    assert f.status == FAIL and f.updates == list(range(115, 121))


def test_homogenisation() -> None:
    rows = plant(healthy_rows(), "sync_kl_mean", range(80, 121), 1e-5)
    f = finding(make_run(rows), "homogenisation")
    assert f.status == FAIL and "merged" in f.summary  # 12 agents: above the seed's 8
    f = finding(make_run(rows, env={"num_agents": 4}), "homogenisation")
    assert f.status == WARN


def test_dead_and_idle_agents() -> None:
    rows = healthy_rows()
    for r in rows:
        r["agent_alive"][3] = 0.0
        r["agent_action_entropy"][7] = 0.01
    f = finding(make_run(rows), "dead_idle")
    assert f.status == WARN and "dead slot(s) [3]" in f.summary and "idle slot(s) [7]" in f.summary


def test_gradient_conflict() -> None:
    rows = plant(healthy_rows(), "grad_conflict", range(1, 121), 0.05)
    f = finding(make_run(rows), "grad_conflict")
    assert f.status == FAIL and "0.05" in f.summary
    rows = plant(healthy_rows(), "grad_conflict", range(1, 121), 0.2)
    assert finding(make_run(rows), "grad_conflict").status == WARN


def test_cooperation_low() -> None:
    rows = plant(healthy_rows(), "cooperation", [120], 0.01)
    f = finding(make_run(rows), "cooperation")
    assert f.status == WARN and f.updates == [120]


def test_repeated_rollbacks() -> None:
    events = [{"event": "rollback", "step": u * 1000, "update": u, "reasons": "drawdown", "lr_scale": 0.5 ** i}
              for i, u in enumerate((30, 60, 90), 1)]
    f = finding(make_run(healthy_rows(), events), "rollbacks")
    assert f.status == FAIL and f.updates == [30, 60, 90] and "update 60: rollback (drawdown)" in f.evidence[0]
    assert finding(make_run(healthy_rows(), events[:1]), "rollbacks").status == WARN


def test_replay_staleness() -> None:
    rows = plant(healthy_rows(off_policy=True), "replay_old_frac", range(1, 121), 0.6)
    f = finding(make_run(rows), "replay_staleness")
    assert f.status == FAIL and "0.6" in f.evidence[0]
    rows = plant(healthy_rows(off_policy=True), "replay_age_mean", range(1, 121), lambda r: 2.0 * r["update"] + 50)
    f = finding(make_run(rows), "replay_staleness")
    assert f.status == WARN and "growing" in f.evidence[-1] and 120 in f.updates


def test_q_blowup() -> None:
    rows = plant(healthy_rows(off_policy=True), "q_max", range(100, 121), lambda r: 1e3 * 1.5 ** (r["update"] - 99))
    f = finding(make_run(rows), "q_blowup")
    assert f.status == FAIL and f.updates[0] == 100 and "blew up" in f.summary


def test_checks_tolerate_missing_keys() -> None:
    """An older or --env run logs only a few keys: every check answers (SKIP where it cannot judge)."""
    rows = [{"step": u * 100, "episode_return_mean": float(u)} for u in range(1, 30)]
    findings = run_checks(make_run(rows, env={}))
    assert {f.status for f in findings} <= {OK, SKIP, WARN}
    assert sum(f.status == SKIP for f in findings) >= 10


def test_helpers() -> None:
    x = np.ones(30)
    x[20] = 10.0
    assert C.spikes(x).tolist() == [20]
    t = np.arange(64)
    assert C.high_frequency_share(np.sin(2 * np.pi * t / 3)) > 0.9
    assert C.high_frequency_share(np.sin(2 * np.pi * t / 32) + t) < 0.1
    lag, value = C.autocorrelation_peak(np.sin(2 * np.pi * t / 8))
    assert lag == 8 and value > 0.5


def test_loader_reads_rows_and_events(tmp_path: Path) -> None:
    rows = healthy_rows(20)
    events = [{"event": "rollback", "step": 5000, "update": 5, "reasons": "oscillation"}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:5] + events + rows[5:]))
    run = load_run(tmp_path)
    assert len(run.rows) == 20 and run.events == events
    assert run.notes and "no checkpoint" in run.notes[0]


def test_one_huge_kl_jump_fails() -> None:
    rows = plant(healthy_rows(), "approx_kl", [44], 50.0)
    f = finding(make_run(rows), "kl")
    assert f.status == FAIL and 44 in f.updates and "update 44" in f.summary


def test_agents_that_never_differentiate_warn_on_long_runs_only() -> None:
    rows = plant(healthy_rows(), "sync_kl_mean", range(1, 121), 2e-4)
    f = finding(make_run(rows), "homogenisation")
    assert f.status == WARN and "never differentiated" in f.summary
    assert finding(make_run(rows[:60]), "homogenisation").status == OK
