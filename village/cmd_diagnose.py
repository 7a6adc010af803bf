"""`village diagnose RUN_DIR`: find training faults in a run's metrics.jsonl and say what to do (docs/diagnose.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from village.cli import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR",
                        help="a run directory written by `village train` (it holds metrics.jsonl)")
    parser.add_argument("--json", action="store_true",
                        help="print the findings as one JSON object on stdout instead of the summary table")
    parser.add_argument("--out", metavar="DIR",
                        help="where diagnosis.md, diagnosis.png and diagnosis.json go (default: RUN_DIR/diagnosis)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when any check FAILs (for CI); without it the status is 0")
    parser.add_argument("--no-png", action="store_true", help="skip the PNG panels (no matplotlib import)")


def run(args: argparse.Namespace) -> int:
    from npc_brains.diagnose import FAIL, RunError, diagnose, to_json, verdict, write_report

    try:
        run_, findings = diagnose(args.run_dir)
    except RunError as exc:
        raise UserError(str(exc)) from None
    out = Path(args.out) if args.out else Path(args.run_dir) / "diagnosis"
    try:
        md = write_report(run_, findings, out, png=not args.no_png)
    except OSError as exc:
        raise UserError(f"--out: cannot write the report in {out} ({exc.strerror or exc})") from None
    if args.json:
        print(json.dumps(to_json(run_, findings), indent=1))
    else:
        print(f"village diagnose: {verdict(findings)}")
        for f in findings:
            if f.status != "SKIP":
                print(f"  {f.status:<4}  {f.check:<20} {f.summary}")
        print(f"report: {md}")
    failed = any(f.status == FAIL for f in findings)
    if failed and args.strict:
        print("village diagnose: --strict: a check failed", file=sys.stderr)
        return 1
    return 0
