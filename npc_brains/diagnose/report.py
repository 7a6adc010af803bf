"""The diagnosis report: markdown (a summary table, a section per finding), JSON, and PNG panels of the key
curves with the thresholds drawn and the flagged updates shaded (matplotlib, imported only here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from npc_brains.diagnose import checks as C
from npc_brains.diagnose.logs import Run

# panels of the PNG: (key, title, horizontal threshold lines, log scale)
PANELS: tuple[tuple[str, str, tuple[float, ...], bool], ...] = (
    ("episode_return_mean", "episode return", (), False),
    ("lr", "learning rate", (C.LR_HIGH, C.LR_LOW), True),
    ("return_abs_mean", "mean |value target|", (C.RETURN_SCALE_WARN, C.RETURN_SCALE_FAIL), True),
    ("approx_kl", "approx KL", (C.KL_LIMIT,), True),
    ("clipfrac", "clip fraction", (C.CLIPFRAC_WARN, C.CLIPFRAC_FAIL), False),
    ("entropy", "entropy / log(valid actions)", (C.ENTROPY_WARN, C.ENTROPY_FAIL), False),
    ("explained_variance", "explained variance", (C.EV_FAIL,), False),
    ("value_loss", "value loss", (), True),
    ("grad_norm", "gradient norm (pre-clip)", (), True),
    ("oscillation", "oscillation std/mean", (C.OSCILLATION_MAX,), False),
    ("grad_conflict", "gradient conflict", (C.CONFLICT_MIN,), False),
    ("sync_kl_mean", "KL between agents", (C.HOMOGENEOUS_KL,), True),
    ("q_mean", "mean Q", (), False),
    ("replay_age_mean", "replay age (updates)", (C.REPLAY_AGE_WARN,), False),
)


def verdict(findings: list[C.Finding]) -> str:
    """'FAIL: 2 failing, 1 warning (kl, clipfrac; grad_norm)' or 'OK: 14 checks passed'."""
    fails = [f.check for f in findings if f.status == C.FAIL]
    warns = [f.check for f in findings if f.status == C.WARN]
    ran = sum(f.status != C.SKIP for f in findings)
    if fails:
        return (f"FAIL: {len(fails)} failing, {len(warns)} warning(s) of {ran} checks (first: "
                f"{findings[0].summary})")
    if warns:
        return f"WARN: {len(warns)} warning(s) of {ran} checks (first: {findings[0].summary})"
    return f"OK: {ran} checks passed"


def to_json(run: Run, findings: list[C.Finding]) -> dict[str, Any]:
    return {"run_dir": str(run.path), "updates": len(run.rows), "verdict": verdict(findings),
            "status": findings[0].status if findings and findings[0].status in (C.FAIL, C.WARN) else C.OK,
            "notes": run.notes, "findings": [f.to_dict() for f in findings]}


def markdown(run: Run, findings: list[C.Finding], png: str | None, png_note: str | None) -> str:
    lines = [f"# Diagnosis of `{run.path}`", "",
             f"**{verdict(findings)}**", "",
             f"{len(run.rows)} updates, {len(run.events)} event row(s)"
             + (f"; algorithm {run.config['algo']}" if run.config.get("algo") else "")
             + (f"; {run.num_agents} agents" if run.num_agents else "") + ".", ""]
    for note in run.notes:
        lines.append(f"- note: {note}")
    if run.notes:
        lines.append("")
    if png:
        lines += [f"![curves]({png})", ""]
    elif png_note:
        lines += [f"PNG panels skipped: {png_note}.", ""]
    lines += ["| status | check | finding |", "| --- | --- | --- |"]
    for f in findings:
        title = f.title if f.status == C.SKIP else f"[{f.title}](#{f.check})"
        lines.append(f"| {f.status} | {title} | {f.summary} |")
    lines.append("")
    for f in findings:
        if f.status == C.SKIP:
            continue
        lines += [f"## {f.status}: {f.title} <a id=\"{f.check}\"></a>", "", f"{f.summary}.", "",
                  f"- formula: {f.formula}", f"- threshold: {f.threshold}"]
        lines += [f"- evidence: {e}" for e in f.evidence]
        if f.status != C.OK:
            lines += ["", f"**Fix.** {f.fix}"]
        lines.append("")
    skipped = [f for f in findings if f.status == C.SKIP]
    if skipped:
        lines += ["## Not checked", ""] + [f"- {f.title}: {f.summary}" for f in skipped] + [""]
    lines.append("Formulas, thresholds and their sources: docs/diagnose.md.")
    return "\n".join(lines) + "\n"


def _spans(updates: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of flagged update numbers as (first, last)."""
    out: list[tuple[int, int]] = []
    for u in sorted(set(updates)):
        if out and u <= out[-1][1] + 1:
            out[-1] = (out[-1][0], u)
        else:
            out.append((u, u))
    return out


def write_png(run: Run, findings: list[C.Finding], path: Path) -> str | None:
    """Write the panels; returns None, or why they were skipped (matplotlib absent)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'village-npc[plots]')"
    flagged_by_key: dict[str, list[int]] = {}
    status_by_key: dict[str, str] = {}
    for f in findings:
        if f.status in (C.FAIL, C.WARN):
            for k in f.keys:
                flagged_by_key.setdefault(k, []).extend(f.updates)
                if status_by_key.get(k) != C.FAIL:
                    status_by_key[k] = f.status
    n_valid, _ = C._valid_actions(run)
    panels = []
    for key, title, lines, log in PANELS:
        x, y = run.series(key)
        if y.size == 0:
            continue
        if key == "entropy":
            if not n_valid > 1:
                continue
            y = y / np.log(n_valid)
            if not run.has("valid_actions"):
                title = "entropy / log(all actions)"
        panels.append((key, title, lines, log, x, y))
    if not panels:
        return "no plottable series in the log"
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), squeeze=False)
    for ax, (key, title, lines, log, x, y) in zip(axes.flat, panels, strict=False):
        ax.plot(x, y, lw=1.2, color="#1f4e79")
        for level in lines:
            ax.axhline(level, color="#b22222", ls="--", lw=0.9)
        colour = "#f4a6a6" if status_by_key.get(key) == C.FAIL else "#f7d59c"
        for a, b in _spans(flagged_by_key.get(key, [])):
            ax.axvspan(a - 0.5, b + 0.5, color=colour, alpha=0.6, lw=0)
        if log and (y > 0).all():
            ax.set_yscale("log")
        elif log and (y > 0).any():  # zeros or rounding below 0 (a frozen policy's KL): log above the smallest
            ax.set_yscale("symlog", linthresh=float(y[y > 0].min()))
        mark = f" [{status_by_key[key]}]" if key in status_by_key else ""
        ax.set_title(title + mark, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("update", fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
    return None


def write_report(run: Run, findings: list[C.Finding], out_dir: Path, *, png: bool = True) -> Path:
    """diagnosis.md (+ diagnosis.png, diagnosis.json) in out_dir; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png_name, png_note = None, None
    if png:
        png_note = write_png(run, findings, out_dir / "diagnosis.png")
        png_name = None if png_note else "diagnosis.png"
    else:
        png_note = "not asked for"
    md = out_dir / "diagnosis.md"
    md.write_text(markdown(run, findings, png_name, png_note), encoding="utf-8")
    (out_dir / "diagnosis.json").write_text(json.dumps(to_json(run, findings), indent=1) + "\n", encoding="utf-8")
    return md
