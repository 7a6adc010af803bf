"""`village eval` end to end on a tiny budget, its JSON line, its output files and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from village.cli import main

METRICS = ("mourning_rate", "revenge_rate", "revenge_accuracy", "fear_rate", "consistency", "diversity")
TINY = ["--scenarios", "kill-parent,kill-in-square", "--worlds", "village-v1,generated:12:10000", "--seeds", "2",
        "--max-ticks", "70", "--quiet"]


def call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_help() -> None:
    assert call(["eval", "--help"]) == 0


def test_scripted_vs_random_prints_a_table_thresholds_and_a_json_last_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = call(["eval", "--policy", "scripted", *TINY, "--compare", "random_init,random", "--json",
                 "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "| policy | mourning_rate" in out and "| scripted |" in out and "| random |" in out
    assert "Thresholds for scripted (held-out generated worlds)" in out
    assert "random_init skipped" in out  # the scripted rules have no network to re-initialise
    data = last_json(out)
    assert list(data) == ["scripted", "random"]
    for name in data:
        for metric in METRICS:
            assert metric in data[name]
        assert set(data[name]["by_scenario"]) == {"kill-parent", "kill-in-square"}
        assert data[name]["counts"]["villages"] == 2 * 2 * 2
    assert data["random"]["diversity"] == pytest.approx(0.0)  # uniform whatever the personality
    assert data["scripted"]["consistency"] >= 0.9
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"results.json", "table.md", "rates.png", "reach.png", "diversity.png", "distance.png"} <= written
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["policy"] == "scripted" and set(results["results"]) == {"scripted", "random"}
    assert results["results"]["scripted"]["curves"]["news_reach"]


def test_held_out_worlds_are_reported_per_size_with_the_targets(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = call(["eval", "--policy", "scripted", "--scenarios", "kill-parent", "--worlds",
                 "generated:12:10000,generated:16:10000,generated:12:3", "--seeds", "2", "--max-ticks", "90",
                 "--quiet", "--compare", "random", "--json", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Held-out worlds by size:" in captured.out and "Targets for scripted" in captured.out
    data = last_json(captured.out)
    for name in ("scripted", "random"):
        sizes = data[name]["held_out_by_size"]
        assert set(sizes) == {"12", "16"}  # generated:12:3 is a training world: not held out
        for metric in ("news_reach_48", "chain_branching", "player_reactions", "hearsay_accuracy"):
            assert metric in sizes["16"]
        for size in sizes.values():  # each pooled rate with its bootstrap interval around it
            for metric, interval in size["intervals"].items():
                if size[metric] is None:
                    assert interval is None
                else:
                    assert interval[0] <= size[metric] <= interval[1], (name, metric)
    assert "bootstrap interval" in captured.out
    assert data["scripted"]["diversity_ratio"] == pytest.approx(1.0)  # its own SND over its own
    assert data["random"]["diversity_ratio"] == pytest.approx(0.0)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(results["targets_by_size"]) == {"12", "16"}
    assert results["results"]["scripted"]["held_out_by_size"]["12"]["curves"]["news_reach"]
    assert (tmp_path / "out" / "reach_by_size.png").is_file()


def test_a_network_policy_is_compared_with_its_untrained_twin(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from engine.sim import VillageSim
    from npc_brains.checkpoint import save_checkpoint
    from npc_brains.evaluate import fresh_policy
    from worlds import load_world

    sim = VillageSim(load_world("village-v1"), 1, 0, scenario="none")
    net = {"obs_dim": sim.observer.obs_dim, "n_actions": sim.n_actions, "state_dim": sim.observer.state_dim,
           "cond_index": list(range(13)), "hidden": 16, "intent_dim": 8, "film": True, "central_critic": True}
    from engine.observe import observation_layout
    from engine.vec_env import flat_action_names

    env = {"env_id": "village:village-v1", "obs_dim": net["obs_dim"], "n_actions": net["n_actions"],
           "state_dim": net["state_dim"], "num_agents": sim.N, "observation_layout": observation_layout(sim.K),
           "action_names": flat_action_names(sim.K)}
    twin = fresh_policy(net, env, seed=5, name="twin")
    assert twin.n_actions == sim.n_actions and twin.name == "twin"
    path = save_checkpoint(tmp_path / "tiny.pt", {"kind": "policy", "config": {}, "net": net, "env": env,
                                                  "model": _actor_state(net)})
    code = call(["eval", "--policy", str(path), *TINY, "--scenarios", "kill-parent", "--compare", "random_init",
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = last_json(captured.out)
    assert list(data) == ["tiny", "random_init"]
    assert "random_init mourning_rate" in captured.out


def test_random_init_draws_play_a_population_of_untrained_networks(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--policy", "default", "--scenarios", "kill-parent", "--worlds", "generated:12:10000",
            "--seeds", "2", "--max-ticks", "40", "--compare", "random_init", "--deterministic", "--quiet", "--json"]
    assert call([*argv, "--out", str(tmp_path / "one")]) == 0
    one = last_json(capsys.readouterr().out)
    code = call([*argv, "--random-init-draws", "3", "--out", str(tmp_path / "three")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    three = last_json(captured.out)
    note = "note: random_init: 3 untrained networks (torch seeds 0 to 2), NPC i acting with draw i mod 3"
    assert note in captured.out
    assert one["default"] == three["default"]  # the trained policy's play is untouched
    assert one["random_init"] != three["random_init"]  # two more draws play two thirds of the NPCs
    saved = json.loads((tmp_path / "three" / "results.json").read_text())
    assert saved["config"]["random_init_draws"] == 3
    assert saved["config"]["random_init_seed"] == 0  # --seed's, by default
    code = call([*argv, "--random-init-draws", "3", "--random-init-seed", "5"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    other = last_json(captured.out)
    assert "random_init: 3 untrained networks (torch seeds 5 to 7)" in captured.out
    assert other["default"] == three["default"]  # the same villages
    assert other["random_init"] != three["random_init"]  # another population on them


def test_greedy_play_reports_the_diversity_of_the_actions_taken(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--policy", "default", "--scenarios", "kill-parent", "--worlds", "generated:12:10000",
            "--seeds", "2", "--max-ticks", "40", "--compare", "scripted", "--quiet", "--json"]
    assert call([*argv, "--deterministic"]) == 0
    captured = capsys.readouterr()
    greedy = last_json(captured.out)
    assert "| diversity_played_ratio |" in captured.out and "SND as played / scripted SND" in captured.out
    mine, rules = greedy["default"]["held_out_by_size"]["12"], greedy["scripted"]["held_out_by_size"]["12"]
    assert rules["diversity_played"] == pytest.approx(rules["diversity"])  # the rules play their one-hot choice
    assert greedy["scripted"]["diversity_played_ratio"] == pytest.approx(1.0)
    assert mine["diversity_played_ratio"] == pytest.approx(mine["diversity_played"] / rules["diversity"])
    assert mine["diversity_played"] != pytest.approx(mine["diversity"])  # greedy: one-hot choices, not probabilities
    assert call(argv) == 0
    sampled = last_json(capsys.readouterr().out)["default"]["held_out_by_size"]["12"]
    assert sampled["diversity_played"] == pytest.approx(sampled["diversity"])  # sampled: it acts from them


def test_temperature_samples_every_network_alike_and_is_recorded(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--temperature T: the policy and its untrained twin sample at T, the rules do not; results.json keeps T."""
    argv = ["eval", "--policy", "default", "--scenarios", "kill-parent", "--worlds", "generated:12:10000",
            "--seeds", "2", "--max-ticks", "40", "--compare", "random_init,scripted", "--quiet", "--json"]
    assert call([*argv, "--temperature", "0.25", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    sharp = last_json(captured.out)
    assert "note: the networks sample at temperature 0.25" in captured.out
    assert json.loads((tmp_path / "results.json").read_text())["config"]["temperature"] == 0.25
    assert call(argv) == 0
    plain = last_json(capsys.readouterr().out)
    mine, rules = sharp["default"]["held_out_by_size"]["12"], plain["default"]["held_out_by_size"]["12"]
    assert mine["diversity"] != pytest.approx(rules["diversity"])  # the probabilities probed are the tempered ones
    assert sharp["scripted"]["held_out_by_size"]["12"] == plain["scripted"]["held_out_by_size"]["12"]


def test_personality_strength_plays_every_network_alike_and_is_recorded(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """--personality-strength S: the policy and its untrained twin play their personalities at S, the rules do
    not; results.json keeps S."""
    argv = ["eval", "--policy", "default", "--scenarios", "kill-parent", "--worlds", "generated:12:10000",
            "--seeds", "2", "--max-ticks", "40", "--compare", "random_init,scripted", "--quiet", "--json",
            "--deterministic"]
    assert call([*argv, "--personality-strength", "2.5", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    strong = last_json(captured.out)
    assert "note: the networks play their personalities at strength 2.5" in captured.out
    assert json.loads((tmp_path / "results.json").read_text())["config"]["personality_strength"] == 2.5
    assert call(argv) == 0
    plain = last_json(capsys.readouterr().out)
    for name in ("default", "random_init"):
        mine, trained = strong[name]["held_out_by_size"]["12"], plain[name]["held_out_by_size"]["12"]
        assert mine["diversity"] > trained["diversity"]  # the personalities probed are further apart
    assert strong["scripted"]["held_out_by_size"]["12"] == plain["scripted"]["held_out_by_size"]["12"]
    everyday = tmp_path / "everyday"
    assert call([*argv, "--personality-strength", "2.5", "--personality-traits", "sociability,diligence",
                 "--out", str(everyday)]) == 0
    captured = capsys.readouterr()
    assert "at strength 2.5 (on sociability,diligence)" in captured.out
    assert json.loads((everyday / "results.json").read_text())["config"]["personality_traits"] == \
        "sociability,diligence"
    mine = last_json(captured.out)["default"]["held_out_by_size"]["12"]["diversity"]
    assert mine != pytest.approx(strong["default"]["held_out_by_size"]["12"]["diversity"])


def _actor_state(net: dict) -> dict:
    """A fresh actor's weights under checkpoint keys (what a trained policy file holds)."""
    import torch

    from npc_brains.networks import Actor, NetSpec

    torch.manual_seed(0)
    return {f"actor.{k}": v for k, v in Actor(NetSpec.from_dict(net)).state_dict().items()}


@pytest.mark.parametrize(("argv", "message"), [
    (["--seeds", "0"], "--seeds: expected an integer >= 1, got 0"),
    (["--seeds", "many"], "--seeds: expected an integer >= 1, got 'many'"),
    (["--max-ticks", "-3"], "--max-ticks: expected an integer >= 1"),
    (["--scenarios", "kill-parent,nope"], "--scenarios: unknown scenario 'nope'"),
    (["--scenarios", "kill-parent,,raid"], "--scenarios: expected a comma-separated list"),
    (["--compare", "mappo,qmix"], "--compare: unknown comparison 'qmix'"),
    (["--worlds", "generated:x"], "generated:N"),
    (["--worlds", "no-such-world"], "no-such-world"),
    (["--policy", "missing.pt"], "--policy: expected default, mappo, scripted, random or a policy file"),
    (["--sweep", "--worlds", "village-v1"], "--sweep: it sets the worlds itself"),
    (["--sweep-worlds", "3"], "--sweep-worlds: it sets how many worlds --sweep plays; expected --sweep with it"),
    (["--sweep", "--sweep-worlds", "0"], "--sweep-worlds: expected an integer >= 1, got 0"),
    (["--random-init-draws", "0"], "--random-init-draws: expected an integer >= 1, got 0"),
    (["--compare", "scripted", "--random-init-draws", "4"],
     "--random-init-draws: it sets the random_init comparison; expected random_init in --compare"),
    (["--compare", "random_init", "--random-init-seed", "-1"], "--random-init-seed: expected an integer >= 0, got -1"),
    (["--compare", "scripted", "--random-init-seed", "3"],
     "--random-init-seed: it sets the random_init comparison; expected random_init in --compare"),
    (["--temperature", "0"], "--temperature: expected a number from 0.01 to 100"),
    (["--temperature", "0.5", "--deterministic"], "--temperature: it sets how sharply policies sample"),
    (["--temperature", "0.5"], "--temperature: scripted has no learned probabilities to sharpen"),
    (["--personality-strength", "11"], "--personality-strength: expected a number from 0 to 10"),
    (["--personality-strength", "much"], "--personality-strength: expected a number from 0 to 10"),
    (["--personality-strength", "2"], "--personality-strength: scripted has no learned personality"),
    (["--personality-traits", "sociability"], "--personality-traits: it sets which traits --personality-strength"),
    (["--personality-strength", "2", "--personality-traits", "wit"], "--personality-traits: expected 'all' or"),
    (["--tuning", "nope=1"], "--tuning: unknown engine field 'nope'"),
    (["--tuning", "rumour_error=abc"], "--tuning rumour_error: expected a number or true/false"),
    (["--tuning", "rumour_error"], "--tuning: expected FIELD=VALUE"),
])
def test_bad_flags_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--policy", "scripted", "--seeds", "1", "--quiet"]
    code = call(base + argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("village eval: error: ") and message in err


def test_a_non_utf8_scenario_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "latin1.toml"
    scenario.write_bytes("name = 'd\u00e9j\u00e0'\n".encode("latin-1"))
    assert call(["eval", "--policy", "scripted", "--seeds", "1", "--quiet", "--scenarios", str(scenario)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "latin1.toml" in err and "UTF-8" in err


def test_a_missing_bundled_policy_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import npc_brains.resolve as resolve

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)
    assert call(["eval", "--seeds", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bundled default policy is missing" in err and "scripted" in err


def test_sweep_worlds_plays_more_held_out_worlds_of_each_size(capsys: pytest.CaptureFixture[str]) -> None:
    code = call(["eval", "--policy", "scripted", "--sweep", "--sweep-worlds", "3", "--seeds", "1", "--max-ticks", "3",
                 "--scenarios", "kill-parent", "--compare", "none", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = last_json(captured.out)["scripted"]
    assert list(data["by_world"]) == [f"generated:{n}:{seed}" for n in (12, 24, 48, 96)
                                      for seed in (10_000, 10_001, 10_002)]
    assert all("world_intervals" not in v for v in data["held_out_by_size"].values())  # too few worlds for one


def test_many_worlds_per_size_give_the_targets_an_interval_over_the_worlds(capsys: pytest.CaptureFixture[str]) -> None:
    from npc_brains.evaluate import WORLD_INTERVAL_MIN_WORLDS

    worlds = ",".join(f"generated:12:{10_000 + j}" for j in range(WORLD_INTERVAL_MIN_WORLDS))
    code = call(["eval", "--policy", "scripted", "--worlds", worlds, "--seeds", "2", "--scenarios", "kill-parent",
                 "--compare", "none", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    size = last_json(captured.out)["scripted"]["held_out_by_size"]["12"]
    low, high = size["world_intervals"]["mourning_rate"]
    assert low <= size["mourning_rate"] <= high
    assert "worlds [" in captured.out and "over the worlds of that size" in captured.out


@pytest.mark.slow
def test_the_bundled_policy_meets_the_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's acceptance: on held-out generated worlds, with every comparison (minutes on 2 CPU cores)."""
    from npc_brains.evaluate import threshold_checks

    code = call(["eval", "--policy", "default", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = last_json(captured.out)
    checks, scope = threshold_checks(data, "default")
    assert scope == "held-out generated worlds"
    failed = [(c.name, c.value, c.target) for c in checks if c.passed is not True]
    assert not failed, failed


def test_rule_and_random_baselines_run_in_the_checked_policys_world() -> None:
    from npc_brains import policy_tuning
    from village.cmd_eval import _comparisons

    class Trained:
        name = "trained"
        config = {"tuning": {"mourn_ticks": 4}}

    out = dict(_comparisons(["scripted", "random"], "trained", Trained(), 0, []))
    assert policy_tuning(out["scripted"]).mourn_ticks == 4 and policy_tuning(out["random"]).mourn_ticks == 4
    plain = dict(_comparisons(["scripted"], "other", object(), 0, []))
    assert policy_tuning(plain["scripted"]) is None


def test_tuning_flags_change_the_world_of_every_policy_on_top_of_its_own() -> None:
    from npc_brains import policy_tuning
    from village.cmd_eval import _comparisons, _override_tuning

    class Trained:
        name = "trained"
        config = {"tuning": {"mourn_ticks": 4}}

    main_policy = Trained()
    policies = [("trained", main_policy), *_comparisons(["scripted"], "trained", main_policy, 0, [])]
    _override_tuning(policies, ["rumour_error=0.2", "hunt_nearest=true"])
    for _, policy in policies:
        tuning = policy_tuning(policy)
        assert tuning.rumour_error == 0.2 and tuning.hunt_nearest and tuning.mourn_ticks == 4


def test_wrong_rumours_lower_hearsay_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    """With --tuning rumour_error=1 every culprit passed on by word of mouth is someone else."""
    argv = ["eval", "--policy", "scripted", "--scenarios", "kill-parent", "--worlds", "generated:12:10000",
            "--seeds", "4", "--compare", "none", "--quiet", "--json"]
    assert call(argv) == 0
    plain = last_json(capsys.readouterr().out)["scripted"]["hearsay_accuracy"]
    assert call([*argv, "--tuning", "rumour_error=1.0"]) == 0
    wrong = last_json(capsys.readouterr().out)["scripted"]["hearsay_accuracy"]
    assert plain == 1.0 and wrong is not None and wrong < 0.5
