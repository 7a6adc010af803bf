"""MAS-Diag: training faults found in a run's metrics.jsonl, with the evidence and the fix.

    load_run(dir) -> Run          npc_brains.diagnose.logs (rows, events, stored configuration)
    run_checks(run) -> findings   npc_brains.diagnose.checks (one function per fault, numpy only)
    write_report(...)             npc_brains.diagnose.report (markdown, JSON, PNG panels)
"""

from __future__ import annotations

from pathlib import Path

from npc_brains.diagnose.checks import CHECKS, FAIL, OK, SKIP, WARN, Finding, run_checks
from npc_brains.diagnose.logs import Run, RunError, load_run
from npc_brains.diagnose.report import to_json, verdict, write_report


def diagnose(run_dir: str | Path) -> tuple[Run, list[Finding]]:
    """Load a run directory and run every check (RunError when it cannot be read)."""
    run = load_run(run_dir)
    return run, run_checks(run)


def train_verdict(run_dir: str | Path, out_dir: str | Path | None = None) -> str:
    """The one line `village train` prints at its end: the verdict and where the report is."""
    try:
        run, findings = diagnose(run_dir)
    except RunError as exc:
        return f"diagnose: not run ({exc})"
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "diagnosis"
    md = write_report(run, findings, out)
    return f"diagnose: {verdict(findings)}; report {md}"


__all__ = ["CHECKS", "FAIL", "OK", "SKIP", "WARN", "Finding", "Run", "RunError", "diagnose", "load_run",
           "run_checks", "to_json", "train_verdict", "verdict", "write_report"]
