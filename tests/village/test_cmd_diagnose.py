"""`village diagnose` as a user runs it, and the diagnosis `village train` does at its end and while it runs."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from npc_brains.dashboard import Dashboard, LiveDiagnosis, sparkline
from npc_brains.metrics import MetricsWriter
from tests.npc_brains.test_diagnose_checks import healthy_rows, plant
from village.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = "tests.npc_brains.tiny_env:make_env"


def write_run(path: Path, rows: list[dict], events: list[dict] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + (events or [])))
    return path


def diagnose(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["diagnose", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_healthy_run_report(tmp_path, capsys):
    run = write_run(tmp_path / "run", healthy_rows())
    code, out, err = diagnose(capsys, str(run), "--strict")
    assert code == 0, err
    assert out.startswith("village diagnose: OK:")
    md = (run / "diagnosis" / "diagnosis.md").read_text()
    assert "| status | check | finding |" in md and "![curves](diagnosis.png)" in md
    assert (run / "diagnosis" / "diagnosis.png").stat().st_size > 1000
    assert json.loads((run / "diagnosis" / "diagnosis.json").read_text())["status"] == "OK"


def test_faulty_run_json_strict_and_out(tmp_path, capsys):
    rows = plant(healthy_rows(), "approx_kl", range(1, 121), 0.2)
    rows = plant(rows, "lr", range(1, 121), 0.05)
    run = write_run(tmp_path / "run", rows)
    code, out, _ = diagnose(capsys, str(run), "--json", "--out", str(tmp_path / "report"))
    assert code == 0  # without --strict a FAIL is reported, not an exit status
    data = json.loads(out)
    assert data["status"] == "FAIL" and data["findings"][0]["check"] == "learning_rate"
    assert data["findings"][0]["evidence"] and data["findings"][0]["fix"]
    md = (tmp_path / "report" / "diagnosis.md").read_text()
    assert "## FAIL: Learning rate" in md and "**Fix.**" in md
    code, _, err = diagnose(capsys, str(run), "--strict", "--no-png")
    assert code == 1 and "--strict" in err


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "no such directory"),
    (lambda p: p.mkdir(), "not a run directory"),
    (lambda p: (p.mkdir(), (p / "checkpoints").mkdir()), "has no metrics.jsonl"),
    (lambda p: (p.mkdir(), (p / "metrics.jsonl").write_text("")), "no metrics rows"),
    (lambda p: (p.mkdir(), (p / "metrics.jsonl").write_text('{"step": 1, "update": 1}\n{"step": 2, "upd')),
     "last line is not a complete JSON object"),
    (lambda p: (p.mkdir(), (p / "metrics.jsonl").write_text('[1, 2]\n')), "expected a JSON object"),
    (lambda p: p.write_text("x"), "not a directory"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, setup, message):
    target = tmp_path / "target"
    setup(target)
    code, out, err = diagnose(capsys, str(target))
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_png_skipped_without_matplotlib(tmp_path, capsys, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    run = write_run(tmp_path / "run", healthy_rows(30))
    code, _, _ = diagnose(capsys, str(run))
    assert code == 0
    md = (run / "diagnosis" / "diagnosis.md").read_text()
    assert "PNG panels skipped: matplotlib is not installed" in md
    assert not (run / "diagnosis" / "diagnosis.png").exists()


def test_train_ends_with_a_verdict_and_a_report(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = main(["train", "--env", TINY, "--steps", "600", "--envs", "2", "--rollout", "8", "--run-dir",
                 str(tmp_path), "--no-progress", "--device", "cpu", "--dashboard"])
    err = capsys.readouterr().err
    assert code == 0, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("village train: diagnose: ") and str(tmp_path / "diagnosis" / "diagnosis.md") in last
    assert "--dashboard needs a terminal" in err  # captured stderr is no TTY: the plain progress bar
    assert (tmp_path / "diagnosis" / "diagnosis.md").is_file()


class FakeBoard:
    def __init__(self) -> None:
        self.scalars: dict[str, list[float]] = {}

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.setdefault(tag, []).append(value)


def test_live_diagnosis_reports_as_it_happens_and_to_tensorboard(tmp_path):
    live = LiveDiagnosis(tmp_path, env={"num_agents": 12})
    board = FakeBoard()
    rows = plant(healthy_rows(60), "value_loss", [40], None)
    for row in rows:
        live(row, board)
    live({"event": "rollback", "step": 41000, "update": 41, "reasons": "drawdown"}, board)
    assert any("FAIL non_finite" in m and "update 40" in m for m in live.messages)
    assert live.messages[-1].startswith("update 41: rollback")
    assert board.scalars["diagnose/non_finite"][-1] == 2.0 and board.scalars["diagnose/non_finite"][0] == 0.0
    assert "health/oscillation" in board.scalars and "health/conflict" in board.scalars
    assert board.scalars["diagnose/failures"][-1] >= 1


def test_metrics_writer_feeds_its_listeners(tmp_path):
    seen = []
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.listeners.append(lambda row, tb: seen.append((row, tb)))
    writer.write({"step": 1, "value_loss": float("nan")})
    writer.close()
    assert seen == [({"step": 1, "value_loss": None}, None)]


def test_dashboard_renders(tmp_path):
    pytest.importorskip("rich")
    from rich.console import Console

    live = LiveDiagnosis(tmp_path, env={"num_agents": 12})
    board = Dashboard(live, 120_000, "village train: drmas")
    for row in plant(healthy_rows(40), "oscillation", range(30, 41), 0.9):
        live(row)
        board.step = row["step"]
    console = Console(record=True, width=110)
    console.print(board.render())
    text = console.export_text()
    assert "policy oscillation std/mean" in text and "OUT" in text  # 0.9 against its 0.3
    assert "gradient conflict" in text and "return" in text and "█" in text


def test_sparkline():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([1.0, 1.0]) == "▄▄"
    assert sparkline([]) == ""
