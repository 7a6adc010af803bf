"""Reading a run directory for diagnosis: metrics.jsonl rows, event rows, and the stored configuration.

Every key is optional: runs from older versions, `--env` runs and off-policy learners log different sets, so
callers ask for a series and get an empty one when a key never appears.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class RunError(Exception):
    """A run directory that cannot be diagnosed (one line for the user)."""


@dataclass
class Run:
    path: Path
    rows: list[dict[str, Any]]  # one per update, in order
    events: list[dict[str, Any]]  # rollback / unstable rows
    config: dict[str, Any] = field(default_factory=dict)  # from checkpoints/last.pt or policy.pt, when readable
    env: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what could not be read (shown in the report)

    @property
    def updates(self) -> np.ndarray:
        return np.array([int(r.get("update", i + 1)) for i, r in enumerate(self.rows)], np.int64)

    def has(self, key: str) -> bool:
        return any(key in r for r in self.rows)

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(update numbers, values) of the rows where `key` is a finite number."""
        xs, ys = [], []
        for i, r in enumerate(self.rows):
            v = r.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            xs.append(int(r.get("update", i + 1)))
            ys.append(float(v))
        return np.array(xs, np.int64), np.array(ys, np.float64)

    def lists(self, key: str) -> tuple[np.ndarray, list[list[float | None]]]:
        """(update numbers, per-agent lists) of the rows where `key` is a list."""
        xs, ys = [], []
        for i, r in enumerate(self.rows):
            v = r.get(key)
            if isinstance(v, list) and v:
                xs.append(int(r.get("update", i + 1)))
                ys.append(v)
        return np.array(xs, np.int64), ys

    def epoch_returns(self) -> tuple[np.ndarray, np.ndarray]:
        """The return curve at epoch ends (rows that close an epoch), else at every row with a return."""
        xs, ys = [], []
        for i, r in enumerate(self.rows):
            v = r.get("episode_return_mean")
            if "epoch" in r and isinstance(v, (int, float)) and math.isfinite(v):
                xs.append(int(r.get("update", i + 1)))
                ys.append(float(v))
        if len(xs) < 3:
            return self.series("episode_return_mean")
        return np.array(xs, np.int64), np.array(ys, np.float64)

    def setting(self, key: str, default: Any = None) -> Any:
        """A configuration value: the stored config's, else the last row's (lr, ent_coef), else `default`."""
        if key in self.config:
            return self.config[key]
        for r in reversed(self.rows):
            if key in r:
                return r[key]
        return default

    @property
    def num_agents(self) -> int | None:
        n = self.env.get("num_agents")
        if n:
            return int(n)
        _, alive = self.lists("agent_alive")
        return len(alive[-1]) if alive else None


def load_run(run_dir: str | Path, *, read_config: bool = True) -> Run:
    """Read a run directory; RunError names what is wrong with it."""
    path = Path(run_dir)
    if not path.exists():
        raise RunError(f"{path}: no such directory")
    if not path.is_dir():
        raise RunError(f"{path}: not a directory (expected a run directory holding metrics.jsonl)")
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        if (path / "checkpoints").is_dir() or (path / "policy.pt").is_file():
            raise RunError(f"{path}: run directory has no metrics.jsonl (nothing to diagnose)")
        raise RunError(f"{path}: not a run directory (no metrics.jsonl; pass the --run-dir of a village train run)")
    try:
        text = metrics.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{metrics}: unreadable ({type(exc).__name__})") from None
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            where = "last line" if number == len(lines) else f"line {number}"
            hint = " (a run killed mid-write: resume it, or delete that line)" if number == len(lines) else ""
            raise RunError(f"{metrics}: {where} is not a complete JSON object{hint}") from None
        if not isinstance(row, dict):
            raise RunError(f"{metrics}: line {number}: expected a JSON object, got {type(row).__name__}")
        (events if "event" in row else rows).append(row)
    if not rows:
        raise RunError(f"{metrics}: no metrics rows (the run wrote nothing yet)")
    run = Run(path, rows, events)
    if read_config:
        _read_config(run)
    return run


def _read_config(run: Run) -> None:
    for name in ("checkpoints/last.pt", "policy.pt"):
        ckpt = run.path / name
        if not ckpt.is_file():
            continue
        try:
            from npc_brains.checkpoint import CheckpointError, load_checkpoint

            data = load_checkpoint(ckpt)
        except CheckpointError as exc:
            run.notes.append(f"configuration not read ({exc})")
            continue
        run.config = dict(data.get("config") or {})
        run.env = dict(data.get("env") or {})
        return
    run.notes.append("no checkpoint: configuration taken from the metrics rows only")
