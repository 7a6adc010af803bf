"""One policy resolver: `load_policy(spec)` for the demo, eval, the sandbox and the bridge.

    default | mappo    the trained policies shipped inside the package (npc_brains/data/policies/)
    scripted | random  the baselines (npc_brains.baselines)
    PATH               a policy.pt or a training checkpoint written by `village train`

The policy it returns carries `tuning`: the engine `Tuning` it was trained under (npc_brains.tuning), so that
whoever runs it runs it in the world it learned. A spec that cannot be used raises `PolicyError`, one line
naming the policy and what was expected; a missing bundled policy is such an error, never a silent fallback.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from npc_brains.policy_api import Policy

BUNDLED: tuple[str, ...] = ("default", "mappo")
BASELINES: tuple[str, ...] = ("scripted", "random")
SPECS: tuple[str, ...] = (*BUNDLED, *BASELINES)
# package data, read through importlib.resources so that an installed wheel finds it as a checkout does
POLICY_DIR = resources.files("npc_brains") / "data" / "policies"


class PolicyError(ValueError):
    """A policy name or file that cannot be used; the message is one line naming it and what was expected."""


def bundled_policy(name: str) -> Path:
    """Where the bundled policy `name` ("default", "mappo") is (the file may be missing from a broken install)."""
    if name not in BUNDLED:
        raise PolicyError(f"no bundled policy named {name!r}; expected one of {', '.join(BUNDLED)}")
    return Path(str(POLICY_DIR / f"{name}.pt"))


def load_policy(spec: str | Path = "default", *, seed: int | None = None, slots: int | None = None,
                backend: str = "numpy", device: str = "cpu") -> Policy:
    """The policy `spec` names (module docstring), seeded with `seed`, with `.tuning` set.

    `slots`: the observation slots K the caller runs (the bridge's --slots); a trained policy built for another
    K is refused with the K it needs. Without it, a trained policy fixes K (`policy_slots`)."""
    text = str(spec)
    if text in BASELINES:
        from npc_brains.baselines import get_baseline

        baseline = get_baseline(text, seed=seed, slots=slots)
        baseline.tuning = None  # type: ignore[attr-defined]  # the engine's defaults
        return baseline
    if text in BUNDLED:
        path = bundled_policy(text)
        if not path.is_file():
            raise PolicyError(f"the bundled {text} policy is missing from this installation (expected {path}); "
                              f"reinstall village-npc, or pass a policy file or one of {', '.join(BASELINES)}")
        name, source = text, f"the bundled {text} policy"
    else:
        path = Path(text)
        if not path.is_file():
            what = "a directory" if path.is_dir() else "no such file"
            raise PolicyError(f"expected {', '.join(SPECS)} or a policy file, got {text!r} ({what})")
        name, source = path.stem, str(path)
    from npc_brains.checkpoint import CheckpointError
    from npc_brains.runtime import load_policy_file

    try:
        policy = load_policy_file(path, name=name, seed=seed, backend=backend, device=device)
    except CheckpointError as exc:
        raise PolicyError(str(exc)) from None
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError) as exc:
        # a village-npc-brain file whose sections are not what this build writes (missing or misshapen weights)
        raise PolicyError(f"{source}: not a usable policy ({type(exc).__name__}: {_first_line(exc)})") from None
    k = village_slots(policy, source)
    if slots is not None and k != slots:
        raise PolicyError(f"{source} was trained with {k} observation slots, not {slots}; run it with --slots {k}")
    from npc_brains.tuning import TuningError, trained_tuning

    try:
        policy.tuning = trained_tuning(policy.config)  # type: ignore[attr-defined]
    except TuningError as exc:
        raise PolicyError(f"{source}: its stored engine tuning does not fit this engine ({exc})") from None
    return policy


def village_slots(policy: Any, source: str) -> int:
    """K of a trained policy whose observations and actions are the village's; PolicyError otherwise (e.g. a
    policy trained with `village train --env` on another PettingZoo environment)."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES, observation_layout
    from engine.vec_env import flat_action_names

    k, rest = divmod(int(policy.obs_dim) - len(SELF_FEATURES), len(SLOT_FEATURES))
    env_id = getattr(policy, "env_id", "?")
    theirs = list(policy.observation_layout)
    if str(env_id).startswith("village") and theirs and (rest or k < 1 or theirs != observation_layout(k)):
        raise PolicyError(f"{source} was trained on another version of the village's observation "
                          f"({_layout_change(theirs)}): retrain it with `village train` (docs/training.md)")
    if (rest or k < 1 or theirs != observation_layout(k)
            or list(policy.action_names) != flat_action_names(k)):
        raise PolicyError(f"{source} was trained on {env_id}, not on a village: its observations and actions do "
                          f"not fit this engine's (train one on a village world with `village train`)")
    return k


def _layout_change(theirs: list[str]) -> str:
    """What a village policy's observation layout lacks or has beyond this engine's, by feature name."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    names = {name.split(".", 1)[-1] for name in theirs}
    ours = set(SELF_FEATURES) | set(SLOT_FEATURES)
    missing, unknown = sorted(ours - names), sorted(names - ours)
    parts = ([f"it lacks {', '.join(missing)}"] if missing else []) + (
        [f"it has {', '.join(unknown)}, which this engine does not"] if unknown else [])
    return "; ".join(parts) or f"{len(theirs)} columns in another order"


def policy_slots(policy: Any) -> int | None:
    """The observation slots K a policy was built for (from its observation width), None where it adapts."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    obs_dim = getattr(policy, "obs_dim", None)
    if not isinstance(obs_dim, int):
        slots = getattr(policy, "slots", None)
        return slots if isinstance(slots, int) else None
    k, rest = divmod(obs_dim - len(SELF_FEATURES), len(SLOT_FEATURES))
    if rest or k < 1:
        raise PolicyError(f"policy {getattr(policy, 'name', '?')!r}: observation width {obs_dim} does not "
                          f"match this engine's layout ({len(SELF_FEATURES)} + K*{len(SLOT_FEATURES)})")
    return k


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__
