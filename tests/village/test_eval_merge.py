"""`village eval --merge`: a held-out sweep run in parts split by world size reads as one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from village.cli import main

# the bundled policy against its untrained population and the rules: what the targets read
RUN = ["--policy", "default", "--scenarios", "kill-parent", "--seeds", "2", "--max-ticks", "90", "--quiet",
       "--compare", "random_init,scripted", "--random-init-draws", "2", "--deterministic"]


def call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def run_eval(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = call(["eval", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def by_size(out: str) -> dict:
    return {name: r["held_out_by_size"] for name, r in json.loads(out.strip().splitlines()[-1]).items()}


def summary(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("targets: "))


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run over a 12- and a 16-NPC world, and the same sweep in two parts: the second part's --seed is 7 x its
    first world's index in the one run, and it plays the same untrained population (--random-init-seed 0)."""
    root = tmp_path_factory.mktemp("sweep")
    assert call(["eval", *RUN, "--worlds", "generated:12:10000,generated:16:10000", "--json",
                 "--out", str(root / "one")]) == 0
    assert call(["eval", *RUN, "--worlds", "generated:12:10000", "--out", str(root / "a")]) == 0
    assert call(["eval", *RUN, "--worlds", "generated:16:10000", "--seed", "7", "--random-init-seed", "0",
                 "--out", str(root / "b")]) == 0
    return root


def test_a_sweep_in_parts_merges_into_the_one_runs_tables_and_targets(parts: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    out = run_eval(["--merge", f"{parts / 'a'},{parts / 'b'}", "--json", "--out", str(parts / "merged")], capsys)
    one = json.loads((parts / "one" / "results.json").read_text())
    one_by_size = {name: {size: {k: v for k, v in m.items() if k != "curves"}
                          for size, m in r["held_out_by_size"].items()}
                   for name, r in one["results"].items()}
    assert by_size(out) == one_by_size
    merged = json.loads((parts / "merged" / "results.json").read_text())
    assert merged["targets_by_size"] == one["targets_by_size"]
    assert merged["config"]["merged_from"] == [str(parts / "a"), str(parts / "b")]
    assert "Targets for default" in out and "2 parts" in out
    count = sum(c["passed"] is True for cs in one["targets_by_size"].values() for c in cs)
    assert summary(out).startswith(f"targets: {count} of 38 pass")
    assert summary(out) in (parts / "merged" / "table.md").read_text()


def test_sizes_plays_a_part_of_the_sweep_on_the_villages_the_whole_sweep_gives_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--sweep --sizes`: parts that are not runs of the list's neighbours (12 with 48, 24 with 96) merge into the
    whole sweep's figures, which no --seed offset could give them."""
    sweep = [*RUN, "--sweep", "--sweep-worlds", "1", "--max-ticks", "60"]
    whole = by_size(run_eval([*sweep, "--json"], capsys))
    for part, sizes in (("a", "12,48"), ("b", "96,24")):
        out = run_eval([*sweep, "--sizes", sizes, "--out", str(tmp_path / part)], capsys)
        assert f"worlds (generated:{sizes.split(',')[0] if part == 'a' else 24}:10000" in out
    merged = by_size(run_eval(["--merge", f"{tmp_path / 'a'},{tmp_path / 'b'}", "--json"], capsys))
    assert set(merged["default"]) == {"12", "24", "48", "96"}
    assert merged == whole


@pytest.mark.parametrize(("argv", "message"), [
    (["--merge", "{a},{a}"], "its 12-NPC worlds are also in"),
    (["--merge", "{a},{missing}"], "no results.json in"),
    (["--merge", "{a},{bad}"], "cannot read"),
    (["--merge", "{a},{other}"], "config.seeds is 3"),
    (["--merge", "{a},{notes}"], "not a results.json written by village eval --out"),
    (["--merge", "{a},{b}", "--policy", "mappo"], "--merge: it runs nothing and reads the parts' own settings; "
                                                  "--policy does not apply"),
    (["--merge", "{a},,{b}"], "--merge: expected a comma-separated list without empty entries"),
])
def test_parts_that_do_not_make_one_sweep_are_one_line_errors(parts: Path, tmp_path: Path, argv: list[str],
                                                              message: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "results.json").write_text("[1, 2]", encoding="utf-8")
    other = json.loads((parts / "b" / "results.json").read_text())
    other["config"]["seeds"] = 3
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.json").write_text(json.dumps(other), encoding="utf-8")
    dirs = {"a": parts / "a", "b": parts / "b", "missing": tmp_path / "missing", "bad": tmp_path / "bad",
            "other": tmp_path / "other", "notes": tmp_path / "notes"}
    capsys.readouterr()
    code = call(["eval", *[a.format(**dirs) for a in argv]])
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err and "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert not captured.out
