"""Metrics sinks: metrics.jsonl always (one JSON object per line), TensorBoard when it is installed."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worlds.atomic import write_atomically


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN and infinities become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return _clean(value.item())
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class MetricsWriter:
    def __init__(self, run_dir: str | Path, *, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self.tb = None
        # called with every written row (clean) and the TensorBoard writer or None (live diagnosis, dashboard)
        self.listeners: list[Callable[[dict[str, Any], Any], None]] = []
        if tensorboard:
            try:
                import tensorboard  # noqa: F401  (only to know whether it is installed)
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(Path(run_dir) / "tb"))
            except ImportError:
                self.tb = None

    def write(self, row: dict[str, Any]) -> None:
        clean = {k: _clean(v) for k, v in row.items()}
        self._fh.write(json.dumps(clean, separators=(",", ":")) + "\n")
        self._fh.flush()
        if self.tb is not None:
            step = int(row["step"])
            for key, value in clean.items():
                if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.tb.add_scalar(key, value, step)
        for listener in self.listeners:
            listener(clean, self.tb)

    def close(self) -> None:
        self._fh.close()
        if self.tb is not None:
            self.tb.close()


def truncate_metrics(path: str | Path, max_step: int) -> int:
    """Drop rows written after `max_step` (a run killed after its last checkpoint); atomic rewrite.
    Returns the number of rows kept."""
    p = Path(path)
    if not p.exists():
        return 0
    kept = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut by kill -9
            continue
        if isinstance(row, dict) and int(row.get("step", 0)) <= max_step:
            kept.append(line)
    write_atomically(p, "".join(line + "\n" for line in kept).encode("utf-8"))
    return len(kept)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
