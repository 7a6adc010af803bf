"""Live health of a training run: the seed's three indicators against their thresholds, sparklines, rollbacks
and the diagnosis checks as they fire.

`LiveDiagnosis` listens to the metrics writer (every row, and every rollback / unstable event): it keeps the
rows, re-runs the checks every few updates, and writes the indicators and the check statuses to TensorBoard
when the writer has one. `Dashboard` draws them in the terminal with rich (an optional dependency, imported
when the first row arrives, so a forked collector never inherits its state); it redraws once per update, from
the training thread, so it starts no thread of its own.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from npc_brains.diagnose.checks import (
    CONFLICT_MIN,
    COOPERATION_MIN,
    FAIL,
    OSCILLATION_MAX,
    SEVERITY,
    WARN,
    Finding,
    run_checks,
)
from npc_brains.diagnose.logs import Run

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40
# the seed's indicators: (key, label, threshold, healthy when the value is below it)
INDICATORS: tuple[tuple[str, str, float, bool], ...] = (
    ("oscillation", "policy oscillation std/mean", OSCILLATION_MAX, True),
    ("cooperation", "cooperation efficiency", COOPERATION_MIN, False),
    ("conflict", "gradient conflict", CONFLICT_MIN, False),
)
STATUS_VALUE = {"OK": 0.0, "WARN": 1.0, "FAIL": 2.0}


def sparkline(values: list[float], width: int = SPARK_WIDTH) -> str:
    """The last `width` finite values as block characters scaled between their min and max."""
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo <= 1e-12 * max(abs(hi), 1.0):
        return BLOCKS[3] * len(vals)
    return "".join(BLOCKS[min(int((v - lo) / (hi - lo) * (len(BLOCKS) - 1) + 0.5), len(BLOCKS) - 1)] for v in vals)


def healthy(value: float | None, threshold: float, below: bool) -> bool | None:
    if value is None or not math.isfinite(value):
        return None
    return value < threshold if below else value >= threshold


class LiveDiagnosis:
    """Collects the rows of a running training and re-runs the checks on them."""

    def __init__(self, run_dir: str | Path, config: dict[str, Any] | None = None,
                 env: dict[str, Any] | None = None, every: int = 1):
        self.run = Run(Path(run_dir), [], [], dict(config or {}), dict(env or {}))
        self.every = max(1, every)
        self.findings: list[Finding] = []
        self.latest: dict[str, float] = {}  # last value of each indicator
        self.messages: list[str] = []  # rollbacks and checks that started firing, newest last
        self._status: dict[str, str] = {}

    def __call__(self, row: dict[str, Any], tb: Any = None) -> None:
        if "event" in row:
            self.run.events.append(row)
            self.messages.append(f"update {row.get('update')}: {row['event']} ({row.get('reasons', '')})")
            return
        self.run.rows.append(row)
        for key, *_ in INDICATORS:
            v = row.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.latest[key] = float(v)
        n = len(self.run.rows)
        # the checks cost a few milliseconds on a few hundred rows; long runs re-check less often
        if n % max(self.every, n // 100 + 1) == 0:
            self.recheck(int(row.get("update", n)))
        if tb is not None:
            step = int(row.get("step", n))
            for key, *_ in INDICATORS:
                if key in self.latest:
                    tb.add_scalar(f"health/{key}", self.latest[key], step)
            for f in self.findings:
                if f.status in STATUS_VALUE:
                    tb.add_scalar(f"diagnose/{f.check}", STATUS_VALUE[f.status], step)
            tb.add_scalar("diagnose/warnings", float(sum(f.status == WARN for f in self.findings)), step)
            tb.add_scalar("diagnose/failures", float(sum(f.status == FAIL for f in self.findings)), step)

    def recheck(self, update: int) -> None:
        self.findings = run_checks(self.run)
        for f in self.findings:
            before = self._status.get(f.check, "OK")
            if f.status in (WARN, FAIL) and SEVERITY[f.status] < SEVERITY.get(before, 2):
                self.messages.append(f"update {update}: {f.status} {f.check}: {f.summary}")
            self._status[f.check] = f.status
        del self.messages[:-8]

    def series(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.run.rows
                if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


class Dashboard:
    """A rich Live panel fed by a LiveDiagnosis (call `dashboard(row, tb)` for every metrics row)."""

    def __init__(self, live: LiveDiagnosis, total_steps: int, title: str, start_step: int = 0):
        self.live = live
        self.total = max(1, int(total_steps))
        self.title = title
        self.step = start_step
        self.started = time.perf_counter()
        self.start_step = start_step
        self._live: Any = None

    def __call__(self, row: dict[str, Any], tb: Any = None) -> None:
        if "event" not in row:
            self.step = int(row.get("step", self.step))
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self.render(), console=Console(stderr=True), auto_refresh=False, transient=False)
            self._live.start()
        self._live.update(self.render(), refresh=True)

    def render(self) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        frac = min(self.step / self.total, 1.0)
        elapsed = time.perf_counter() - self.started
        rate = (self.step - self.start_step) / max(elapsed, 1e-9)
        eta = (self.total - self.step) / rate if rate > 0 else float("nan")
        bar = "█" * int(frac * 30) + "░" * (30 - int(frac * 30))
        head = Text(f"{bar} {frac:6.1%}  {self.step:,}/{self.total:,} NPC-steps  {rate:,.0f}/s"
                    + (f"  eta {eta:,.0f}s" if math.isfinite(eta) else ""))

        ind = Table(title="health (the seed's indicators)", expand=True, show_edge=False)
        for col in ("indicator", "value", "healthy", "status"):
            ind.add_column(col)
        for key, label, threshold, below in INDICATORS:
            value = self.live.latest.get(key)
            ok = healthy(value, threshold, below)
            shown = "-" if value is None else f"{value:.3f}"
            mark = Text("-" if ok is None else "ok" if ok else "OUT", style="" if ok is None else
                        "green" if ok else "bold red")
            ind.add_row(label, shown, f"{'<' if below else '>='} {threshold:g}", mark)

        spark = Table(expand=True, show_edge=False, show_header=False)
        spark.add_column("curve")
        spark.add_column("spark")
        spark.add_column("last")
        for key, label in (("episode_return_mean", "return"), ("entropy", "entropy"), ("approx_kl", "KL")):
            vals = self.live.series(key)
            spark.add_row(label, sparkline(vals), f"{vals[-1]:.4g}" if vals else "-")

        flagged = [f for f in self.live.findings if f.status in (WARN, FAIL)]
        checks = Text()
        for f in flagged[:6]:
            checks.append(f"{f.status} {f.check}: {f.summary}\n", style="bold red" if f.status == FAIL else "yellow")
        if not flagged:
            checks.append("diagnose: no warning so far\n", style="green")
        log = Text("\n".join(self.live.messages[-5:]) or "no rollback", style="dim")
        rollbacks = sum(e.get("event") == "rollback" for e in self.live.run.events)
        return Panel(Group(head, ind, spark, checks, log), title=f"{self.title}  rollbacks {rollbacks}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
