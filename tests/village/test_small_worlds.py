"""The docs' complete minimal world runs in demo, train and eval; smaller ones are refused with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from village.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "world-format.md"


@pytest.fixture(scope="module")
def hamlet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    example = DOC.read_text(encoding="utf-8").split("## A complete minimal world", 1)[1]
    (block,) = re.findall(r"```toml\n(.*?)```", example.split("\n## ", 1)[0], re.S)
    path = tmp_path_factory.mktemp("worlds") / "hamlet.toml"
    path.write_text(block, encoding="utf-8")
    return path


def call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_demo_runs_the_minimal_world(hamlet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert call(["demo", "--world", str(hamlet)]) == 0, capsys.readouterr().err
    assert "Traceback" not in capsys.readouterr().err


def test_eval_runs_the_minimal_world(hamlet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = call(["eval", "--worlds", str(hamlet), "--scenarios", "kill-parent", "--seeds", "1", "--max-ticks", "40",
                 "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_train_runs_the_minimal_world(hamlet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = call(["train", "--world", str(hamlet), "--steps", "100", "--run-dir", str(tmp_path / "run"),
                 "--no-progress", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "policy.pt").is_file()


def test_a_two_npc_world_is_refused_with_one_line(hamlet: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    text = hamlet.read_text(encoding="utf-8")
    two = text.split('[[npcs]]\nname = "Cy"', 1)[0] + '[[actors]]' + text.rsplit("[[actors]]", 1)[1]
    small = tmp_path / "two.toml"
    small.write_text(two, encoding="utf-8")
    for argv in (["demo", "--world", str(small)],
                 ["train", "--world", str(small), "--steps", "100", "--run-dir", str(tmp_path / "r"), "--no-progress"]):
        assert call(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "npcs: expected at least 5 NPCs and actors together" in err
