"""The engine `Tuning` a run trains under, and the one a trained policy runs under (its stored overrides).

`village train --tuning FIELD=VALUE` stores its overrides in the policy file's config; every place that runs a
policy (demo, eval, the sandbox, bridge sessions) rebuilds the physics it learned in through `policy_tuning`.
No torch here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.constants import Tuning

# the fields that are a share of episodes or a chance: a value outside [0, 1] is a typo, not a stronger lever
SHARES = ("curriculum_raid", "curriculum_rampage", "curriculum_armoured", "curriculum_late", "rumour_error")


class TuningError(ValueError):
    """A bad engine override: the message names the field and what was expected."""


def engine_tuning(overrides: dict[str, Any]) -> Tuning:
    """The engine's `Tuning` with `overrides` applied; TuningError names a bad key or value."""
    defaults = Tuning()
    known = {f.name for f in dataclasses.fields(Tuning)}
    clean: dict[str, Any] = {}
    for key, value in overrides.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise TuningError(f"tuning: unknown engine field {key!r} (see docs/engine.md for the Tuning fields)")
        default = getattr(defaults, name)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        if not ok:
            raise TuningError(f"tuning.{name}: expected a {type(default).__name__}, got {value!r}")
        if name in SHARES and not 0.0 <= value <= 1.0:
            raise TuningError(f"tuning.{name}: expected a share in [0, 1], got {value!r}")
        clean[name] = value
    return dataclasses.replace(defaults, **clean)


def with_overrides(base: Tuning | None, overrides: dict[str, Any]) -> Tuning:
    """`base` (the engine's defaults when None) with only the fields named in `overrides` changed, each value
    checked as engine_tuning checks it; TuningError names a bad key or value."""
    checked = engine_tuning(overrides)
    changed = {name: getattr(checked, name) for name in (str(key).replace("-", "_") for key in overrides)}
    return dataclasses.replace(base or Tuning(), **changed)


def trained_tuning(config: dict[str, Any] | None) -> Tuning | None:
    """The tuning a policy with this stored training config learned in; None for the engine's defaults."""
    overrides = (config or {}).get("tuning") or {}
    return engine_tuning(overrides) if overrides else None


def policy_tuning(policy: Any) -> Tuning | None:
    """The tuning to run `policy` under: its `tuning` (set by npc_brains.load_policy), else the one rebuilt
    from its stored config, else None (the engine's defaults: baselines and plain policies)."""
    tuning = getattr(policy, "tuning", None)
    if isinstance(tuning, Tuning):
        return tuning
    return trained_tuning(getattr(policy, "config", None))
